"""Hidden checks of notebook 01: the reference and differently written answers pass; each mistake is named."""
from __future__ import annotations

import pytest

import solutions
import variants as V
from autograder.checks import embeddings as checks


@pytest.mark.parametrize("build_vocab", [solutions.build_vocab, V.build_vocab_two_sorts, V.build_vocab_most_common])
def test_build_vocab_correct_answers_pass(build_vocab):
    checks.check_build_vocab(build_vocab)


@pytest.mark.parametrize("kind, diagnosis", [
    ("most_common_ties", "vocab.ties"),
    ("reverse_ties", "vocab.ties"),
    ("ascending", "vocab.ascending"),
    ("strict_min", "vocab.min_freq_strict"),
    ("specials_last", "vocab.specials_last"),
    ("special_duplicate", "vocab.special_duplicate"),
])
def test_build_vocab_mistakes_are_named(kind, diagnosis):
    V.fails_with(checks.check_build_vocab, V.build_vocab_wrong(kind), "build_vocab", diagnosis)


def test_build_vocab_generator_is_read_once():
    def build_vocab(tokenized_texts, min_freq=1, specials=V.SPECIALS):
        list(tokenized_texts)  # reads the generator once, then counts nothing
        return solutions.build_vocab(tokenized_texts, min_freq, specials)

    V.fails_with(checks.check_build_vocab, build_vocab, "generator", "vocab.generator_read_twice")


def test_build_vocab_wrong_type():
    V.fails_with(checks.check_build_vocab, lambda texts, min_freq=1, specials=(): [1, 2], "must return a dict")


@pytest.mark.parametrize("encode", [solutions.encode, V.encode_loop])
def test_encode_correct_answers_pass(encode):
    checks.check_encode(encode)


def test_encode_hard_coded_unk():
    V.fails_with(checks.check_encode, V.encode_unk_one, "'<unk>' id is not 1", "encode.unk_hardcoded")


@pytest.mark.parametrize("pad_batch", [solutions.pad_batch, V.pad_batch_pad_sequence, V.pad_batch_lists])
def test_pad_batch_correct_answers_pass(pad_batch):
    checks.check_pad_batch(pad_batch)


@pytest.mark.parametrize("kind, diagnosis", [
    ("pre", "pad_batch.pre_padding"), ("front", "pad_batch.truncate_front"),
    ("ignore_pad_id", "pad_batch.pad_id_ignored")])
def test_pad_batch_mistakes_are_named(kind, diagnosis):
    V.fails_with(checks.check_pad_batch, V.pad_batch_wrong(kind), "pad_batch", diagnosis)


def test_pad_batch_wrong_shape_and_dtype():
    V.fails_with(checks.check_pad_batch, lambda s, pad_id=0, max_len=None: solutions.pad_batch(s, pad_id, max_len).T,
                 "wrong shape", "expected shape (")
    V.fails_with(checks.check_pad_batch,
                 lambda s, pad_id=0, max_len=None: solutions.pad_batch(s, pad_id, max_len).float(), "int64")


def test_not_implemented_is_reported():
    def pad_batch(sequences, pad_id=0, max_len=None):
        raise NotImplementedError()

    V.fails_with(checks.check_pad_batch, pad_batch, "not implemented yet")


@pytest.mark.parametrize("cls", [solutions.TokenEmbedding, V.TokenEmbeddingSubclass, V.TokenEmbeddingFunctional,
                                 V.TokenEmbeddingWrong])
def test_token_embedding_correct_answers_pass(cls):
    checks.check_token_embedding(cls)


def test_token_embedding_mistakes():
    V.fails_with(checks.check_token_embedding, V.mistake(V.TokenEmbeddingWrong, "scaled"), "embedding.scaled")
    V.fails_with(checks.check_token_embedding, V.mistake(V.TokenEmbeddingWrong, "xavier_init"), "std d_model ** -0.5")
    V.fails_with(checks.check_token_embedding, V.mistake(V.TokenEmbeddingWrong, "unit_init"), "got mean",
                 "embedding.unit_init")
    V.fails_with(checks.check_token_embedding, V.mistake(V.TokenEmbeddingWrong, "padding_row"), "all zeros",
                 "embedding.padding_row_not_zero")
    V.fails_with(checks.check_token_embedding, lambda v, d, padding_idx=None: None, "inherits from nn.Module")


@pytest.mark.parametrize("fn", [solutions.embedding_matrix_from_word2vec, V.w2v_numpy])
def test_embedding_matrix_correct_answers_pass(fn):
    checks.check_embedding_matrix_from_word2vec(fn)


def test_embedding_matrix_mistakes():
    V.fails_with(checks.check_embedding_matrix_from_word2vec, V.w2v_wrong("enumerate"), "word2vec.by_iteration")
    V.fails_with(checks.check_embedding_matrix_from_word2vec, V.w2v_wrong("random_missing"),
                 "word2vec.missing_not_zero")
    V.fails_with(checks.check_embedding_matrix_from_word2vec, V.w2v_wrong("float64"), "float32")


@pytest.mark.parametrize("fn", [solutions.attention_over_words, V.attention_over_words_torch])
def test_attention_over_words_correct_answers_pass(fn):
    checks.check_attention_over_words(fn)


@pytest.mark.parametrize("kind, diagnosis", [
    ("none", "attention.missing_scale"), ("mul", "attention.scale_multiplied")])
def test_attention_over_words_mistakes(kind, diagnosis):
    V.fails_with(checks.check_attention_over_words, V.attention_over_words_wrong(kind), diagnosis)


def test_attention_over_words_tensor_output():
    def returns_tensors(query, keys, kv):
        import torch
        w, v = solutions.attention_over_words(query, keys, kv)
        return torch.tensor(w), torch.tensor(v)

    V.fails_with(checks.check_attention_over_words, returns_tensors, "numpy array", ".numpy()")
