"""Known-mistake variants of notebook 01 (tokens and embeddings), and the table of the mistakes they make.

`TABLE` = {mistake id: (variant, switches)}: the variant run with those switches on a check's own inputs gives that
mistake's answer (`kit.compare.from_table`); each check tries the rows of its variant in the table's order, the first
match naming the mistake. `FORMS` = {mistake id: [switches, ...]}: other switches of the same variant that make the
same mistake, tried right after its row.
"""
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
    """unk_id: a hard-coded id for unknown tokens ("last": len(vocab) - 1) instead of vocab['<unk>']."""
    unk = vocab["<unk>"] if unk_id is None else len(vocab) - 1 if unk_id == "last" else unk_id
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


def lookup(weight, ids, *, scaled=False):
    """TokenEmbedding's forward, weight[ids] (B, T, d_model); `scaled` multiplies it by sqrt(d_model)."""
    looked_up = weight[ids]
    return looked_up * weight.shape[1] ** 0.5 if scaled else looked_up


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


TABLE = {
    # build_vocab
    "vocab.specials_last": (build_vocab, {"specials_first": False}),
    "vocab.ascending": (build_vocab, {"descending": False}),
    "vocab.ties": (build_vocab, {"ties": "first_seen"}),
    "vocab.min_freq_strict": (build_vocab, {"strict_min": True}),
    "vocab.special_duplicate": (build_vocab, {"dedupe_specials": False}),
    # encode
    "encode.unk_hardcoded": (encode, {"unk_id": 0}),
    # pad_batch
    "pad_batch.pre_padding": (pad_batch, {"pre_padding": True}),
    "pad_batch.truncate_front": (pad_batch, {"truncate_front": True}),
    "pad_batch.pad_id_ignored": (pad_batch, {"ignore_pad_id": True}),
    # TokenEmbedding
    "embedding.scaled": (lookup, {"scaled": True}),
    # embedding_matrix_from_word2vec
    "word2vec.by_iteration": (embedding_matrix_from_word2vec, {"by_iteration": True}),
    # attention_over_words
    "attention.missing_scale": (attention_over_words, {"scale": "none"}),
    "attention.scale_multiplied": (attention_over_words, {"scale": "mul_sqrt"}),
    "attention.scale_by_d": (attention_over_words, {"scale": "d"}),
}
FORMS = {
    "vocab.ties": [{"ties": "reverse_alpha"}],                                   # Counter.most_common's, or reversed
    "encode.unk_hardcoded": [{"unk_id": 1}, {"unk_id": "last"}, {"unk_id": -1}],
}
