"""The public checks of notebook 05 pass correct answers (written two ways) and name the likely mistake otherwise."""
from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from coursekit.checks import CheckFailed
from coursekit.criteria import CRITERIA
from coursekit.mistakes import text_of
from coursekit.checks.encoder.checks import check_encoder, check_encoder_block, check_positionwise_feed_forward
from solutions import Encoder, EncoderBlock, PositionwiseFeedForward


class FunctionalFeedForward(PositionwiseFeedForward):
    """Correct, written with F.linear and clamp."""

    def forward(self, x):
        hidden = F.linear(x, self.linear1.weight, self.linear1.bias).clamp(min=0)
        hidden = F.dropout(hidden, self.dropout.p, self.training)
        return F.linear(hidden, self.linear2.weight, self.linear2.bias)


class LoopEncoderBlock(EncoderBlock):
    """Correct, written as a loop over (norm, sublayer) pairs."""

    def forward(self, x, mask=None):
        sublayers = [(self.norm1, lambda h: self.self_attn(h, h, h, mask)[0]), (self.norm2, self.ffn)]
        for norm, sublayer in sublayers:
            x = x + sublayer(norm(x)) if self.norm_first else norm(x + sublayer(x))
        return x


def ffn_with(mistake):
    class Wrong(PositionwiseFeedForward):
        def forward(self, x):
            if mistake == "no_relu":
                return self.linear2(self.linear1(x))
            return torch.relu(self.linear2(self.linear1(x)))
    return Wrong


def block_with(mistake):
    class Wrong(EncoderBlock):
        def forward(self, x, mask=None):
            m = None if mistake == "no_mask" else mask
            n1, n2 = (self.norm2, self.norm1) if mistake == "norms_swapped" else (self.norm1, self.norm2)
            pre = (not self.norm_first) if mistake == "pre_post_swapped" else self.norm_first
            keep = 0 if mistake == "no_attn_residual" else 1
            if pre:
                h = n1(x)
                x = keep * x + self.self_attn(h, h, h, m)[0]
                return x + self.ffn(n2(x))
            x = n1(keep * x + self.self_attn(x, x, x, m)[0])
            return n2(x + self.ffn(x))
    return Wrong


def encoder_with(mistake):
    class Wrong(Encoder):
        def forward(self, src_ids, src_mask=None):
            x = self.embedding(src_ids)
            if mistake != "no_scale":
                x = x * math.sqrt(self.d_model)
            if mistake != "no_positions":
                x = self.pos_encoding(x)
            for layer in self.layers:
                x = layer(x, None if mistake == "no_mask" else src_mask)
            return x if mistake == "no_final_norm" else self.norm(x)
    return Wrong


def test_correct_answers_pass(capsys):
    for cls in (PositionwiseFeedForward, FunctionalFeedForward):
        check_positionwise_feed_forward(cls)
    for cls in (EncoderBlock, LoopEncoderBlock):
        check_encoder_block(cls)
    check_encoder(Encoder)
    assert capsys.readouterr().out.count("passed") == 5


@pytest.mark.parametrize("mistake, words", [("no_relu", text_of("encoder.no_relu")),
                                             ("relu_last", text_of("encoder.relu_after_linear2"))])
def test_feed_forward_mistakes(mistake, words):
    with pytest.raises(CheckFailed) as error:
        check_positionwise_feed_forward(ffn_with(mistake))
    assert words in str(error.value)


def test_feed_forward_wrong_sizes():
    class Wide(nn.Module):
        def __init__(self, d_model, d_ff, dropout=0.0):
            super().__init__()
            self.linear1 = nn.Linear(d_model, d_model)
            self.linear2 = nn.Linear(d_model, d_model)

    with pytest.raises(CheckFailed, match="`linear1` should map 5 -> 7"):
        check_positionwise_feed_forward(Wide)


@pytest.mark.parametrize("mistake, words", [
    ("pre_post_swapped", text_of("encoder.norm_swapped")),
    ("pre_post_swapped", "you wrote the pre-norm block, but norm_first=False"),
    ("no_attn_residual", text_of("encoder.missing_residual_attn")),
    ("no_mask", "mask is not passed"),
    ("norms_swapped", "norm1 and norm2 are swapped"),
])
def test_encoder_block_mistakes(mistake, words):
    with pytest.raises(CheckFailed) as error:
        check_encoder_block(block_with(mistake))
    assert words in str(error.value)


def test_encoder_block_returning_a_tuple():
    class Tuple(EncoderBlock):
        def forward(self, x, mask=None):
            return super().forward(x, mask), None

    with pytest.raises(CheckFailed, match="should be a Tensor"):
        check_encoder_block(Tuple)


@pytest.mark.parametrize("mistake, words", [
    ("no_scale", text_of("encoder.no_embedding_scale")),
    ("no_positions", text_of("encoder.no_positions")),
    ("no_mask", "mask is not handed to the layers"),
    ("no_final_norm", text_of("encoder.final_norm")),
])
def test_encoder_mistakes(mistake, words):
    with pytest.raises(CheckFailed) as error:
        check_encoder(encoder_with(mistake))
    assert words in str(error.value)


def test_encoder_shared_layer():
    class Shared(Encoder):
        def __init__(self, *args, **kwargs):
            super().__init__(*args, **kwargs)
            self.layers = nn.ModuleList([self.layers[0]] * len(self.layers))

    with pytest.raises(CheckFailed, match="same block several times"):
        check_encoder(Shared)


def test_encoder_wrong_final_norm():
    class AlwaysNorm(Encoder):
        def __init__(self, vocab_size, d_model, *args, **kwargs):
            super().__init__(vocab_size, d_model, *args, **kwargs)
            self.norm = nn.LayerNorm(d_model)

    with pytest.raises(CheckFailed, match="submodule `norm` \\(Identity\\)"):
        check_encoder(AlwaysNorm)


def test_the_public_check_tries_the_too_long_edge_case():
    """A correct Encoder that does not pass max_len on fails the public check, which names the stated edge case."""
    import pytest

    from coursekit.checks import CheckFailed
    from coursekit.criteria import CRITERIA
    from solutions import Encoder

    class IgnoresMaxLen(Encoder):
        def __init__(self, *args, max_len=512, **kwargs):
            super().__init__(*args, **kwargs)

    with pytest.raises(CheckFailed) as info:
        check_encoder(IgnoresMaxLen)
    assert "should raise ValueError" in str(info.value) and CRITERIA["Encoder.too_long"].text in str(info.value)


# ------------------------------------------------------------------------ arguments with teeth: dropout, norm_first

def stated(criterion: str) -> str:
    return f"(an argument the exercise states: {CRITERIA[criterion].text})"


class FeedForwardNoDropout(PositionwiseFeedForward):
    def forward(self, x):
        return self.linear2(torch.relu(self.linear1(x)))


class BlockPostNormOnly(EncoderBlock):
    def __init__(self, d_model, num_heads, d_ff, dropout=0.0, norm_first=False):
        super().__init__(d_model, num_heads, d_ff, dropout)


class BlockNoDropout(EncoderBlock):
    def __init__(self, d_model, num_heads, d_ff, dropout=0.0, norm_first=False):
        super().__init__(d_model, num_heads, d_ff, 0.0, norm_first)


class BlockOwnDropoutOnly(BlockNoDropout):
    """Drops the sublayers' outputs, but self_attn and ffn get no dropout."""

    def __init__(self, d_model, num_heads, d_ff, dropout=0.0, norm_first=False):
        super().__init__(d_model, num_heads, d_ff, dropout, norm_first)
        self.dropout1, self.dropout2 = nn.Dropout(dropout), nn.Dropout(dropout)


class EncoderPostNormOnly(Encoder):
    def __init__(self, vocab_size, d_model, num_heads, d_ff, num_layers, max_len=512, dropout=0.0, norm_first=False):
        super().__init__(vocab_size, d_model, num_heads, d_ff, num_layers, max_len, dropout)


class EncoderNoDropout(Encoder):
    def __init__(self, vocab_size, d_model, num_heads, d_ff, num_layers, max_len=512, dropout=0.0, norm_first=False):
        super().__init__(vocab_size, d_model, num_heads, d_ff, num_layers, max_len, 0.0, norm_first)


class EncoderDropoutInPositionsOnly(EncoderNoDropout):
    def __init__(self, vocab_size, d_model, num_heads, d_ff, num_layers, max_len=512, dropout=0.0, norm_first=False):
        super().__init__(vocab_size, d_model, num_heads, d_ff, num_layers, max_len, dropout, norm_first)
        self.pos_encoding.dropout = nn.Dropout(dropout)


@pytest.mark.parametrize("check, cls, criterion, words", [
    (check_positionwise_feed_forward, FeedForwardNoDropout, "PositionwiseFeedForward.dropout",
     "its dropout does not act"),
    (check_encoder_block, BlockPostNormOnly, "EncoderBlock.norm_first", text_of("encoder.norm_swapped")),
    (check_encoder_block, BlockNoDropout, "EncoderBlock.dropout", "its dropout does not act"),
    (check_encoder_block, BlockOwnDropoutOnly, "EncoderBlock.dropout", ".self_attn gives the same output"),
    (check_encoder, EncoderPostNormOnly, "Encoder.norm_first", "submodule `norm` (LayerNorm)"),
    (check_encoder, EncoderNoDropout, "Encoder.dropout", "its dropout does not act"),
    (check_encoder, EncoderDropoutInPositionsOnly, "Encoder.dropout", ".layers[0] gives the same output"),
])
def test_argument_mistakes_are_named(check, cls, criterion, words):
    with pytest.raises(CheckFailed) as error:
        check(cls)
    assert words in str(error.value) and stated(criterion) in str(error.value), str(error.value)
