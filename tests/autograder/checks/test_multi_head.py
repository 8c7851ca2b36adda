"""Hidden checks of notebook 04: the reference and differently written answers pass; each mistake is named."""
from __future__ import annotations

import pytest

import solutions
import variants as V
from autograder.checks import multi_head as checks


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
