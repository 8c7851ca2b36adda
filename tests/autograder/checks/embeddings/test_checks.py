"""Hidden checks of notebook 01: the reference and differently written answers pass; each mistake is named."""
from __future__ import annotations

import pytest

import solutions
import variants as V
from autograder.checks.embeddings import checks as checks


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
    # each shows with the default arguments already: the core fails, no partial credit
    V.fails_plainly(checks.check_build_vocab, V.build_vocab_wrong(kind), "build_vocab", diagnosis)


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
    if kind == "pre":  # pre-padding shows with the default arguments: the core fails
        V.fails_plainly(checks.check_pad_batch, V.pad_batch_wrong(kind), diagnosis)


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
                 "embedding.padding_row_not_zero")  # only padding_idx is wrong: partial credit (below)
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


# ------------------------------------------------------------------ arguments with teeth: partial credit (door 4)
def _only_argument_wrong(check, answer, criterion, mistake_id=None):
    """`answer` is right with every optional argument at its default and wrong in `criterion` only: it keeps at
    least 75 % of the points (PartialCredit), that argument crossed, the diagnosis (if any) carried on."""
    from autograder.checks.kit.criteria import PartialCredit
    from coursekit.mistakes import MISTAKES

    fragments = [MISTAKES[mistake_id].text] if mistake_id else []
    V.fails_partially(check, answer, criterion, *fragments)
    with pytest.raises(PartialCredit) as info:
        check(answer)
    assert info.value.mistake_id == mistake_id, str(info.value)


def build_vocab_min_freq_ignored(tokenized_texts, min_freq=1, specials=V.SPECIALS):
    return solutions.build_vocab(tokenized_texts, 1, specials)


def build_vocab_min_freq_strict_above_one(tokenized_texts, min_freq=1, specials=V.SPECIALS):
    """count > min_freq, except that min_freq=1 keeps everything (so the default case is right)."""
    return solutions.build_vocab(tokenized_texts, min_freq if min_freq == 1 else min_freq + 1, specials)


def build_vocab_specials_hard_coded(tokenized_texts, min_freq=1, specials=V.SPECIALS):
    return solutions.build_vocab(tokenized_texts, min_freq)


def build_vocab_without_specials_argument(tokenized_texts, min_freq=1):
    return solutions.build_vocab(tokenized_texts, min_freq)


@pytest.mark.parametrize("answer, criterion, mistake_id", [
    (build_vocab_min_freq_ignored, "build_vocab.min_freq", None),
    (build_vocab_min_freq_strict_above_one, "build_vocab.min_freq", "vocab.min_freq_strict"),
    (build_vocab_specials_hard_coded, "build_vocab.specials", None),
    (build_vocab_without_specials_argument, "build_vocab.specials", None),
])
def test_build_vocab_wrong_only_in_an_argument_keeps_most_points(answer, criterion, mistake_id):
    _only_argument_wrong(checks.check_build_vocab, answer, criterion, mistake_id)


def pad_batch_max_len_ignored(sequences, pad_id=0, max_len=None):
    return solutions.pad_batch(sequences, pad_id)


def pad_batch_max_len_only_cuts(sequences, pad_id=0, max_len=None):
    """max_len cuts the longer sequences but never pads past the longest one."""
    longest = max(len(s) for s in sequences)
    return solutions.pad_batch(sequences, pad_id, None if max_len is None else min(max_len, longest))


def pad_batch_pad_id_not_past_the_longest(sequences, pad_id=0, max_len=None):
    """pad_id fills up to the longest sequence, a fixed 0 beyond it (when max_len pads further)."""
    out = solutions.pad_batch(sequences, pad_id, max_len)
    out[:, max(len(s) for s in sequences):] = 0
    return out


def pad_batch_without_pad_id_argument(sequences, max_len=None):
    return solutions.pad_batch(sequences, 0, max_len)


@pytest.mark.parametrize("answer, criterion, mistake_id", [
    (V.pad_batch_wrong("ignore_pad_id"), "pad_batch.pad_id", "pad_batch.pad_id_ignored"),
    (pad_batch_pad_id_not_past_the_longest, "pad_batch.pad_id", None),
    (pad_batch_without_pad_id_argument, "pad_batch.pad_id", None),
    (pad_batch_max_len_ignored, "pad_batch.max_len", None),
    (pad_batch_max_len_only_cuts, "pad_batch.max_len", None),
    (V.pad_batch_wrong("front"), "pad_batch.max_len", "pad_batch.truncate_front"),
])
def test_pad_batch_wrong_only_in_an_argument_keeps_most_points(answer, criterion, mistake_id):
    _only_argument_wrong(checks.check_pad_batch, answer, criterion, mistake_id)


class TokenEmbeddingWithoutPaddingIdx(solutions.TokenEmbedding):
    """Takes no padding_idx at all (the default None is right)."""

    def __init__(self, vocab_size, d_model):
        super().__init__(vocab_size, d_model)


@pytest.mark.parametrize("answer, mistake_id", [
    (V.mistake(V.TokenEmbeddingWrong, "padding_row"), "embedding.padding_row_not_zero"),
    (TokenEmbeddingWithoutPaddingIdx, None),
])
def test_token_embedding_wrong_only_in_padding_idx_keeps_most_points(answer, mistake_id):
    _only_argument_wrong(checks.check_token_embedding, answer, "TokenEmbedding.padding_idx", mistake_id)


def test_a_core_failure_gets_no_credit_for_its_arguments():
    def pad_batch(sequences, pad_id=0, max_len=None):  # pre-padding, arguments handled right
        return V.pad_batch_wrong("pre")(sequences, pad_id, max_len)

    V.fails_plainly(checks.check_pad_batch, pad_batch, "pad_batch.pre_padding")
    V.fails_plainly(checks.check_token_embedding, V.mistake(V.TokenEmbeddingWrong, "unit_init"),
                    "embedding.unit_init")
