"""01 - Tokens and embeddings: a vocabulary, token ids, an embedding table, and word2vec vectors.

Shapes: B = batch size, T = sequence length, V = vocabulary size, d_model = embedding width.
"""
from __future__ import annotations

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
        # (V, d_model), N(0, 1/d_model), i.e. std d_model ** -0.5: the Encoder multiplies by sqrt(d_model), which
        # brings token vectors to unit scale, the scale of the positional encoding (as fairseq initialises its
        # embeddings)
        self.weight = nn.Parameter(torch.randn(vocab_size, d_model) * d_model ** -0.5)
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
