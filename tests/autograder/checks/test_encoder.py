"""Hidden checks of notebook 05: the reference and differently written answers pass; each mistake is named."""
from __future__ import annotations

import pytest

import solutions
import variants as V
from autograder.checks import encoder as checks


@pytest.mark.parametrize("cls", [solutions.PositionwiseFeedForward, V.FeedForwardFunctional, V.FeedForwardWrong])
def test_feed_forward_correct_answers_pass(cls):
    checks.check_positionwise_feed_forward(cls)


@pytest.mark.parametrize("kind, diagnosis", [
    ("no_relu", "encoder.no_relu"), ("relu_after", "encoder.relu_after_linear2"), ("gelu", "encoder.gelu")])
def test_feed_forward_mistakes(kind, diagnosis):
    V.fails_with(checks.check_positionwise_feed_forward, V.mistake(V.FeedForwardWrong, kind), diagnosis)


@pytest.mark.parametrize("cls", [solutions.EncoderBlock, V.EncoderBlockStudent,
                                 type("EncoderBlockSDPA", (V.EncoderBlockStudent,),
                                      {"ATTENTION": V.MultiHeadAttentionTorchSDPA})])
def test_encoder_block_correct_answers_pass(cls):
    checks.check_encoder_block(cls)


@pytest.mark.parametrize("kind, diagnosis", [
    ("norm_swapped", "encoder.norm_swapped"), ("no_residual_attn", "encoder.missing_residual_attn"),
    ("no_residual_ffn", "encoder.missing_residual_ffn"), ("inverted", "attention.mask_inverted")])
def test_encoder_block_mistakes(kind, diagnosis):
    V.fails_with(checks.check_encoder_block, V.mistake(V.EncoderBlockStudent, kind), diagnosis)


@pytest.mark.parametrize("cls", [solutions.Encoder, V.EncoderStudent])
def test_encoder_correct_answers_pass(cls):
    checks.check_encoder(cls)


@pytest.mark.parametrize("kind, diagnosis", [
    ("no_scale", "encoder.no_embedding_scale"), ("no_positions", "encoder.no_positions"),
    ("final_norm", "encoder.final_norm"),
    ("norm_swapped", "encoder.norm_swapped"), ("ignore_mask", "attention.mask_ignored")])
def test_encoder_mistakes(kind, diagnosis):
    V.fails_with(checks.check_encoder, V.mistake(V.EncoderStudent, kind), diagnosis)


def test_encoder_missing_submodule():
    class NoLayers(V.EncoderStudent):
        def __init__(self, *args, **kwargs):
            super().__init__(*args, **kwargs)
            self.blocks = self.layers
            del self.layers

    V.fails_with(checks.check_encoder, NoLayers, "submodule `layers.0")


class EncoderWrongMaxLen(V.EncoderStudent):
    """Passes another max_len than its own on to the positional encoding."""

    @staticmethod
    def used(max_len):
        return max_len

    def __init__(self, vocab_size, d_model, num_heads, d_ff, num_layers, max_len=512, dropout=0.0, norm_first=False):
        super().__init__(vocab_size, d_model, num_heads, d_ff, num_layers, self.used(max_len), dropout, norm_first)


def test_encoder_that_ignores_max_len_keeps_partial_credit():
    """Only the stated edge case fails (a sequence longer than max_len raises nothing): 80% of the points."""
    wrong = type("Encoder", (EncoderWrongMaxLen,), {"used": staticmethod(lambda max_len: 512)})
    V.fails_partially(checks.check_encoder, wrong, "Encoder.too_long",
                      "should raise ValueError", f"longer than max_len={checks.sizes().max_len}")


def test_encoder_with_a_too_short_table_fails():
    """A table shorter than max_len breaks the core (a sequence of exactly max_len tokens): no partial credit."""
    wrong = type("Encoder", (EncoderWrongMaxLen,), {"used": staticmethod(lambda max_len: max_len - 1)})
    V.fails_plainly(checks.check_encoder, wrong, "exactly max_len tokens", "raised an error")


def test_encoder_stub_fails_plainly():
    class Stub(V.EncoderStudent):
        def forward(self, src_ids, src_mask=None):
            raise ValueError("not written yet")

    V.fails_plainly(checks.check_encoder, Stub, "raised an error")
