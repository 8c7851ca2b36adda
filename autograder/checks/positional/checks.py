"""Hidden checks of notebook 02 (positional encoding).

Every input is this submission's (autograder/checks/kit/draws.py); with no salt, the first option of each space:
- sinusoidal tables (max_len, d_model): (12, 8) (max_len 10-15 > d_model 6-10), (9, 6) (7-9, 4-6, distinct),
  (5, 2) (3-7, d_model 2), (16, 20) (14-18 < d_model 20-26); d_model even and >= 4 in all but the third case
  (so that every exponent and base mistake shows); the odd case (10, 7) (8-11, odd 5-13);
- PositionalEncoding: B 3 (2-4) < T 7 (5-9) < max_len 20 (16-24), d_model 10 (8-14, even), B * T * d_model >= 200
  (the dropout fraction is measured on that many entries); the too-long input T = max_len + 1 (1-3);
- LearnedPositionalEmbedding: B 3 (2-4), T 6 (4-8) < max_len 11 (9-14), d_model 8 (6-12), all distinct.
"""
from __future__ import annotations


import torch

from autograder.checks.kit import inputs
from autograder.checks.kit.compare import (
    as_tensor, candidates, describe, expect_shape, expect_tensor, prepare, values_close,
)
from autograder.checks.kit.criteria import argument
from autograder.checks.kit.draws import draw_sizes, pick
from autograder.checks.kit.parts import given_working_parts
from autograder.checks.kit.remote import hidden_check
from autograder.checks.kit.tolerance import tolerance
from autograder.checks.kit.toolkit import (
    call, construct, expect_callable, expect_raises, fail, randn, seeded, start_check,
)
from autograder.checks.positional import mistakes as M
from coursekit.tolerance import DROPOUT_FRACTION_SLACK


def _candidates(variant, run) -> list:
    """[(mistake id, thunk)] for the rows of M.TABLE whose variant is `variant`, in the table's order, each row's
    other forms (M.FORMS) right after it; a thunk is `run(variant, switches)` on the check's own inputs."""
    ids = [mistake_id for mistake_id, (row_variant, _switches) in M.TABLE.items() if row_variant is variant]
    return candidates(M.TABLE, run, ids, M.FORMS)


def _table_mistakes(max_len, d_model):
    """The known wrong sinusoidal tables (max_len, d_model)."""
    return lambda: _candidates(M.sinusoidal, lambda variant, switches: variant(max_len, d_model, **switches))


def _added_mistakes(x, table):
    """The known wrong ways of adding the positions `table` to x."""
    return _candidates(M.add_positions, lambda variant, switches: variant(x, table, **switches))


@hidden_check
def check_sinusoidal_positional_encoding(sinusoidal_positional_encoding) -> None:
    """sinusoidal_positional_encoding(max_len, d_model) -> FloatTensor (max_len, d_model); odd d_model: ValueError."""
    start_check()
    expect_callable(sinusoidal_positional_encoding, "sinusoidal_positional_encoding")
    reference = inputs.reference("positional")
    tables = [
        draw_sizes("positional.table.wide", {"max_len": [12, 10, 11, 13, 14, 15], "d_model": [8, 6, 10]}),
        draw_sizes("positional.table.mid", {"max_len": [9, 7, 8], "d_model": [6, 4]}),
        draw_sizes("positional.table.narrow", {"max_len": [5, 3, 4, 6, 7], "d_model": [2]}),
        draw_sizes("positional.table.deep", {"max_len": [16, 14, 15, 17, 18], "d_model": [20, 22, 24, 26]}),
    ]
    for max_len, d_model in ((t["max_len"], t["d_model"]) for t in tables):
        tested = f"max_len={max_len}, d_model={d_model}"
        expected = reference.sinusoidal_positional_encoding(max_len, d_model)
        got = call("sinusoidal_positional_encoding", sinusoidal_positional_encoding, max_len, d_model, tested=tested)
        got = as_tensor(got, "the table", tested)
        if got.is_floating_point() and got.dtype != torch.float32:
            fail(f"the table must be float32 (a FloatTensor), got {got.dtype}.", tested=tested,
                 hint="numpy creates float64 by default: convert with .float() or dtype=torch.float32")
        expect_tensor(got.cpu(), expected, "the table", "cpu", tested=tested, dtype=torch.float32,
                      mistakes=_table_mistakes(max_len, d_model),
                      shape_hint="rows are positions (max_len), columns are features (d_model)")
    odd = draw_sizes("positional.table.odd", {"max_len": [10, 8, 9, 11], "d_model": [7, 5, 9, 11, 13]})
    expect_raises(ValueError, f"sinusoidal_positional_encoding({odd['max_len']}, {odd['d_model']})",
                  sinusoidal_positional_encoding, odd["max_len"], odd["d_model"],
                  why="for an odd d_model", criterion="sinusoidal_positional_encoding.odd_d_model")


@hidden_check
@given_working_parts("positional_encoding")
def check_positional_encoding(PositionalEncoding) -> None:
    """PositionalEncoding(d_model, max_len=512, dropout=0.0): buffer pe, forward(x) = x + pe[:T]."""
    device = start_check()
    reference = inputs.reference("positional")
    sizes = draw_sizes("positional.encoding.sizes", {"B": [3, 2, 4], "T": [7, 5, 6, 8, 9],
                                                     "d_model": [10, 8, 12, 14], "max_len": [20, 16, 18, 22, 24]},
                       valid=lambda s: s["B"] < s["T"] < s["max_len"] and s["B"] * s["T"] * s["d_model"] >= 200)
    B, T, d_model, max_len = (sizes[name] for name in ("B", "T", "d_model", "max_len"))
    module = construct(PositionalEncoding, "PositionalEncoding", d_model, max_len=max_len)  # dropout: its default
    ref = reference.PositionalEncoding(d_model, max_len=max_len, dropout=0.0)
    prepare(module, ref, device, "PositionalEncoding", copy=False)  # nothing to copy: the table is computed
    # the buffer first: on a GPU a table kept as a plain attribute stays on the CPU, and the forward pass would only
    # say that the devices differ
    info = describe(module, "PositionalEncoding")
    if "pe" not in {name for name, _shape in info.get("buffers", [])}:
        parameters = {name for name, _shape, _dtype in info.get("parameters", [])}
        where = "a parameter (it would be trained)" if "pe" in parameters else "missing"
        fail(f"PositionalEncoding: `pe` must be a buffer (self.register_buffer('pe', ...)); yours is {where}.",
             hint="a buffer moves with .to(device) and is saved with the model, but is not trained")
    x = randn(B, T, d_model, seed=5, device=device)
    tested = f"PositionalEncoding({d_model}, max_len={max_len}) on x {tuple(x.shape)}"
    with torch.no_grad():
        expected = ref(x)
        got = call("PositionalEncoding.forward", module, x.clone(), tested=tested)
    table = ref.pe

    def mistakes():  # the positions added wrongly, or a wrong table added
        return _added_mistakes(x, table) + [(name, lambda make=make: M.add_positions(x, make().to(device)))
                                            for name, make in _table_mistakes(max_len, d_model)()]

    expect_tensor(got, expected, "PositionalEncoding output", device, tested=tested, mistakes=mistakes)
    pe = call("PositionalEncoding.pe", module.attr("pe").fetch)
    expect_tensor(pe, table, "PositionalEncoding.pe", device,
                  tested=f"PositionalEncoding({d_model}, max_len={max_len})", mistakes=_table_mistakes(max_len, d_model))
    long_x = randn(B, max_len + pick("positional.encoding.too_long", [1, 2, 3]), d_model, seed=6, device=device)
    expect_raises(ValueError, f"PositionalEncoding (max_len={max_len}) on x {tuple(long_x.shape)}", module, long_x,
                  why="when the sequence is longer than max_len", criterion="PositionalEncoding.too_long")
    with argument("PositionalEncoding.dropout"):  # an argument with teeth: a non-default dropout
        _check_positional_dropout(PositionalEncoding, x, expected, device, d_model, max_len)


def _check_positional_dropout(PositionalEncoding, x, expected, device, d_model: int, max_len: int, p: float = 0.5):
    """dropout is an argument too: in training mode every entry of dropout(x + pe[:T]) is 0 or (x + pe[:T]) / (1 - p),
    about a fraction p of them 0; in eval mode dropout does nothing. (Any dropout implementation passes.)"""
    name = f"PositionalEncoding({d_model}, max_len={max_len}, dropout={p})"
    module = construct(PositionalEncoding, "PositionalEncoding", d_model, max_len=max_len, dropout=p)
    call(f"{name}.to(device)", module.attr("to"), device)
    call(f"{name}.train()", module.attr("train"))
    tested = f"{name} in training mode on x {tuple(x.shape)}"
    got = as_tensor(call("PositionalEncoding.forward", module, x.clone(), _seed=3, _no_grad=True, tested=tested),
                    "PositionalEncoding output", tested)
    expect_shape(got, expected.shape, "PositionalEncoding output", tested)
    got = got.to(expected.device)
    dropped = got == 0
    kept_close = values_close(got[~dropped], (expected / (1 - p))[~dropped], device)
    fraction = float(dropped.float().mean())
    if not kept_close or abs(fraction - p) > DROPOUT_FRACTION_SLACK:
        mistake = "positional.dropout_ignored" if values_close(got, expected, device) else \
            "positional.dropout_before_add" if _dropped_before_adding(got, x.to(got.device), expected, p, device) \
            else None
        fail("PositionalEncoding: dropout(x + pe[:T]) is wrong in training mode.", tested=tested,
             details=[f"expected about {p:.0%} of the entries zeroed and the others (x + pe[:T]) / (1 - p); "
                      f"got {fraction:.0%} zeroed" + ("" if kept_close else ", and other values differ")],
             mistake=mistake, hint="self.dropout = nn.Dropout(dropout) in __init__, then return self.dropout(x + ...)")
    call(f"{name}.eval()", module.attr("eval"))
    tested = f"{name} in eval mode on x {tuple(x.shape)}"
    got = call("PositionalEncoding.forward", module, x.clone(), _no_grad=True, tested=tested)
    eval_got = as_tensor(got, "PositionalEncoding output", tested)
    if eval_got.shape == expected.shape and _dropped(eval_got.to(expected.device), expected, p, device):
        fail("PositionalEncoding: dropout acts in eval mode.", tested=tested, mistake="positional.dropout_in_eval")
    expect_tensor(got, expected, "PositionalEncoding output", device, tested=tested,
                  note="dropout must do nothing in eval mode: use nn.Dropout, or F.dropout(..., training=self.training)")


def _dropped(got, expected, p: float, device) -> bool:
    """got is dropout(expected): some entries zeroed, every other one expected / (1 - p) (the course tolerance)."""
    zero = got == 0
    return bool(zero.any()) and values_close(got, expected / (1 - p), device, where=~zero)


def _dropped_before_adding(got, x, expected, p: float, device) -> bool:
    """got is dropout(x) + pe: each entry is either pe (x dropped) or x / (1 - p) + pe (the course tolerance)."""
    pe = expected - x
    dropped = torch.isclose(got, pe, **tolerance(device))
    return bool(dropped.any()) and values_close(got, x / (1 - p) + pe, device, where=~dropped)


@hidden_check
def check_learned_positional_embedding(LearnedPositionalEmbedding) -> None:
    """LearnedPositionalEmbedding(max_len, d_model): submodule `embedding`; forward(x) = x + embedding(arange(T))."""
    device = start_check()
    reference = inputs.reference("positional")
    sizes = draw_sizes("positional.learned.sizes", {"B": [3, 2, 4], "T": [6, 4, 5, 7, 8], "d_model": [8, 6, 10, 12],
                                                    "max_len": [11, 9, 10, 12, 13, 14]},
                       valid=lambda s: len(set(s.values())) == 4 and s["T"] < s["max_len"])
    B, T, d_model, max_len = (sizes[name] for name in ("B", "T", "d_model", "max_len"))
    module = construct(LearnedPositionalEmbedding, "LearnedPositionalEmbedding", max_len, d_model)
    if "Embedding" not in describe(module, "LearnedPositionalEmbedding").get("module_bases", {}).get("embedding", []):
        fail("LearnedPositionalEmbedding needs a submodule `embedding = nn.Embedding(max_len, d_model)`.")
    with seeded(2):
        ref = reference.LearnedPositionalEmbedding(max_len, d_model)
    prepare(module, ref, device, "LearnedPositionalEmbedding")
    table = ref.embedding.weight.detach()
    for T in (T, max_len):
        x = randn(B, T, d_model, seed=7 + T, device=device)
        tested = f"LearnedPositionalEmbedding({max_len}, {d_model}) on x {tuple(x.shape)}"
        with torch.no_grad():
            expected = ref(x)
            got = call("LearnedPositionalEmbedding.forward", module, x.clone(), tested=tested)
        expect_tensor(got, expected, "LearnedPositionalEmbedding output", device, tested=tested,
                      mistakes=lambda x=x: _added_mistakes(x, table))
