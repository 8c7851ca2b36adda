"""Starting a classifier's token embedding from word2vec vectors trained on review text (labelled or not).

With little labelled data, most of what a model knows about a word comes from the few labelled reviews it occurs
in. word2vec needs no labels: trained on every review text at hand, it places words used alike ("tasty",
"delicious") close together, and a classifier started from those vectors has less to learn. The vectors are
rescaled to the standard deviation of the course's `TokenEmbedding` (d_model ** -0.5), so the start differs from
the random one only in direction, not in scale. gensim is imported only when vectors are trained.
"""
from __future__ import annotations

from typing import Iterable

import torch

__all__ = ["train_word2vec", "rescale_known_rows", "init_embedding", "embedding_weight"]


def train_word2vec(token_lists: Iterable[list[str]], dim: int, seed: int = 0, min_count: int = 2, window: int = 5,
                   epochs: int = 5):
    """gensim KeyedVectors trained on the tokenised texts (one worker and a fixed seed: the same on every run)."""
    from gensim.models import Word2Vec

    sentences = [list(tokens) for tokens in token_lists]
    if not any(sentences):
        raise ValueError("word2vec needs at least one non-empty tokenised text")
    model = Word2Vec(sentences, vector_size=dim, window=window, min_count=min_count, workers=1, seed=seed,
                     epochs=epochs)
    return model.wv


def rescale_known_rows(matrix: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """(matrix (V, dim) float32, known (V,) bool) from the (V, dim) matrix that notebook 01's
    `embedding_matrix_from_word2vec(vocab, keyed_vectors)` returns (zero rows for words word2vec lacks): the
    non-zero rows, rescaled together to standard deviation dim ** -0.5, and which rows they are."""
    if matrix.dim() != 2:
        raise ValueError(f"expected a (V, dim) matrix, got shape {tuple(matrix.shape)}")
    matrix = matrix.detach().to(torch.float32).clone()                                  # (V, dim)
    known = matrix.abs().sum(dim=1) > 0                                                 # (V,)
    if known.any():
        matrix[known] = matrix[known] / matrix[known].std() * matrix.shape[1] ** -0.5
    return matrix, known


def embedding_weight(model: torch.nn.Module) -> torch.nn.Parameter:
    """The token embedding table of a course classifier: `model.encoder.embedding.weight`, (V, d_model)."""
    try:
        return model.encoder.embedding.weight
    except AttributeError:
        raise AttributeError("the model has no encoder.embedding.weight (the course's TransformerClassifier "
                             "keeps its Encoder in self.encoder)") from None


def init_embedding(model: torch.nn.Module, matrix: torch.Tensor, known: torch.Tensor) -> int:
    """Copy the known rows of `matrix` into the model's token embedding (the others keep their random start).

    Returns how many rows were copied.
    """
    weight = embedding_weight(model)
    if tuple(matrix.shape) != tuple(weight.shape) or tuple(known.shape) != (weight.shape[0],):
        raise ValueError(f"matrix {tuple(matrix.shape)} / known {tuple(known.shape)} do not fit the embedding "
                         f"{tuple(weight.shape)}: train word2vec with vector_size = d_model on this vocabulary")
    with torch.no_grad():
        weight[known.to(weight.device)] = matrix[known].to(weight.device, weight.dtype)
    return int(known.sum())
