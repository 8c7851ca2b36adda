"""Hidden checks of notebook 05: the reference and differently written answers pass; each mistake is named."""
from __future__ import annotations

import pytest
from torch import nn

import solutions
import variants as V
from autograder.checks.encoder import checks as checks


@pytest.mark.parametrize("cls", [solutions.PositionwiseFeedForward, V.FeedForwardFunctional])
def test_feed_forward_correct_answers_pass(cls):
    checks.check_positionwise_feed_forward(cls)


def test_feed_forward_that_ignores_dropout_keeps_most_points():
    """V.FeedForwardWrong without a mistake computes the right thing but never applies dropout: 75% of the points."""
    V.fails_partially(checks.check_positionwise_feed_forward, V.FeedForwardWrong, "PositionwiseFeedForward.dropout",
                      "its dropout does not act", "linear2(dropout(relu(linear1(x))))")


@pytest.mark.parametrize("kind, diagnosis", [
    ("no_relu", "encoder.no_relu"), ("relu_after", "encoder.relu_after_linear2"), ("gelu", "encoder.gelu")])
def test_feed_forward_mistakes(kind, diagnosis):
    V.fails_with(checks.check_positionwise_feed_forward, V.mistake(V.FeedForwardWrong, kind), diagnosis)


# V.EncoderBlockStudent's attention (the loop over heads) ignores dropout: these blocks give it one that applies it
EncoderBlockDropout = type("EncoderBlock", (V.EncoderBlockStudent,), {"ATTENTION": V.MultiHeadAttentionBase})
EncoderBlockSDPADropout = type("EncoderBlock", (V.EncoderBlockStudent,), {"ATTENTION": V.MultiHeadAttentionSDPADropout})


@pytest.mark.parametrize("cls", [solutions.EncoderBlock, EncoderBlockDropout, EncoderBlockSDPADropout])
def test_encoder_block_correct_answers_pass(cls):
    checks.check_encoder_block(cls)


@pytest.mark.parametrize("kind, diagnosis", [
    ("norm_swapped", "encoder.norm_swapped"), ("no_residual_attn", "encoder.missing_residual_attn"),
    ("no_residual_ffn", "encoder.missing_residual_ffn"), ("inverted", "attention.mask_inverted")])
def test_encoder_block_mistakes(kind, diagnosis):
    V.fails_with(checks.check_encoder_block, V.mistake(EncoderBlockDropout, kind), diagnosis)


# ---------------------------------------------------------- EncoderBlock's arguments with teeth: norm_first, dropout
class EncoderBlockPostNormOnly(EncoderBlockDropout):
    """Ignores norm_first: always the post-norm block."""

    def __init__(self, d_model, num_heads, d_ff, dropout=0.0, norm_first=False):
        super().__init__(d_model, num_heads, d_ff, dropout)


def test_encoder_block_that_ignores_norm_first_keeps_most_points():
    message = V.fails_partially(checks.check_encoder_block, EncoderBlockPostNormOnly, "EncoderBlock.norm_first",
                                "norm_first=True")
    assert "encoder.norm_swapped" in message or "pre-norm and post-norm are swapped" in message, message


class EncoderBlockNoDropout(EncoderBlockDropout):
    """Ignores dropout: nothing is ever dropped."""

    def __init__(self, d_model, num_heads, d_ff, dropout=0.0, norm_first=False):
        super().__init__(d_model, num_heads, d_ff, 0.0, norm_first)


class EncoderBlockOwnDropoutOnly(EncoderBlockDropout):
    """Drops the sublayers' outputs, but does not pass dropout on to self_attn and ffn."""

    def __init__(self, d_model, num_heads, d_ff, dropout=0.0, norm_first=False):
        super().__init__(d_model, num_heads, d_ff, 0.0, norm_first)
        self.drop = nn.Dropout(dropout)


@pytest.mark.parametrize("cls, words", [
    (EncoderBlockNoDropout, "its dropout does not act"),
    (EncoderBlockOwnDropoutOnly, "dropout does not reach `self_attn`"),
    (V.EncoderBlockStudent, "dropout does not reach `self_attn`"),   # its attention (a loop over heads) ignores it
])
def test_encoder_block_dropout_mistakes_keep_most_points(cls, words):
    V.fails_partially(checks.check_encoder_block, cls, "EncoderBlock.dropout", words)


EncoderDropout = type("Encoder", (V.EncoderStudent,), {"BLOCK": EncoderBlockDropout})


@pytest.mark.parametrize("cls", [solutions.Encoder, V.EncoderStudent, EncoderDropout])
def test_encoder_correct_answers_pass(cls):
    checks.check_encoder(cls)


# --------------------------------------------------------------- Encoder's arguments with teeth: norm_first, dropout
class EncoderPostNormBlocks(EncoderDropout):
    """Ends a pre-norm stack with its LayerNorm, but does not pass norm_first on: its blocks are always post-norm."""

    def __init__(self, vocab_size, d_model, num_heads, d_ff, num_layers, max_len=512, dropout=0.0, norm_first=False):
        super().__init__(vocab_size, d_model, num_heads, d_ff, num_layers, max_len, dropout)
        self.norm = nn.LayerNorm(d_model) if norm_first else nn.Identity()


class EncoderPostNormOnly(EncoderDropout):
    """Ignores norm_first: post-norm blocks and no final LayerNorm, whatever it is asked."""

    def __init__(self, vocab_size, d_model, num_heads, d_ff, num_layers, max_len=512, dropout=0.0, norm_first=False):
        super().__init__(vocab_size, d_model, num_heads, d_ff, num_layers, max_len, dropout)


class EncoderNoFinalNorm(EncoderDropout):
    """Passes norm_first on to its blocks, but a pre-norm stack has no final LayerNorm."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.norm = nn.Identity()


class EncoderFinalNormUnused(EncoderDropout):
    """Has the pre-norm stack's final LayerNorm, but forward never applies it."""

    def forward(self, src_ids, src_mask=None):
        x = self.pos_encoding(self.embedding(src_ids) * self.scale)
        for layer in self.layers:
            x = layer(x, src_mask)
        return x


@pytest.mark.parametrize("cls, words", [
    (EncoderPostNormBlocks, "pre-norm and post-norm are swapped"),          # the mistake encoder.norm_swapped
    (EncoderFinalNormUnused, "the final LayerNorm is wrong"),                # the mistake encoder.final_norm
    (EncoderPostNormOnly, "expected submodule `norm`"), (EncoderNoFinalNorm, "expected submodule `norm`")])
def test_encoder_that_ignores_norm_first_keeps_most_points(cls, words):
    V.fails_partially(checks.check_encoder, cls, "Encoder.norm_first", "norm_first=True", words)


class EncoderNoDropout(EncoderDropout):
    """Ignores dropout: neither the positions nor the blocks drop anything."""

    def __init__(self, vocab_size, d_model, num_heads, d_ff, num_layers, max_len=512, dropout=0.0, norm_first=False):
        super().__init__(vocab_size, d_model, num_heads, d_ff, num_layers, max_len, 0.0, norm_first)


class EncoderDropoutInPositionsOnly(EncoderDropout):
    """Passes dropout to the positional encoding only: the blocks never drop."""

    def __init__(self, vocab_size, d_model, num_heads, d_ff, num_layers, max_len=512, dropout=0.0, norm_first=False):
        super().__init__(vocab_size, d_model, num_heads, d_ff, num_layers, max_len, 0.0, norm_first)
        self.pos_encoding = V.PositionalEncodingNumpy(d_model, max_len, dropout)


@pytest.mark.parametrize("cls, words", [(EncoderNoDropout, "its dropout does not act"),
                                        (EncoderDropoutInPositionsOnly, "dropout does not reach `layers.0`")])
def test_encoder_dropout_mistakes_keep_most_points(cls, words):
    V.fails_partially(checks.check_encoder, cls, "Encoder.dropout", words)


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


def test_known_mistakes_are_tried_in_their_order():
    """The first match names the mistake: a block's own rows come before the attention's (those about the mask
    only with a mask), a stack's own before its blocks'; every id tried has its row in the table."""
    from autograder.checks.encoder import mistakes as M

    block = ["encoder.norm_swapped", "encoder.missing_residual_attn", "encoder.missing_residual_ffn"]
    assert M.block_ids(False)[:3] == M.block_ids(True)[:3] == block
    assert "attention.mask_inverted" in M.block_ids(True) and "attention.mask_inverted" not in M.block_ids(False)
    assert M.stack_ids(True)[:4] == ["encoder.no_embedding_scale", "encoder.no_positions", "encoder.final_norm",
                                     "attention.mask_ignored"]
    assert M.stack_ids(False)[3:6] == block
    for ids in (M.FEED_FORWARD_IDS, M.block_ids(True), M.stack_ids(True)):
        assert set(ids) <= set(M.TABLE)
