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
    """The decoding models really exercise padding after eos and early stopping (on this device)."""
    import torch

    device = torch.device("cpu")
    model, src = checks._decoding_model(device, 0, 2, 3, 8, "mixed")
    out = solutions.greedy_decode(model, src, 8)
    assert out.shape[1] == 8 and (out == 3).any(1).any() and not (out == 3).any(1).all()
    model, src = checks._decoding_model(device, 0, 2, 3, 12, "all_early")
    out = solutions.greedy_decode(model, src, 12)
    first = (out == 3).float().argmax(1)
    assert out.shape[1] < 12 and (out == 3).any(1).all() and first.min() != first.max()
    model, src = checks._decoding_model(device, 5, 4, 6, 9, "mixed")
    out = solutions.greedy_decode(model, src, 9, bos_id=4, eos_id=6)
    assert out.shape[1] == 9 and (out == 6).any(1).any() and not (out == 6).any(1).all() and (out == 5).any()


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

    V.fails_with(checks.check_decoder, DefaultMaxLen, "should raise ValueError", "longer than max_len=32")


@pytest.mark.parametrize("ignored", ["num_layers", "max_len"])
def test_transformer_constructor_arguments_matter(ignored):
    """num_layers is probed with a value other than its default; max_len with a too long source."""
    class Ignores(V.TransformerStudent):
        def __init__(self, *args, **kwargs):
            kwargs.pop(ignored)
            super().__init__(*args, **kwargs)

    fragment = {"num_layers": "submodule `encoder.layers.2", "max_len": "longer than max_len=32"}[ignored]
    V.fails_with(checks.check_transformer, Ignores, fragment)


def test_greedy_decode_that_reorders_the_source_fails():
    def reversed_source(model, src_ids, max_len, bos_id=2, eos_id=3):
        return solutions.greedy_decode(model, src_ids.flip(1), max_len, bos_id=bos_id, eos_id=eos_id)

    with pytest.raises(AssertionError):
        checks.check_greedy_decode(reversed_source)
