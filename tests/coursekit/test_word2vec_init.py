"""coursekit.word2vec_init: real gensim vectors copied into a course classifier's token embedding."""
from __future__ import annotations

import pytest
import torch

from coursekit import load_yelp, tokenize
import solutions
from coursekit.word2vec_init import init_embedding, rescale_known_rows, train_word2vec


def embedding_from_word2vec(vocab, vectors):
    """The path of the real-data comparison: notebook 01's matrix (here the reference's), rows rescaled."""
    return rescale_known_rows(solutions.embedding_matrix_from_word2vec(vocab, vectors))


@pytest.fixture(scope="module")
def tokens():
    texts, _ = load_yelp("synthetic", "train", limit=600)
    return [tokenize(text) for text in texts]


def test_vectors_are_reproducible_and_scaled(tokens):
    vectors = train_word2vec(tokens, dim=16, seed=0, epochs=2)
    again = train_word2vec(tokens, dim=16, seed=0, epochs=2)
    assert (vectors["good"] == again["good"]).all()
    vocab = {"<pad>": 0, "<unk>": 1, "good": 2, "awful": 3, "zzz-never-seen": 4}
    matrix, known = embedding_from_word2vec(vocab, vectors)
    assert known.tolist() == [False, False, True, True, False]
    assert matrix[known].std().item() == pytest.approx(16 ** -0.5, rel=1e-5)
    assert (matrix[~known] == 0).all()
    # the direction is word2vec's: the cosine of two copied rows equals the vectors' own cosine
    cosine = torch.nn.functional.cosine_similarity(matrix[2], matrix[3], dim=0).item()
    assert cosine == pytest.approx(float(vectors.similarity("good", "awful")), abs=1e-5)


def test_init_embedding_copies_only_known_rows():
    from coursekit.word2vec_init import embedding_weight

    model = solutions.TransformerClassifier(5, d_model=16, num_heads=2, d_ff=32, num_layers=1, max_len=8)
    before = embedding_weight(model).detach().clone()
    matrix = torch.randn(5, 16)
    known = torch.tensor([False, False, True, True, False])
    assert init_embedding(model, matrix, known) == 2
    after = embedding_weight(model).detach()
    assert torch.equal(after[known], matrix[known]) and torch.equal(after[~known], before[~known])
    with pytest.raises(ValueError, match="vector_size = d_model"):
        init_embedding(model, torch.zeros(5, 8), known)
    with pytest.raises(AttributeError, match="encoder.embedding.weight"):
        embedding_weight(torch.nn.Linear(2, 2))


def test_bad_input_is_a_clear_error():
    with pytest.raises(ValueError, match="non-empty"):
        train_word2vec([[], []], dim=8)
    with pytest.raises(ValueError, match="0..len"):
        embedding_from_word2vec({"<pad>": 0, "a": 2}, None)
