"""Hidden checks of notebook 01 (tokens and embeddings).

Every input is this submission's (autograder/checks/kit/draws.py); with no salt, the first option of each space:
- texts: pseudo-words drawn from this submission's seeds (2 to 6 letters: a pool of ~3e8 words), 12 (or 12-16)
  distinct words per corpus, counted 1, 1, 1, 2, 2, 2, ... (ties in every group of three), split into 9 (or 7-11)
  texts, shuffled until first appearance differs from alphabetical order inside some tie (the ties mistake shows);
  min_freq 2 and 3 (or 4, with enough words that some count equals min_freq); custom specials from a pool of
  orders where '<unk>' is not id 1 (encode) / subsets of the four specials (build_vocab);
- pad_batch: 4 (3-5) sequences of distinct lengths in 1..9, the longest != B, values 4..50; pad_id 9 (1-9, != 0),
  a truncating max_len strictly between the shortest and the longest length, a padding max_len 1-3 past the longest;
- TokenEmbedding: statistics on (V, d_model) in {300, 256, 320, 400} x {64, 48, 80, 96} with padding_idx None, 0 and
  5 (1..V-1); values on V in 17..29, d_model in {8, 6, 10, 12}, ids (3-4, 5-7);
- word2vec: 14 (12-18) words, 4 (3-5) of them unknown to the keyed vectors, vector_size 6 (5-9);
- attention_over_words: 9 (9-12) words, vector_size 12 (10-16), one query over 5 (4-6) keys, 3 keys, 1 key.
"""
from __future__ import annotations

import random

import numpy as np
import torch

from autograder.checks.embeddings import mistakes as M
from autograder.checks.kit.compare import (
    as_tensor, candidates, describe, expect_shape, expect_tensor, is_integer, prepare, to_numpy,
    values_close,
)
from autograder.checks.kit.criteria import argument
from autograder.checks.kit.draws import current_salt, generator, pick, rng, seed_for
from autograder.checks.kit import inputs
from autograder.checks.kit.remote import new, hidden_check
from autograder.checks.kit.toolkit import call, construct, expect_callable, fail, seeded, start_check
from coursekit.tolerance import INIT_MEAN_RTOL, INIT_STD_RTOL

SPECIALS = ("<pad>", "<unk>", "<bos>", "<eos>")


def _candidates(variant, run) -> list:
    """[(mistake id, thunk)] for the rows of M.TABLE whose variant is `variant`, in the table's order, each row's
    other forms (M.FORMS) right after it; a thunk is `run(variant, switches)` on the check's own inputs."""
    ids = [mistake_id for mistake_id, (row_variant, _switches) in M.TABLE.items() if row_variant is variant]
    return candidates(M.TABLE, run, ids, M.FORMS)


def _words(n: int, seed: int) -> list[str]:
    """n distinct lowercase pseudo-words (this submission's, for the written seed)."""
    rng = random.Random(seed_for(seed))
    words: set[str] = set()
    while len(words) < n:
        words.add("".join(rng.choice("abcdefghijklmnopqrstuvwxyz") for _ in range(rng.randint(2, 6))))
    return sorted(words)


def _corpus(seed: int, n_words: int = 12, n_texts: int = 9, extra=()) -> list[list[str]]:
    """Texts whose word counts include ties, in an order that is neither alphabetical nor by count.

    The order of first appearance differs from the alphabetical order inside some tie (redrawn until it does, a
    bounded number of times), so that breaking ties by first appearance (Counter.most_common) shows."""
    rng = random.Random(seed_for(seed))
    words = _words(n_words, seed)
    rng.shuffle(words)
    counts = [1 + (i // 3) for i in range(n_words)]  # groups of three tokens share a count: ties
    tokens = [w for w, c in zip(words, counts) for _ in range(c)] + list(extra)
    for _ in range(50):
        rng.shuffle(tokens)
        if M.build_vocab([tokens], ties="first_seen") != M.build_vocab([tokens]):
            break
    size = max(1, len(tokens) // n_texts)
    return [tokens[i:i + size] for i in range(0, len(tokens), size)]


# ------------------------------------------------------------------------------------------------- build_vocab
def _diagnose_vocab(got: dict, texts, kwargs) -> str | None:
    candidates = _candidates(M.build_vocab, lambda variant, switches: variant(texts, **kwargs, **switches))
    return next((mistake_id for mistake_id, produce in candidates if got == produce()), None)


@hidden_check
def check_build_vocab(build_vocab) -> None:
    """build_vocab(tokenized_texts, min_freq=1, specials=...) -> dict[str, int]."""
    start_check()
    expect_callable(build_vocab, "build_vocab")
    reference = inputs.reference("embeddings")
    n_words = pick("embeddings.vocab.n_words", [12, 13, 14, 15, 16])
    n_texts = pick("embeddings.vocab.n_texts", [9, 7, 8, 10, 11])
    high = pick("embeddings.vocab.min_freq", [3, 4])              # 3 * high words: some count equals min_freq
    specials = pick("embeddings.vocab.specials", [("<pad>", "<unk>"), ("<unk>", "<pad>"), ("<pad>", "<unk>", "<eos>"),
                                                  ("<unk>",), ("<pad>", "<bos>", "<unk>", "<eos>")])
    extra = pick("embeddings.vocab.extra", [["<unk>", "<unk>", "<eos>"], ["<pad>", "<unk>"],
                                            ["<eos>", "<bos>", "<eos>"], ["<unk>", "<bos>"]])

    def case(tested, texts, **kwargs):
        _check_vocab_case(build_vocab, reference, tested, texts, kwargs)

    # the core: every argument at its default
    case(f"{n_texts} texts, default arguments", _corpus(1, n_words, n_texts))
    with argument("build_vocab.min_freq"):  # an argument with teeth: its non-default values
        case(f"{n_texts} texts, min_freq=2", _corpus(2, n_words, n_texts), min_freq=2)
        case(f"{n_texts} texts, min_freq={high}", _corpus(3, n_words=max(15, 3 * high + 3), n_texts=n_texts),
             min_freq=high)
    case("texts containing special tokens", _corpus(4, n_words, n_texts, extra=extra))
    with argument("build_vocab.specials"):
        case(f"custom specials {specials}", _corpus(5, n_words, n_texts), specials=specials)
    # tokenized_texts is any iterable: a generator can be read only once.
    texts = _corpus(6, n_words, n_texts)
    expected = reference.build_vocab(texts)
    once = new(build_vocab.channel, "builtins.iter", [list(t) for t in texts])  # an iterator, read once, in the kernel
    got = call("build_vocab", build_vocab, once, tested="a generator of token lists")
    if got != expected:
        fail("build_vocab: wrong vocabulary when tokenized_texts is a generator.", tested="a generator of token lists",
             mistake="vocab.generator_read_twice")


def _check_vocab_case(build_vocab, reference, tested: str, texts, kwargs: dict) -> None:
    expected = reference.build_vocab(texts, **kwargs)
    got = call("build_vocab", build_vocab, [list(t) for t in texts], **kwargs, tested=tested)
    if not isinstance(got, dict):
        fail(f"build_vocab must return a dict, got {type(got).__name__}.", tested=tested)
    if not all(isinstance(k, str) and is_integer(v) for k, v in got.items()):
        fail("build_vocab must map token strings to integer ids.", tested=tested)
    if got != expected:
        mistake = _diagnose_vocab(got, texts, kwargs)
        wrong = sum(1 for k, v in expected.items() if got.get(k) != v)
        details = [f"expected {len(expected)} entries, got {len(got)}; {wrong} tokens have a different id"]
        if sorted(got.values()) != list(range(len(got))):
            details.append("the ids must be exactly 0, 1, ..., len(vocab) - 1")
        fail("build_vocab: the vocabulary differs from the reference solution.", tested=tested, details=details,
             mistake=mistake)


# ------------------------------------------------------------------------------------------------------ encode
@hidden_check
def check_encode(encode) -> None:
    """encode(tokens, vocab) -> list[int]; unknown tokens map to vocab['<unk>']."""
    start_check()
    expect_callable(encode, "encode")
    reference = inputs.reference("embeddings")
    texts = _corpus(7)
    known = sorted({t for text in texts for t in text})
    unknown = _words(30, 99)[:6]
    unknown = [w for w in unknown if w not in known][:3]
    # '<unk>' is never id 1 here, and never the last id either (hard-coded 1 or len(vocab) - 1 would pass otherwise)
    unk_elsewhere = pick("embeddings.encode.specials", [
        ("<pad>", "<bos>", "<unk>"), ("<unk>", "<pad>", "<bos>"), ("<pad>", "<bos>", "<eos>", "<unk>"),
        ("<bos>", "<eos>", "<unk>"), ("<unk>", "<eos>")])
    cases = [
        ("known tokens", reference.build_vocab(texts), known[:5]),
        ("known and unknown tokens", reference.build_vocab(texts), known[3:6] + unknown + known[:2]),
        ("an empty token list", reference.build_vocab(texts), []),
        ("a vocabulary whose '<unk>' id is not 1", reference.build_vocab(texts, specials=unk_elsewhere),
         unknown + known[:3]),
    ]
    for tested, vocab, tokens in cases:
        expected = reference.encode(tokens, vocab)
        got = call("encode", encode, list(tokens), dict(vocab), tested=tested)
        if not isinstance(got, (list, tuple)):
            fail(f"encode must return a list of ints, got {type(got).__name__}.", tested=tested)
        if not all(is_integer(i) for i in got):
            fail("encode must return a list of Python ints.", tested=tested)
        if len(got) != len(expected):
            fail("encode returned the wrong number of ids.", tested=tested,
                 details=[f"expected {len(expected)} ids (one per token), got {len(got)}"])
        if [int(i) for i in got] != expected:
            candidates = _candidates(M.encode, lambda variant, switches: variant(tokens, vocab, **switches))
            mistake = next((mistake_id for mistake_id, produce in candidates if [int(i) for i in got] == produce()),
                           None)
            wrong = sum(1 for a, b in zip(got, expected) if int(a) != b)
            fail("encode: ids differ from the reference solution.", tested=tested,
                 details=[f"{wrong} of {len(expected)} ids differ"], mistake=mistake)


# --------------------------------------------------------------------------------------------------- pad_batch
@hidden_check
def check_pad_batch(pad_batch) -> None:
    """pad_batch(sequences, pad_id=0, max_len=None) -> LongTensor (B, T), post-padding, post-truncation."""
    start_check()
    expect_callable(pad_batch, "pad_batch")
    reference = inputs.reference("embeddings")
    lengths = [5, 2, 7, 3]
    draw = rng("embeddings.pad_batch.lengths")
    if current_salt():
        while True:  # distinct lengths, the longest different from B (a transposed result shows by its shape)
            lengths = draw.sample(range(1, 10), draw.choice([3, 4, 5]))
            if max(lengths) != len(lengths):
                break
    values = random.Random(seed_for(11))
    sequences = [[values.randint(4, 50) for _ in range(n)] for n in lengths]
    shortest, longest = min(lengths), max(lengths)
    cut = pick("embeddings.pad_batch.cut", [4, *range(shortest + 1, longest)])
    cut = cut if shortest < cut < longest else shortest + 1
    padded = longest + pick("embeddings.pad_batch.padded", [2, 1, 3])
    pad_id, other_pad_id = pick("embeddings.pad_batch.pad_id", [(9, 1), (1, 9), (3, 7), (7, 2), (5, 8), (2, 6)])

    def case(tested, **kwargs):
        _check_pad_batch_case(pad_batch, reference, sequences, tested, kwargs)

    # the core: every argument at its default; each argument with teeth: its non-default values, one at a time
    case(f"{len(lengths)} sequences of lengths {', '.join(map(str, lengths))}")
    with argument("pad_batch.pad_id"):
        case(f"pad_id={pad_id}", pad_id=pad_id)
    max_len_works = False
    with argument("pad_batch.max_len"):
        case(f"max_len={cut} (shorter than the longest: truncation)", max_len=cut)
        case(f"max_len={padded} (longer than the longest)", max_len=padded)
        max_len_works = True
    if max_len_works:  # pad_id also fills what max_len pads (tried once max_len works, so each mistake costs one)
        with argument("pad_batch.pad_id"):
            case(f"max_len={padded}, pad_id={other_pad_id}", max_len=padded, pad_id=other_pad_id)


def _check_pad_batch_case(pad_batch, reference, sequences, tested: str, kwargs: dict) -> None:
    expected = reference.pad_batch([list(s) for s in sequences], **kwargs)
    got = call("pad_batch", pad_batch, [list(s) for s in sequences], **kwargs, tested=tested)
    got = as_tensor(got, "pad_batch's result", tested)
    expect_shape(got, expected.shape, "pad_batch's result", tested)
    if got.dtype != torch.long:
        fail(f"pad_batch must return int64 (torch.long) ids, got {got.dtype}.", tested=tested)

    def mistakes():
        return _candidates(M.pad_batch, lambda variant, switches: variant([list(s) for s in sequences], **kwargs,
                                                                          **switches))

    expect_tensor(got.cpu(), expected, "pad_batch's result", "cpu", tested=tested, exact=True, mistakes=mistakes)


# ---------------------------------------------------------------------------------------------- TokenEmbedding
@hidden_check
def check_token_embedding(TokenEmbedding) -> None:
    """TokenEmbedding(vocab_size, d_model, padding_idx=None): weight (V, d) ~ N(0, d_model^-1/2), row padding_idx
    zero."""
    device = start_check()
    reference = inputs.reference("embeddings")
    V = pick("embeddings.token_embedding.stats_V", [300, 256, 320, 400])
    d_model = pick("embeddings.token_embedding.stats_d_model", [64, 48, 80, 96])
    other_idx = pick("embeddings.token_embedding.padding_idx", [5, *range(1, 12)])
    _token_embedding_statistics(TokenEmbedding, V, d_model, None)       # the core: padding_idx at its default
    with argument("TokenEmbedding.padding_idx"):                       # an argument with teeth: other values
        for padding_idx in (0, other_idx):
            _token_embedding_statistics(TokenEmbedding, V, d_model, padding_idx)
    # values: copy the reference table, then look up ids
    V = pick("embeddings.token_embedding.V", [23, *range(17, 30)])
    d_model = pick("embeddings.token_embedding.d_model", [8, 6, 10, 12])
    B, T = pick("embeddings.token_embedding.batch", [(3, 5), (3, 6), (4, 5), (4, 7), (3, 7)])
    ids = torch.randint(0, V, (B, T), generator=generator(3)).to(device)
    _token_embedding_values(TokenEmbedding, reference, device, V, d_model, ids, None)
    with argument("TokenEmbedding.padding_idx"):
        _token_embedding_values(TokenEmbedding, reference, device, V, d_model, ids, 0)


def _constructed(TokenEmbedding, V: int, d_model: int, padding_idx):
    """The student's TokenEmbedding(V, d_model), with padding_idx only when it is not the default."""
    if padding_idx is None:
        return construct(TokenEmbedding, "TokenEmbedding", V, d_model)
    return construct(TokenEmbedding, "TokenEmbedding", V, d_model, padding_idx=padding_idx)


def _token_embedding_statistics(TokenEmbedding, V: int, d_model: int, padding_idx) -> None:
    module = _constructed(TokenEmbedding, V, d_model, padding_idx)
    info = describe(module, "TokenEmbedding", attrs=["weight"])
    params = [name for name, _shape, _dtype in info.get("parameters", [])]
    if not info.get("has", {}).get("weight"):
        fail("TokenEmbedding needs an nn.Parameter named `weight` (self.weight = nn.Parameter(...)).",
             details=[f"your parameters: {', '.join(params) or 'none'}"])
    weight = as_tensor(call("TokenEmbedding.weight", module.attr("weight").fetch), "TokenEmbedding.weight")
    expect_shape(weight, (V, d_model), "TokenEmbedding.weight", f"TokenEmbedding({V}, {d_model})")
    w = weight.detach().double().cpu()
    if padding_idx is not None:
        if not bool((w[padding_idx] == 0).all()):
            fail(f"TokenEmbedding: row padding_idx={padding_idx} of weight must be all zeros.",
                 mistake="embedding.padding_row_not_zero")
        w = torch.cat([w[:padding_idx], w[padding_idx + 1:]])
    mean, std, target = float(w.mean()), float(w.std()), d_model ** -0.5
    if abs(mean) > INIT_MEAN_RTOL * target or abs(std - target) > INIT_STD_RTOL * target:
        fail("TokenEmbedding: weight must be initialised from N(0, d_model^-1/2), i.e. std d_model ** -0.5 "
             f"({target:.3f} for d_model={d_model}).",
             tested=f"TokenEmbedding({V}, {d_model})", details=[f"got mean {mean:.3f}, std {std:.3f}"],
             mistake="embedding.unit_init" if abs(std - 1) < INIT_STD_RTOL else None,
             hint="torch.randn(vocab_size, d_model) * d_model ** -0.5")


def _token_embedding_values(TokenEmbedding, reference, device, V: int, d_model: int, ids, padding_idx) -> None:
    module = _constructed(TokenEmbedding, V, d_model, padding_idx)
    with seeded(1):
        ref = reference.TokenEmbedding(V, d_model, padding_idx=padding_idx)
    prepare(module, ref, device, "TokenEmbedding")
    tested = f"TokenEmbedding({V}, {d_model}, padding_idx={padding_idx}) on ids {tuple(ids.shape)}"
    with torch.no_grad():
        expected = ref(ids)
        got = call("TokenEmbedding.forward", module, ids.clone(), tested=tested)
    expect_tensor(got, expected, "TokenEmbedding output", device, tested=tested, mistakes=lambda: _candidates(
        M.lookup, lambda variant, switches: variant(ref.weight.detach(), ids, **switches)))


# ------------------------------------------------------------------------------ embedding_matrix_from_word2vec
def _keyed_vectors(words, size: int, seed: int, channel=None):
    """gensim KeyedVectors with random vectors: here (channel None) or, the same, in the student's kernel."""
    vectors = np.random.default_rng(seed_for(seed)).standard_normal((len(words), size)).astype(np.float32)
    if channel is not None:
        kv = new(channel, "gensim.models.KeyedVectors", vector_size=size)
        kv.attr("add_vectors")(list(words), vectors)
        return kv
    from gensim.models import KeyedVectors

    kv = KeyedVectors(vector_size=size)
    kv.add_vectors(list(words), vectors)
    return kv


@hidden_check
def check_embedding_matrix_from_word2vec(embedding_matrix_from_word2vec) -> None:
    """embedding_matrix_from_word2vec(vocab, keyed_vectors) -> FloatTensor (len(vocab), vector_size)."""
    start_check()
    expect_callable(embedding_matrix_from_word2vec, "embedding_matrix_from_word2vec")
    reference = inputs.reference("embeddings")
    n_words = pick("embeddings.word2vec.n_words", [14, *range(12, 19)])
    n_unknown = pick("embeddings.word2vec.n_unknown", [4, 3, 5])
    size = pick("embeddings.word2vec.vector_size", [6, 5, 7, 8, 9])
    others = ["extra", "words"]                                      # in word2vec, not in the vocabulary
    words = [w for w in _words(n_words + 2, 21) if w not in others][:n_words]
    known = words[:n_words - n_unknown] + others                     # words[n_words - n_unknown:] are unknown
    kv = _keyed_vectors(known, size, seed=2)
    their_kv = _keyed_vectors(known, size, seed=2, channel=embedding_matrix_from_word2vec.channel)
    ordered = {token: i for i, token in enumerate([*SPECIALS, *words])}
    shuffled_items = list(ordered.items())
    shuffle = random.Random(seed_for(5))
    while [i for _token, i in shuffled_items] == list(range(len(shuffled_items))):  # dict order != id order
        shuffle.shuffle(shuffled_items)
    cases = [
        (f"a vocabulary of {len(ordered)} entries ({len(SPECIALS)} specials, {n_unknown} words unknown to word2vec), "
         f"vector_size {size}", ordered),
        ("the same vocabulary with its dict entries in a different order than the ids", dict(shuffled_items)),
    ]
    for tested, vocab in cases:
        expected = reference.embedding_matrix_from_word2vec(dict(vocab), kv)
        got = call("embedding_matrix_from_word2vec", embedding_matrix_from_word2vec, dict(vocab), their_kv,
                   tested=tested)
        got = as_tensor(got, "the matrix", tested)
        expect_shape(got, expected.shape, "the matrix", tested)
        if got.dtype != torch.float32:
            fail(f"the matrix must be float32 (a FloatTensor), got {got.dtype}.", tested=tested,
                 hint="numpy creates float64 by default; use torch.zeros(...) or dtype=torch.float32")
        missing_rows = [i for w, i in vocab.items() if w not in kv.key_to_index]
        got = got.detach().cpu()
        if not bool((got[missing_rows] == 0).all()) and values_close(
                got[[i for w, i in vocab.items() if w in kv.key_to_index]],
                expected[[i for w, i in vocab.items() if w in kv.key_to_index]], "cpu"):
            fail("embedding_matrix_from_word2vec: values differ from the reference solution.", tested=tested,
                 mistake="word2vec.missing_not_zero")
        expect_tensor(got, expected, "the matrix", "cpu", tested=tested, mistakes=lambda vocab=vocab: _candidates(
            M.embedding_matrix_from_word2vec, lambda variant, switches: variant(vocab, kv, **switches)))


# ---------------------------------------------------------------------------------------- attention_over_words
@hidden_check
def check_attention_over_words(attention_over_words) -> None:
    """attention_over_words(query, keys, keyed_vectors) -> (weights (n,), value (vector_size,)) numpy arrays."""
    start_check()
    expect_callable(attention_over_words, "attention_over_words")
    reference = inputs.reference("embeddings")
    n_keys = pick("embeddings.attention_over_words.n_keys", [5, 4, 6])
    words = _words(pick("embeddings.attention_over_words.n_words", [9, 10, 11, 12]), 31)
    size = pick("embeddings.attention_over_words.vector_size", [12, 10, 11, 13, 14, 16])
    kv = _keyed_vectors(words, size, seed=4)
    their_kv = _keyed_vectors(words, size, seed=4, channel=attention_over_words.channel)
    order = words[:1] + rng("embeddings.attention_over_words.order").sample(words[1:], len(words) - 1) \
        if current_salt() else words                                 # which words play which role
    cases = [(order[0], order[1:1 + n_keys]), (order[6], [order[2], order[6], order[8]]), (order[3], [order[7]])]
    for query, keys in cases:
        tested = f"a query word over {len(keys)} key words, vector_size {size}"
        expected_w, expected_v = reference.attention_over_words(query, list(keys), kv)
        got = call("attention_over_words", attention_over_words, query, list(keys), their_kv, tested=tested)
        if not isinstance(got, tuple) or len(got) != 2:
            fail("attention_over_words must return a tuple (weights, value).", tested=tested)
        weights = to_numpy(got[0], "weights", (len(keys),), tested)
        value = to_numpy(got[1], "value", (size,), tested)
        for label, arr, exp, part in (("weights", weights, expected_w, 0), ("value", value, expected_v, 1)):
            def mistakes(part=part, query=query, keys=keys):
                return _candidates(M.attention_over_words,
                                   lambda variant, switches: variant(query, keys, kv, **switches)[part])

            expect_tensor(torch.as_tensor(np.asarray(arr, dtype=np.float64)), torch.as_tensor(exp), label, "cpu",
                          tested=tested, mistakes=mistakes)
