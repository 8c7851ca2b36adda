"""Hidden checks of notebook 05 (feed-forward, encoder block, encoder)."""
from __future__ import annotations

from autograder.checks.parts import given_working_parts
from autograder.checks.remote import probed

import torch

from autograder.checks import known_mistakes as M
from autograder.checks.toolkit import (
    call, construct, expect_raises, expect_tensor, prepare, randn, shape_of, start_check,
)
from autograder.checks.attention import padded_ids

B, T, H, D_HEAD, D_FF = 2, 6, 3, 4, 20
D_MODEL = H * D_HEAD          # 12
VOCAB, NUM_LAYERS, MAX_LEN = 17, 2, 32


def _reference():
    import solutions.encoder as reference

    return reference


def reference_module(factory, seed: int, *args, **kwargs):
    """Build a reference module under a fixed seed, then randomise its LayerNorms so that they matter."""
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        module = factory(*args, **kwargs)
        for sub in module.modules():
            if isinstance(sub, torch.nn.LayerNorm):
                torch.nn.init.normal_(sub.weight, 1.0, 0.3)
                torch.nn.init.normal_(sub.bias, 0.0, 0.3)
    return module


@probed
def check_positionwise_feed_forward(PositionwiseFeedForward) -> None:
    """PositionwiseFeedForward(d_model, d_ff, dropout=0.0): linear2(dropout(relu(linear1(x))))."""
    device = start_check()
    reference = _reference()
    module = construct(PositionwiseFeedForward, "PositionwiseFeedForward", D_MODEL, D_FF, dropout=0.0)
    ref = reference_module(reference.PositionwiseFeedForward, 3, D_MODEL, D_FF, dropout=0.0)
    prepare(module, ref, device, "PositionwiseFeedForward")
    x = randn(B, T, D_MODEL, seed=70, device=device)
    tested = f"PositionwiseFeedForward({D_MODEL}, {D_FF}) on x {shape_of(x)}"
    with torch.no_grad():
        expected = ref(x)
        got = call("PositionwiseFeedForward.forward", module, x.clone(), tested=tested)
    expect_tensor(got, expected, "PositionwiseFeedForward output", device, tested=tested, mistakes=lambda: [
        ("encoder.no_relu", lambda: M.feed_forward(ref, x, relu=False)),
        ("encoder.relu_after_linear2", lambda: M.feed_forward(ref, x, relu_after=True)),
        ("encoder.gelu", lambda: M.feed_forward(ref, x, activation="gelu")),
    ])


def block_mistakes(call_variant, norm_first: bool, has_mask: bool, residual_flags=("attn_residual", "ffn_residual")):
    """Known mistakes of a block: `call_variant(**flags)` runs the reference block with those switches."""
    names = {"attn_residual": "encoder.missing_residual_attn", "ffn_residual": "encoder.missing_residual_ffn",
             "cross_residual": "decoder.missing_residual_cross"}

    def variants():
        out = [("encoder.norm_swapped", lambda: call_variant(norm_first=not norm_first))]
        out += [(names[flag], lambda flag=flag: call_variant(**{flag: False})) for flag in residual_flags]
        for name, flags in M.ATTENTION_MISTAKES.items():
            if has_mask or "mask" not in next(iter(flags)):
                out.append((name, lambda flags=flags: call_variant(attn_flags=flags)))
        return out

    return variants


@probed
@given_working_parts("encoder_block")
def check_encoder_block(EncoderBlock) -> None:
    """EncoderBlock(d_model, num_heads, d_ff, dropout=0.0, norm_first=False): self_attn, ffn, norm1, norm2."""
    device = start_check()
    reference = _reference()
    from solutions.attention import make_padding_mask

    ids = padded_ids([T, 4], T, seed=71, device=device)
    keep = ids != 0                                                                       # (B, T) real tokens
    mask = make_padding_mask(ids)                                                          # (B, 1, 1, T)
    x = randn(B, T, D_MODEL, seed=72, device=device)
    for norm_first in (False, True):
        name = f"EncoderBlock({D_MODEL}, {H}, {D_FF}, norm_first={norm_first})"
        module = construct(EncoderBlock, "EncoderBlock", D_MODEL, H, D_FF, dropout=0.0, norm_first=norm_first)
        ref = reference_module(reference.EncoderBlock, 4, D_MODEL, H, D_FF, dropout=0.0, norm_first=norm_first)
        prepare(module, ref, device, "EncoderBlock")
        for m in (None, mask):
            tested = f"{name} on x {shape_of(x)}, " + ("no mask" if m is None else f"padding mask {shape_of(m)}")
            with torch.no_grad():
                expected = ref(x, m)
                got = call("EncoderBlock.forward", module, x.clone(), None if m is None else m.clone(), tested=tested)
            expect_tensor(got, expected, "EncoderBlock output", device, tested=tested,
                          where=None if m is None else keep,
                          mistakes=block_mistakes(lambda m=m, **f: M.encoder_block(ref, x, m, **f), norm_first,
                                                  m is not None))


def stack_mistakes(call_variant, norm_first: bool, has_mask: bool, residual_flags=("attn_residual", "ffn_residual")):
    """Mistakes of an Encoder/Decoder: embedding scale, positions, final norm, plus every block mistake."""
    def variants():
        out = [("encoder.no_embedding_scale", lambda: call_variant(scale_embeddings=False)),
               ("encoder.no_positions", lambda: call_variant(positions=False)),
               ("encoder.final_norm", lambda: call_variant(final_norm=not norm_first))]
        if has_mask:
            out.append(("attention.mask_ignored", lambda: call_variant(attn_flags={"ignore_mask": True})))
        out += block_mistakes(call_variant, norm_first, has_mask, residual_flags)()
        return out

    return variants


@probed
@given_working_parts("encoder")
def check_encoder(Encoder) -> None:
    """Encoder(vocab_size, d_model, num_heads, d_ff, num_layers, max_len=512, dropout=0.0, norm_first=False)."""
    device = start_check()
    reference = _reference()
    from solutions.attention import make_padding_mask

    ids = padded_ids([T, 3], T, vocab=VOCAB, seed=73, device=device)
    keep = ids != 0
    mask = make_padding_mask(ids)
    for norm_first in (False, True):
        name = f"Encoder({VOCAB}, {D_MODEL}, {H}, {D_FF}, {NUM_LAYERS}, max_len={MAX_LEN}, norm_first={norm_first})"
        module = construct(Encoder, "Encoder", VOCAB, D_MODEL, H, D_FF, NUM_LAYERS, max_len=MAX_LEN, dropout=0.0,
                           norm_first=norm_first)
        ref = reference_module(reference.Encoder, 5, VOCAB, D_MODEL, H, D_FF, NUM_LAYERS, max_len=MAX_LEN,
                               dropout=0.0, norm_first=norm_first)
        prepare(module, ref, device, "Encoder")
        for m in (None, mask):
            tested = f"{name} on src_ids {shape_of(ids)}, " + ("no mask" if m is None else f"padding mask "
                                                                                          f"{shape_of(m)}")
            with torch.no_grad():
                expected = ref(ids, m)
                got = call("Encoder.forward", module, ids.clone(), None if m is None else m.clone(), tested=tested)
            expect_tensor(got, expected, "Encoder output", device, tested=tested, where=None if m is None else keep,
                          mistakes=stack_mistakes(lambda m=m, **f: M.encoder(ref, ids, m, **f), norm_first,
                                                  m is not None))
    expect_max_len(module, name, MAX_LEN,
                   lambda length: (padded_ids([length, 3], length, vocab=VOCAB, seed=74, device=device),))


def expect_max_len(module, name: str, max_len: int, make_inputs) -> None:
    """max_len must reach the positional encoding: a sequence of max_len tokens works, a longer one raises
    ValueError there. `make_inputs(T)` gives the module's arguments for sequences of length T."""
    inputs = make_inputs(max_len)
    call(f"{name}.forward", module, *inputs, _no_grad=True,
         tested=f"{name} on ids {shape_of(inputs[0])} (exactly max_len tokens)")
    inputs = make_inputs(max_len + 1)
    expect_raises(ValueError, f"{name} on ids {shape_of(inputs[0])}", module, *inputs,
                  why=f"when the sequence is longer than max_len={max_len} (pass max_len on to "
                      "PositionalEncoding(d_model, max_len, dropout), which raises it)", criterion=name.split("(")[0] + ".too_long")
