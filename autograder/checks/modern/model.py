"""Hidden checks of notebook 09's block and model: LlamaBlock and ModernGPT.

They draw from the same spaces as the parts' checks (`checks.py`: sizes, lengths, padded positions) and build the
reference modules the same way (`reference_module`: RMSNorm weights randomised so that they matter). A wrong output
is diagnosed with the known mistakes of the block and the model (`mistakes.py`'s LLAMA_BLOCK and MODERN_GPT, the
attention's own mistakes inside them included). Every sequence is longer than a block's max_len once: the stated
edge cases. The arguments with teeth `rope_base` and `eps` (fifth edition) are each tried after the core (which
leaves them at their defaults), in their own `argument` block, with a drawn value far from the default
(`ROPE_BASES`, `EPSILONS`): a block must hand them to its attention and both norms, a model to every block and its
final norm.
"""
from __future__ import annotations

import torch

from autograder.checks.modern import mistakes as M
from autograder.checks.modern.checks import (
    BATCHES, D_FFS, D_MODELS, LENGTHS, MAX_LENS, PADDED, candidates, causal_padding_mask, only_contract_parameters,
    reference_module,
)
from autograder.checks.kit.criteria import argument, edge_case
from autograder.checks.kit.draws import pick
from autograder.checks.kit.inputs import reference
from autograder.checks.kit.toolkit import (
    call, construct, expect_raises, fail, fetch, randint, randn, shape_of, start_check,
)
from autograder.checks.kit.compare import describe, expect_tensor, prepare
from autograder.checks.kit.parts import given_working_parts
from autograder.checks.kit.remote import hidden_check
from coursekit.tolerance import ROTARY_LOOSER

DEFAULTS_NOTE = "keep the defaults d_model=128, num_heads=4, num_kv_heads=2, d_ff=344, num_layers=4"
# the spaces of the arguments rope_base and eps (first option: the input of salt 0): bases far from the default 10000
# and from 1000 (10000 / 10: another mistake's base); epsilons far above the default 1e-6, so that on the block's
# inputs (of size about 1) the norms' outputs move by a few percent
ROPE_BASES = [500.0, 100000.0, 2000.0, 200.0]
EPSILONS = [0.05, 0.02, 0.1, 0.03]


# ---------------------------------------------------------------------------------------------------------- block
def block_mistakes(block, x, mask):
    """The known mistakes of LlamaBlock (M.LLAMA_BLOCK) on the reference block, x and mask."""
    def variants():
        return candidates(M.LLAMA_BLOCK, lambda variant, switches: variant(block, x, mask, **switches))

    return variants


@hidden_check
@given_working_parts("llama_block")
def check_llama_block(LlamaBlock) -> None:
    """LlamaBlock(d_model, num_heads, num_kv_heads, d_ff, max_len=512, rope_base=10000.0, eps=1e-6): norm1, attn,
    norm2, ffn; pre-norm."""
    device = start_check()
    solution = reference("modern")
    name = "LlamaBlock"
    d_model, d_ff = pick("llama.d_model", D_MODELS), pick("llama.d_ff", D_FFS)
    max_len = pick("llama.max_len", MAX_LENS)
    B_, T_, padded = pick("llama.batch", BATCHES), pick("llama.length", LENGTHS), pick("llama.padded", PADDED)
    H = 4
    # the arguments: a rotary base far from 10000 (and from 10000 / 10, another mistake's base), an eps that moves
    # the norms of inputs of size about 1 by a few percent
    rope_base = pick("llama.rope_base", ROPE_BASES)
    eps = pick("llama.eps", EPSILONS)

    def compare(seed, kv_heads, extra):
        module = construct(LlamaBlock, name, d_model, H, kv_heads, d_ff, **extra)
        ref = reference_module(solution.LlamaBlock, 70 + seed, d_model, H, kv_heads, d_ff, **extra)
        only_contract_parameters(module, ref, name, "norm1 and norm2 are RMSNorm (weight only); the linear layers "
                                                    "of attn and ffn have no bias")
        prepare(module, ref, device, name)
        x = randn(B_, T_, d_model, seed=75 + seed, device=device)
        mask = causal_padding_mask(B_, T_, padded, device)
        shown = ", ".join([f"{d_model}, {H}, {kv_heads}, {d_ff}", *([_shown(extra)] if extra else [])])
        tested = f"{name}({shown}) on x {shape_of(x)} with a causal and padding mask {shape_of(mask)}"
        with torch.no_grad():
            expected = ref(x, mask)
            got = call(f"{name}.forward", module, x.clone(), mask.clone(), tested=tested)
        expect_tensor(got, expected, f"{name} output", device, tested=tested, looser=ROTARY_LOOSER,
                      mistakes=block_mistakes(ref, x, mask))

    # the core: rope_base and eps left out
    for seed, (kv_heads, extra) in enumerate(((2, {"max_len": max_len}), (1, {}), (H, {}))):
        compare(seed, kv_heads, extra)
    with argument("LlamaBlock.rope_base"):       # another rotary base, for the attention
        compare(3, 2, {"max_len": max_len, "rope_base": rope_base})
    with argument("LlamaBlock.eps"):             # another eps, for norm1 and norm2
        compare(4, 1, {"eps": eps})
    # the stated edge case: max_len reaches the attention, so a sequence one too long raises ValueError
    with edge_case("LlamaBlock.too_long"):
        short = construct(LlamaBlock, name, d_model, H, 2, d_ff, max_len=T_ - 1)
        expect_raises(ValueError, f"{name}({d_model}, {H}, 2, {d_ff}, max_len={T_ - 1}) on x {(B_, T_, d_model)}",
                      short, randn(B_, T_, d_model, seed=69, device="cpu"), why="for a sequence longer than max_len",
                      criterion="LlamaBlock.too_long")


# ---------------------------------------------------------------------------------------------------------- model
def _model_structure(module, ref, name: str, max_len: int) -> None:
    """The contract's parameters: lm_head tied (no weight of its own), no position table, nothing beyond the
    reference's; and the attribute max_len."""
    parameters = {n for n, _shape, _dtype in describe(module, name).get("parameters", [])}
    if "lm_head.weight" in parameters:
        fail(f"{name}.lm_head is not tied to the token embedding (it has a weight of its own).",
             mistake="modern_gpt.untied_head")
    if any("position" in p for p in parameters):
        fail(f"{name} has a position table ({', '.join(p for p in parameters if 'position' in p)[:120]}).",
             mistake="modern_gpt.position_table")
    only_contract_parameters(module, ref, name, "token_embedding, blocks of LlamaBlock and norm; lm_head is tied")
    got_max_len = fetch(module.attr("max_len"), f"{name}.max_len")
    if got_max_len != max_len:
        fail(f"{name}.max_len should be the constructor's max_len ({max_len}), got {got_max_len!r}.")


def _model_defaults(ModernGPT, name: str, vocab: int, solution, device) -> None:
    """ModernGPT(vocab) with the contract's default sizes: the reference's parameters (names and shapes) and, with
    its weights, its logits."""
    default = construct(ModernGPT, name, vocab)
    theirs = {n: tuple(s) for n, s, _dtype in describe(default, name).get("parameters", [])}
    ours = {n: tuple(p.shape) for n, p in solution.ModernGPT(vocab).named_parameters()}
    if theirs != ours:
        differing = sorted(n for n in set(theirs) | set(ours) if theirs.get(n) != ours.get(n))
        fail(f"{name}({vocab}) with the default sizes has different parameters from the exercise's.",
             details=[f"first difference: {differing[0]}: expected {ours.get(differing[0])}, "
                      f"got {theirs.get(differing[0])}"],
             hint=f"{DEFAULTS_NOTE}, max_len=256")
    reference_default = reference_module(solution.ModernGPT, 84, vocab)
    prepare(default, reference_default, device, name)
    ids = randint(0, vocab, (1, pick("modern_gpt.default_length", [5, 4, 6, 7])), seed=85, device=device)
    tested = f"{name}({vocab}) with the default sizes on ids {shape_of(ids)}"
    with torch.no_grad():
        expected = reference_default(ids)
        got = call(f"{name}.forward", default, ids.clone(), tested=tested)
    expect_tensor(got, expected, f"{name} logits", device, tested=tested, looser=ROTARY_LOOSER, note=DEFAULTS_NOTE)


def _shown(arguments: dict) -> str:
    """`k=v, ...` of a constructor's keyword arguments (floats short: rope_base=500, eps=0.05)."""
    return ", ".join(f"{k}={v:g}" if isinstance(v, float) else f"{k}={v}" for k, v in arguments.items())


def _compare_logits(module, ref, name: str, vocab: int, arguments: dict, ids, device) -> None:
    """The student's ModernGPT(vocab, **arguments) against the reference built the same way, on `ids`."""
    tested = f"{name}({vocab}, {_shown(arguments)}) on ids {shape_of(ids)}"
    with torch.no_grad():
        expected = ref(ids)
        got = call(f"{name}.forward", module, ids.clone(), tested=tested)
    expect_tensor(got, expected, f"{name} logits", device, tested=tested, looser=ROTARY_LOOSER,
                  shape_hint="(B, T, vocab_size)", mistakes=lambda: candidates(
                      M.MODERN_GPT, lambda variant, switches: variant(ref, ids, **switches)))


def _model_argument(ModernGPT, name: str, vocab: int, B_: int, sizes: dict, extra: dict, seed: int, solution,
                    device) -> None:
    """ModernGPT(vocab, **sizes, **extra) against the reference built the same way (rope_base or eps not default)."""
    module = construct(ModernGPT, name, vocab, **sizes, **extra)
    ref = reference_module(solution.ModernGPT, seed, vocab, **sizes, **extra)
    prepare(module, ref, device, name)
    ids = randint(0, vocab, (B_, pick("modern_gpt.argument_length", [7, 6, 8, 9])), seed=seed + 1, device=device)
    _compare_logits(module, ref, name, vocab, {**sizes, **extra}, ids, device)


@hidden_check
@given_working_parts("modern_gpt")
def check_modern_gpt(ModernGPT) -> None:
    """ModernGPT(vocab_size, d_model=128, num_heads=4, num_kv_heads=2, d_ff=344, num_layers=4, max_len=256,
    rope_base=10000.0, eps=1e-6)."""
    device = start_check()
    solution = reference("modern")
    name = "ModernGPT"
    vocab, B_ = pick("modern_gpt.vocab", [19, 17, 23, 29]), pick("modern_gpt.batch", BATCHES)
    # 6 heads over 3 key/value heads: none of the sizes is the default, and all differ from each other, so each
    # argument must be passed on (and to its own place)
    sizes = {"d_model": pick("modern_gpt.d_model", D_MODELS), "num_heads": 6, "num_kv_heads": 3,
             "d_ff": pick("modern_gpt.d_ff", D_FFS), "num_layers": pick("modern_gpt.num_layers", [2, 5]),
             "max_len": pick("modern_gpt.max_len", MAX_LENS)}
    max_len = sizes["max_len"]
    module = construct(ModernGPT, name, vocab, **sizes)
    ref = reference_module(solution.ModernGPT, 80, vocab, **sizes)
    _model_structure(module, ref, name, max_len)
    prepare(module, ref, device, name)
    for T_, seed in ((pick("modern_gpt.length", [9, 5, 7, 10, 11]), 81), (max_len, 82)):
        _compare_logits(module, ref, name, vocab, sizes, randint(0, vocab, (B_, T_), seed=seed, device=device),
                        device)
    _model_defaults(ModernGPT, name, vocab, solution, device)
    # the arguments, each in its own model: every block (at least 2) and the final norm must get them
    with argument("ModernGPT.rope_base"):
        _model_argument(ModernGPT, name, vocab, B_, sizes, {"rope_base": pick("modern_gpt.rope_base", ROPE_BASES)},
                        86, solution, device)
    with argument("ModernGPT.eps"):
        _model_argument(ModernGPT, name, vocab, B_, sizes, {"eps": pick("modern_gpt.eps", EPSILONS)}, 88,
                        solution, device)
    # the stated edge case: a sequence one longer than max_len
    too_long = randint(0, vocab, (1, max_len + 1), seed=83, device=device)
    expect_raises(ValueError, f"{name}(..., max_len={max_len}) on ids {shape_of(too_long)}", module, too_long,
                  why="for a sequence longer than max_len", criterion="ModernGPT.too_long")
