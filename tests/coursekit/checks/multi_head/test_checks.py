"""The public checks of notebook 04 pass correct answers (written two ways) and name the likely mistake otherwise."""
from __future__ import annotations

import math

import pytest
import torch
from torch import nn

from coursekit.checks import CheckFailed
from coursekit.criteria import CRITERIA
from coursekit.mistakes import text_of
from coursekit.checks.multi_head.checks import check_merge_heads, check_multi_head_attention, check_split_heads
from solutions import MultiHeadAttention as ReferenceMHA
from solutions import merge_heads as reference_merge_heads
from solutions import split_heads as reference_split_heads


# ---------------------------------------------------------------------------------------- correct, written otherwise

def split_heads_einops_style(x, num_heads):
    B, T, d_model = x.shape
    return torch.stack(x.chunk(num_heads, dim=-1), dim=1)                             # (B, H, T, d_head)


def merge_heads_cat(x):
    return torch.cat(x.unbind(dim=1), dim=-1)                                         # (B, T, H * d_head)


class EinsumMHA(nn.Module):
    """A correct multi-head attention with einsum, a -inf style mask and float 0/1 handling."""

    def __init__(self, d_model, num_heads, dropout=0.0, bias=True):
        super().__init__()
        if d_model % num_heads:
            raise ValueError("d_model must be divisible by num_heads")
        self.h, self.p = num_heads, dropout
        self.w_q, self.w_k, self.w_v, self.w_o = (nn.Linear(d_model, d_model, bias=bias) for _ in range(4))

    def forward(self, query, key, value, mask=None):
        B, T_q, d = query.shape
        q = self.w_q(query).view(B, T_q, self.h, -1)
        k = self.w_k(key).view(B, key.size(1), self.h, -1)
        v = self.w_v(value).view(B, value.size(1), self.h, -1)
        scores = torch.einsum("bqhd,bkhd->bhqk", q, k) / math.sqrt(q.size(-1))
        if mask is not None:
            scores = scores.masked_fill(mask == 0, float("-inf"))
        weights = scores.softmax(-1)
        dropped = torch.nn.functional.dropout(weights, self.p, self.training)
        out = torch.einsum("bhqk,bkhd->bqhd", dropped, v).reshape(B, T_q, d)
        return self.w_o(out), weights


# ------------------------------------------------------------------------------------------------------ mistakes

def split_heads_no_transpose(x, num_heads):
    B, T, d = x.shape
    return x.reshape(B, num_heads, T, d // num_heads)


def split_heads_interleaved(x, num_heads):
    B, T, d = x.shape
    return x.reshape(B, T, d // num_heads, num_heads).permute(0, 3, 1, 2)


def merge_heads_no_transpose(x):
    B, H, T, d_head = x.shape
    return x.reshape(B, T, H * d_head)


def mha_with(mistake):
    """A copy of the einsum answer with one known mistake."""

    class Wrong(EinsumMHA):
        def forward(self, query, key, value, mask=None):
            B, T_q, d = query.shape
            split = (lambda x: x.reshape(B, self.h, x.size(1), -1)) if mistake == "split" else (
                lambda x: x.view(B, x.size(1), self.h, -1).transpose(1, 2))
            q, k, v = split(self.w_q(query)), split(self.w_k(key)), split(self.w_v(value))
            scale = {"no_scale": 1.0, "sqrt_d_model": math.sqrt(d)}.get(mistake, math.sqrt(q.size(-1)))
            scores = q @ k.transpose(-2, -1) / scale
            if mask is not None:
                blocked = mask if mistake == "polarity" else ~mask
                scores = scores.masked_fill(blocked, -1e9)
            weights = scores.softmax(dim=-2 if mistake == "dim" else -1)
            heads = weights @ v
            merged = heads.reshape(B, T_q, d) if mistake == "merge" else heads.transpose(1, 2).reshape(B, T_q, d)
            return (merged if mistake == "no_w_o" else self.w_o(merged)), weights

    return Wrong


def test_correct_answers_pass(capsys):
    for fn in (reference_split_heads, split_heads_einops_style):
        check_split_heads(fn)
    for fn in (reference_merge_heads, merge_heads_cat):
        check_merge_heads(fn)
    for cls in (ReferenceMHA, EinsumMHA):
        check_multi_head_attention(cls)
    assert capsys.readouterr().out.count("passed") == 6


@pytest.mark.parametrize("fn, words", [
    (split_heads_no_transpose, text_of("multi_head.split_no_transpose")),
    (split_heads_no_transpose, "transpose(1, 2)"),
    (split_heads_interleaved, text_of("multi_head.split_interleaved")),
])
def test_split_heads_mistakes(fn, words):
    with pytest.raises(CheckFailed, match="HINT") as error:
        check_split_heads(fn)
    assert words in str(error.value)


def test_split_heads_wrong_shape():
    with pytest.raises(CheckFailed, match=r"should have shape \(2, 3, 4, 2\)"):
        check_split_heads(lambda x, h: x)


def test_merge_heads_mistake():
    with pytest.raises(CheckFailed, match="swap the H and T axes"):
        check_merge_heads(merge_heads_no_transpose)


def test_stub_is_reported_as_not_implemented():
    def stub(x, num_heads):
        raise NotImplementedError()

    with pytest.raises(CheckFailed, match="not implemented yet"):
        check_split_heads(stub)


@pytest.mark.parametrize("mistake, words", [
    ("no_scale", text_of("attention.missing_scale")),
    ("sqrt_d_model", text_of("multi_head.scale_d_model")),
    ("polarity", text_of("attention.mask_inverted")),
    ("dim", text_of("attention.softmax_dim")),
    ("split", text_of("multi_head.split_no_transpose")),
    ("merge", text_of("multi_head.merge_no_transpose")),
    ("no_w_o", "output projection w_o"),
])
def test_multi_head_attention_mistakes(mistake, words):
    with pytest.raises(CheckFailed) as error:
        check_multi_head_attention(mha_with(mistake))
    assert words in str(error.value)


def test_multi_head_attention_without_value_error():
    class NoCheck(EinsumMHA):
        def __init__(self, d_model, num_heads, dropout=0.0, bias=True):
            nn.Module.__init__(self)
            self.h = num_heads
            self.w_q, self.w_k, self.w_v, self.w_o = (nn.Linear(d_model, d_model, bias=bias) for _ in range(4))

    with pytest.raises(CheckFailed, match="should raise ValueError") as error:
        check_multi_head_attention(NoCheck)
    assert f"(an edge case the exercise states: {CRITERIA['MultiHeadAttention.indivisible'].text})" \
        in str(error.value)


def test_multi_head_attention_missing_submodule():
    class Fused(nn.Module):
        def __init__(self, d_model, num_heads, dropout=0.0, bias=True):
            super().__init__()
            self.qkv = nn.Linear(d_model, 3 * d_model)

    with pytest.raises(CheckFailed, match="submodule `w_q`"):
        check_multi_head_attention(Fused)


def test_multi_head_attention_weights_shape():
    class AveragedWeights(EinsumMHA):
        def forward(self, query, key, value, mask=None):
            out, weights = super().forward(query, key, value, mask)
            return out, weights.mean(dim=1)

    with pytest.raises(CheckFailed, match=r"should have shape \(2, 3, 4, 4\)"):
        check_multi_head_attention(AveragedWeights)


# ------------------------------------------------------------------------------------ arguments: bias and dropout

def test_multi_head_attention_that_ignores_bias():
    class AlwaysBias(EinsumMHA):
        def __init__(self, d_model, num_heads, dropout=0.0, bias=True):
            super().__init__(d_model, num_heads, dropout)

    with pytest.raises(CheckFailed, match="with bias=False, `w_q` should have no bias") as error:
        check_multi_head_attention(AlwaysBias)
    assert f"(an argument the exercise states: {CRITERIA['MultiHeadAttention.bias'].text})" in str(error.value)


class NoDropout(EinsumMHA):
    """Right except that dropout is never applied."""

    def __init__(self, d_model, num_heads, dropout=0.0, bias=True):
        super().__init__(d_model, num_heads, 0.0, bias)


class DroppedWeights(EinsumMHA):
    """Returns the weights after dropout."""

    def forward(self, query, key, value, mask=None):
        out, weights = super().forward(query, key, value, mask)
        return out, torch.nn.functional.dropout(weights, self.p, self.training)


class DropoutInEval(EinsumMHA):
    """F.dropout without training=self.training: it also drops in eval mode."""

    def forward(self, query, key, value, mask=None):
        training, self.training = self.training, True
        try:
            return super().forward(query, key, value, mask)
        finally:
            self.training = training


@pytest.mark.parametrize("cls, words", [(NoDropout, "its dropout does not act"),
                                        (DroppedWeights, "return the weights before dropout"),
                                        (DropoutInEval, "eval mode")])
def test_multi_head_attention_dropout_mistakes(cls, words):
    with pytest.raises(CheckFailed) as error:
        check_multi_head_attention(cls)
    assert words in str(error.value)
    assert f"(an argument the exercise states: {CRITERIA['MultiHeadAttention.dropout'].text})" in str(error.value)
