"""Hidden checks of notebook 03 (scaled dot-product attention and the masks; True = may attend).

Every input is this submission's (autograder/checks/kit/draws.py); with no salt, the first option of each space:
- make_padding_mask: ids (3, 7) (B 2-4, T 5-9, B != T) with lengths 5, 2, 7 (one full row, others 1..T-1), and
  ids (4, 6) (B 3-5, T 4-8) with pad_id 3 (1-9) and lengths 4, 6, 1, 6 (one full row, none of length 1 in the
  first place: position 1 holds the ordinary token 0);
- make_causal_mask: sizes 5 (3-6) and 7 (6-10), distinct;
- scaled_dot_product_attention: B 2 (2-3), H 3 (2-4), T_q 5 (3-6), T_k 7 (6-9), d_k 4 (3-8), d_v 6 (5-10), all six
  distinct (so that every transposed or misplaced axis shows, and sqrt(T_k) != sqrt(d_k)); the padded lengths T_k
  and 2..T_k-1.
"""
from __future__ import annotations

import torch

from autograder.checks.attention import mistakes as M
from autograder.checks.kit import inputs
from autograder.checks.kit.compare import as_tensor, expect_shape, expect_tensor, from_table
from autograder.checks.kit.criteria import argument
from autograder.checks.kit.draws import draw_sizes, pick, rng
from autograder.checks.kit.inputs import draw_lengths, padded_ids
from autograder.checks.kit.remote import hidden_check
from autograder.checks.kit.toolkit import call, expect_callable, fail, randn, shape_of, start_check


def _ids(variant, keep=lambda switches: True) -> list[str]:
    """The ids of the rows of M.TABLE whose variant is `variant` (and whose switches `keep` admits), in order."""
    return [mistake_id for mistake_id, (row_variant, switches) in M.TABLE.items()
            if row_variant is variant and keep(switches)]


def _mask_problem(got, expected, label, tested, mistakes=None):
    """Fail unless `got` is the bool mask `expected`; an inverted mask, or one of `mistakes` ({id: thunk}), named."""
    got = as_tensor(got, label, tested)
    expect_shape(got, expected.shape, label, tested)
    if got.dtype != torch.bool:
        fail(f"{label} must be a bool tensor, got {got.dtype}.", tested=tested, hint="comparisons give bool tensors")
    got = got.to(expected.device)
    if bool(torch.equal(got, expected)):
        return
    candidates = {"attention.mask_inverted": lambda: ~expected, **(mistakes or {})}
    mistake = next((name for name, produce in candidates.items() if bool(torch.equal(got, produce()))), None)
    wrong = int((got != expected).sum())
    fail(f"{label}: values differ from the reference solution.", tested=tested,
         details=[f"{wrong} of {expected.numel()} entries differ"], mistake=mistake)


@hidden_check
def check_make_padding_mask(make_padding_mask) -> None:
    """make_padding_mask(ids (B, T), pad_id=0) -> bool (B, 1, 1, T), True at real tokens."""
    device = start_check()
    expect_callable(make_padding_mask, "make_padding_mask")
    reference = inputs.reference("attention")
    first = draw_sizes("attention.padding_mask.first", {"B": [3, 2, 4], "T": [7, 5, 6, 8, 9]})
    second = draw_sizes("attention.padding_mask.second", {"B": [4, 3, 5], "T": [6, 4, 5, 7, 8]})
    pad_id = pick("attention.padding_mask.pad_id", [3, 1, 2, 4, 5, 6, 7, 8, 9])
    lengths = draw_lengths("attention.padding_mask.lengths_first", [5, 2, 7], first["T"], first["B"])
    other = draw_lengths("attention.padding_mask.lengths_second", [4, 6, 1, 6], second["T"], second["B"])
    _check_padding_mask_case(make_padding_mask, reference, padded_ids(lengths, first["T"], seed=1, device=device))
    with argument("make_padding_mask.pad_id"):  # an argument with teeth: a pad_id other than 0
        _check_padding_mask_case(make_padding_mask, reference,
                                 padded_ids(other, second["T"], pad_id=pad_id, seed=2, device=device), pad_id=pad_id)


def _check_padding_mask_case(make_padding_mask, reference, ids, **kwargs) -> None:
    tested = f"ids {tuple(ids.shape)}" + (f", pad_id={kwargs['pad_id']}" if kwargs else "")
    expected = reference.make_padding_mask(ids, **kwargs)
    got = call("make_padding_mask", make_padding_mask, ids.clone(), **kwargs, tested=tested)
    if isinstance(got, torch.Tensor) and tuple(got.shape) != tuple(expected.shape):
        fail("the padding mask has the wrong shape.", tested=tested,
             details=[f"expected shape {tuple(expected.shape)} = (B, 1, 1, T), got {tuple(got.shape)}"],
             hint="add the two broadcast axes: mask[:, None, None, :]")
    _mask_problem(got, expected, "the padding mask", tested)


@hidden_check
def check_make_causal_mask(make_causal_mask) -> None:
    """make_causal_mask(size, device=None) -> bool (size, size), lower triangle True."""
    device = start_check()
    expect_callable(make_causal_mask, "make_causal_mask")
    reference = inputs.reference("attention")
    sizes = draw_sizes("attention.causal_mask.sizes", {"first": [5, 3, 4, 6], "second": [7, 6, 8, 9, 10]})
    for size, kwargs in ((sizes["first"], {}), (sizes["second"], {"device": device})):
        tested = f"size={size}" + (f", device={device.type}" if kwargs else "")
        expected = reference.make_causal_mask(size, **kwargs)
        got = call("make_causal_mask", make_causal_mask, size, **kwargs, tested=tested)
        got = as_tensor(got, "the causal mask", tested)
        if got.device != expected.device:
            fail("the causal mask is on the wrong device.", tested=tested,
                 details=[f"expected {expected.device}, got {got.device}"], hint="pass device=device to torch.ones")
        _mask_problem(got, expected, "the causal mask", tested, from_table(
            M.TABLE, lambda variant, switches: variant(size, expected.device, **switches), _ids(M.causal_mask)))


def attention_mistakes(query, key, value, mask, part: int):
    """Known mistakes of scaled_dot_product_attention (those of the mask only with a mask); part 0 = output,
    1 = weights."""
    ids = _ids(M.sdpa, lambda switches: mask is not None or not any("mask" in name for name in switches))
    return lambda: from_table(M.TABLE, lambda variant, switches: variant(query, key, value, mask, **switches)[part],
                              ids)


@hidden_check
def check_scaled_dot_product_attention(scaled_dot_product_attention) -> None:
    """scaled_dot_product_attention(q, k, v, mask=None) -> (output (..., T_q, d_v), weights (..., T_q, T_k))."""
    device = start_check()
    expect_callable(scaled_dot_product_attention, "scaled_dot_product_attention")
    reference = inputs.reference("attention")
    sizes = draw_sizes("attention.sdpa.sizes", {"B": [2, 3], "H": [3, 2, 4], "T_q": [5, 3, 4, 6],
                                                "T_k": [7, 6, 8, 9], "d_k": [4, 3, 5, 8], "d_v": [6, 5, 7, 10]})
    B, H, T_q, T_k, d_k, d_v = (sizes[name] for name in ("B", "H", "T_q", "T_k", "d_k", "d_v"))
    lengths = [T_k, pick("attention.sdpa.length", [4, *range(2, T_k)])] + \
        [rng("attention.sdpa.lengths").randint(2, T_k) for _ in range(B - 2)]
    padding = reference.make_padding_mask(padded_ids(lengths, T_k, seed=3, device=device))  # (B,1,1,T_k)
    causal = reference.make_causal_mask(T_k, device=device)                                  # (T_k, T_k)
    cases = [
        ("no mask", (B, H, T_q), None),
        ("no mask, inputs without a head axis", (B, T_q), None),
        ("padding mask", (B, H, T_q), padding),
        ("causal mask (self-attention, T_q = T_k)", (B, H, T_k), causal),
        ("causal and padding mask", (B, H, T_k), padding & causal),
    ]
    for i, (what, lead, mask) in enumerate(cases):
        if mask is None:  # the core: no mask, the argument's default
            _check_attention_case(scaled_dot_product_attention, reference, device, i, what, lead, T_k, d_k, d_v, mask)
            continue
        with argument("scaled_dot_product_attention.mask"):  # an argument with teeth: the masks
            _check_attention_case(scaled_dot_product_attention, reference, device, i, what, lead, T_k, d_k, d_v, mask)


def _check_attention_case(scaled_dot_product_attention, reference, device, i: int, what: str, lead, T_k: int,
                          d_k: int, d_v: int, mask) -> None:
    key_lead = lead[:-1] + (T_k,)
    q = randn(*lead, d_k, seed=10 + i, device=device)
    k = randn(*key_lead, d_k, seed=20 + i, device=device)
    v = randn(*key_lead, d_v, seed=30 + i, device=device)
    tested = f"query {shape_of(q)}, key {shape_of(k)}, value {shape_of(v)}, {what}" + \
             (f" {shape_of(mask)}" if mask is not None else "")
    expected_out, expected_w = reference.scaled_dot_product_attention(q, k, v, mask)
    args = (q.clone(), k.clone(), v.clone()) + (() if mask is None else (mask.clone(),))  # no mask: the default
    got = call("scaled_dot_product_attention", scaled_dot_product_attention, *args, tested=tested)
    if not isinstance(got, tuple) or len(got) != 2:
        fail("scaled_dot_product_attention must return a tuple (output, weights).", tested=tested)
    expect_tensor(got[1], expected_w, "the attention weights", device, tested=tested,
                  mistakes=attention_mistakes(q, k, v, mask, 1),
                  shape_hint="weights are (..., T_q, T_k): one row per query, one column per key")
    expect_tensor(got[0], expected_out, "the output", device, tested=tested,
                  mistakes=attention_mistakes(q, k, v, mask, 0))
