"""Hidden check of notebook 08's `GPT`: a tied head, causal pre-norm blocks, the tables' initialisation, max_len, and
the dropout argument, judged on the reference's weights copied into the student's model (sizes drawn for the
submission)."""
from __future__ import annotations

import torch

from autograder.checks.gpt import mistakes as M
from autograder.checks.kit.compare import describe, expect_dropout_acts, expect_tensor, from_table, prepare
from autograder.checks.kit.criteria import argument
from autograder.checks.kit.draws import draw_sizes, pick
from autograder.checks.kit.inputs import reference
from autograder.checks.kit.remote import RemoteObject, hidden_check
from autograder.checks.kit.toolkit import (
    call, construct, expect_raises, expected_got, fail, fetch, grader_step, randint, seeded, shape_of, start_check,
)
from coursekit.tolerance import GPT_TABLE_STD_RTOL

# GPT sizes: heads, widths, lengths and the vocabulary all differ (drawn until they do).
# (Not the contract's defaults either: num_heads=4, num_layers=4, so that an argument left at its default shows.)
GPT_SIZES = {"vocab": [29, 31, 27, 33, 37], "d_model_heads": [(12, 3), (16, 2), (15, 3), (20, 2), (12, 2), (18, 3)],
             "d_ff": [20, 22, 26, 30, 34], "layers": [2, 3], "max_len": [16, 14, 17, 19], "t": [7, 5, 6, 9, 11],
             "b": [2, 3]}


def gpt_sizes() -> dict:
    """This submission's GPT sizes (today's with no salt): vocabulary, width, heads, d_ff, layers, max_len, T, B,
    drawn until vocabulary, width, d_ff, max_len and T all differ (T < max_len), and heads and layers differ."""
    def valid(sizes):
        lengths = [sizes["vocab"], sizes["d_model_heads"][0], sizes["d_ff"], sizes["max_len"], sizes["t"]]
        return len(set(lengths)) == len(lengths) and sizes["t"] < sizes["max_len"] \
            and sizes["d_model_heads"][1] != sizes["layers"]

    sizes = draw_sizes("gpt.sizes", GPT_SIZES, valid)
    d_model, heads = sizes["d_model_heads"]
    return {"vocab": sizes["vocab"], "d_model": d_model, "heads": heads, "d_ff": sizes["d_ff"],
            "layers": sizes["layers"], "max_len": sizes["max_len"], "t": sizes["t"], "b": sizes["b"]}


def reference_gpt(seed: int, sizes: dict | None = None, **kwargs):
    """The reference GPT under this submission's seed, its LayerNorms randomised so that a missing or moved norm
    shows."""
    z = sizes or gpt_sizes()
    with seeded(seed):
        model = reference("gpt").GPT(z["vocab"], z["d_model"], z["heads"], z["d_ff"], z["layers"],
                                     max_len=z["max_len"], **kwargs)
        for sub in model.modules():
            if isinstance(sub, torch.nn.LayerNorm):
                torch.nn.init.normal_(sub.weight, 1.0, 0.3)
                torch.nn.init.normal_(sub.bias, 0.0, 0.3)
    return model


def _parameter_names(module: RemoteObject, name: str) -> dict[str, tuple]:
    return {n: tuple(shape) for n, shape, _dtype in describe(module, name).get("parameters", [])}


@hidden_check
def check_gpt(GPT) -> None:
    """GPT(vocab_size, d_model, num_heads, d_ff, num_layers, max_len, dropout): tied head, causal pre-norm blocks."""
    device = start_check()
    z = gpt_sizes()
    VOCAB, D_MODEL, H, D_FF, LAYERS, MAX_LEN, B, T = (z[k] for k in ("vocab", "d_model", "heads", "d_ff", "layers",
                                                                     "max_len", "b", "t"))
    name = f"GPT({VOCAB}, {D_MODEL}, {H}, {D_FF}, {LAYERS}, max_len={MAX_LEN})"
    module = construct(GPT, "GPT", VOCAB, D_MODEL, H, D_FF, LAYERS, max_len=MAX_LEN)  # the default dropout, 0.0
    _expect_head_and_max_len(module, name, MAX_LEN)
    _expect_tables_initialised(GPT)
    ref = reference_gpt(8, z)
    prepare(module, ref, device, "GPT")
    ids = randint(0, VOCAB, (B, T), seed=80, device=device)
    for length in (T, 1, MAX_LEN):
        x = ids[:, :length] if length <= T else randint(0, VOCAB, (B, length), seed=81, device=device)
        tested = f"{name} on ids {shape_of(x)}"
        with torch.no_grad():
            expected = ref(x)
            got = call("GPT.forward", module, x.clone(), tested=tested, _no_grad=True)
        expect_tensor(got, expected, "GPT logits", device, tested=tested, mistakes=lambda x=x: from_table(
            M.TABLE, lambda variant, switches: variant(ref, x, **switches), M.ids_of(M.gpt_variant)))
    too_long = MAX_LEN + pick("gpt.too_long", [1, 2, 3, 5])
    expect_raises(ValueError, f"{name} on ids of length {too_long}", module,
                  randint(0, VOCAB, (1, too_long), seed=82, device=device),
                  why=f"when the sequence is longer than max_len={MAX_LEN}", criterion="GPT.too_long")
    # dropout reaches the model: dropout=0.5 in training mode changes the logits, in eval mode it does not
    with argument("GPT.dropout"):
        dropped = construct(GPT, "GPT", VOCAB, D_MODEL, H, D_FF, LAYERS, max_len=MAX_LEN, dropout=0.5)
        prepare(dropped, reference_gpt(8, z, dropout=0.5), device, "GPT")
        with torch.no_grad():
            expected = ref(ids)  # (B, T, vocab), eval mode
        expect_dropout_acts(dropped, "GPT", (ids,), expected, device, what="logits",
                            tested=f"GPT(..., dropout=0.5) on ids {shape_of(ids)}",
                            hint="pass dropout to nn.Dropout (self.drop) and to every EncoderBlock")


def _expect_head_and_max_len(module: RemoteObject, name: str, max_len: int) -> None:
    """lm_head is the token embedding's weight (no Parameter of its own) without a bias; the attribute max_len."""
    params = _parameter_names(module, name)
    if "lm_head.weight" in params:
        fail(f"{name}: lm_head has a weight of its own.", mistake="gpt.untied_head")
    if params.get("lm_head.bias") is not None:
        fail(f"{name}: lm_head has a bias.", hint="nn.Linear(d_model, vocab_size, bias=False)")
    got = fetch(module.attr("max_len"), f"{name}.max_len")
    if got != max_len:
        fail(f"{name}: the attribute max_len is wrong.", details=expected_got(str(max_len), repr(got)[:40]))


def _expect_tables_initialised(GPT) -> None:
    """Both tables at the tokens' scale, std d_model ** -0.5 (large tables: a tight estimate)."""
    big_vocab = pick("gpt.init.vocab", [97, 89, 101, 113])
    big_d = pick("gpt.init.d_model", [64, 48, 80, 56])
    big_len = pick("gpt.init.max_len", [128, 96, 112, 120])
    big_name = f"GPT({big_vocab}, {big_d}, 4, 32, 1, max_len={big_len})"
    big = construct(GPT, "GPT", big_vocab, big_d, 4, 32, 1, max_len=big_len)
    state = grader_step(big_name, big.state)
    for key in ("token_embedding.weight", "position_embedding.embedding.weight"):
        table = state.get(key) if isinstance(state, dict) else None
        if not isinstance(table, torch.Tensor):
            fail(f"GPT: expected the parameter `{key}` as named in the exercise.")
        std = float(table.double().std())
        if not (1 - GPT_TABLE_STD_RTOL) * big_d ** -0.5 <= std <= (1 + GPT_TABLE_STD_RTOL) * big_d ** -0.5:
            fail(f"{big_name}: `{key}` is not initialised at the tokens' scale.",
                 details=expected_got(f"standard deviation {big_d ** -0.5:.3f} (d_model ** -0.5)", f"{std:.3f}"),
                 mistake="gpt.position_init" if key.startswith("position") else None)
