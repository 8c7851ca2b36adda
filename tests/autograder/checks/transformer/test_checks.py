"""Hidden checks of notebook 06: the reference and differently written answers pass; each mistake is named."""
from __future__ import annotations

import functools

import pytest

import solutions
import variants as V
from autograder.checks.transformer import checks as checks
from autograder.checks.transformer import decoding


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
    ("inverted_src", "attention.mask_inverted")])
def test_transformer_mistakes(kind, diagnosis):
    V.fails_plainly(checks.check_transformer, V.mistake(V.TransformerStudent, kind), diagnosis)


def test_transformer_pad_id_hardcoded_keeps_most_of_its_points():
    """pad_id is an argument with teeth: the core (pad_id 0) passes, the other pad id fails with the diagnosis."""
    answer = V.mistake(V.TransformerStudent, "pad_zero")
    V.fails_with(checks.check_transformer, answer, "transformer.pad_id_hardcoded")
    V.fails_partially(checks.check_transformer, answer, "Transformer.pad_id")


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
    cases = decoding.greedy_cases()
    assert [c[0] for c in cases] == [None, None, None, "greedy_decode.bos_id", "greedy_decode.eos_id"]
    for criterion, pad_id, bos_id, eos_id, max_len, want in cases:
        assert (criterion is None) == ((bos_id, eos_id) == (2, 3))      # the core uses the default ids
        model, src = decoding.decoding_model(device, checks.sizes(), pad_id, bos_id, eos_id, max_len, want)
        out = solutions.greedy_decode(model, src, max_len, bos_id=bos_id, eos_id=eos_id)
        if criterion is not None:  # an answer that ignores the argument (the default id) decodes otherwise
            assert not torch.equal(out, solutions.greedy_decode(model, src, max_len))
        has_eos, first = (out == eos_id).any(1), (out == eos_id).float().argmax(1)
        if want == "mixed":
            assert out.shape[1] == max_len and has_eos.any() and not has_eos.all() and (out == pad_id).any()
        else:
            assert out.shape[1] < max_len and has_eos.all() and first.min() != first.max()
        assert decoding.decodes_as_wanted(out, eos_id, max_len, want)


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


# ------------------------------------------------------------------------- arguments with teeth (criteria of #31)
class DecoderBlockPostNormOnly(V.DecoderBlockStudent):
    """Ignores norm_first: always the post-norm block."""

    def __init__(self, d_model, num_heads, d_ff, dropout=0.0, norm_first=False):
        super().__init__(d_model, num_heads, d_ff, dropout)


class DecoderBlockNoDropout(V.DecoderBlockStudent):
    """Ignores dropout: its sublayers never drop anything."""

    def __init__(self, d_model, num_heads, d_ff, dropout=0.0, norm_first=False):
        super().__init__(d_model, num_heads, d_ff, 0.0, norm_first)


class DecoderBlockFixedDropout(V.DecoderBlockStudent):
    """Hard-codes dropout=0.1: right in eval mode, but dropout=0.0 in training mode still drops."""

    def __init__(self, d_model, num_heads, d_ff, dropout=0.0, norm_first=False):
        super().__init__(d_model, num_heads, d_ff, 0.1, norm_first)


class DecoderBlockDropoutInEval(V.DecoderBlockStudent):
    """Drops the sublayer outputs with F.dropout but forgets training=self.training: it drops in eval mode too."""

    def __init__(self, d_model, num_heads, d_ff, dropout=0.0, norm_first=False):
        super().__init__(d_model, num_heads, d_ff, 0.0, norm_first)
        self.p = dropout

    def forward(self, x, memory, tgt_mask=None, memory_mask=None):
        import torch.nn.functional as F

        return F.dropout(super().forward(x, memory, tgt_mask, memory_mask), self.p)


@pytest.mark.parametrize("answer, criterion", [
    (DecoderBlockPostNormOnly, "DecoderBlock.norm_first"), (DecoderBlockNoDropout, "DecoderBlock.dropout"),
    (DecoderBlockFixedDropout, "DecoderBlock.dropout"), (DecoderBlockDropoutInEval, "DecoderBlock.dropout")])
def test_decoder_block_arguments_with_teeth(answer, criterion):
    V.fails_partially(checks.check_decoder_block, answer, criterion)


class DecoderPostNormOnly(V.DecoderStudent):
    """Ignores norm_first: post-norm blocks and no final norm, whatever is asked."""

    def __init__(self, vocab_size, d_model, num_heads, d_ff, num_layers, max_len=512, dropout=0.0,
                 norm_first=False):
        super().__init__(vocab_size, d_model, num_heads, d_ff, num_layers, max_len, dropout)


class DecoderNoDropout(V.DecoderStudent):
    """Ignores dropout (passes 0.0 on)."""

    def __init__(self, vocab_size, d_model, num_heads, d_ff, num_layers, max_len=512, dropout=0.0,
                 norm_first=False):
        super().__init__(vocab_size, d_model, num_heads, d_ff, num_layers, max_len, 0.0, norm_first)


@pytest.mark.parametrize("answer, criterion", [
    (DecoderPostNormOnly, "Decoder.norm_first"), (DecoderNoDropout, "Decoder.dropout")])
def test_decoder_arguments_with_teeth(answer, criterion):
    V.fails_partially(checks.check_decoder, answer, criterion)


class TransformerPostNormOnly(V.TransformerStudent):
    """Ignores norm_first (does not pass it on)."""

    def __init__(self, src_vocab_size, tgt_vocab_size, d_model=64, num_heads=4, d_ff=128, num_layers=2,
                 max_len=512, dropout=0.0, pad_id=0, norm_first=False):
        super().__init__(src_vocab_size, tgt_vocab_size, d_model, num_heads, d_ff, num_layers, max_len, dropout,
                         pad_id)


class TransformerNoDropout(V.TransformerStudent):
    """Ignores dropout (passes 0.0 on)."""

    def __init__(self, src_vocab_size, tgt_vocab_size, d_model=64, num_heads=4, d_ff=128, num_layers=2,
                 max_len=512, dropout=0.0, pad_id=0, norm_first=False):
        super().__init__(src_vocab_size, tgt_vocab_size, d_model, num_heads, d_ff, num_layers, max_len, 0.0,
                         pad_id, norm_first)


@pytest.mark.parametrize("answer, criterion", [
    (TransformerPostNormOnly, "Transformer.norm_first"), (TransformerNoDropout, "Transformer.dropout"),
    (V.mistake(V.TransformerStudent, "pad_zero"), "Transformer.pad_id")])
def test_transformer_arguments_with_teeth(answer, criterion):
    V.fails_partially(checks.check_transformer, answer, criterion)


def greedy_default_bos(model, src_ids, max_len, bos_id=2, eos_id=3):
    """Ignores bos_id: always starts from 2."""
    return solutions.greedy_decode(model, src_ids, max_len, eos_id=eos_id, use_cache=False)


def greedy_default_eos(model, src_ids, max_len, bos_id=2, eos_id=3):
    """Ignores eos_id: always ends at 3."""
    return solutions.greedy_decode(model, src_ids, max_len, bos_id=bos_id, use_cache=False)


@pytest.mark.parametrize("answer, criterion", [
    (greedy_default_bos, "greedy_decode.bos_id"), (greedy_default_eos, "greedy_decode.eos_id")])
def test_greedy_decode_arguments_with_teeth(answer, criterion):
    argument_name = criterion.split(".")[1]
    V.fails_partially(checks.check_greedy_decode, answer, criterion, f"greedy_decode ignores {argument_name}=")


def test_known_mistakes_are_tried_in_their_order():
    """The first match names the mistake: the Transformer's own masks (the source mask inverted in encode, then
    every mask inverted in the attention), then the decoder's own, then the stack's and the blocks'."""
    import torch

    from autograder.checks.kit.inputs import padded_ids

    model = solutions.Transformer(19, 17, 12, 3, 20, 2, max_len=16).eval()
    src, tgt = padded_ids([7, 4], 7, vocab=19), padded_ids([6, 3], 6, vocab=17)
    with torch.no_grad():
        ids = [mistake_id for mistake_id, _ in checks.transformer_mistakes(model, src, tgt)()]
    assert ids[:8] == ["transformer.no_causal_mask", "transformer.no_src_mask", "transformer.pad_id_hardcoded",
                       "attention.mask_inverted", "attention.mask_inverted", "decoder.cross_from_decoder",
                       "decoder.tgt_mask_ignored", "decoder.masks_swapped"]
    assert ids[8:11] == ["encoder.no_embedding_scale", "encoder.no_positions", "encoder.final_norm"]
    assert checks.M.decoder_ids(False, False)[:2] == ["decoder.cross_from_decoder", "encoder.norm_swapped"]
