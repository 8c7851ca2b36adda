"""04 - Multi-head attention: H attentions side by side on slices of the features.

Shapes: B = batch, H = num_heads, T_q / T_k = query / key lengths, d_head = d_model // H.
"""
from __future__ import annotations

import torch
from torch import nn

from solutions.attention import scaled_dot_product_attention


def split_heads(x: torch.Tensor, num_heads: int) -> torch.Tensor:
    """(B, T, d_model) -> (B, H, T, d_head); head h gets features h*d_head .. (h+1)*d_head - 1."""
    if x.dim() != 3:
        raise ValueError(f"split_heads expects (B, T, d_model), got shape {tuple(x.shape)}")
    B, T, d_model = x.shape
    if d_model % num_heads != 0:
        raise ValueError(f"d_model {d_model} is not divisible by num_heads {num_heads}")
    return x.reshape(B, T, num_heads, d_model // num_heads).transpose(1, 2)


def merge_heads(x: torch.Tensor) -> torch.Tensor:
    """(B, H, T, d_head) -> (B, T, H * d_head), the inverse of split_heads."""
    if x.dim() != 4:
        raise ValueError(f"merge_heads expects (B, H, T, d_head), got shape {tuple(x.shape)}")
    B, H, T, d_head = x.shape
    return x.transpose(1, 2).reshape(B, T, H * d_head)


class MultiHeadAttention(nn.Module):
    """Project q, k, v; attend in H heads; concatenate the heads; project back."""

    def __init__(self, d_model: int, num_heads: int, dropout: float = 0.0, bias: bool = True):
        super().__init__()
        if d_model % num_heads != 0:
            raise ValueError(f"d_model {d_model} is not divisible by num_heads {num_heads}")
        self.d_model = d_model
        self.num_heads = num_heads
        self.w_q = nn.Linear(d_model, d_model, bias=bias)
        self.w_k = nn.Linear(d_model, d_model, bias=bias)
        self.w_v = nn.Linear(d_model, d_model, bias=bias)
        self.w_o = nn.Linear(d_model, d_model, bias=bias)
        self.dropout = nn.Dropout(dropout)

    def forward(self, query, key, value, mask=None):
        # query: (B, T_q, d_model); key, value: (B, T_k, d_model); mask broadcasts to (B, H, T_q, T_k)
        q = split_heads(self.w_q(query), self.num_heads)  # (B, H, T_q, d_head)
        k = split_heads(self.w_k(key), self.num_heads)    # (B, H, T_k, d_head)
        v = split_heads(self.w_v(value), self.num_heads)  # (B, H, T_k, d_head)
        heads, weights = scaled_dot_product_attention(q, k, v, mask)  # (B, H, T_q, d_head), (B, H, T_q, T_k)
        if self.training and self.dropout.p > 0:
            heads = self.dropout(weights) @ v             # dropout on the attention weights, then mix values
        output = self.w_o(merge_heads(heads))             # (B, T_q, d_model)
        return output, weights
