"""Known-mistake variants of notebook 03 (attention), and the table of the mistakes they make.

`ATTENTION_MISTAKES` = {mistake id: switches} of attention, shared by the checks of later notebooks (multi-head,
encoder, modern) whose variants take the same switches; `SDPA_FLAGS` are those that `sdpa` takes.
`TABLE` = {mistake id: (variant, switches)}: the variant run with those switches on a check's own inputs gives that
mistake's answer (`kit.compare.from_table`); a check tries its rows in the table's order, the first match naming the
mistake.
"""
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


def causal_mask(size, device=None, *, diagonal=0, upper=False):
    """The causal mask (size, size), True on and below the diagonal; `diagonal=-1` blocks the diagonal, `upper`
    keeps the upper triangle instead."""
    ones = torch.ones(size, size, dtype=torch.bool, device=device)
    return torch.triu(ones, diagonal=-diagonal) if upper else torch.tril(ones, diagonal=diagonal)


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

TABLE = {
    # scaled_dot_product_attention
    **{mistake_id: (sdpa, switches) for mistake_id, switches in ATTENTION_MISTAKES.items()
       if set(switches) <= set(SDPA_FLAGS)},
    # make_causal_mask (besides attention.mask_inverted, which every mask check recognises as ~expected)
    "causal_mask.diagonal_blocked": (causal_mask, {"diagonal": -1}),
    "causal_mask.upper_triangle": (causal_mask, {"upper": True}),
}
