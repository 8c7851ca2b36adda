"""Hidden checks of notebook 06: the reference and differently written answers pass; each mistake is named."""
from __future__ import annotations

import functools

import pytest

import solutions
import variants as V
from autograder.checks import transformer as checks


@pytest.mark.parametrize("cls", [solutions.DecoderBlock, V.DecoderBlockStudent])
def test_decoder_block_correct_answers_pass(cls):
    checks.check_decoder_block(cls)


@pytest.mark.parametrize("kind, diagnosis", [
    ("cross_from_decoder", "decoder.cross_from_decoder"), ("ignore_tgt_mask", "decoder.tgt_mask_ignored"),
    ("norm_swapped", "encoder.norm_swapped"), ("no_residual_attn", "encoder.missing_residual_attn"),
    ("no_residual_cross", "decoder.missing_residual_cross"), ("no_residual_ffn", "encoder.missing_residual_ffn")])
def test_decoder_block_mistakes(kind, diagnosis):
    V.fails_with(checks.check_decoder_block, V.mistake(V.DecoderBlockStudent, kind), "DecoderBlock", diagnosis)


@pytest.mark.parametrize("cls", [solutions.Decoder, V.DecoderStudent])
def test_decoder_correct_answers_pass(cls):
    checks.check_decoder(cls)


@pytest.mark.parametrize("kind, diagnosis", [
    ("no_scale", "encoder.no_embedding_scale"), ("final_norm", "encoder.final_norm"),
    ("cross_from_decoder", "decoder.cross_from_decoder")])
def test_decoder_mistakes(kind, diagnosis):
    V.fails_with(checks.check_decoder, V.mistake(V.DecoderStudent, kind), "Decoder output", diagnosis)


@pytest.mark.parametrize("cls", [solutions.Transformer, V.TransformerStudent])
def test_transformer_correct_answers_pass(cls):
    checks.check_transformer(cls)


@pytest.mark.parametrize("kind, diagnosis", [
    ("no_causal", "transformer.no_causal_mask"), ("no_src_mask", "transformer.no_src_mask"),
    ("pad_zero", "transformer.pad_id_hardcoded"),
    ("inverted_src", "attention.mask_inverted")])
def test_transformer_mistakes(kind, diagnosis):
    V.fails_with(checks.check_transformer, V.mistake(V.TransformerStudent, kind), diagnosis)


@pytest.mark.parametrize("fn", [solutions.greedy_decode, functools.partial(solutions.greedy_decode, use_cache=False),
                                V.greedy_forward, V.greedy_per_sequence, V.greedy_wrong("correct")])
def test_greedy_correct_answers_pass(fn):
    checks.check_greedy_decode(fn)


@pytest.mark.parametrize("kind, diagnosis", [
    ("with_bos", "greedy.keeps_bos"), ("no_stop", "greedy.no_early_stop"), ("stop_any", "greedy.stops_at_first_eos"),
    ("no_pad", "greedy.no_pad_after_eos"), ("no_eos", "greedy.drops_eos")])
def test_greedy_mistakes(kind, diagnosis):
    V.fails_with(checks.check_greedy_decode, V.greedy_wrong(kind), "greedy_decode", diagnosis)


def test_greedy_search_finds_the_intended_decodings():
    """The decoding models (this submission's) really exercise padding after eos and early stopping."""
    import torch

    device = torch.device("cpu")
    for pad_id, bos_id, eos_id, max_len, want in checks.greedy_cases():
        model, src = checks._decoding_model(device, pad_id, bos_id, eos_id, max_len, want)
        out = solutions.greedy_decode(model, src, max_len, bos_id=bos_id, eos_id=eos_id)
        has_eos, first = (out == eos_id).any(1), (out == eos_id).float().argmax(1)
        if want == "mixed":
            assert out.shape[1] == max_len and has_eos.any() and not has_eos.all() and (out == pad_id).any()
        else:
            assert out.shape[1] < max_len and has_eos.all() and first.min() != first.max()
        assert checks.decodes_as_wanted(out, eos_id, max_len, want)


def test_transformer_without_encode_method():
    class NoEncode(V.TransformerStudent):
        encode = None

        def forward(self, src_ids, tgt_ids):
            memory, src_mask = V.TransformerStudent.encode(self, src_ids)
            return self.decode(tgt_ids, memory, src_mask)

    V.fails_with(checks.check_transformer, NoEncode, "method `encode`")


def test_decoder_must_pass_max_len_on():
    class DefaultMaxLen(V.DecoderStudent):
        def __init__(self, vocab_size, d_model, num_heads, d_ff, num_layers, max_len=512, dropout=0.0,
                     norm_first=False):
            super().__init__(vocab_size, d_model, num_heads, d_ff, num_layers, dropout=dropout, norm_first=norm_first)

    V.fails_partially(checks.check_decoder, DefaultMaxLen, "Decoder.too_long", "should raise ValueError",
                      f"longer than max_len={checks.sizes().max_len}")


def test_decoder_stub_fails_plainly():
    class Stub(V.DecoderStudent):
        def forward(self, tgt_ids, memory, tgt_mask=None, memory_mask=None):
            raise ValueError("not written yet")

    V.fails_plainly(checks.check_decoder, Stub, "raised an error")


@pytest.mark.parametrize("ignored", ["num_layers", "max_len"])
def test_transformer_constructor_arguments_matter(ignored):
    """num_layers is probed with a value other than its default; max_len with a too long source."""
    class Ignores(V.TransformerStudent):
        def __init__(self, *args, **kwargs):
            kwargs.pop(ignored)
            super().__init__(*args, **kwargs)

    if ignored == "max_len":   # only the stated edge case fails: partial credit
        V.fails_partially(checks.check_transformer, Ignores, "Transformer.too_long",
                          f"longer than max_len={checks.sizes().max_len}")
    else:
        V.fails_plainly(checks.check_transformer, Ignores, "submodule `encoder.layers.")


def test_transformer_stub_fails_plainly():
    class Stub(V.TransformerStudent):
        def forward(self, src_ids, tgt_ids):
            raise ValueError("not written yet")

    V.fails_plainly(checks.check_transformer, Stub, "raised an error")


def test_greedy_decode_that_reorders_the_source_fails():
    def reversed_source(model, src_ids, max_len, bos_id=2, eos_id=3):
        return solutions.greedy_decode(model, src_ids.flip(1), max_len, bos_id=bos_id, eos_id=eos_id)

    with pytest.raises(AssertionError):
        checks.check_greedy_decode(reversed_source)
