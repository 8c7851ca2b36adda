"""Public checks for notebook 01 (tokens and embeddings).

Each expected answer is worked out here from a tiny example, by hand or by a deliberately simple method.
"""
from __future__ import annotations

import math

import numpy as np
import torch
from torch import nn

from coursekit.checks.toolkit import (
    CheckFailed, close, expect_close, expect_dtype, expect_shape, expect_type, fail, first_matching_hint, mistake_hint,
    passed, run,
)
from coursekit.criteria import argument
from coursekit.tolerance import INIT_MEAN_RTOL, INIT_STD_RTOL

SPECIALS = ("<pad>", "<unk>", "<bos>", "<eos>")


# ---------------------------------------------------------------------------------------------------------- vocab
def check_build_vocab(build_vocab) -> None:
    texts = [["b", "a", "c", "a"], ["c", "a", "d"], ["e", "d"]]
    # counts: a=3, c=2, d=2, b=1, e=1 -> a, then c and d (tie: alphabetical), then b and e (tie: alphabetical)
    expected = {"<pad>": 0, "<unk>": 1, "<bos>": 2, "<eos>": 3, "a": 4, "c": 5, "d": 6, "b": 7, "e": 8}
    vocab = run("build_vocab", build_vocab, texts)
    expect_type(vocab, dict, "build_vocab(...)", "return a plain dict mapping each token to its id.")
    for i, special in enumerate(SPECIALS):
        if vocab.get(special) != i:
            fail(f"{special!r} should have id {i}, got {vocab.get(special)}.", mistake_hint("vocab.specials_last"))
    if vocab != expected:
        hint = None
        words = [t for t in vocab if t not in SPECIALS]
        if set(vocab) != set(expected):
            missing = sorted(set(expected) - set(vocab))
            extra = sorted(set(vocab) - set(expected))
            hint = f"missing tokens {missing}, unexpected tokens {extra}; with min_freq=1 every token is kept."
        elif words == sorted(words):
            hint = "you sorted alphabetically only: sort by descending count first, then alphabetically for ties."
        elif [vocab[w] for w in ("a", "c", "d")] == [4, 6, 5] or [vocab[w] for w in ("b", "e")] == [8, 7]:
            hint = mistake_hint("vocab.ties")
        elif [vocab[w] for w in ("b", "e", "c", "d", "a")] == [4, 5, 6, 7, 8]:
            hint = mistake_hint("vocab.ascending")
        elif [vocab[w] for w in ("a", "b", "c")] == [5, 4, 6]:
            hint = "the tokens look ordered by first appearance: sort by descending count instead."
        elif sorted(vocab.values()) != list(range(len(vocab))):
            hint = "ids must be 0, 1, 2, ... with no gaps: give each new token the id len(vocab)."
        fail(f"build_vocab({texts}) should be\n  {expected}\ngot\n  {vocab}", hint)

    with argument("build_vocab.min_freq"):
        rare = run("build_vocab", build_vocab, texts, min_freq=2)
        expected_rare = {"<pad>": 0, "<unk>": 1, "<bos>": 2, "<eos>": 3, "a": 4, "c": 5, "d": 6}
        if rare != expected_rare:
            hint = None
            if "b" in rare or "e" in rare:
                hint = "with min_freq=2, tokens seen once must be left out."
            elif "c" not in rare:
                hint = mistake_hint("vocab.min_freq_strict")
            fail(f"build_vocab(..., min_freq=2) should be {expected_rare}, got {rare}", hint)

    with argument("build_vocab.specials"):
        custom = run("build_vocab", build_vocab, texts, specials=("<unk>", "<pad>"))
        expected_custom = {"<unk>": 0, "<pad>": 1, "a": 2, "c": 3, "d": 4, "b": 5, "e": 6}
        if custom != expected_custom:
            fail(f"build_vocab(..., specials=('<unk>', '<pad>')) should be {expected_custom}, got {custom}",
                 "the specials are the `specials` argument, in its order, not the four defaults.")

    clash = run("build_vocab", build_vocab, [["<unk>", "x", "<unk>"]])
    if clash.get("<unk>") != 1 or clash.get("x") != 4 or len(clash) != 5:
        fail(f"a text containing '<unk>' should keep '<unk>' at id 1 and give 'x' id 4; got {clash}",
             mistake_hint("vocab.special_duplicate"))
    passed("build_vocab")


# --------------------------------------------------------------------------------------------------------- encode
def check_encode(encode) -> None:
    vocab = {"<pad>": 0, "<unk>": 1, "<bos>": 2, "<eos>": 3, "the": 4, "food": 5, "good": 6}
    tokens = ["the", "food", "was", "good", "!"]
    expected = [4, 5, 1, 6, 1]
    try:
        ids = run("encode", encode, tokens, vocab)
    except CheckFailed as failure:
        if "raised KeyError" in str(failure):
            fail("encode raised KeyError for a word that is not in the vocabulary.",
                 'use vocab.get(token, vocab["<unk>"]) so unknown words become the <unk> id.')
        raise
    if isinstance(ids, torch.Tensor):
        fail("encode should return a Python list of ints, not a tensor.", "pad_batch makes the tensor later.")
    expect_type(ids, list, "encode(...)")
    if ids != expected:
        hint = None
        if ids == [4, 5, 0, 6, 0]:
            hint = mistake_hint("encode.unk_hardcoded")
        elif len(ids) != len(tokens):
            hint = "return one id per token, unknown tokens included."
        fail(f"encode({tokens}, vocab) should be {expected}, got {ids}", hint)
    other = dict(vocab, **{"<unk>": 7})
    if encode(["zzz"], other) != [7]:
        fail('with vocab["<unk>"] == 7, an unknown word should map to 7.', mistake_hint("encode.unk_hardcoded"))
    passed("encode")


# ------------------------------------------------------------------------------------------------------ pad_batch
def check_pad_batch(pad_batch) -> None:
    sequences = [[5, 8, 2], [7], [4, 4, 9, 6]]
    expected = torch.tensor([[5, 8, 2, 0], [7, 0, 0, 0], [4, 4, 9, 6]])
    pre_padded = torch.tensor([[0, 5, 8, 2], [0, 0, 0, 7], [4, 4, 9, 6]])
    out = run("pad_batch", pad_batch, sequences)
    expect_type(out, torch.Tensor, "pad_batch(...)", "build the result with torch.full(...) or torch.tensor(...).")
    expect_shape(out, (3, 4), "pad_batch([[5, 8, 2], [7], [4, 4, 9, 6]])",
                 "B = number of sequences, T = length of the longest one.")
    expect_dtype(out, torch.long, "pad_batch(...)", "token ids are integers: use dtype=torch.long.")
    if not torch.equal(out.cpu(), expected):
        hint = (mistake_hint("pad_batch.pre_padding")
                if torch.equal(out.cpu(), pre_padded) else None)
        fail(f"pad_batch({sequences}) should be\n{expected}\ngot\n{out}", hint)

    with argument("pad_batch.pad_id"):
        nines = run("pad_batch", pad_batch, [[1], [2, 3]], pad_id=9)
        if not torch.equal(nines.cpu(), torch.tensor([[1, 9], [2, 3]])):
            fail(f"pad_batch([[1], [2, 3]], pad_id=9) should be [[1, 9], [2, 3]], got {nines.tolist()}",
                 mistake_hint("pad_batch.pad_id_ignored"))

    with argument("pad_batch.max_len"):
        cut = run("pad_batch", pad_batch, sequences, max_len=2)
        expected_cut = torch.tensor([[5, 8], [7, 0], [4, 4]])
        if tuple(cut.shape) != (3, 2) or not torch.equal(cut.cpu(), expected_cut):
            hint = None
            if tuple(cut.shape) == (3, 4):
                hint = "when max_len is given, every row has exactly max_len entries."
            elif torch.equal(cut.cpu(), torch.tensor([[8, 2], [7, 0], [9, 6]])):
                hint = mistake_hint("pad_batch.truncate_front")
            fail(f"pad_batch({sequences}, max_len=2) should be\n{expected_cut}\ngot\n{cut}", hint)

        longer = run("pad_batch", pad_batch, [[1, 2]], max_len=4)
        if not torch.equal(longer.cpu(), torch.tensor([[1, 2, 0, 0]])):
            fail(f"pad_batch([[1, 2]], max_len=4) should be [[1, 2, 0, 0]], got {longer.tolist()}",
                 "max_len also pads: T = max_len even when every sequence is shorter.")
    passed("pad_batch")


# ------------------------------------------------------------------------------------------------- TokenEmbedding
def check_token_embedding(TokenEmbedding) -> None:
    torch.manual_seed(0)
    layer = run("TokenEmbedding", TokenEmbedding, 10, 4, padding_idx=0)
    expect_type(layer, nn.Module, "TokenEmbedding(...)", "subclass nn.Module and call super().__init__().")
    weight = getattr(layer, "weight", None)
    if not isinstance(weight, nn.Parameter):
        fail("TokenEmbedding needs an attribute `weight` that is an nn.Parameter.",
             "write self.weight = nn.Parameter(torch.randn(vocab_size, d_model) * d_model ** -0.5); a plain "
             "tensor is not trained.")
    expect_shape(weight, (10, 4), "TokenEmbedding(10, 4).weight", "one row per token: (vocab_size, d_model).")
    if any(p is not weight for p in layer.parameters()) or sum(1 for _ in layer.parameters()) != 1:
        fail("TokenEmbedding should have exactly one parameter, `weight`.",
             "build the table yourself; do not wrap an nn.Embedding (this exercise is about writing one).")
    with argument("TokenEmbedding.padding_idx"):
        if not torch.all(weight[0] == 0):
            fail("row padding_idx=0 of the weight should be all zeros.", mistake_hint("embedding.padding_row_not_zero"))
    if torch.all(weight == 0):
        fail("all rows of the weight are zero.", "initialise with torch.randn(vocab_size, d_model) * d_model ** -0.5; "
             "only padding_idx is zero.")

    ids = torch.tensor([[3, 0, 7], [1, 1, 9]])
    out = run("TokenEmbedding.forward", layer, ids)
    expect_shape(out, (2, 3, 4), "TokenEmbedding(10, 4)(ids of shape (2, 3))", "(B, T) ids -> (B, T, d_model).")
    expected = weight.detach()[ids]
    hint = first_matching_hint(out.detach(), [(expected * math.sqrt(4), mistake_hint("embedding.scaled"))])
    expect_close(out, expected, "TokenEmbedding output", hint)
    out.sum().backward()
    if weight.grad is None:
        fail("no gradient reached `weight`.", "index the parameter itself (self.weight[ids]); do not detach or "
             "convert to numpy.")

    big = run("TokenEmbedding", TokenEmbedding, 2000, 16)
    values = big.weight.detach()
    mean, std, target = values.mean().item(), values.std().item(), 16 ** -0.5            # d_model = 16: std 0.25
    if not (abs(mean) < INIT_MEAN_RTOL * target and abs(std - target) < INIT_STD_RTOL * target):
        if abs(std - 1.0) < INIT_STD_RTOL:
            hint = mistake_hint("embedding.unit_init")
        elif abs(std - 1 / 16) < INIT_STD_RTOL / 16:
            hint = "d_model ** -0.5 is 1 / sqrt(d_model), not 1 / d_model."
        else:
            hint = "use torch.randn(vocab_size, d_model) * d_model ** -0.5."
        fail(f"TokenEmbedding(2000, 16).weight should start from N(0, std = 16 ** -0.5 = 0.25); got mean {mean:.3f}, "
             f"std {std:.3f}.", hint)
    if torch.all(values[0] == 0):
        fail("with padding_idx=None no row should be zeroed.", "only zero a row when padding_idx is not None.")
    passed("TokenEmbedding", "It matches nn.Embedding's lookup.")


# ------------------------------------------------------------------------------------------- word2vec -> matrix
def _tiny_keyed_vectors():
    from gensim.models import KeyedVectors

    kv = KeyedVectors(vector_size=3)
    kv.add_vectors(["food", "good", "service"],
                   np.array([[1.0, 0.0, 2.0], [0.5, -1.0, 0.0], [0.0, 3.0, -1.0]], dtype=np.float32))
    return kv


def check_embedding_matrix_from_word2vec(embedding_matrix_from_word2vec) -> None:
    kv = _tiny_keyed_vectors()
    vocab = {"<pad>": 0, "<unk>": 1, "<bos>": 2, "<eos>": 3, "good": 4, "pasta": 5, "food": 6}
    expected = torch.zeros(7, 3)
    expected[4] = torch.tensor([0.5, -1.0, 0.0])
    expected[6] = torch.tensor([1.0, 0.0, 2.0])
    matrix = run("embedding_matrix_from_word2vec", embedding_matrix_from_word2vec, vocab, kv)
    if isinstance(matrix, np.ndarray):
        fail("return a torch tensor, not a numpy array.", "wrap it with torch.from_numpy(...) or build it with "
             "torch.zeros(...).")
    expect_type(matrix, torch.Tensor, "embedding_matrix_from_word2vec(...)")
    expect_shape(matrix, (7, 3), "the matrix", "rows = len(vocab), columns = keyed_vectors.vector_size; "
                 "not the size of the word2vec vocabulary.")
    expect_dtype(matrix, torch.float32, "the matrix", "create it with torch.zeros(..., dtype=torch.float32).")
    by_kv_order = torch.zeros(7, 3)
    by_kv_order[:3] = torch.tensor(kv.vectors)
    if (matrix[[0, 1, 2, 3, 5]] != 0).any():
        hint = ("rows must follow YOUR vocabulary's ids (row vocab[word]), not word2vec's own order."
                if close(matrix, by_kv_order) else
                mistake_hint("word2vec.missing_not_zero"))
        fail("rows for the specials and for unknown words should be all zeros.", hint)
    expect_close(matrix, expected, "the matrix", "row vocab[word] should be keyed_vectors[word].")
    passed("embedding_matrix_from_word2vec")


# ------------------------------------------------------------------------------------------ attention over words
def _reference_attention(q: np.ndarray, K: np.ndarray, scale: float):
    scores = K @ q * scale
    exp = np.exp(scores - scores.max())
    weights = exp / exp.sum()
    return weights, weights @ K


def check_attention_over_words(attention_over_words) -> None:
    kv = _tiny_keyed_vectors()
    keys = ["good", "service", "food"]
    q = kv["food"].astype(np.float64)
    K = np.stack([kv[k] for k in keys]).astype(np.float64)     # (3, 3)
    weights_ok, value_ok = _reference_attention(q, K, 1 / math.sqrt(3))
    result = run("attention_over_words", attention_over_words, "food", keys, kv)
    if not (isinstance(result, tuple) and len(result) == 2):
        fail("attention_over_words should return a tuple (weights, value).", "end with `return weights, value`.")
    weights, value = result
    if isinstance(weights, torch.Tensor) or isinstance(value, torch.Tensor):
        fail("return numpy arrays, not torch tensors.", "this exercise works on the numpy vectors of gensim.")
    weights, value = np.asarray(weights, dtype=np.float64), np.asarray(value, dtype=np.float64)
    if weights.shape == (3,) and value.shape == (3,) and close(weights, value_ok) and close(value, weights_ok):
        fail("weights and value look swapped.", "return (weights, value) in this order.")
    expect_shape(weights, (3,), "weights", "one weight per key word.")
    expect_shape(value, (3,), "value", "the value is a weighted sum of key vectors: shape (vector_size,).")
    hint = first_matching_hint(weights, [
        (_reference_attention(q, K, 1.0)[0], mistake_hint("attention.missing_scale")),
        (_reference_attention(q, K, 1 / 3)[0], mistake_hint("attention.scale_by_d")),
        (K @ q / math.sqrt(3), "these are the raw scores: apply a softmax so the weights are positive and sum "
                               "to 1."),
    ])
    if hint is None and not np.isclose(weights.sum(), 1.0):
        hint = "the weights should sum to 1: divide exp(scores) by their sum."
    expect_close(weights, weights_ok, "weights", hint)
    expect_close(value, value_ok, "value", "value = sum_j weights[j] * vector(keys[j]) (weights @ K).")
    one_weights, _ = run("attention_over_words", attention_over_words, "good", ["service"], kv)
    expect_close(one_weights, np.array([1.0]), "weights over a single key", "a single key gets all the weight.")
    passed("attention_over_words")
