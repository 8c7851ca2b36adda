"""03 - Scaled dot-product attention and the two masks (True = may attend).

Shapes: B = batch, H = heads, T_q / T_k = query / key lengths, d_k = query/key width, d_v = value width.
"""
from __future__ import annotations

import math

import torch


def make_padding_mask(ids: torch.Tensor, pad_id: int = 0) -> torch.Tensor:
    """(B, T) ids -> (B, 1, 1, T) bool, True at real tokens; broadcasts over heads and query positions."""
    if ids.dim() != 2:
        raise ValueError(f"ids must have shape (B, T), got {tuple(ids.shape)}")
    return (ids != pad_id)[:, None, None, :]


def make_causal_mask(size: int, device=None) -> torch.Tensor:
    """(size, size) bool, lower triangle True: position i may look at positions j <= i."""
    return torch.ones(size, size, dtype=torch.bool, device=device).tril()


def scaled_dot_product_attention(query, key, value, mask=None):
    """softmax(q k^T / sqrt(d_k)) v, with blocked scores set to the dtype's most negative value."""
    d_k = query.size(-1)
    scores = query @ key.transpose(-2, -1) / math.sqrt(d_k)   # (..., T_q, T_k)
    if mask is not None:
        scores = scores.masked_fill(~mask.to(torch.bool), torch.finfo(scores.dtype).min)
    weights = torch.softmax(scores, dim=-1)                   # (..., T_q, T_k), rows sum to 1
    output = weights @ value                                  # (..., T_q, d_v)
    return output, weights
