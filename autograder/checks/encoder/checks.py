"""Hidden checks of notebook 05 (feed-forward, encoder block, encoder)."""
from __future__ import annotations

import contextlib
from types import SimpleNamespace

import torch

from autograder.checks.encoder import mistakes as M
from autograder.checks.kit.compare import (
    DROPOUT_P, as_tensor, expect_dropout_acts, expect_max_len, expect_shape, expect_tensor, from_table, prepare,
    values_close,
)
from autograder.checks.kit.criteria import argument
from autograder.checks.kit.draws import pick
from autograder.checks.kit.inputs import padded_ids, reference, reference_module, short_length
from autograder.checks.kit.parts import given_working_parts
from autograder.checks.kit.remote import hidden_check
from autograder.checks.kit.toolkit import call, construct, fail, randn, shape_of, start_check

# The probes' sizes are this submission's (`draws.pick`, the first option with no salt: B=2, T=6, H=3,
# d_head=4, d_model=12, d_ff=20, vocab 17, 2 layers, max_len=32). The space keeps what the cases need: an even
# d_model (the positional encoding), H >= 2, and the constructor's sizes all distinct (a student who swaps two of
# them fails), num_layers not the number of heads, max_len well below the default 512 and above T.
B = 2


def sizes(prefix: str = "encoder") -> SimpleNamespace:
    """This submission's sizes for the probes of `prefix` (05's checks: "encoder")."""
    heads = pick(f"{prefix}.num_heads", [3, 2, 4])
    d_head = pick(f"{prefix}.d_head", [4, 6, 8])
    d_model = heads * d_head
    return SimpleNamespace(
        B=B, T=pick(f"{prefix}.T", [6, 5, 7, 8]), H=heads, d_head=d_head, d_model=d_model,
        d_ff=pick(f"{prefix}.d_ff", [f for f in (20, 16, 28, 36) if f != d_model]),
        vocab=pick(f"{prefix}.vocab", [17, 19, 23, 29]),
        num_layers=pick(f"{prefix}.num_layers", [n for n in (2, 3) if n != heads]),
        max_len=pick(f"{prefix}.max_len", [32, 20, 24, 40]))


@hidden_check
def check_positionwise_feed_forward(PositionwiseFeedForward) -> None:
    """PositionwiseFeedForward(d_model, d_ff, dropout=0.0): linear2(dropout(relu(linear1(x)))); dropout > 0 is an
    argument with teeth."""
    device = start_check()
    solution = reference("encoder")
    z = sizes()
    module = construct(PositionwiseFeedForward, "PositionwiseFeedForward", z.d_model, z.d_ff)
    ref = reference_module(solution.PositionwiseFeedForward, 3, z.d_model, z.d_ff)
    prepare(module, ref, device, "PositionwiseFeedForward")
    x = randn(z.B, z.T, z.d_model, seed=70, device=device)
    tested = f"PositionwiseFeedForward({z.d_model}, {z.d_ff}) on x {shape_of(x)}"
    with torch.no_grad():
        expected = ref(x)
        got = call("PositionwiseFeedForward.forward", module, x.clone(), tested=tested)
    expect_tensor(got, expected, "PositionwiseFeedForward output", device, tested=tested,
                  mistakes=lambda: from_table(M.TABLE, lambda variant, switches: variant(ref, x, **switches),
                                              M.FEED_FORWARD_IDS))
    with argument("PositionwiseFeedForward.dropout"):
        name = f"PositionwiseFeedForward({z.d_model}, {z.d_ff}, dropout={DROPOUT_P})"
        module = construct(PositionwiseFeedForward, "PositionwiseFeedForward", z.d_model, z.d_ff, dropout=DROPOUT_P)
        ref = reference_module(solution.PositionwiseFeedForward, 3, z.d_model, z.d_ff, dropout=DROPOUT_P)
        prepare(module, ref, device, "PositionwiseFeedForward")
        with torch.no_grad():
            expected = ref(x)
        expect_dropout_acts(module, "PositionwiseFeedForward", (x,), expected, device,
                            tested=f"{name} on x {shape_of(x)}",
                            hint="self.dropout = nn.Dropout(dropout) in __init__, applied to the hidden layer: "
                                 "linear2(dropout(relu(linear1(x))))")


def block_mistakes(ref, x, mask):
    """The known mistakes of an EncoderBlock (the reference `ref`) on x, with or without a padding mask."""
    return lambda: from_table(M.TABLE, lambda variant, switches: variant(ref, x, mask, **switches),
                              M.block_ids(mask is not None))


@hidden_check
@given_working_parts("encoder_block")
def check_encoder_block(EncoderBlock) -> None:
    """EncoderBlock(d_model, num_heads, d_ff, dropout=0.0, norm_first=False): self_attn, ffn, norm1, norm2."""
    device = start_check()
    solution = reference("encoder")
    from solutions.attention import make_padding_mask

    z = sizes()
    T = z.T
    ids = padded_ids([T, short_length("encoder.block_short", 4, T)], T, seed=71, device=device)
    keep = ids != 0                                                                       # (B, T) real tokens
    mask = make_padding_mask(ids)                                                          # (B, 1, 1, T)
    x = randn(z.B, T, z.d_model, seed=72, device=device)
    for norm_first in (False, True):   # the core: post-norm, the default; pre-norm is an argument with teeth
        with argument("EncoderBlock.norm_first") if norm_first else contextlib.nullcontext():
            name = f"EncoderBlock({z.d_model}, {z.H}, {z.d_ff}" + (", norm_first=True)" if norm_first else ")")
            module = construct(EncoderBlock, "EncoderBlock", z.d_model, z.H, z.d_ff,
                               **({"norm_first": True} if norm_first else {}))
            ref = reference_module(solution.EncoderBlock, 4, z.d_model, z.H, z.d_ff, norm_first=norm_first)
            prepare(module, ref, device, "EncoderBlock")
            for m in (None, mask):
                tested = f"{name} on x {shape_of(x)}, " + ("no mask" if m is None else f"padding mask {shape_of(m)}")
                with torch.no_grad():
                    expected = ref(x, m)
                    got = call("EncoderBlock.forward", module, x.clone(), None if m is None else m.clone(),
                               tested=tested)
                expect_tensor(got, expected, "EncoderBlock output", device, tested=tested,
                              where=None if m is None else keep,
                              mistakes=block_mistakes(ref, x, m))
    with argument("EncoderBlock.dropout"):
        name = f"EncoderBlock({z.d_model}, {z.H}, {z.d_ff}, dropout={DROPOUT_P})"
        module = construct(EncoderBlock, "EncoderBlock", z.d_model, z.H, z.d_ff, dropout=DROPOUT_P)
        ref = reference_module(solution.EncoderBlock, 4, z.d_model, z.H, z.d_ff, dropout=DROPOUT_P)
        prepare(module, ref, device, "EncoderBlock")
        with torch.no_grad():
            expected = ref(x, None)
        tested = f"{name} on x {shape_of(x)}, no mask"
        expect_dropout_acts(module, "EncoderBlock", (x, None), expected, device, tested=tested,
                            hint="pass dropout on to self_attn and ffn, and apply nn.Dropout(dropout) to each "
                                 "sublayer's output before the residual addition")
        expect_dropout_reaches(module, name, {"self_attn": (x, x, x, None), "ffn": (x,)}, device,
                               tested=f"on x {shape_of(x)}",
                               hint="pass dropout on to self_attn = MultiHeadAttention(d_model, num_heads, dropout) "
                                    "and to ffn = PositionwiseFeedForward(d_model, d_ff, dropout)")


def expect_dropout_reaches(module, name: str, submodules: dict, device, *, tested: str, hint: str) -> None:
    """Each submodule (a path below `module`, e.g. "layers.1": its inputs) of a module made with dropout > 0 gives
    another output in training mode than in eval mode: the module passed dropout on to it."""
    for path, inputs in submodules.items():
        sub = module.attr(*path.split("."))
        label = f"{name}.{path}"
        first = (lambda got: got[0] if isinstance(got, tuple) else got)  # noqa: E731 -- attention: (output, weights)
        calm = as_tensor(first(call(f"{label}.forward", sub, *inputs, tested=f"{label} {tested}, eval mode",
                                    _no_grad=True)), f"{label} output")
        call(f"{name}.train()", module.attr("train"))
        noisy = call(f"{label}.forward", sub, *inputs, tested=f"{label} {tested}, training mode", _seed=2,
                     _no_grad=True)
        call(f"{name}.eval()", module.attr("eval"))
        noisy = as_tensor(first(noisy), f"{label} output")
        expect_shape(noisy, calm.shape, f"{label} output in training mode")
        if values_close(noisy, calm, device):
            fail(f"{name}: dropout does not reach `{path}` (the same output in training mode as in eval mode).",
                 tested=f"{label} {tested}, training mode", hint=hint)


def stack_mistakes(ref, ids, mask):
    """The known mistakes of an Encoder (the reference `ref`) on ids, with or without a padding mask: every row
    runs through the stack (a block's switches reach every block)."""
    return lambda: from_table(M.TABLE, lambda _variant, switches: M.encoder(ref, ids, mask, **switches),
                              M.stack_ids(mask is not None))


@hidden_check
@given_working_parts("encoder")
def check_encoder(Encoder) -> None:
    """Encoder(vocab_size, d_model, num_heads, d_ff, num_layers, max_len=512, dropout=0.0, norm_first=False)."""
    device = start_check()
    solution = reference("encoder")
    from solutions.attention import make_padding_mask

    z = sizes()
    T, VOCAB, MAX_LEN = z.T, z.vocab, z.max_len
    ids = padded_ids([T, short_length("encoder.stack_short", 3, T)], T, vocab=VOCAB, seed=73, device=device)
    keep = ids != 0
    mask = make_padding_mask(ids)
    sized = f"Encoder({VOCAB}, {z.d_model}, {z.H}, {z.d_ff}, {z.num_layers}, max_len={MAX_LEN}"
    for norm_first in (False, True):   # the core: post-norm, the default; pre-norm is an argument with teeth
        with argument("Encoder.norm_first") if norm_first else contextlib.nullcontext():
            name = sized + (", norm_first=True)" if norm_first else ")")
            module = construct(Encoder, "Encoder", VOCAB, z.d_model, z.H, z.d_ff, z.num_layers, max_len=MAX_LEN,
                               **({"norm_first": True} if norm_first else {}))
            ref = reference_module(solution.Encoder, 5, VOCAB, z.d_model, z.H, z.d_ff, z.num_layers,
                                   max_len=MAX_LEN, norm_first=norm_first)
            prepare(module, ref, device, "Encoder")
            for m in (None, mask):
                tested = f"{name} on src_ids {shape_of(ids)}, " + ("no mask" if m is None else f"padding mask "
                                                                                              f"{shape_of(m)}")
                with torch.no_grad():
                    expected = ref(ids, m)
                    got = call("Encoder.forward", module, ids.clone(), None if m is None else m.clone(),
                               tested=tested)
                expect_tensor(got, expected, "Encoder output", device, tested=tested,
                              where=None if m is None else keep,
                              mistakes=stack_mistakes(ref, ids, m))
            if not norm_first:
                core, core_name = module, name
    expect_max_len(core, core_name, MAX_LEN,
                   lambda length: (padded_ids([length, 3], length, vocab=VOCAB, seed=74, device=device),),
                   criterion="Encoder.too_long")
    with argument("Encoder.dropout"):
        name = f"{sized}, dropout={DROPOUT_P})"
        module = construct(Encoder, "Encoder", VOCAB, z.d_model, z.H, z.d_ff, z.num_layers, max_len=MAX_LEN,
                           dropout=DROPOUT_P)
        ref = reference_module(solution.Encoder, 5, VOCAB, z.d_model, z.H, z.d_ff, z.num_layers, max_len=MAX_LEN,
                               dropout=DROPOUT_P)
        prepare(module, ref, device, "Encoder")
        with torch.no_grad():
            expected = ref(ids, None)
        expect_dropout_acts(module, "Encoder", (ids, None), expected, device,
                            tested=f"{name} on src_ids {shape_of(ids)}, no mask",
                            hint="pass dropout on to PositionalEncoding(d_model, max_len, dropout) and to every "
                                 "EncoderBlock")
        x = randn(z.B, T, z.d_model, seed=75, device=device)
        expect_dropout_reaches(module, name, {f"layers.{i}": (x, None) for i in range(z.num_layers)}, device,
                               tested=f"on x {shape_of(x)}",
                               hint="build every block as EncoderBlock(d_model, num_heads, d_ff, dropout, norm_first)")
