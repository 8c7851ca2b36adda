"""The public checks of notebook 03 pass the reference and name the likely mistake of wrong answers."""
import math

import pytest
import torch

import solutions
from coursekit.checks.attention import checks as checks
from coursekit.checks.toolkit import CheckFailed, snake_case
from coursekit.mistakes import MISTAKES


def hint_of(check, candidate) -> str:
    with pytest.raises(CheckFailed) as failure:
        check(candidate)
    return str(failure.value)


@pytest.mark.parametrize("name", ["make_padding_mask", "make_causal_mask", "scaled_dot_product_attention"])
def test_reference_passes(name, capsys):
    getattr(checks, f"check_{snake_case(name)}")(getattr(solutions, name))
    assert "passed" in capsys.readouterr().out


def test_padding_mask_inverted():
    message = hint_of(checks.check_make_padding_mask, lambda ids, pad_id=0: (ids == pad_id)[:, None, None, :])
    assert "inverted" in message and MISTAKES["attention.mask_inverted"].text in message  # True = may attend


def test_padding_mask_flat_shape():
    assert "[:, None, None, :]" in hint_of(checks.check_make_padding_mask, lambda ids, pad_id=0: ids != pad_id)


def test_padding_mask_int_dtype():
    message = hint_of(checks.check_make_padding_mask, lambda ids, pad_id=0: (ids != pad_id).long()[:, None, None])
    assert "bool" in message


def test_causal_upper_triangle():
    message = hint_of(checks.check_make_causal_mask,
                      lambda size, device=None: torch.ones(size, size, dtype=torch.bool, device=device).triu())
    assert "LOWER triangle" in message and MISTAKES["causal_mask.upper_triangle"].text in message


def test_causal_inverted():
    message = hint_of(checks.check_make_causal_mask,
                      lambda size, device=None: torch.ones(size, size, dtype=torch.bool, device=device).triu(1))
    assert "inverted" in message


def test_causal_without_diagonal():
    message = hint_of(checks.check_make_causal_mask,
                      lambda size, device=None: torch.ones(size, size, dtype=torch.bool, device=device).tril(-1))
    assert MISTAKES["causal_mask.diagonal_blocked"].text in message


def _attention(scale="sqrt", dim=-1, fill="min", use_mask=True, swap=False, transpose="last"):
    def scaled_dot_product_attention(query, key, value, mask=None):
        d_k = query.size(-1)
        k_t = key.transpose(-2, -1) if transpose == "last" else key.mT.transpose(0, -1).mT
        scores = query @ k_t
        scores = scores / {"sqrt": math.sqrt(d_k), "d": d_k, "none": 1.0}[scale]
        if mask is not None and use_mask:
            value_for_blocked = {"min": torch.finfo(scores.dtype).min, "zero": 0.0, "-inf": float("-inf")}[fill]
            scores = scores.masked_fill(~mask, value_for_blocked)
        weights = scores.softmax(dim=dim)
        output = weights @ value
        return (weights, output) if swap else (output, weights)
    return scaled_dot_product_attention


def test_helper_is_correct_with_defaults(capsys):
    checks.check_scaled_dot_product_attention(_attention())
    assert "passed" in capsys.readouterr().out


@pytest.mark.parametrize("variant, expected_hint", [
    (dict(scale="none"), MISTAKES["attention.missing_scale"].text),
    (dict(scale="d"), MISTAKES["attention.scale_by_d"].text),
    (dict(dim=-2), MISTAKES["attention.softmax_dim"].text),
    (dict(use_mask=False), MISTAKES["attention.mask_ignored"].text),
    (dict(fill="zero"), "very negative number"),
    (dict(fill="-inf"), "instead of -inf"),
    (dict(swap=True), "swapped"),
])
def test_attention_mistakes(variant, expected_hint):
    assert expected_hint in hint_of(checks.check_scaled_dot_product_attention, _attention(**variant))


def test_attention_softmax_over_size_one_axis():
    def scaled_dot_product_attention(query, key, value, mask=None):
        scores = (query @ key.transpose(-2, -1) / math.sqrt(query.size(-1)))[..., None]   # trailing axis of 1
        weights = scores.softmax(dim=-1)[..., 0]
        return weights @ value, weights

    assert "forget the softmax dim" in hint_of(checks.check_scaled_dot_product_attention,
                                               scaled_dot_product_attention)


def test_attention_inverted_mask():
    def scaled_dot_product_attention(query, key, value, mask=None):
        return solutions.scaled_dot_product_attention(query, key, value, None if mask is None else ~mask)

    assert MISTAKES["attention.mask_inverted"].text in hint_of(checks.check_scaled_dot_product_attention,
                                                                scaled_dot_product_attention)
