"""Hidden checks of notebook 03: the reference and differently written answers pass; each mistake is named."""
from __future__ import annotations

import pytest

import solutions
import variants as V
from autograder.checks.attention import checks as checks


@pytest.mark.parametrize("fn", [solutions.make_padding_mask, V.padding_mask_unsqueeze])
def test_padding_mask_correct_answers_pass(fn):
    checks.check_make_padding_mask(fn)


def test_padding_mask_mistakes():
    V.fails_plainly(checks.check_make_padding_mask, V.padding_mask_wrong("inverted"), "attention.mask_inverted")
    V.fails_plainly(checks.check_make_padding_mask, V.padding_mask_wrong("shape"), "expected shape (", ", 1, 1, ")
    V.fails_plainly(checks.check_make_padding_mask, V.padding_mask_wrong("float"), "bool")


@pytest.mark.parametrize("answer", [
    lambda ids, pad_id=0: solutions.make_padding_mask(ids),        # pad_id ignored: 0 hard-coded
    lambda ids: solutions.make_padding_mask(ids),                  # no pad_id argument at all
])
def test_padding_mask_wrong_only_in_pad_id_keeps_most_points(answer):
    V.fails_partially(checks.check_make_padding_mask, answer, "make_padding_mask.pad_id", "pad_id=")


@pytest.mark.parametrize("fn", [solutions.make_causal_mask, V.causal_mask_arange, V.causal_mask_triu])
def test_causal_mask_correct_answers_pass(fn):
    checks.check_make_causal_mask(fn)


@pytest.mark.parametrize("kind, fragment", [
    ("inverted", "attention.mask_inverted"), ("strict", "causal_mask.diagonal_blocked"),
    ("upper", "causal_mask.upper_triangle")])
def test_causal_mask_mistakes(kind, fragment):
    V.fails_with(checks.check_make_causal_mask, V.causal_mask_wrong(kind), fragment)


@pytest.mark.parametrize("fn", [solutions.scaled_dot_product_attention, V.sdpa_einsum_inf, V.sdpa_additive_float,
                                V.sdpa_torch_builtin, V.sdpa_wrong("correct")])
def test_sdpa_correct_answers_pass(fn):
    checks.check_scaled_dot_product_attention(fn)


@pytest.mark.parametrize("kind, diagnosis", [
    ("none", "attention.missing_scale"), ("mul", "attention.scale_multiplied"), ("by_d", "attention.scale_by_d"),
    ("by_length", "attention.scale_by_length"),
    ("dim", "attention.softmax_dim"),
    ("inverted", "attention.mask_inverted"), ("ignore", "attention.mask_ignored"),
    ("after", "attention.mask_after_softmax")])
def test_sdpa_mistakes_are_named(kind, diagnosis):
    V.fails_with(checks.check_scaled_dot_product_attention, V.sdpa_wrong(kind), diagnosis)


@pytest.mark.parametrize("kind", ["none", "mul", "by_d", "by_length", "dim"])
def test_sdpa_core_mistakes_get_no_partial_credit(kind):
    """Wrong without a mask already: the core fails, whatever the masked cases do."""
    V.fails_plainly(checks.check_scaled_dot_product_attention, V.sdpa_wrong(kind))


@pytest.mark.parametrize("kind, diagnosis", [
    ("inverted", "attention.mask_inverted"), ("ignore", "attention.mask_ignored"),
    ("after", "attention.mask_after_softmax")])
def test_sdpa_wrong_only_in_the_mask_keeps_most_points(kind, diagnosis):
    """mask is an argument with teeth: unmasked attention (its default, None) is the core; these answers get it
    right, so they keep 75 % of the points, the mask crossed and the mistake still named."""
    from autograder.checks.kit.criteria import PartialCredit
    from coursekit.mistakes import MISTAKES

    answer = V.sdpa_wrong(kind)
    V.fails_partially(checks.check_scaled_dot_product_attention, answer, "scaled_dot_product_attention.mask",
                      MISTAKES[diagnosis].text)
    with pytest.raises(PartialCredit) as info:
        checks.check_scaled_dot_product_attention(answer)
    assert info.value.mistake_id == diagnosis and info.value.fraction == 0.75


def test_sdpa_without_a_mask_argument_keeps_most_points():
    def sdpa(query, key, value):
        return solutions.scaled_dot_product_attention(query, key, value)

    V.fails_partially(checks.check_scaled_dot_product_attention, sdpa, "scaled_dot_product_attention.mask")


def test_sdpa_inverted_mask_with_minus_inf_reports_nan_and_the_mistake():
    V.fails_with(checks.check_scaled_dot_product_attention, V.sdpa_wrong("inverted", fill=float("-inf")),
                 "NaN", "attention.mask_inverted")


def test_sdpa_wrong_shape():
    V.fails_with(checks.check_scaled_dot_product_attention, V.sdpa_wrong("transposed_weights"),
                 "wrong shape", "expected shape (")


def test_sdpa_must_return_a_tuple():
    V.fails_with(checks.check_scaled_dot_product_attention, lambda q, k, v, mask=None: q, "tuple (output, weights)")


def test_sdpa_that_only_handles_four_axes_gets_a_hint():
    def four_d_only(query, key, value, mask=None):
        return solutions.scaled_dot_product_attention(query.transpose(2, 3).transpose(2, 3), key, value, mask)

    V.fails_with(checks.check_scaled_dot_product_attention, four_d_only, "without a head axis", "negative dims")
