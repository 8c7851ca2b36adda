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


@pytest.mark.parametrize("used_max_len, fragments", [
    (lambda max_len: 512, ("should raise ValueError", "longer than max_len=32")),
    (lambda max_len: max_len - 1, ("exactly max_len tokens", "raised an error"))])
def test_encoder_must_pass_max_len_on(used_max_len, fragments):
    class WrongMaxLen(V.EncoderStudent):
        def __init__(self, vocab_size, d_model, num_heads, d_ff, num_layers, max_len=512, dropout=0.0,
                     norm_first=False):
            super().__init__(vocab_size, d_model, num_heads, d_ff, num_layers, used_max_len(max_len), dropout,
                             norm_first)

    V.fails_with(checks.check_encoder, WrongMaxLen, *fragments)
