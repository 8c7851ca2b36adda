"""Proofs for solutions/embeddings.py (notebook 01)."""
from __future__ import annotations

import math

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from solutions.embeddings import (
    TokenEmbedding,
    attention_over_words,
    build_vocab,
    embedding_matrix_from_word2vec,
    encode,
    pad_batch,
)
from solutions_compare import assert_matches

SPECIALS = ["<pad>", "<unk>", "<bos>", "<eos>"]


# --- build_vocab / encode / pad_batch ---------------------------------------------------------------------------

def test_build_vocab_specials_first_then_count_then_alphabet():
    texts = [["b", "a", "c", "b"], ["c", "a", "d"], ["b"]]
    vocab = build_vocab(texts)
    # counts: b=3, a=2, c=2, d=1 -> b, then a/c tie in alphabetical order, then d
    assert list(vocab) == SPECIALS + ["b", "a", "c", "d"]
    assert list(vocab.values()) == list(range(8))


def test_build_vocab_min_freq_drops_rare_tokens():
    vocab = build_vocab([["x", "y", "y", "z", "z", "z"]], min_freq=2)
    assert list(vocab) == SPECIALS + ["z", "y"]


def test_build_vocab_token_equal_to_special_keeps_special_id():
    vocab = build_vocab([["<eos>", "<eos>", "hi", "<pad>"]])
    assert vocab["<eos>"] == 3 and vocab["<pad>"] == 0
    assert vocab == {"<pad>": 0, "<unk>": 1, "<bos>": 2, "<eos>": 3, "hi": 4}


def test_build_vocab_accepts_a_generator_and_custom_specials():
    vocab = build_vocab((t for t in [["q", "p"]]), specials=("<pad>", "<unk>"))
    assert vocab == {"<pad>": 0, "<unk>": 1, "p": 2, "q": 3}


def test_build_vocab_rejects_plain_strings():
    with pytest.raises(TypeError, match="tokenize"):
        build_vocab(["not tokenized"])


def test_encode_maps_unknown_to_unk():
    vocab = build_vocab([["the", "cat"]])
    assert encode(["the", "dog", "cat"], vocab) == [vocab["the"], 1, vocab["cat"]]
    assert encode([], vocab) == []


def test_pad_batch_post_pads_to_longest():
    batch = pad_batch([[5, 6, 7], [8]], pad_id=0)
    assert batch.dtype == torch.long
    assert batch.tolist() == [[5, 6, 7], [8, 0, 0]]


def test_pad_batch_max_len_truncates_at_the_end_and_pads():
    batch = pad_batch([[5, 6, 7, 9], [8]], pad_id=1, max_len=3)
    assert batch.tolist() == [[5, 6, 7], [8, 1, 1]]
    assert pad_batch([[5], [6, 7]], max_len=4).shape == (2, 4)


def test_pad_batch_negative_max_len_raises():
    with pytest.raises(ValueError, match="max_len"):
        pad_batch([[1]], max_len=-1)


# --- TokenEmbedding -------------------------------------------------------------------------------------------

def test_token_embedding_equals_f_embedding(device):
    torch.manual_seed(0)
    emb = TokenEmbedding(11, 6, padding_idx=0).to(device)
    ids = torch.tensor([[1, 0, 10, 3, 3], [7, 2, 0, 0, 9]], device=device)  # (B=2, T=5)
    out = emb(ids)
    assert out.shape == (2, 5, 6)
    assert_matches(out, F.embedding(ids, emb.weight), device)
    assert torch.all(emb.weight[0] == 0)


def test_token_embedding_init_is_normal_with_std_inverse_sqrt_d_model():
    """N(0, d_model^-1/2): after the Encoder's * sqrt(d_model) token vectors have unit scale (fairseq's choice)."""
    torch.manual_seed(0)
    emb = TokenEmbedding(400, 50)
    w = emb.weight.detach()
    assert emb.weight.shape == (400, 50)
    assert abs(w.mean().item()) < 0.01 and abs(w.std().item() / 50 ** -0.5 - 1.0) < 0.05
    assert abs((w * math.sqrt(50)).std().item() - 1.0) < 0.05


# --- word2vec ---------------------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def keyed_vectors():
    """A real (tiny) gensim Word2Vec trained deterministically on a few sentences."""
    from gensim.models import Word2Vec

    sentences = [["the", "food", "was", "great"], ["the", "service", "was", "slow"],
                 ["great", "food", "slow", "service"], ["the", "staff", "was", "great"]] * 5
    model = Word2Vec(sentences, vector_size=8, window=2, min_count=1, workers=1, seed=3, epochs=3)
    return model.wv


def test_embedding_matrix_from_word2vec_rows(keyed_vectors):
    vocab = build_vocab([["food", "great", "unseenword"]])
    matrix = embedding_matrix_from_word2vec(vocab, keyed_vectors)
    assert matrix.shape == (len(vocab), 8) and matrix.dtype == torch.float32
    for word, index in vocab.items():
        if word in keyed_vectors.key_to_index:
            np.testing.assert_allclose(matrix[index].numpy(), keyed_vectors[word], rtol=0, atol=0)
        else:
            assert torch.all(matrix[index] == 0), word


def test_attention_over_words_equals_numpy(keyed_vectors):
    keys = ["food", "service", "slow", "the"]
    weights, value = attention_over_words("great", keys, keyed_vectors)
    q = keyed_vectors["great"].astype(np.float64)
    K = np.stack([keyed_vectors[w] for w in keys]).astype(np.float64)
    scores = K @ q / math.sqrt(8)
    expected = np.exp(scores) / np.exp(scores).sum()
    assert weights.shape == (4,) and value.shape == (8,)
    np.testing.assert_allclose(weights, expected, rtol=1e-6)
    np.testing.assert_allclose(value, expected @ K, rtol=1e-6, atol=1e-9)
    assert math.isclose(weights.sum(), 1.0, rel_tol=1e-9)


def test_attention_over_words_unknown_word_is_a_clear_error(keyed_vectors):
    with pytest.raises(KeyError, match="notaword"):
        attention_over_words("notaword", ["food"], keyed_vectors)
