"""Hidden checks of notebook 04: the reference and differently written answers pass; each mistake is named."""
from __future__ import annotations

import pytest
from torch import nn

import solutions
import variants as V
from autograder.checks import multi_head as checks
from autograder.checks.criteria import PartialCredit
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


@pytest.mark.parametrize("cls", [solutions.MultiHeadAttention, V.MultiHeadAttentionBase, V.MultiHeadAttentionLoop,
                                 V.MultiHeadAttentionTorchSDPA])
def test_mha_correct_answers_pass(cls):
    checks.check_multi_head_attention(cls)


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
