"""The public checks of notebook 01 pass the reference and name the likely mistake of wrong answers."""
import math
from collections import Counter

import numpy as np
import pytest
import torch
from torch import nn

import solutions
from coursekit.checks.embeddings import checks as checks
from coursekit.checks.toolkit import CheckFailed, snake_case
from coursekit.mistakes import text_of

SPECIALS = ("<pad>", "<unk>", "<bos>", "<eos>")


def hint_of(check, candidate) -> str:
    with pytest.raises(CheckFailed) as failure:
        check(candidate)
    assert isinstance(failure.value, AssertionError)
    return str(failure.value)


@pytest.mark.parametrize("name", ["build_vocab", "encode", "pad_batch", "TokenEmbedding",
                                  "embedding_matrix_from_word2vec", "attention_over_words"])
def test_reference_passes(name, capsys):
    getattr(checks, f"check_{snake_case(name)}")(getattr(solutions, name))
    assert "passed" in capsys.readouterr().out


def test_not_implemented_is_reported():
    def build_vocab(tokenized_texts, min_freq=1, specials=SPECIALS):
        raise NotImplementedError()

    assert "not implemented yet" in hint_of(checks.check_build_vocab, build_vocab)


def _vocab_with_order(order_key):
    def build_vocab(tokenized_texts, min_freq=1, specials=SPECIALS):
        counts = Counter(t for tokens in tokenized_texts for t in tokens)
        vocab = {s: i for i, s in enumerate(specials)}
        for token in sorted((t for t, c in counts.items() if c >= min_freq), key=lambda t: order_key(t, counts)):
            vocab.setdefault(token, len(vocab))
        return vocab
    return build_vocab


def test_build_vocab_alphabetical_only():
    message = hint_of(checks.check_build_vocab, _vocab_with_order(lambda t, c: t))
    assert "descending count first" in message


def test_build_vocab_ties_not_alphabetical():
    # by count, ties in reverse alphabetical order
    message = hint_of(checks.check_build_vocab, _vocab_with_order(lambda t, c: (-c[t], [-ord(ch) for ch in t])))
    assert text_of("vocab.ties") in message


def test_build_vocab_ascending_count():
    message = hint_of(checks.check_build_vocab, _vocab_with_order(lambda t, c: (c[t], t)))
    assert text_of("vocab.ascending") in message


def test_build_vocab_specials_last():
    def build_vocab(tokenized_texts, min_freq=1, specials=SPECIALS):
        counts = Counter(t for tokens in tokenized_texts for t in tokens)
        words = sorted((t for t, c in counts.items() if c >= min_freq), key=lambda t: (-counts[t], t))
        return {t: i for i, t in enumerate([*words, *specials])}

    assert text_of("vocab.specials_last") in hint_of(checks.check_build_vocab, build_vocab)


def test_build_vocab_min_freq_strict():
    message = hint_of(checks.check_build_vocab, _strict_min_freq)
    assert ">= min_freq" in message and text_of("vocab.min_freq_strict") in message


def _strict_min_freq(tokenized_texts, min_freq=1, specials=SPECIALS):
    """Keeps a token only when its count is strictly above min_freq (except min_freq=1)."""
    counts = Counter(t for tokens in tokenized_texts for t in tokens)
    vocab = {s: i for i, s in enumerate(specials)}
    for token, count in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0])):
        if count > min_freq or (min_freq == 1 and count >= 1):
            vocab.setdefault(token, len(vocab))
    return vocab


def test_encode_unknown_to_pad():
    message = hint_of(checks.check_encode, lambda tokens, vocab: [vocab.get(t, 0) for t in tokens])
    assert "not the padding id 0" in message


def test_encode_key_error():
    message = hint_of(checks.check_encode, lambda tokens, vocab: [vocab[t] for t in tokens])
    assert "vocab.get(token" in message


def test_pad_batch_pre_padding():
    def pad_batch(sequences, pad_id=0, max_len=None):
        T = max(len(s) for s in sequences)
        return torch.tensor([[pad_id] * (T - len(s)) + list(s) for s in sequences])

    assert "pre-padding" in hint_of(checks.check_pad_batch, pad_batch)


def test_pad_batch_pre_truncation():
    def pad_batch(sequences, pad_id=0, max_len=None):
        T = max(len(s) for s in sequences) if max_len is None else max_len
        rows = [list(s)[-T:] if len(s) > T else list(s) for s in sequences]
        return torch.tensor([r + [pad_id] * (T - len(r)) for r in rows])

    assert text_of("pad_batch.truncate_front") in hint_of(checks.check_pad_batch, pad_batch)


def test_pad_batch_float_dtype():
    def pad_batch(sequences, pad_id=0, max_len=None):
        return solutions.pad_batch(sequences, pad_id, max_len).float()

    assert "torch.long" in hint_of(checks.check_pad_batch, pad_batch)


class ScaledEmbedding(solutions.TokenEmbedding):
    def forward(self, ids):
        return self.weight[ids] * math.sqrt(self.weight.shape[1])


class WrappedEmbedding(nn.Module):
    def __init__(self, vocab_size, d_model, padding_idx=None):
        super().__init__()
        self.table = nn.Embedding(vocab_size, d_model, padding_idx=padding_idx)

    def forward(self, ids):
        return self.table(ids)


class UniformEmbedding(solutions.TokenEmbedding):
    def __init__(self, vocab_size, d_model, padding_idx=None):
        super().__init__(vocab_size, d_model, padding_idx)
        with torch.no_grad():
            self.weight.uniform_(-0.1, 0.1)
            if padding_idx is not None:
                self.weight[padding_idx] = 0


def test_token_embedding_scaled():
    assert text_of("embedding.scaled") in hint_of(checks.check_token_embedding, ScaledEmbedding)


def test_token_embedding_without_weight():
    assert "nn.Parameter" in hint_of(checks.check_token_embedding, WrappedEmbedding)


def test_token_embedding_init():
    assert "torch.randn" in hint_of(checks.check_token_embedding, UniformEmbedding)


class StandardNormalEmbedding(solutions.TokenEmbedding):
    """The course's old convention, N(0, 1)."""

    def __init__(self, vocab_size, d_model, padding_idx=None):
        super().__init__(vocab_size, d_model, padding_idx)
        with torch.no_grad():
            self.weight.mul_(d_model ** 0.5)


class InverseDModelEmbedding(solutions.TokenEmbedding):
    def __init__(self, vocab_size, d_model, padding_idx=None):
        super().__init__(vocab_size, d_model, padding_idx)
        with torch.no_grad():
            self.weight.mul_(d_model ** -0.5)


def test_token_embedding_init_standard_normal_is_the_old_convention():
    assert text_of("embedding.unit_init") in hint_of(checks.check_token_embedding, StandardNormalEmbedding)


def test_token_embedding_init_one_over_d_model():
    assert "not 1 / d_model" in hint_of(checks.check_token_embedding, InverseDModelEmbedding)


def test_matrix_random_unknown_rows():
    def embedding_matrix_from_word2vec(vocab, kv):
        matrix = torch.randn(len(vocab), kv.vector_size)
        for word, i in vocab.items():
            if word in kv.key_to_index:
                matrix[i] = torch.tensor(kv[word])
        return matrix

    assert "start from torch.zeros" in hint_of(checks.check_embedding_matrix_from_word2vec,
                                               embedding_matrix_from_word2vec)


def test_matrix_word2vec_order():
    def embedding_matrix_from_word2vec(vocab, kv):
        matrix = torch.zeros(len(vocab), kv.vector_size)
        matrix[: len(kv.index_to_key)] = torch.tensor(kv.vectors)
        return matrix

    assert "YOUR vocabulary's ids" in hint_of(checks.check_embedding_matrix_from_word2vec,
                                              embedding_matrix_from_word2vec)


def test_matrix_numpy():
    def embedding_matrix_from_word2vec(vocab, kv):
        return solutions.embedding_matrix_from_word2vec(vocab, kv).numpy()

    assert "not a numpy array" in hint_of(checks.check_embedding_matrix_from_word2vec,
                                          embedding_matrix_from_word2vec)


def _attention_with(scale_of, normalise=True):
    def attention_over_words(query, keys, kv):
        q = np.asarray(kv[query], dtype=np.float64)
        K = np.stack([np.asarray(kv[k], dtype=np.float64) for k in keys])
        scores = K @ q * scale_of(kv.vector_size)
        weights = np.exp(scores) / np.exp(scores).sum() if normalise else scores
        return weights, weights @ K
    return attention_over_words


def test_attention_over_words_no_scale():
    message = hint_of(checks.check_attention_over_words, _attention_with(lambda d: 1.0))
    assert "vector_size for word vectors" in message


def test_attention_over_words_scale_by_d():
    message = hint_of(checks.check_attention_over_words, _attention_with(lambda d: 1 / d))
    assert "SQUARE ROOT" in message


def test_attention_over_words_no_softmax():
    message = hint_of(checks.check_attention_over_words, _attention_with(lambda d: 1 / math.sqrt(d), False))
    assert "apply a softmax" in message


def test_attention_over_words_swapped():
    def attention_over_words(query, keys, kv):
        weights, value = solutions.attention_over_words(query, keys, kv)
        return value, weights

    assert "swapped" in hint_of(checks.check_attention_over_words, attention_over_words)
