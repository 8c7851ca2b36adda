"""Hidden checks of notebook 01 (tokens and embeddings)."""
from __future__ import annotations

from autograder.checks.remote import new, probed

import random

import numpy as np
import torch

from autograder.checks import known_mistakes as M
from autograder.checks.toolkit import (
    as_tensor, call, construct, describe, expect_callable, expect_shape, expect_tensor, fail, is_integer, prepare,
    start_check, to_numpy, values_close,
)

SPECIALS = ("<pad>", "<unk>", "<bos>", "<eos>")


def _reference():
    import solutions.embeddings as reference

    return reference


def _words(n: int, seed: int) -> list[str]:
    """n distinct lowercase pseudo-words (deterministic)."""
    rng = random.Random(seed)
    words: set[str] = set()
    while len(words) < n:
        words.add("".join(rng.choice("abcdefghijklmnopqrstuvwxyz") for _ in range(rng.randint(2, 6))))
    return sorted(words)


def _corpus(seed: int, n_words: int = 12, n_texts: int = 9, extra=()) -> list[list[str]]:
    """Texts whose word counts include ties, in an order that is neither alphabetical nor by count."""
    rng = random.Random(seed)
    words = _words(n_words, seed)
    rng.shuffle(words)
    counts = [1 + (i // 3) for i in range(n_words)]  # groups of three tokens share a count: ties
    tokens = [w for w, c in zip(words, counts) for _ in range(c)] + list(extra)
    rng.shuffle(tokens)
    size = max(1, len(tokens) // n_texts)
    return [tokens[i:i + size] for i in range(0, len(tokens), size)]


# ------------------------------------------------------------------------------------------------- build_vocab
def _vocab_mistakes(texts, kwargs):
    def variant(**flags):
        return lambda: M.build_vocab(texts, **kwargs, **flags)

    return [
        ("vocab.specials_last", variant(specials_first=False)),
        ("vocab.ascending", variant(descending=False)),
        ("vocab.ties", variant(ties="first_seen")),
        ("vocab.ties", variant(ties="reverse_alpha")),
        ("vocab.min_freq_strict", variant(strict_min=True)),
        ("vocab.special_duplicate", variant(dedupe_specials=False)),
    ]


def _diagnose_vocab(got: dict, texts, kwargs) -> str | None:
    for name, produce in _vocab_mistakes(texts, kwargs):
        if got == produce():
            return name
    return None


@probed
def check_build_vocab(build_vocab) -> None:
    """build_vocab(tokenized_texts, min_freq=1, specials=...) -> dict[str, int]."""
    start_check()
    expect_callable(build_vocab, "build_vocab")
    reference = _reference()
    cases = [
        ("9 texts, default arguments", _corpus(1), {}),
        ("9 texts, min_freq=2", _corpus(2), {"min_freq": 2}),
        ("9 texts, min_freq=3", _corpus(3, n_words=15), {"min_freq": 3}),
        ("texts containing the token '<unk>'", _corpus(4, extra=["<unk>", "<unk>", "<eos>"]), {}),
        ("custom specials ('<pad>', '<unk>')", _corpus(5), {"specials": ("<pad>", "<unk>")}),
    ]
    for tested, texts, kwargs in cases:
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
    # tokenized_texts is any iterable: a generator can be read only once.
    texts = _corpus(6)
    expected = reference.build_vocab(texts)
    once = new(build_vocab.channel, "builtins.iter", [list(t) for t in texts])  # an iterator, read once, in the kernel
    got = call("build_vocab", build_vocab, once, tested="a generator of token lists")
    if got != expected:
        fail("build_vocab: wrong vocabulary when tokenized_texts is a generator.", tested="a generator of token lists",
             hint="a generator can be iterated only once: count the tokens in a single pass")


# ------------------------------------------------------------------------------------------------------ encode
@probed
def check_encode(encode) -> None:
    """encode(tokens, vocab) -> list[int]; unknown tokens map to vocab['<unk>']."""
    start_check()
    expect_callable(encode, "encode")
    reference = _reference()
    texts = _corpus(7)
    known = sorted({t for text in texts for t in text})
    unknown = _words(30, 99)[:6]
    unknown = [w for w in unknown if w not in known][:3]
    cases = [
        ("known tokens", reference.build_vocab(texts), known[:5]),
        ("known and unknown tokens", reference.build_vocab(texts), known[3:6] + unknown + known[:2]),
        ("an empty token list", reference.build_vocab(texts), []),
        ("a vocabulary whose '<unk>' id is not 1", reference.build_vocab(texts, specials=("<pad>", "<bos>", "<unk>")),
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
            mistake = None
            for unk_id in (0, 1, len(vocab) - 1, -1, None):
                if unk_id is not None and [int(i) for i in got] == M.encode(tokens, vocab, unk_id=unk_id):
                    mistake = "encode.unk_hardcoded"
            wrong = sum(1 for a, b in zip(got, expected) if int(a) != b)
            fail("encode: ids differ from the reference solution.", tested=tested,
                 details=[f"{wrong} of {len(expected)} ids differ"], mistake=mistake)


# --------------------------------------------------------------------------------------------------- pad_batch
@probed
def check_pad_batch(pad_batch) -> None:
    """pad_batch(sequences, pad_id=0, max_len=None) -> LongTensor (B, T), post-padding, post-truncation."""
    start_check()
    expect_callable(pad_batch, "pad_batch")
    reference = _reference()
    rng = random.Random(11)
    sequences = [[rng.randint(4, 50) for _ in range(n)] for n in (5, 2, 7, 3)]
    cases = [
        ("4 sequences of lengths 5, 2, 7, 3", {}),
        ("pad_id=9", {"pad_id": 9}),
        ("max_len=4 (shorter than the longest: truncation)", {"max_len": 4}),
        ("max_len=9 (longer than the longest)", {"max_len": 9, "pad_id": 1}),
    ]
    for tested, kwargs in cases:
        expected = reference.pad_batch([list(s) for s in sequences], **kwargs)
        got = call("pad_batch", pad_batch, [list(s) for s in sequences], **kwargs, tested=tested)
        got = as_tensor(got, "pad_batch's result", tested)
        expect_shape(got, expected.shape, "pad_batch's result", tested)
        if got.dtype != torch.long:
            fail(f"pad_batch must return int64 (torch.long) ids, got {got.dtype}.", tested=tested)

        def mistakes(kwargs=kwargs):
            seqs = [list(s) for s in sequences]
            return {
                "pad_batch.pre_padding": lambda: M.pad_batch(seqs, **kwargs, pre_padding=True),
                "pad_batch.truncate_front": lambda: M.pad_batch(seqs, **kwargs, truncate_front=True),
                "pad_batch.pad_id_ignored": lambda: M.pad_batch(seqs, **kwargs, ignore_pad_id=True),
            }

        expect_tensor(got.cpu(), expected, "pad_batch's result", "cpu", tested=tested, exact=True, mistakes=mistakes)


# ---------------------------------------------------------------------------------------------- TokenEmbedding
@probed
def check_token_embedding(TokenEmbedding) -> None:
    """TokenEmbedding(vocab_size, d_model, padding_idx=None): weight (V, d) ~ N(0, d_model^-1/2), row padding_idx
    zero."""
    device = start_check()
    reference = _reference()
    V, d_model = 300, 64
    for padding_idx in (None, 0, 5):
        module = construct(TokenEmbedding, "TokenEmbedding", V, d_model, padding_idx=padding_idx)
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
                fail(f"TokenEmbedding: row padding_idx={padding_idx} of weight must be all zeros.")
            w = torch.cat([w[:padding_idx], w[padding_idx + 1:]])
        mean, std, target = float(w.mean()), float(w.std()), d_model ** -0.5
        if abs(mean) > 0.05 * target * 8 or abs(std - target) > 0.05 * target:
            fail("TokenEmbedding: weight must be initialised from N(0, d_model^-1/2), i.e. std d_model ** -0.5 "
                 f"({target:.3f} for d_model={d_model}).",
                 tested=f"TokenEmbedding({V}, {d_model})", details=[f"got mean {mean:.3f}, std {std:.3f}"],
                 mistake="embedding.unit_init" if abs(std - 1) < 0.05 else None,
                 hint="torch.randn(vocab_size, d_model) * d_model ** -0.5")
    # values: copy the reference table, then look up ids
    V, d_model, B, T = 23, 8, 3, 5
    ids = torch.randint(0, V, (B, T), generator=torch.Generator().manual_seed(3)).to(device)
    for padding_idx in (None, 0):
        module = construct(TokenEmbedding, "TokenEmbedding", V, d_model, padding_idx=padding_idx)
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(1)
            ref = reference.TokenEmbedding(V, d_model, padding_idx=padding_idx)
        prepare(module, ref, device, "TokenEmbedding")
        tested = f"TokenEmbedding({V}, {d_model}, padding_idx={padding_idx}) on ids {tuple(ids.shape)}"
        with torch.no_grad():
            expected = ref(ids)
            got = call("TokenEmbedding.forward", module, ids.clone(), tested=tested)
        expect_tensor(got, expected, "TokenEmbedding output", device, tested=tested,
                      mistakes=lambda: {"embedding.scaled": lambda: expected * d_model ** 0.5})


# ------------------------------------------------------------------------------ embedding_matrix_from_word2vec
def _keyed_vectors(words, size: int, seed: int, channel=None):
    """gensim KeyedVectors with random vectors: here (channel None) or, the same, in the student's kernel."""
    vectors = np.random.default_rng(seed).standard_normal((len(words), size)).astype(np.float32)
    if channel is not None:
        kv = new(channel, "gensim.models.KeyedVectors", vector_size=size)
        kv.attr("add_vectors")(list(words), vectors)
        return kv
    from gensim.models import KeyedVectors

    kv = KeyedVectors(vector_size=size)
    kv.add_vectors(list(words), vectors)
    return kv


@probed
def check_embedding_matrix_from_word2vec(embedding_matrix_from_word2vec) -> None:
    """embedding_matrix_from_word2vec(vocab, keyed_vectors) -> FloatTensor (len(vocab), vector_size)."""
    start_check()
    expect_callable(embedding_matrix_from_word2vec, "embedding_matrix_from_word2vec")
    reference = _reference()
    words = _words(14, 21)
    kv = _keyed_vectors(words[:10] + ["extra", "words"], 6, seed=2)  # words[10:] are unknown to word2vec
    their_kv = _keyed_vectors(words[:10] + ["extra", "words"], 6, seed=2, channel=embedding_matrix_from_word2vec.channel)
    ordered = {token: i for i, token in enumerate([*SPECIALS, *words])}
    shuffled_items = list(ordered.items())
    random.Random(5).shuffle(shuffled_items)
    cases = [
        ("a vocabulary of 18 entries (4 specials, 4 words unknown to word2vec), vector_size 6", ordered),
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
        expect_tensor(got, expected, "the matrix", "cpu", tested=tested, mistakes=lambda vocab=vocab: {
            "word2vec.by_iteration": lambda: M.embedding_matrix_from_word2vec(vocab, kv, by_iteration=True)})


# ---------------------------------------------------------------------------------------- attention_over_words
@probed
def check_attention_over_words(attention_over_words) -> None:
    """attention_over_words(query, keys, keyed_vectors) -> (weights (n,), value (vector_size,)) numpy arrays."""
    start_check()
    expect_callable(attention_over_words, "attention_over_words")
    reference = _reference()
    words = _words(9, 31)
    size = 12
    kv = _keyed_vectors(words, size, seed=4)
    their_kv = _keyed_vectors(words, size, seed=4, channel=attention_over_words.channel)
    cases = [(words[0], words[1:6]), (words[6], [words[2], words[6], words[8]]), (words[3], [words[7]])]
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
                return {name: (lambda scale=scale: M.attention_over_words(query, keys, kv, scale=scale)[part])
                        for name, scale in (("attention.missing_scale", "none"),
                                            ("attention.scale_multiplied", "mul_sqrt"), ("attention.scale_by_d", "d"))}

            expect_tensor(torch.as_tensor(np.asarray(arr, dtype=np.float64)), torch.as_tensor(exp), label, "cpu",
                          tested=tested, mistakes=mistakes)
