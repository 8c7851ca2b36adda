"""Public checks for notebook 03 (attention and masks). Mask convention: True = may attend.

Expected attention is computed here in float64 numpy, one query row at a time, with an explicit softmax.
"""
from __future__ import annotations

import math

import numpy as np
import torch

from coursekit.checks.toolkit import (
    close, expect_close, expect_dtype, expect_shape, expect_type, fail, first_matching_hint, mistake_hint, passed,
    run, softmax_rows,
)
from coursekit.criteria import argument

INVERTED = mistake_hint("attention.mask_inverted")


def check_make_padding_mask(make_padding_mask) -> None:
    ids = torch.tensor([[5, 7, 0], [3, 0, 0]])
    expected = torch.tensor([[True, True, False], [True, False, False]])[:, None, None, :]   # (2, 1, 1, 3)
    mask = run("make_padding_mask", make_padding_mask, ids)
    expect_type(mask, torch.Tensor, "make_padding_mask(ids)")
    if tuple(mask.shape) in {(2, 3), (2, 1, 3), (2, 3, 1, 1)}:
        fail(f"the mask has shape {tuple(mask.shape)}, expected (B, 1, 1, T) = (2, 1, 1, 3).",
             "add the two middle axes: (ids != pad_id)[:, None, None, :], so it broadcasts over heads and queries.")
    expect_shape(mask, (2, 1, 1, 3), "make_padding_mask(ids of shape (2, 3))")
    expect_dtype(mask, torch.bool, "the mask", "a comparison such as ids != pad_id already gives a bool tensor.")
    if torch.equal(mask.cpu(), ~expected):
        fail("the mask is inverted: it is True at the padding.", INVERTED)
    if not torch.equal(mask.cpu(), expected):
        fail(f"make_padding_mask({ids.tolist()}) should be {expected[:, 0, 0].tolist()} (shown without the "
             f"middle axes), got {mask[:, 0, 0].tolist()}", None)
    with argument("make_padding_mask.pad_id"):
        nines = run("make_padding_mask", make_padding_mask, torch.tensor([[4, 9, 0]]), pad_id=9)
        if nines[0, 0, 0].tolist() != [True, False, True]:
            fail("with pad_id=9 only the 9s are padding.", "compare with the pad_id argument, not a fixed 0.")
    passed("make_padding_mask")


def check_make_causal_mask(make_causal_mask) -> None:
    expected = torch.tensor(np.tri(4, dtype=bool))      # lower triangle with the diagonal
    mask = run("make_causal_mask", make_causal_mask, 4)
    expect_type(mask, torch.Tensor, "make_causal_mask(4)")
    expect_shape(mask, (4, 4), "make_causal_mask(4)", "a square (size, size) matrix, no batch axes.")
    expect_dtype(mask, torch.bool, "the mask", "use dtype=torch.bool (for example torch.ones(..., dtype=torch.bool)).")
    mask_cpu = mask.cpu()
    if torch.equal(mask_cpu, ~expected):
        fail("the mask is inverted: True above the diagonal blocks the past and allows the future.", INVERTED)
    if torch.equal(mask_cpu, expected.T):
        fail("that is the upper triangle: query i would see the future positions j > i.",
             mistake_hint("causal_mask.upper_triangle"))
    if torch.equal(mask_cpu, torch.tensor(np.tri(4, k=-1, dtype=bool))):
        fail("the diagonal is False, so a position could not attend to itself.",
             mistake_hint("causal_mask.diagonal_blocked"))
    if not torch.equal(mask_cpu, expected):
        fail(f"make_causal_mask(4) should be\n{expected.int()}\ngot\n{mask_cpu.int()}")
    on_cpu = run("make_causal_mask", make_causal_mask, 3, device=torch.device("cpu"))
    if on_cpu.device.type != "cpu" or tuple(on_cpu.shape) != (3, 3):
        fail("make_causal_mask(3, device=cpu) should be a (3, 3) tensor on that device.",
             "pass device=device when you create the tensor.")
    passed("make_causal_mask")


def _attention_by_rows(q, k, v, mask=None, scale=None, fill=None):
    """float64 numpy attention over the last two axes, query row by query row (independent of torch)."""
    q, k, v = (np.asarray(t, dtype=np.float64) for t in (q, k, v))
    scale = 1 / math.sqrt(q.shape[-1]) if scale is None else scale
    scores = np.einsum("...qd,...kd->...qk", q, k) * scale
    if mask is not None:
        allowed = np.broadcast_to(np.asarray(mask, dtype=bool), scores.shape)
        scores = np.where(allowed, scores, -1e300 if fill is None else fill)
    weights = softmax_rows(scores)
    return np.einsum("...qk,...kd->...qd", weights, v), weights


def check_scaled_dot_product_attention(scaled_dot_product_attention) -> None:
    gen = torch.Generator().manual_seed(0)
    q = torch.randn(2, 3, 4, generator=gen)       # (B=2, T_q=3, d_k=4)
    k = torch.randn(2, 5, 4, generator=gen)       # (B=2, T_k=5, d_k=4)
    v = torch.randn(2, 5, 6, generator=gen)       # (B=2, T_k=5, d_v=6)
    out_ok, w_ok = _attention_by_rows(q, k, v)

    result = run("scaled_dot_product_attention", scaled_dot_product_attention, q, k, v)
    if not (isinstance(result, tuple) and len(result) == 2):
        fail("scaled_dot_product_attention should return a tuple (output, weights).",
             "end with `return output, weights`.")
    out, weights = result
    if tuple(out.shape) == (2, 3, 5) and tuple(weights.shape) == (2, 3, 6):
        fail("output and weights look swapped.", "return (output, weights) in this order.")
    expect_shape(weights, (2, 3, 5), "weights for q (2, 3, 4), k (2, 5, 4)",
                 "weights are (..., T_q, T_k): use key.transpose(-2, -1), not key.T (which reverses every axis).")
    expect_shape(out, (2, 3, 6), "output for v (2, 5, 6)", "output = weights @ value: (..., T_q, d_v).")
    w = weights.detach().double()
    if torch.allclose(w, torch.ones_like(w)) or torch.allclose(w, w[..., :1].expand_as(w)):
        hint = "your weights are all equal: did you forget the softmax dim? It is dim=-1 (over the keys)."
        fail("the weights are all equal.", hint)
    scores = np.einsum("bqd,bkd->bqk", q.double().numpy(), k.double().numpy())
    hint = first_matching_hint(w, [
        (_attention_by_rows(q, k, v, scale=1.0)[1], mistake_hint("attention.missing_scale")),
        (_attention_by_rows(q, k, v, scale=1 / 4)[1], mistake_hint("attention.scale_by_d")),
        (torch.softmax(torch.tensor(scores / 2), dim=-2), mistake_hint("attention.softmax_dim")),
        (torch.softmax(torch.tensor(scores / 2), dim=0), "the softmax runs over the batch axis: use dim=-1."),
        (torch.tensor(scores / 2), "these are the raw scaled scores: apply the softmax."),
    ])
    expect_close(weights, w_ok, "weights", hint)
    expect_close(out, out_ok, "output", "output = weights @ value.")

    # Heads: (B, H, T, d) inputs, any leading axes pass through.
    q4, k4, v4 = (torch.randn(1, 2, 3, 4, generator=gen) for _ in range(3))
    out4, w4 = run("scaled_dot_product_attention", scaled_dot_product_attention, q4, k4, v4)
    expect_shape(w4, (1, 2, 3, 3), "weights for (B, H, T, d) = (1, 2, 3, 4) inputs",
                 "work on the LAST two axes only (matmul and transpose(-2, -1)), so any leading axes pass through.")
    expected_out4, expected_w4 = _attention_by_rows(q4, k4, v4)
    expect_close(w4, expected_w4, "weights with 4-D inputs")
    expect_close(out4, expected_out4, "output with 4-D inputs")

    with argument("scaled_dot_product_attention.mask"):  # the argument `mask`: True = may attend
        _check_masks(scaled_dot_product_attention, (q, k, v), w_ok, (q4, k4, v4))
    passed("scaled_dot_product_attention")


def _check_masks(scaled_dot_product_attention, qkv, w_ok, qkv4) -> None:
    """The argument `mask` (True = may attend): a padding-style mask on (B, T, d) inputs `qkv` (whose unmasked
    weights are `w_ok`), a causal mask on (B, H, T, d) inputs `qkv4`, and a fully blocked query row."""
    q, k, v = qkv
    q4, k4, v4 = qkv4
    # A padding-style mask, broadcast over the queries: (B, 1, T_k).
    mask = torch.tensor([[True, True, True, False, False], [True, False, True, True, True]])[:, None, :]
    out_m, w_m = run("scaled_dot_product_attention", scaled_dot_product_attention, q, k, v, mask)
    expected_out_m, expected_w_m = _attention_by_rows(q, k, v, mask.numpy())
    hint = first_matching_hint(w_m.detach(), [
        (w_ok, mistake_hint("attention.mask_ignored")),
        (_attention_by_rows(q, k, v, ~mask.numpy())[1], INVERTED),
        (_attention_by_rows(q, k, v, mask.numpy(), fill=0.0)[1],
         "blocked scores were set to 0, which still gets weight: use a very negative number "
         "(torch.finfo(scores.dtype).min)."),
    ])
    if hint is None and close(w_m.detach() * mask, w_m.detach()) is False and not close(w_m, expected_w_m):
        hint = "blocked positions must get weight 0 and the remaining weights must still sum to 1."
    expect_close(w_m, expected_w_m, "weights with a padding mask", hint)
    expect_close(out_m, expected_out_m, "output with a padding mask")

    # A causal (T, T) mask on (B, H, T, d) inputs; one query row fully blocked must stay finite.
    causal = torch.tensor(np.tri(3, dtype=bool))
    out4, w4 = run("scaled_dot_product_attention", scaled_dot_product_attention, q4, k4, v4, causal)
    expect_shape(w4, (1, 2, 3, 3), "weights for (B, H, T, d) = (1, 2, 3, 4) inputs and a (3, 3) mask",
                 "the (T, T) mask broadcasts against the (B, H, T, T) scores.")
    expected_out4, expected_w4 = _attention_by_rows(q4, k4, v4, causal.numpy())
    expect_close(w4, expected_w4, "weights with 4-D inputs and a causal mask")
    expect_close(out4, expected_out4, "output with 4-D inputs and a causal mask")

    blocked_row = torch.tensor([[False, False, False], [True, True, False], [True, True, True]])
    _, w_blocked = run("scaled_dot_product_attention", scaled_dot_product_attention, q4, k4, v4, blocked_row)
    if not torch.isfinite(w_blocked).all():
        fail("a query whose keys are all blocked produced NaN or inf weights.",
             "fill blocked scores with torch.finfo(scores.dtype).min instead of -inf.")
