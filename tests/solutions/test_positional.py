"""Proofs for solutions/positional.py (notebook 02)."""
from __future__ import annotations

import numpy as np
import pytest
import torch

from solutions.positional import LearnedPositionalEmbedding, PositionalEncoding, sinusoidal_positional_encoding
from solutions_compare import assert_matches


def numpy_sinusoidal(max_len: int, d_model: int) -> np.ndarray:
    """The formula evaluated entry by entry, independently of the reference's vectorised code."""
    pe = np.zeros((max_len, d_model))
    for p in range(max_len):
        for i in range(d_model // 2):
            angle = p / 10000 ** (2 * i / d_model)
            pe[p, 2 * i] = np.sin(angle)
            pe[p, 2 * i + 1] = np.cos(angle)
    return pe


def sin_cos_swapped(max_len: int, d_model: int) -> torch.Tensor:
    """A broken table (cosine on even features): the comparison below must reject it."""
    pe = sinusoidal_positional_encoding(max_len, d_model)
    return pe[:, [j + 1 if j % 2 == 0 else j - 1 for j in range(d_model)]]


@pytest.mark.parametrize("max_len,d_model", [(7, 12), (50, 6), (1, 2)])
def test_sinusoidal_matches_numpy(max_len, d_model):
    pe = sinusoidal_positional_encoding(max_len, d_model)
    assert pe.shape == (max_len, d_model) and pe.dtype == torch.float32
    assert_matches(pe, torch.from_numpy(numpy_sinusoidal(max_len, d_model)), "cpu", "positional table")


def test_teeth_swapped_sin_cos_is_rejected():
    with pytest.raises(AssertionError):
        assert_matches(sin_cos_swapped(7, 12), torch.from_numpy(numpy_sinusoidal(7, 12)), "cpu")


def test_each_frequency_pair_lies_on_the_unit_circle():
    pe = sinusoidal_positional_encoding(40, 16)
    radius = pe[:, 0::2] ** 2 + pe[:, 1::2] ** 2  # (40, 8)
    assert_matches(radius, torch.ones_like(radius), "cpu", "sin^2 + cos^2")


def test_odd_d_model_raises():
    with pytest.raises(ValueError, match="even"):
        sinusoidal_positional_encoding(10, 7)


def test_positional_encoding_adds_the_table(device):
    module = PositionalEncoding(12, max_len=9).to(device).eval()
    assert module.pe.shape == (9, 12)
    assert "pe" in dict(module.named_buffers())
    x = torch.randn(2, 5, 12, device=device)
    out = module(x)
    assert out.shape == (2, 5, 12)
    assert_matches(out, x + sinusoidal_positional_encoding(9, 12).to(device)[:5], device)


def test_positional_encoding_too_long_raises():
    with pytest.raises(ValueError, match="max_len"):
        PositionalEncoding(12, max_len=4)(torch.zeros(1, 5, 12))


def test_learned_positional_embedding(device):
    torch.manual_seed(0)
    module = LearnedPositionalEmbedding(9, 12).to(device)
    assert isinstance(module.embedding, torch.nn.Embedding) and module.embedding.weight.shape == (9, 12)
    x = torch.randn(2, 5, 12, device=device)
    out = module(x)
    assert out.shape == (2, 5, 12)
    assert_matches(out, x + module.embedding.weight[:5], device)


def test_learned_positional_embedding_too_long_raises():
    with pytest.raises(ValueError, match="max_len"):
        LearnedPositionalEmbedding(4, 12)(torch.zeros(1, 5, 12))
