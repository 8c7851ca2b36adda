"""Hidden checks of notebook 04 (multi-head attention).

Every input is this submission's (autograder/checks/kit/draws.py); with no salt, the first option of each space:
B 2 (2-3), T 5 (4-6), T_k 7 (7-9), H 3 (2-4), d_head 4 (3-5), all five distinct (T_k != T for cross-attention;
d_model = H * d_head); split_heads also with num_heads = d_head (so d_head' = H); the indivisible num_heads 5 (the
first of 5, 7, 9, 11 that does not divide d_model); padded lengths: full rows and one of 2..T-1 (2..T_k-1).
"""
from __future__ import annotations


import torch

from autograder.checks.kit import inputs
from autograder.checks.kit.compare import (
    DROPOUT_P, candidates, describe, expect_dropout_acts, expect_tensor, from_table, prepare,
)
from autograder.checks.kit.criteria import argument
from autograder.checks.kit.draws import draw_sizes, pick, rng
from autograder.checks.kit.inputs import padded_ids
from autograder.checks.kit.parts import given_working_parts
from autograder.checks.kit.remote import hidden_check
from autograder.checks.kit.toolkit import (
    call, construct, expect_callable, expect_raises, fail, randn, seeded, shape_of, start_check,
)
from autograder.checks.multi_head import mistakes as M


def _sizes() -> tuple[int, int, int, int, int, int]:
    """(B, T, T_K, H, D_HEAD, D_MODEL) of this submission: B, T, T_K, H, D_HEAD all distinct, D_MODEL = H * D_HEAD."""
    sizes = draw_sizes("multi_head.sizes", {"B": [2, 3], "T": [5, 4, 6], "T_K": [7, 8, 9], "H": [3, 2, 4],
                                            "D_HEAD": [4, 3, 5]})
    B, T, T_K, H, D_HEAD = (sizes[name] for name in ("B", "T", "T_K", "H", "D_HEAD"))
    return B, T, T_K, H, D_HEAD, H * D_HEAD


def _heads_mistakes(variant, *args):
    """The known wrong answers of split_heads or merge_heads (`variant`: M.split or M.merge) on `args`."""
    ids = [mistake_id for mistake_id, (row_variant, _switches) in M.HEADS_TABLE.items() if row_variant is variant]
    return lambda: from_table(M.HEADS_TABLE, lambda variant, switches: variant(*args, **switches), ids)


@hidden_check
def check_split_heads(split_heads) -> None:
    """split_heads(x (B, T, d_model), num_heads) -> (B, H, T, d_head)."""
    device = start_check()
    expect_callable(split_heads, "split_heads")
    reference = inputs.reference("multi_head")
    B, T, _T_K, H, D_HEAD, D_MODEL = _sizes()
    for num_heads in (H, D_HEAD):               # d_head D_HEAD and H: B, T, H, d_head stay distinct
        x = randn(B, T, D_MODEL, seed=40 + num_heads, device=device)
        tested = f"x {shape_of(x)}, num_heads={num_heads}"
        expected = reference.split_heads(x, num_heads)
        got = call("split_heads", split_heads, x.clone(), num_heads, tested=tested)
        expect_tensor(got, expected, "split_heads output", device, tested=tested,
                      shape_hint="(B, T, d_model) -> (B, num_heads, T, d_model // num_heads)",
                      mistakes=_heads_mistakes(M.split, x, num_heads))


@hidden_check
def check_merge_heads(merge_heads) -> None:
    """merge_heads(x (B, H, T, d_head)) -> (B, T, H * d_head), the inverse of split_heads."""
    device = start_check()
    expect_callable(merge_heads, "merge_heads")
    reference = inputs.reference("multi_head")
    B, T, _T_K, H, D_HEAD, _D_MODEL = _sizes()
    x = randn(B, H, T, D_HEAD, seed=50, device=device)
    tested = f"x {shape_of(x)}"
    expected = reference.merge_heads(x)
    got = call("merge_heads", merge_heads, x.clone(), tested=tested)
    expect_tensor(got, expected, "merge_heads output", device, tested=tested,
                  shape_hint="(B, H, T, d_head) -> (B, T, H * d_head)",
                  mistakes=_heads_mistakes(M.merge, x))
    # the inverse of split_heads on a transposed (non-contiguous) input, as it comes out of attention
    y = randn(B, T, H, D_HEAD, seed=51, device=device).transpose(1, 2)   # (B, H, T, d_head), non-contiguous
    tested = f"a non-contiguous x {shape_of(y)} (as returned by attention after a transpose)"
    got = call("merge_heads", merge_heads, y, tested=tested)
    expect_tensor(got, reference.merge_heads(y), "merge_heads output", device, tested=tested,
                  mistakes=_heads_mistakes(M.merge, y))


def mha_mistakes(attn, query, key, value, mask, part: int):
    """Known mistakes of MultiHeadAttention (with the reference module's weights); part 0 = output, 1 = weights."""
    def run(variant, switches):
        return variant(attn, query, key, value, mask, **switches)[part]

    def variants():  # the mask's mistakes only with a mask; each row's other forms (M.FORMS) right after it
        ids = [mistake_id for mistake_id, (_variant, switches) in M.TABLE.items()
               if mask is not None or not any("mask" in name for name in switches)]
        return candidates(M.TABLE, run, ids, M.FORMS)

    return variants


def attention_cases(device):
    """(description, query, key, value, mask) for self-attention (no / padding / causal mask) and cross-attention.

    Besides the usual calls (the same tensor as query, key and value; the same memory as key and value), query,
    key and value are also three different tensors, so that an answer that mixes up its inputs (key and value
    swapped, the query projected from the key...) gives different numbers.
    """
    masks = inputs.reference("attention")
    B, T, T_K, _H, _D_HEAD, D_MODEL = _sizes()
    rows = rng("multi_head.padding_lengths")
    short = pick("multi_head.padding_short", [3, *range(2, T)])
    short_k = pick("multi_head.padding_short_k", [4, *range(2, T_K)])
    self_lengths = [T, short] + [rows.randint(2, T) for _ in range(B - 2)]
    cross_lengths = [short_k, T_K] + [rows.randint(2, T_K) for _ in range(B - 2)]
    x = randn(B, T, D_MODEL, seed=60, device=device)
    memory = randn(B, T_K, D_MODEL, seed=61, device=device)
    x_key, x_value = randn(B, T, D_MODEL, seed=64, device=device), randn(B, T, D_MODEL, seed=65, device=device)
    memory_value = randn(B, T_K, D_MODEL, seed=66, device=device)
    self_padding = masks.make_padding_mask(padded_ids(self_lengths, T, seed=62, device=device))  # (B, 1, 1, T)
    cross_padding = masks.make_padding_mask(                                              # (B, 1, 1, T_K)
        padded_ids(cross_lengths, T_K, seed=63, device=device))
    causal = masks.make_causal_mask(T, device=device)                                       # (T, T)
    return [
        ("self-attention, no mask", x, x, x, None),
        ("self-attention, padding mask", x, x, x, self_padding),
        ("self-attention, causal mask", x, x, x, causal),
        ("cross-attention (T_q != T_k), no mask", x, memory, memory, None),
        ("cross-attention (T_q != T_k), padding mask", x, memory, memory, cross_padding),
        ("query, key and value three different tensors, no mask", x, x_key, x_value, None),
        ("query, key and value three different tensors, causal mask", x, x_key, x_value, causal),
        ("cross-attention with different key and value tensors, padding mask", x, memory, memory_value,
         cross_padding),
    ]


def _compare(module, ref, cases, name: str, device) -> None:
    """The module's (output, weights) against the reference's on each case (both prepared: same weights, eval)."""
    for what, q, k, v, mask in cases:
        tested = f"{name}, {what}: query {shape_of(q)}, key/value {shape_of(k)}" + \
            (f", mask {shape_of(mask)}" if mask is not None else "")
        with torch.no_grad():
            expected_out, expected_w = ref(q, k, v, mask)
            got = call("MultiHeadAttention.forward", module, q.clone(), k.clone(), v.clone(),
                       None if mask is None else mask.clone(), tested=tested)
        if not isinstance(got, tuple) or len(got) != 2:
            fail("MultiHeadAttention.forward must return a tuple (output, weights).", tested=tested)
        expect_tensor(got[0], expected_out, "MultiHeadAttention output", device, tested=tested,
                      mistakes=mha_mistakes(ref, q, k, v, mask, 0))
        expect_tensor(got[1], expected_w, "the attention weights", device, tested=tested,
                      mistakes=mha_mistakes(ref, q, k, v, mask, 1),
                      shape_hint="weights are (B, num_heads, T_q, T_k): one map per head, not averaged")


@hidden_check
@given_working_parts("multi_head_attention")
def check_multi_head_attention(MultiHeadAttention) -> None:
    """MultiHeadAttention(d_model, num_heads, dropout=0.0, bias=True): w_q, w_k, w_v, w_o; forward -> (out, weights).

    The core uses the defaults (dropout 0, biases); bias=False and dropout > 0 are arguments with teeth."""
    device = start_check()
    reference = inputs.reference("multi_head")
    expect_callable(MultiHeadAttention, "MultiHeadAttention", "module")
    _B, _T, _T_K, H, _D_HEAD, D_MODEL = _sizes()
    indivisible = pick("multi_head.indivisible", [n for n in (5, 7, 9, 11) if D_MODEL % n])
    expect_raises(ValueError, f"MultiHeadAttention({D_MODEL}, {indivisible})", MultiHeadAttention, D_MODEL,
                  indivisible,
                  why="when d_model is not divisible by num_heads", criterion="MultiHeadAttention.indivisible")
    cases = attention_cases(device)
    module = construct(MultiHeadAttention, "MultiHeadAttention", D_MODEL, H)
    with seeded(7):
        ref = reference.MultiHeadAttention(D_MODEL, H)
    prepare(module, ref, device, "MultiHeadAttention")
    _compare(module, ref, cases, f"MultiHeadAttention({D_MODEL}, {H})", device)
    with argument("MultiHeadAttention.bias"):   # bias=False: four nn.Linear without bias
        name = f"MultiHeadAttention({D_MODEL}, {H}, bias=False)"
        module = construct(MultiHeadAttention, "MultiHeadAttention", D_MODEL, H, bias=False)
        biases = [n for n, _shape, _dtype in describe(module, name).get("parameters", [])
                  if n in {f"{w}.bias" for w in ("w_q", "w_k", "w_v", "w_o")}]
        if biases:
            fail(f"{name} still has biases: {', '.join(biases)}.",
                 hint="pass bias=bias on to every nn.Linear(d_model, d_model, bias=bias)")
        with seeded(7):
            ref = reference.MultiHeadAttention(D_MODEL, H, bias=False)
        prepare(module, ref, device, "MultiHeadAttention")
        _compare(module, ref, cases[1:2], name, device)
    with argument("MultiHeadAttention.dropout"):   # dropout > 0: on the weights in training mode only
        name = f"MultiHeadAttention({D_MODEL}, {H}, dropout={DROPOUT_P})"
        module = construct(MultiHeadAttention, "MultiHeadAttention", D_MODEL, H, dropout=DROPOUT_P)
        with seeded(7):
            ref = reference.MultiHeadAttention(D_MODEL, H, dropout=DROPOUT_P)
        prepare(module, ref, device, "MultiHeadAttention")
        what, q, k, v, mask = cases[1]
        tested = f"{name}, {what}: x {shape_of(q)}, mask {shape_of(mask)}"
        with torch.no_grad():
            expected_out, expected_w = ref(q, k, v, mask)
        pair = lambda got: got[0] if isinstance(got, tuple) and len(got) == 2 else got  # noqa: E731
        noisy = expect_dropout_acts(module, "MultiHeadAttention", (q, k, v, mask), expected_out, device,
                                    tested=tested, output=pair,
                                    hint="self.dropout = nn.Dropout(dropout) in __init__; in forward apply it to "
                                         "the attention weights before multiplying by v")
        expect_tensor(noisy[1], expected_w, "the attention weights in training mode", device,
                      tested=f"{tested}, training mode", note="return the weights before dropout")
