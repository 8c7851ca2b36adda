"""Known-mistake variants of notebook 03 (attention): see the package doc."""
from __future__ import annotations

import math

import torch


def sdpa(query, key, value, mask=None, *, scale="sqrt", softmax_dim=-1, invert_mask=False, ignore_mask=False,
         mask_after_softmax=False, d_scale=None):
    """Scaled dot-product attention with switches. `d_scale` overrides the width used in the scale."""
    d = query.size(-1) if d_scale is None else d_scale
    factor = {"sqrt": 1 / math.sqrt(d), "none": 1.0, "mul_sqrt": math.sqrt(d), "d": 1 / d,
              "length": 1 / math.sqrt(key.size(-2))}[scale]                  # "length": sqrt of the sequence length
    scores = query @ key.transpose(-2, -1) * factor                                         # (..., T_q, T_k)
    keep = None
    if mask is not None and not ignore_mask:
        keep = mask.to(torch.bool)
        if invert_mask:
            keep = ~keep
    if keep is not None and not mask_after_softmax:
        scores = scores.masked_fill(~keep, torch.finfo(scores.dtype).min)
    weights = torch.softmax(scores, dim=softmax_dim)
    if keep is not None and mask_after_softmax:
        weights = weights * keep
    return weights @ value, weights


ATTENTION_MISTAKES = {
    "attention.missing_scale": {"scale": "none"},
    "multi_head.scale_d_model": {"scale_width": "d_model"},
    "attention.scale_multiplied": {"scale": "mul_sqrt"},
    "attention.scale_by_d": {"scale": "d"},
    "attention.scale_by_length": {"scale": "length"},
    "attention.softmax_dim": {"softmax_dim": -2},
    "attention.mask_inverted": {"invert_mask": True},
    "attention.mask_ignored": {"ignore_mask": True},
    "attention.mask_after_softmax": {"mask_after_softmax": True},
    "multi_head.split_no_transpose": {"split_how": "no_transpose"},
    "multi_head.split_interleaved": {"split_how": "interleaved"},
    "multi_head.merge_no_transpose": {"merge_how": "no_transpose"},
}
SDPA_FLAGS = ("scale", "softmax_dim", "invert_mask", "ignore_mask", "mask_after_softmax")
