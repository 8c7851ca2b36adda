"""The public checks of notebook 02 pass the reference and name the likely mistake of wrong answers."""

import pytest
import torch
from torch import nn

import solutions
from coursekit.checks.positional import checks as checks
from coursekit.checks.toolkit import CheckFailed, snake_case
from coursekit.criteria import CRITERIA
from coursekit.mistakes import text_of


def hint_of(check, candidate) -> str:
    with pytest.raises(CheckFailed) as failure:
        check(candidate)
    return str(failure.value)


@pytest.mark.parametrize("name", ["sinusoidal_positional_encoding", "PositionalEncoding",
                                  "LearnedPositionalEmbedding"])
def test_reference_passes(name, capsys):
    getattr(checks, f"check_{snake_case(name)}")(getattr(solutions, name))
    assert "passed" in capsys.readouterr().out


def _encoding(arrange="interleaved", swap=False, exponent="pair"):
    def sinusoidal_positional_encoding(max_len, d_model):
        if d_model % 2:
            raise ValueError("odd")
        p = torch.arange(max_len, dtype=torch.float32)[:, None]
        i = torch.arange(d_model // 2, dtype=torch.float32)
        power = 2 * i if exponent == "pair" else i
        angles = p / 10000 ** (power / d_model)
        first, second = (torch.cos(angles), torch.sin(angles)) if swap else (torch.sin(angles), torch.cos(angles))
        if arrange == "halves":
            return torch.cat([first, second], dim=1)
        return torch.stack([first, second], dim=-1).reshape(max_len, d_model)
    return sinusoidal_positional_encoding


def test_interleaved_helper_matches_reference():
    # the helper's correct variant is the reference, so the wrong variants below differ by the named mistake only
    assert torch.allclose(_encoding()(7, 8), solutions.sinusoidal_positional_encoding(7, 8), atol=1e-6)


def test_sin_cos_swapped():
    hint = hint_of(checks.check_sinusoidal_positional_encoding, _encoding(swap=True))
    assert text_of("positional.sin_cos_swapped") in hint


def test_halves_not_interleaved():
    hint = hint_of(checks.check_sinusoidal_positional_encoding, _encoding(arrange="halves"))
    assert text_of("positional.halves") in hint


def test_exponent_without_two():
    hint = hint_of(checks.check_sinusoidal_positional_encoding, _encoding(exponent="i"))
    assert text_of("positional.exponent_no_two") in hint and "2i/d_model" in hint


def test_odd_d_model_accepted():
    def sinusoidal_positional_encoding(max_len, d_model):
        if d_model % 2:
            return torch.zeros(max_len, d_model)
        return solutions.sinusoidal_positional_encoding(max_len, d_model)

    hint = hint_of(checks.check_sinusoidal_positional_encoding, sinusoidal_positional_encoding)
    assert "ValueError" in hint
    assert f"(an edge case the exercise states: {CRITERIA['sinusoidal_positional_encoding.odd_d_model'].text})" in hint


class NoLengthCheck(solutions.PositionalEncoding):
    """Correct, except that a sequence longer than max_len is not refused (it fails later, with a shape error)."""

    def forward(self, x):
        return self.dropout(x + self.pe[: x.size(1)])


def test_pe_too_long_is_the_stated_edge_case():
    hint = hint_of(checks.check_positional_encoding, NoLengthCheck)
    assert "T > max_len should raise ValueError" in hint
    assert f"(an edge case the exercise states: {CRITERIA['PositionalEncoding.too_long'].text})" in hint


class ParameterTable(nn.Module):
    def __init__(self, d_model, max_len=512, dropout=0.0):
        super().__init__()
        self.pe = nn.Parameter(solutions.sinusoidal_positional_encoding(max_len, d_model))
        self.dropout = nn.Dropout(dropout)

    def forward(self, x):
        return self.dropout(x + self.pe[: x.size(1)])


class ForgetsX(solutions.PositionalEncoding):
    def forward(self, x):
        return self.pe[: x.size(1)].expand_as(x)


class SlicesByBatch(solutions.PositionalEncoding):
    def forward(self, x):
        return x + self.pe[: x.size(0)][:, None, :]


def test_pe_as_parameter():
    assert "register_buffer" in hint_of(checks.check_positional_encoding, ParameterTable)


def test_pe_forgets_x():
    assert text_of("positional.x_not_added") in hint_of(checks.check_positional_encoding, ForgetsX)


def test_pe_sliced_by_batch():
    assert "sequence length" in hint_of(checks.check_positional_encoding, SlicesByBatch)


class LearnedForgetsX(solutions.LearnedPositionalEmbedding):
    def forward(self, x):
        return self.embedding(torch.arange(x.size(1))).expand_as(x)


class LearnedWrongName(nn.Module):
    def __init__(self, max_len, d_model):
        super().__init__()
        self.table = nn.Embedding(max_len, d_model)

    def forward(self, x):
        return x + self.table(torch.arange(x.size(1)))


class LearnedIndexesWithX(solutions.LearnedPositionalEmbedding):
    def forward(self, x):
        return x + self.embedding(x)


def test_learned_forgets_x():
    assert "add them to x" in hint_of(checks.check_learned_positional_embedding, LearnedForgetsX)


def test_learned_wrong_name():
    assert "self.embedding" in hint_of(checks.check_learned_positional_embedding, LearnedWrongName)


def test_learned_indexes_with_x():
    assert "torch.arange(T)" in hint_of(checks.check_learned_positional_embedding, LearnedIndexesWithX)
