"""02 - Positional encoding: tell the model where each token sits in the sequence.

Shapes: B = batch size, T = sequence length, d_model = embedding width.
"""
from __future__ import annotations

import torch
from torch import nn


def sinusoidal_positional_encoding(max_len: int, d_model: int) -> torch.FloatTensor:
    """PE[p, 2i] = sin(p / 10000**(2i/d_model)), PE[p, 2i+1] = cos(same angle); shape (max_len, d_model)."""
    if d_model % 2 != 0:
        raise ValueError(f"d_model must be even for sine/cosine pairs, got {d_model}")
    if max_len < 0:
        raise ValueError(f"max_len must be >= 0, got {max_len}")
    position = torch.arange(max_len, dtype=torch.float64).unsqueeze(1)        # (max_len, 1)
    two_i = torch.arange(0, d_model, 2, dtype=torch.float64)                  # (d_model/2,)
    angle = position / (10000.0 ** (two_i / d_model))                         # (max_len, d_model/2)
    pe = torch.zeros(max_len, d_model, dtype=torch.float64)
    pe[:, 0::2] = torch.sin(angle)
    pe[:, 1::2] = torch.cos(angle)
    return pe.float()


class PositionalEncoding(nn.Module):
    """Adds the fixed sinusoidal table to the embeddings, then dropout."""

    def __init__(self, d_model: int, max_len: int = 512, dropout: float = 0.0):
        super().__init__()
        self.dropout = nn.Dropout(dropout)
        self.register_buffer("pe", sinusoidal_positional_encoding(max_len, d_model))  # (max_len, d_model)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        # x: (B, T, d_model)
        T = x.size(1)
        if T > self.pe.size(0):
            raise ValueError(f"sequence length {T} is longer than max_len {self.pe.size(0)}")
        return self.dropout(x + self.pe[:T].to(x.dtype))


class LearnedPositionalEmbedding(nn.Module):
    """Adds a trained vector per position (as BERT and GPT do)."""

    def __init__(self, max_len: int, d_model: int):
        super().__init__()
        self.embedding = nn.Embedding(max_len, d_model)  # (max_len, d_model)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        # x: (B, T, d_model)
        T = x.size(1)
        if T > self.embedding.num_embeddings:
            raise ValueError(f"sequence length {T} is longer than max_len {self.embedding.num_embeddings}")
        positions = torch.arange(T, device=x.device)  # (T,)
        return x + self.embedding(positions)           # (T, d_model) broadcasts over B
