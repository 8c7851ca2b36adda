"""Provided components for 05_encoder: GENERATED from the reference, do not edit.

Written by autograder.provided.write_provided_module; sources: solutions/embeddings.py, solutions/positional.py, solutions/attention.py, solutions/multi_head.py.
These are the pieces you built in the earlier notebooks; import what you need, e.g.
    from provided import MultiHeadAttention
"""
from __future__ import annotations

# ====================================================================================================
# source: solutions/embeddings.py: 01 - Tokens and embeddings: a vocabulary, token ids, an embedding table, and word2vec vectors.
# ====================================================================================================
import math
from collections import Counter
from typing import Iterable

import numpy as np
import torch
from torch import nn

SPECIALS = ("<pad>", "<unk>", "<bos>", "<eos>")


def build_vocab(tokenized_texts: Iterable[list[str]], min_freq: int = 1, specials=SPECIALS) -> dict[str, int]:
    """Map each token to an id: specials first, then by descending count, ties in alphabetical order."""
    counts = Counter()
    for tokens in tokenized_texts:
        if isinstance(tokens, str):
            raise TypeError("build_vocab expects lists of tokens, got a plain string; tokenize it first")
        counts.update(tokens)
    vocab = {}
    for token in specials:
        if token not in vocab:
            vocab[token] = len(vocab)
    # Sort key: most frequent first (-count), then alphabetical (token).
    for token, count in sorted(counts.items(), key=lambda item: (-item[1], item[0])):
        if count >= min_freq and token not in vocab:
            vocab[token] = len(vocab)
    return vocab


def encode(tokens: list[str], vocab: dict[str, int]) -> list[int]:
    """Token strings -> ids; a token missing from `vocab` becomes the id of "<unk>"."""
    if "<unk>" not in vocab:
        raise KeyError('the vocabulary has no "<unk>" token, so unknown words cannot be encoded')
    unk_id = vocab["<unk>"]
    return [vocab.get(token, unk_id) for token in tokens]


def pad_batch(sequences: list[list[int]], pad_id: int = 0, max_len: int | None = None) -> torch.LongTensor:
    """Lists of ids -> one (B, T) tensor, padded (and cut, when `max_len` is given) at the end."""
    if max_len is not None and max_len < 0:
        raise ValueError(f"max_len must be >= 0, got {max_len}")
    longest = max((len(seq) for seq in sequences), default=0)
    T = longest if max_len is None else max_len
    batch = torch.full((len(sequences), T), pad_id, dtype=torch.long)  # (B, T)
    for row, seq in enumerate(sequences):
        kept = list(seq)[:T]
        if kept:
            batch[row, : len(kept)] = torch.tensor(kept, dtype=torch.long)
    return batch


class TokenEmbedding(nn.Module):
    """A lookup table: row `i` of `weight` is the vector of token id `i` (no scaling here)."""

    def __init__(self, vocab_size: int, d_model: int, padding_idx: int | None = None):
        super().__init__()
        if padding_idx is not None and not 0 <= padding_idx < vocab_size:
            raise ValueError(f"padding_idx {padding_idx} is outside the vocabulary (size {vocab_size})")
        self.padding_idx = padding_idx
        self.weight = nn.Parameter(torch.randn(vocab_size, d_model))  # (V, d_model), N(0, 1)
        if padding_idx is not None:
            with torch.no_grad():
                self.weight[padding_idx].zero_()

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        # ids: (B, T) int64 -> (B, T, d_model)
        return self.weight[ids]


def embedding_matrix_from_word2vec(vocab: dict[str, int], keyed_vectors) -> torch.FloatTensor:
    """A (len(vocab), vector_size) matrix: the word2vec vector for known words, zeros for the rest."""
    if len(set(vocab.values())) != len(vocab) or sorted(vocab.values()) != list(range(len(vocab))):
        raise ValueError("vocab ids must be exactly 0..len(vocab)-1, each used once")
    matrix = torch.zeros(len(vocab), keyed_vectors.vector_size)  # (V, vector_size)
    for word, index in vocab.items():
        if word in keyed_vectors.key_to_index:
            matrix[index] = torch.tensor(np.array(keyed_vectors[word]), dtype=torch.float32)
    return matrix


def attention_over_words(query: str, keys: list[str], keyed_vectors) -> tuple[np.ndarray, np.ndarray]:
    """Scaled dot-product attention of one word over a list of words (the keys are also the values)."""
    missing = [word for word in [query, *keys] if word not in keyed_vectors.key_to_index]
    if missing:
        raise KeyError(f"not in the word2vec vocabulary: {missing}")
    if not keys:
        raise ValueError("keys must contain at least one word")
    q = np.asarray(keyed_vectors[query], dtype=np.float64)                     # (d,)
    K = np.stack([np.asarray(keyed_vectors[w], dtype=np.float64) for w in keys])  # (n, d)
    scores = K @ q / math.sqrt(keyed_vectors.vector_size)                     # (n,)
    scores = scores - scores.max()  # same softmax, no overflow
    weights = np.exp(scores) / np.exp(scores).sum()                           # (n,)
    value = weights @ K                                                       # (d,)
    return weights, value


# ====================================================================================================
# source: solutions/positional.py: 02 - Positional encoding: tell the model where each token sits in the sequence.
# ====================================================================================================
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


# ====================================================================================================
# source: solutions/attention.py: 03 - Scaled dot-product attention and the two masks (True = may attend).
# ====================================================================================================
import math

import torch


def make_padding_mask(ids: torch.Tensor, pad_id: int = 0) -> torch.Tensor:
    """(B, T) ids -> (B, 1, 1, T) bool, True at real tokens; broadcasts over heads and query positions."""
    if ids.dim() != 2:
        raise ValueError(f"ids must have shape (B, T), got {tuple(ids.shape)}")
    return (ids != pad_id)[:, None, None, :]


def make_causal_mask(size: int, device=None) -> torch.Tensor:
    """(size, size) bool, lower triangle True: position i may look at positions j <= i."""
    return torch.tril(torch.ones(size, size, dtype=torch.bool, device=device))


def scaled_dot_product_attention(query, key, value, mask=None):
    """softmax(q k^T / sqrt(d_k)) v, with blocked scores set to the dtype's most negative value."""
    d_k = query.size(-1)
    scores = query @ key.transpose(-2, -1) / math.sqrt(d_k)   # (..., T_q, T_k)
    if mask is not None:
        scores = scores.masked_fill(~mask.to(torch.bool), torch.finfo(scores.dtype).min)
    weights = torch.softmax(scores, dim=-1)                   # (..., T_q, T_k), rows sum to 1
    output = weights @ value                                  # (..., T_q, d_v)
    return output, weights


# ====================================================================================================
# source: solutions/multi_head.py: 04 - Multi-head attention: H attentions side by side on slices of the features.
# ====================================================================================================
import torch
from torch import nn



def split_heads(x: torch.Tensor, num_heads: int) -> torch.Tensor:
    """(B, T, d_model) -> (B, H, T, d_head); head h gets features h*d_head .. (h+1)*d_head - 1."""
    if x.dim() != 3:
        raise ValueError(f"split_heads expects (B, T, d_model), got shape {tuple(x.shape)}")
    B, T, d_model = x.shape
    if d_model % num_heads != 0:
        raise ValueError(f"d_model {d_model} is not divisible by num_heads {num_heads}")
    return x.reshape(B, T, num_heads, d_model // num_heads).transpose(1, 2)


def merge_heads(x: torch.Tensor) -> torch.Tensor:
    """(B, H, T, d_head) -> (B, T, H * d_head), the inverse of split_heads."""
    if x.dim() != 4:
        raise ValueError(f"merge_heads expects (B, H, T, d_head), got shape {tuple(x.shape)}")
    B, H, T, d_head = x.shape
    return x.transpose(1, 2).reshape(B, T, H * d_head)


class MultiHeadAttention(nn.Module):
    """Project q, k, v; attend in H heads; concatenate the heads; project back."""

    def __init__(self, d_model: int, num_heads: int, dropout: float = 0.0, bias: bool = True):
        super().__init__()
        if d_model % num_heads != 0:
            raise ValueError(f"d_model {d_model} is not divisible by num_heads {num_heads}")
        self.d_model = d_model
        self.num_heads = num_heads
        self.w_q = nn.Linear(d_model, d_model, bias=bias)
        self.w_k = nn.Linear(d_model, d_model, bias=bias)
        self.w_v = nn.Linear(d_model, d_model, bias=bias)
        self.w_o = nn.Linear(d_model, d_model, bias=bias)
        self.dropout = nn.Dropout(dropout)

    def forward(self, query, key, value, mask=None):
        # query: (B, T_q, d_model); key, value: (B, T_k, d_model); mask broadcasts to (B, H, T_q, T_k)
        q = split_heads(self.w_q(query), self.num_heads)  # (B, H, T_q, d_head)
        k = split_heads(self.w_k(key), self.num_heads)    # (B, H, T_k, d_head)
        v = split_heads(self.w_v(value), self.num_heads)  # (B, H, T_k, d_head)
        heads, weights = scaled_dot_product_attention(q, k, v, mask)  # (B, H, T_q, d_head), (B, H, T_q, T_k)
        if self.training and self.dropout.p > 0:
            heads = self.dropout(weights) @ v             # dropout on the attention weights, then mix values
        output = self.w_o(merge_heads(heads))             # (B, T_q, d_model)
        return output, weights
