"""Hidden checks of notebook 02: the reference and differently written answers pass; each mistake is named."""
from __future__ import annotations

import pytest
from torch import nn

import solutions
import variants as V
from autograder.checks.positional import checks as checks
from autograder.checks.kit.criteria import PartialCredit
from coursekit.criteria import CRITERIA


@pytest.mark.parametrize("fn", [solutions.sinusoidal_positional_encoding, V.pe_numpy, V.pe_exp_log])
def test_sinusoidal_correct_answers_pass(fn):
    checks.check_sinusoidal_positional_encoding(fn)


@pytest.mark.parametrize("kind, diagnosis", [
    ("swap", "positional.sin_cos_swapped"), ("column", "positional.exponent_per_column"),
    ("no_two", "positional.exponent_no_two"), ("halves", "positional.halves"),
    ("base_1000", "positional.frequency_base")])
def test_sinusoidal_mistakes_are_named(kind, diagnosis):
    V.fails_with(checks.check_sinusoidal_positional_encoding, V.pe_wrong(kind), "the table", diagnosis)


def test_sinusoidal_odd_d_model_must_raise():
    V.fails_with(checks.check_sinusoidal_positional_encoding, V.pe_wrong("no_error"), "ValueError", "odd d_model")


def test_sinusoidal_wrong_shape_and_dtype():
    V.fails_with(checks.check_sinusoidal_positional_encoding, lambda n, d: solutions.sinusoidal_positional_encoding(
        n, d).T, "wrong shape", "expected shape (")
    V.fails_with(checks.check_sinusoidal_positional_encoding, lambda n, d: solutions.sinusoidal_positional_encoding(
        n, d).double(), "float32")


def test_sinusoidal_nan_is_reported():
    def with_nan(max_len, d_model):
        pe = solutions.sinusoidal_positional_encoding(max_len, d_model)
        pe[0, 0] = float("nan")
        return pe

    V.fails_with(checks.check_sinusoidal_positional_encoding, with_nan, "NaN or inf")


@pytest.mark.parametrize("cls", [solutions.PositionalEncoding, V.PositionalEncodingNumpy, V.PositionalEncodingWrong,
                                 V.PositionalEncodingFunctionalDropout])
def test_positional_encoding_correct_answers_pass(cls):
    checks.check_positional_encoding(cls)


def test_positional_encoding_mistakes():
    V.fails_with(checks.check_positional_encoding, V.mistake(V.PositionalEncodingWrong, "batch_axis"),
                 "positional.from_batch_axis")
    V.fails_with(checks.check_positional_encoding, V.mistake(V.PositionalEncodingWrong, "not_buffer"),
                 "must be a buffer")
    V.fails_with(checks.check_positional_encoding, V.mistake(V.PositionalEncodingWrong, "no_error"),
                 "ValueError", "longer than max_len")


@pytest.mark.parametrize("kind, fragments", [
    ("ignored", ("training mode", "positional.dropout_ignored")),
    ("always", ("eval mode", "training=self.training", "positional.dropout_in_eval")),
    ("before", ("training mode", "other values differ", "positional.dropout_before_add"))])
def test_positional_encoding_dropout_matters(kind, fragments):
    V.fails_with(checks.check_positional_encoding, V.mistake(V.PositionalEncodingDropoutWrong, kind), *fragments)


@pytest.mark.parametrize("kind, mistake_id", [
    ("ignored", "positional.dropout_ignored"), ("always", "positional.dropout_in_eval"),
    ("before", "positional.dropout_before_add")])
def test_positional_encoding_wrong_only_in_dropout_keeps_most_points(kind, mistake_id):
    """dropout is an argument with teeth: with its default (0.0) these answers are right, so they keep 75 %."""
    from coursekit.mistakes import MISTAKES

    answer = V.mistake(V.PositionalEncodingDropoutWrong, kind)
    V.fails_partially(checks.check_positional_encoding, answer, "PositionalEncoding.dropout", MISTAKES[mistake_id].text)
    with pytest.raises(PartialCredit) as info:
        checks.check_positional_encoding(answer)
    assert info.value.mistake_id == mistake_id and info.value.fraction == 0.75


def test_positional_encoding_without_a_dropout_argument_keeps_most_points():
    class NoDropoutArgument(nn.Module):
        def __init__(self, d_model, max_len=512):
            super().__init__()
            self.register_buffer("pe", solutions.sinusoidal_positional_encoding(max_len, d_model))

        def forward(self, x):
            if x.size(1) > self.pe.size(0):
                raise ValueError("too long")
            return x + self.pe[: x.size(1)]

    V.fails_partially(checks.check_positional_encoding, NoDropoutArgument, "PositionalEncoding.dropout")


def test_positional_encoding_dropout_and_too_long_both_missing():
    """Both criteria of the exercise failed: 1 - 0.25 (its one argument) - 0.2 (its one edge case)."""
    class Both(nn.Module):
        def __init__(self, d_model, max_len=512, dropout=0.0):
            super().__init__()
            self.register_buffer("pe", solutions.sinusoidal_positional_encoding(max_len, d_model))

        def forward(self, x):
            return x + self.pe[: x.size(1)] if x.size(1) <= self.pe.size(0) else x

    with pytest.raises(PartialCredit) as info:
        checks.check_positional_encoding(Both)
    assert abs(info.value.fraction - 0.55) < 1e-9, str(info.value)
    assert f"✗ {CRITERIA['PositionalEncoding.dropout'].text}" in str(info.value)
    assert f"✗ {CRITERIA['PositionalEncoding.too_long'].text}" in str(info.value)


@pytest.mark.parametrize("cls", [solutions.LearnedPositionalEmbedding, V.LearnedPositionalEmbeddingWeight,
                                 V.LearnedPositionalEmbeddingWrong])
def test_learned_correct_answers_pass(cls):
    checks.check_learned_positional_embedding(cls)


def test_learned_mistakes():
    V.fails_with(checks.check_learned_positional_embedding, V.mistake(V.LearnedPositionalEmbeddingWrong, "batch_axis"),
                 "positional.from_batch_axis")
    V.fails_with(checks.check_learned_positional_embedding, V.mistake(V.LearnedPositionalEmbeddingWrong, "no_x"),
                 "positional.x_not_added")


# ----------------------------------------------------------------------------- partial credit by criterion (door 4)
def _partial(check, answer, criterion):
    """`check(answer)` passes its core and fails only `criterion`: PartialCredit keeping >= 80 %, the case crossed."""
    with pytest.raises(PartialCredit) as info:
        check(answer)
    assert info.value.fraction >= 0.8, str(info.value)
    assert f"✗ {CRITERIA[criterion].text}" in str(info.value), str(info.value)
    assert "✓ the main behaviour" in str(info.value)


def _plain_failure(check, answer):
    with pytest.raises(AssertionError) as info:
        check(answer)
    assert not isinstance(info.value, PartialCredit), str(info.value)


def test_sinusoidal_only_missing_odd_d_model_error_gets_partial_credit():
    _partial(checks.check_sinusoidal_positional_encoding, V.pe_wrong("no_error"),
             "sinusoidal_positional_encoding.odd_d_model")


def test_positional_encoding_only_missing_too_long_error_gets_partial_credit():
    _partial(checks.check_positional_encoding, V.mistake(V.PositionalEncodingWrong, "no_error"),
             "PositionalEncoding.too_long")


def test_stubs_get_no_partial_credit():
    def not_implemented(max_len, d_model):
        raise NotImplementedError()

    def always_value_error(max_len, d_model):
        raise ValueError("d_model must be even")

    class StubEncoding(nn.Module):
        def __init__(self, d_model, max_len=512, dropout=0.0):
            super().__init__()
            self.max_len = max_len

        def forward(self, x):
            if x.size(1) > self.max_len:
                raise ValueError("too long")
            raise NotImplementedError()

    _plain_failure(checks.check_sinusoidal_positional_encoding, not_implemented)
    _plain_failure(checks.check_sinusoidal_positional_encoding, always_value_error)
    _plain_failure(checks.check_positional_encoding, StubEncoding)
