"""Hidden checks of notebook 04: the reference and differently written answers pass; each mistake is named."""
from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from torch import nn

import solutions
import variants as V
from autograder.checks.multi_head import checks as checks
from autograder.checks.kit.criteria import PartialCredit
from coursekit.criteria import CRITERIA


@pytest.mark.parametrize("fn", [solutions.split_heads, V.split_heads_stack, V.split_heads_permute])
def test_split_heads_correct_answers_pass(fn):
    checks.check_split_heads(fn)


@pytest.mark.parametrize("kind, diagnosis", [("no_transpose", "multi_head.split_no_transpose"),
                                             ("interleaved", "multi_head.split_interleaved")])
def test_split_heads_mistakes(kind, diagnosis):
    V.fails_with(checks.check_split_heads, V.split_heads_wrong(kind), diagnosis)


def test_split_heads_wrong_shape():
    V.fails_with(checks.check_split_heads, lambda x, h: solutions.split_heads(x, h).transpose(1, 2),
                 "wrong shape", "expected shape (")


@pytest.mark.parametrize("fn", [solutions.merge_heads, V.merge_heads_cat, V.merge_heads_permute])
def test_merge_heads_correct_answers_pass(fn):
    checks.check_merge_heads(fn)


def test_merge_heads_mistakes():
    V.fails_with(checks.check_merge_heads, V.merge_heads_wrong("no_transpose"), "multi_head.merge_no_transpose")
    V.fails_with(checks.check_merge_heads, V.merge_heads_wrong("view"), "raised an error", ".contiguous()")


class MultiHeadAttentionLoopDropout(V.MultiHeadAttentionLoop):
    """The loop over heads, with dropout on each head's weights (F.dropout, training=self.training)."""

    def __init__(self, d_model, num_heads, dropout=0.0, bias=True):
        super().__init__(d_model, num_heads, dropout, bias)
        self.p = dropout

    def forward(self, query, key, value, mask=None):
        q, k, v = self.w_q(query), self.w_k(key), self.w_v(value)
        d = q.size(-1) // self.num_heads
        outputs, maps = [], []
        for h in range(self.num_heads):
            part = slice(h * d, (h + 1) * d)
            scores = q[..., part] @ k[..., part].transpose(1, 2) / d ** 0.5
            if mask is not None:
                scores = scores.masked_fill(~(mask[:, 0] if mask.dim() == 4 else mask), float("-inf"))
            w = scores.softmax(-1)
            maps.append(w)
            outputs.append(F.dropout(w, self.p, self.training) @ v[..., part])
        return self.w_o(torch.cat(outputs, dim=-1)), torch.stack(maps, dim=1)


@pytest.mark.parametrize("cls", [solutions.MultiHeadAttention, V.MultiHeadAttentionBase,
                                 MultiHeadAttentionLoopDropout, V.MultiHeadAttentionSDPADropout])
def test_mha_correct_answers_pass(cls):
    checks.check_multi_head_attention(cls)


# ------------------------------------------------------------------------------ arguments with teeth: dropout, bias
@pytest.mark.parametrize("cls", [V.MultiHeadAttentionLoop, V.MultiHeadAttentionTorchSDPA])
def test_mha_that_ignores_dropout_keeps_most_points(cls):
    """Right in everything but dropout (never applied): only the argument dropout fails, 75% of the points kept at
    least (88% here: bias is the other argument)."""
    V.fails_partially(checks.check_multi_head_attention, cls, "MultiHeadAttention.dropout",
                      "in training mode gives the same output as in eval mode")


class MultiHeadAttentionDroppedWeights(V.MultiHeadAttentionBase):
    """Returns the weights after dropout (the statement asks for those before dropout)."""

    def forward(self, query, key, value, mask=None):
        out, weights = super().forward(query, key, value, mask)
        torch.manual_seed(0)
        return out, self.dropout(weights)


class MultiHeadAttentionDropoutInEval(V.MultiHeadAttentionBase):
    """F.dropout without training=self.training: it drops in eval mode too."""

    class AlwaysDrop(nn.Dropout):
        def forward(self, x):
            return F.dropout(x, self.p)

    def __init__(self, d_model, num_heads, dropout=0.0, bias=True):
        super().__init__(d_model, num_heads, dropout, bias)
        self.dropout = self.AlwaysDrop(dropout)


@pytest.mark.parametrize("cls, words", [
    (MultiHeadAttentionDroppedWeights, "return the weights before dropout"),
    (MultiHeadAttentionDropoutInEval, "dropout must do nothing in eval mode")])
def test_mha_dropout_mistakes_keep_most_points(cls, words):
    V.fails_partially(checks.check_multi_head_attention, cls, "MultiHeadAttention.dropout", words)


class MultiHeadAttentionAlwaysBias(V.MultiHeadAttentionBase):
    """Ignores bias: its four nn.Linear always have one."""

    def __init__(self, d_model, num_heads, dropout=0.0, bias=True):
        super().__init__(d_model, num_heads, dropout)


class MultiHeadAttentionNoBiasArgument(MultiHeadAttentionLoopDropout):
    """A signature without bias (and every Linear with a bias): only bias=False fails, with a TypeError."""

    def __init__(self, d_model, num_heads, dropout=0.0):
        super().__init__(d_model, num_heads, dropout)


def test_mha_that_ignores_bias_keeps_most_points():
    V.fails_partially(checks.check_multi_head_attention, MultiHeadAttentionAlwaysBias, "MultiHeadAttention.bias",
                      "still has biases: w_q.bias, w_k.bias, w_v.bias, w_o.bias", "pass bias=bias")
    V.fails_partially(checks.check_multi_head_attention, MultiHeadAttentionNoBiasArgument,
                      "MultiHeadAttention.bias", "raised an error", "bias")


@pytest.mark.parametrize("kind, diagnosis", [
    ("no_scale", "attention.missing_scale"), ("d_model", "multi_head.scale_d_model"),
    ("softmax_dim", "attention.softmax_dim"),
    ("inverted", "attention.mask_inverted"), ("split_no_transpose", "multi_head.split_no_transpose"),
    ("merge_no_transpose", "multi_head.merge_no_transpose")])
def test_mha_mistakes_are_named(kind, diagnosis):
    V.fails_with(checks.check_multi_head_attention, V.mistake(V.MultiHeadAttentionBase, kind), diagnosis)


@pytest.mark.parametrize("kind", ["kv_swapped", "value_from_key", "key_from_value", "query_from_key"])
def test_mha_mixed_up_inputs_are_named(kind):
    """key and value (and query) are different tensors in some probes: an answer that mixes them up fails."""
    V.fails_with(checks.check_multi_head_attention, V.mistake(V.MultiHeadAttentionInputsMixed, kind),
                 "MultiHeadAttention output", "multi_head.inputs_mixed")


def test_mha_structure_problems():
    V.fails_with(checks.check_multi_head_attention, V.mistake(V.MultiHeadAttentionBase, "renamed"),
                 "submodule `w_o`")
    V.fails_with(checks.check_multi_head_attention, V.mistake(V.MultiHeadAttentionBase, "averaged"),
                 "the attention weights has the wrong shape", "expected shape (")
    V.fails_with(checks.check_multi_head_attention, V.mistake(V.MultiHeadAttentionBase, "no_value_error"),
                 "ValueError", "not divisible")


# ----------------------------------------------------------------------------- partial credit by criterion (door 4)
def test_mha_only_missing_indivisible_error_gets_partial_credit():
    with pytest.raises(PartialCredit) as info:
        checks.check_multi_head_attention(V.mistake(V.MultiHeadAttentionBase, "no_value_error"))
    assert info.value.fraction >= 0.8, str(info.value)
    assert f"✗ {CRITERIA['MultiHeadAttention.indivisible'].text}" in str(info.value), str(info.value)
    assert "✓ the main behaviour" in str(info.value)


def test_mha_stub_gets_no_partial_credit():
    class Stub(nn.Module):
        def __init__(self, d_model, num_heads, dropout=0.0, bias=True):
            super().__init__()
            if d_model % num_heads:
                raise ValueError("d_model must be divisible by num_heads")
            raise NotImplementedError()

    with pytest.raises(AssertionError) as info:
        checks.check_multi_head_attention(Stub)
    assert not isinstance(info.value, PartialCredit), str(info.value)
    assert "not implemented yet" in str(info.value)
