"""Known-mistake variants of notebook 01 (tokens and embeddings): see the package doc."""
from __future__ import annotations

import math
from collections import Counter

import torch


def build_vocab(tokenized_texts, min_freq=1, specials=("<pad>", "<unk>", "<bos>", "<eos>"), *, ties="alpha",
                specials_first=True, strict_min=False, dedupe_specials=True, descending=True):
    """Vocabulary with switches: ties "alpha" / "first_seen" (Counter.most_common) / "reverse_alpha", specials
    last, count > min_freq, a special re-assigned a new id (`vocab[token] = len(vocab)`), ascending counts."""
    counts = Counter()
    for tokens in tokenized_texts:
        counts.update(tokens)                       # insertion order = order of first appearance
    tokens = list(counts)
    if ties == "alpha":
        tokens.sort()
    elif ties == "reverse_alpha":
        tokens.sort(reverse=True)
    tokens.sort(key=lambda t: -counts[t] if descending else counts[t])  # stable: ties keep the order above
    kept = [t for t in tokens if (counts[t] > min_freq if strict_min else counts[t] >= min_freq)]
    vocab: dict[str, int] = {}
    first, second = (specials, kept) if specials_first else (kept, specials)
    for group in (first, second):
        for token in group:
            if token not in vocab:
                vocab[token] = len(vocab)
            elif not dedupe_specials and group is kept:
                vocab[token] = len(vocab)           # overwrites the special's id
    return vocab


def encode(tokens, vocab, *, unk_id=None):
    unk = vocab["<unk>"] if unk_id is None else unk_id
    return [vocab.get(t, unk) for t in tokens]


def pad_batch(sequences, pad_id=0, max_len=None, *, pre_padding=False, truncate_front=False, ignore_pad_id=False):
    longest = max((len(s) for s in sequences), default=0)
    T = longest if max_len is None else max_len
    fill = 0 if ignore_pad_id else pad_id
    batch = torch.full((len(sequences), T), fill, dtype=torch.long)  # (B, T)
    for row, seq in enumerate(sequences):
        kept = list(seq)[-T:] if truncate_front and len(seq) > T else list(seq)[:T]
        if kept:
            if pre_padding:
                batch[row, T - len(kept):] = torch.tensor(kept)
            else:
                batch[row, :len(kept)] = torch.tensor(kept)
    return batch


def embedding_matrix_from_word2vec(vocab, keyed_vectors, *, by_iteration=False, random_missing=False):
    matrix = torch.zeros(len(vocab), keyed_vectors.vector_size)
    for position, (word, index) in enumerate(vocab.items()):
        row = position if by_iteration else index
        if word in keyed_vectors.key_to_index:
            matrix[row] = torch.tensor(keyed_vectors[word], dtype=torch.float32)
        elif random_missing:
            matrix[row] = float("nan")  # never equal: "not zero" is diagnosed by a dedicated comparison
    return matrix


def attention_over_words(query, keys, keyed_vectors, *, scale="sqrt"):
    """(weights, value) as float64 tensors, with the scale switched: "sqrt", "none", "mul_sqrt", "d"."""
    q = torch.tensor(keyed_vectors[query], dtype=torch.float64)                               # (d,)
    K = torch.stack([torch.tensor(keyed_vectors[w], dtype=torch.float64) for w in keys])      # (n, d)
    d = keyed_vectors.vector_size
    factor = {"sqrt": 1 / math.sqrt(d), "none": 1.0, "mul_sqrt": math.sqrt(d), "d": 1 / d}[scale]
    weights = torch.softmax(K @ q * factor, dim=0)                                            # (n,)
    return weights, weights @ K                                                               # (n,), (d,)
