"""05 - The encoder: blocks of self-attention and feed-forward, each wrapped in residual + LayerNorm.

Shapes: B = batch, T = source length, d_model = model width, d_ff = feed-forward width.
"""
from __future__ import annotations

import math

import torch
from torch import nn

from solutions.embeddings import TokenEmbedding
from solutions.multi_head import MultiHeadAttention
from solutions.positional import PositionalEncoding


class PositionwiseFeedForward(nn.Module):
    """The same two-layer MLP applied at every position: linear2(dropout(relu(linear1(x))))."""

    def __init__(self, d_model: int, d_ff: int, dropout: float = 0.0):
        super().__init__()
        self.linear1 = nn.Linear(d_model, d_ff)
        self.linear2 = nn.Linear(d_ff, d_model)
        self.dropout = nn.Dropout(dropout)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        # x: (B, T, d_model) -> (B, T, d_ff) -> (B, T, d_model)
        hidden = torch.relu(self.linear1(x))          # (B, T, d_ff)
        return self.linear2(self.dropout(hidden))


class EncoderBlock(nn.Module):
    """Self-attention then feed-forward; post-norm (original paper) or pre-norm (norm_first=True)."""

    def __init__(self, d_model: int, num_heads: int, d_ff: int, dropout: float = 0.0, norm_first: bool = False):
        super().__init__()
        self.norm_first = norm_first
        self.self_attn = MultiHeadAttention(d_model, num_heads, dropout)
        self.ffn = PositionwiseFeedForward(d_model, d_ff, dropout)
        self.norm1 = nn.LayerNorm(d_model)
        self.norm2 = nn.LayerNorm(d_model)
        self.dropout1 = nn.Dropout(dropout)
        self.dropout2 = nn.Dropout(dropout)

    def _attend(self, x, mask):
        return self.dropout1(self.self_attn(x, x, x, mask)[0])  # (B, T, d_model)

    def forward(self, x: torch.Tensor, mask=None) -> torch.Tensor:
        # x: (B, T, d_model); mask broadcasts to (B, H, T, T), True = may attend
        if self.norm_first:
            x = x + self._attend(self.norm1(x), mask)
            x = x + self.dropout2(self.ffn(self.norm2(x)))
        else:
            x = self.norm1(x + self._attend(x, mask))
            x = self.norm2(x + self.dropout2(self.ffn(x)))
        return x


class Encoder(nn.Module):
    """Token embedding * sqrt(d_model) + positions, then num_layers EncoderBlocks, then a final norm (pre-norm)."""

    def __init__(self, vocab_size: int, d_model: int, num_heads: int, d_ff: int, num_layers: int,
                 max_len: int = 512, dropout: float = 0.0, norm_first: bool = False):
        super().__init__()
        self.d_model = d_model
        self.embedding = TokenEmbedding(vocab_size, d_model)
        self.pos_encoding = PositionalEncoding(d_model, max_len, dropout)
        self.layers = nn.ModuleList(
            [EncoderBlock(d_model, num_heads, d_ff, dropout, norm_first) for _ in range(num_layers)])
        # Pre-norm stacks leave the residual stream un-normalised, so they end with one more LayerNorm.
        self.norm = nn.LayerNorm(d_model) if norm_first else nn.Identity()

    def forward(self, src_ids: torch.Tensor, src_mask=None) -> torch.Tensor:
        # src_ids: (B, T) -> x: (B, T, d_model)
        x = self.embedding(src_ids) * math.sqrt(self.d_model)
        x = self.pos_encoding(x)
        for layer in self.layers:
            x = layer(x, src_mask)
        return self.norm(x)
