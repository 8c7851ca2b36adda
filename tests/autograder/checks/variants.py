"""Student answers for testing the hidden checks of notebooks 01-06.

CORRECT answers are written differently from the reference (einsum, loops over heads, F.scaled_dot_product_attention,
masks filled with -inf or -1e9 or added as 0/1 floats, numpy, nn.Embedding subclasses, ...) and must pass.
WRONG answers each contain one known mistake, written the way a student would, and must fail with that mistake
named. Wrong modules are made from a configurable student class with `mistake(Class, name)`.
"""
from __future__ import annotations

import math
from collections import Counter

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from torch import nn

import solutions
from coursekit.mistakes import MISTAKES
from solutions.attention import make_padding_mask

SPECIALS = ("<pad>", "<unk>", "<bos>", "<eos>")

# (mistake id or None, message) of every wrong answer the hidden-check tests try: naming.py's figure reads it
TRIED: list[tuple[str | None, str]] = []


def fails_with(check, obj, *fragments):
    """`check(obj)` raises AssertionError whose message contains every fragment; returns the message.

    A fragment that is a mistake id of the catalogue (`coursekit.mistakes`) must be the failure's `mistake_id`, and
    its text must be in the message."""
    with pytest.raises(AssertionError) as info:
        check(obj)
    message = str(info.value)
    TRIED.append((getattr(info.value, "mistake_id", None), message))
    for fragment in fragments:
        if fragment in MISTAKES:
            assert getattr(info.value, "mistake_id", None) == fragment, message
            fragment = MISTAKES[fragment].text
        assert fragment in message, message
    assert len(message.splitlines()) < 15, message
    return message


def fails_publicly(check, obj, *fragments):
    """`check(obj)`, a public check (`coursekit.checks`), raises CheckFailed whose message contains every fragment;
    returns the message."""
    from coursekit.checks import CheckFailed

    with pytest.raises(CheckFailed) as info:
        check(obj)
    message = str(info.value)
    for fragment in fragments:
        assert fragment in message, message
    return message


def mistake(cls, name: str):
    """A subclass of the configurable student class `cls` with one mistake switched on."""
    return type(cls.__name__, (cls,), {"MISTAKE": name})


# ================================================================================================ 01 embeddings
def build_vocab_two_sorts(tokenized_texts, min_freq=1, specials=SPECIALS):
    counts = {}
    for text in tokenized_texts:
        for token in text:
            counts[token] = counts.get(token, 0) + 1
    tokens = sorted(counts)                                  # alphabetical ...
    tokens.sort(key=lambda t: counts[t], reverse=True)       # ... then by count (stable sort keeps ties alphabetical)
    vocab = {}
    for token in list(specials) + [t for t in tokens if counts[t] >= min_freq]:
        vocab.setdefault(token, len(vocab))
    return vocab


def build_vocab_most_common(tokenized_texts, min_freq=1, specials=SPECIALS):
    counts = Counter(token for text in tokenized_texts for token in text)
    ranked = sorted(counts.most_common(), key=lambda pair: (-pair[1], pair[0]))
    vocab = {token: i for i, token in enumerate(specials)}
    for token, count in ranked:
        if count >= min_freq and token not in vocab:
            vocab[token] = len(vocab)
    return vocab


def build_vocab_wrong(kind):
    def build_vocab(tokenized_texts, min_freq=1, specials=SPECIALS):
        counts = Counter(token for text in tokenized_texts for token in text)
        if kind == "most_common_ties":
            ranked = [t for t, _ in counts.most_common()]
        elif kind == "reverse_ties":
            ranked = [t for t, _ in sorted(counts.items(), key=lambda p: (p[1], p[0]), reverse=True)]
        elif kind == "ascending":
            ranked = [t for t, _ in sorted(counts.items(), key=lambda p: (p[1], p[0]))]
        else:
            ranked = [t for t, _ in sorted(counts.items(), key=lambda p: (-p[1], p[0]))]
        threshold = (lambda c: c > min_freq) if kind == "strict_min" else (lambda c: c >= min_freq)
        kept = [t for t in ranked if threshold(counts[t])]
        if kind == "specials_last":
            order = kept + [s for s in specials if s not in kept]
            return {t: i for i, t in enumerate(order)}
        vocab = {s: i for i, s in enumerate(specials)}
        for token in kept:
            if kind == "special_duplicate":
                vocab[token] = len(vocab)
            elif token not in vocab:
                vocab[token] = len(vocab)
        return vocab

    return build_vocab


def encode_loop(tokens, vocab):
    out = []
    for token in tokens:
        out.append(vocab[token] if token in vocab else vocab["<unk>"])
    return out


def encode_unk_one(tokens, vocab):
    return [vocab.get(t, 1) for t in tokens]


def pad_batch_pad_sequence(sequences, pad_id=0, max_len=None):
    tensors = [torch.tensor(s, dtype=torch.long) for s in sequences]
    batch = nn.utils.rnn.pad_sequence(tensors, batch_first=True, padding_value=pad_id)
    if max_len is not None:
        if batch.size(1) >= max_len:
            batch = batch[:, :max_len]
        else:
            batch = F.pad(batch, (0, max_len - batch.size(1)), value=pad_id)
    return batch


def pad_batch_lists(sequences, pad_id=0, max_len=None):
    T = max(len(s) for s in sequences) if max_len is None else max_len
    rows = [list(s[:T]) + [pad_id] * (T - len(s[:T])) for s in sequences]
    return torch.LongTensor(rows)


def pad_batch_wrong(kind):
    def pad_batch(sequences, pad_id=0, max_len=None):
        T = max(len(s) for s in sequences) if max_len is None else max_len
        fill = 0 if kind == "ignore_pad_id" else pad_id
        rows = []
        for s in sequences:
            s = list(s[-T:]) if (kind == "front" and len(s) > T) else list(s[:T])
            pad = [fill] * (T - len(s))
            rows.append(pad + s if kind == "pre" else s + pad)
        return torch.tensor(rows, dtype=torch.long)

    return pad_batch


class TokenEmbeddingSubclass(nn.Embedding):
    """nn.Embedding already has `weight` and a zero padding row; only its N(0, 1) init is rescaled."""

    def __init__(self, vocab_size, d_model, padding_idx=None):
        super().__init__(vocab_size, d_model, padding_idx=padding_idx)
        with torch.no_grad():
            self.weight.mul_(d_model ** -0.5)


class TokenEmbeddingFunctional(nn.Module):
    def __init__(self, vocab_size, d_model, padding_idx=None):
        super().__init__()
        weight = torch.randn(vocab_size, d_model) / math.sqrt(d_model)
        if padding_idx is not None:
            weight[padding_idx] = 0.0
        self.weight = nn.Parameter(weight)

    def forward(self, ids):
        return F.embedding(ids, self.weight)


class TokenEmbeddingWrong(nn.Module):
    MISTAKE = None

    def __init__(self, vocab_size, d_model, padding_idx=None):
        super().__init__()
        weight = torch.empty(vocab_size, d_model)
        if self.MISTAKE == "xavier_init":
            nn.init.xavier_uniform_(weight)
        elif self.MISTAKE == "unit_init":  # the old contract's N(0, 1)
            nn.init.normal_(weight)
        else:
            nn.init.normal_(weight, std=d_model ** -0.5)
        if padding_idx is not None and self.MISTAKE != "padding_row":
            weight[padding_idx] = 0
        self.weight = nn.Parameter(weight)
        self.d_model = d_model

    def forward(self, ids):
        out = self.weight.index_select(0, ids.reshape(-1)).view(*ids.shape, -1)
        return out * math.sqrt(self.d_model) if self.MISTAKE == "scaled" else out


def w2v_numpy(vocab, keyed_vectors):
    matrix = np.zeros((len(vocab), keyed_vectors.vector_size), dtype=np.float32)
    for word, index in vocab.items():
        if keyed_vectors.has_index_for(word):
            matrix[index] = keyed_vectors.get_vector(word)
    return torch.from_numpy(matrix)


def w2v_wrong(kind):
    def embedding_matrix_from_word2vec(vocab, keyed_vectors):
        rows = []
        for word in vocab:                                   # iterates in dict order, not by id
            if word in keyed_vectors:
                rows.append(torch.tensor(keyed_vectors[word]))
            elif kind == "random_missing":
                rows.append(torch.randn(keyed_vectors.vector_size))
            else:
                rows.append(torch.zeros(keyed_vectors.vector_size))
        matrix = torch.stack(rows)
        if kind == "random_missing":                         # rows placed correctly, but unknown rows random
            fixed = torch.zeros_like(matrix)
            for row, (word, index) in zip(matrix, vocab.items()):
                fixed[index] = row
            return fixed
        if kind == "float64":
            return matrix.double()
        return matrix

    return embedding_matrix_from_word2vec


def attention_over_words_torch(query, keys, keyed_vectors):
    q = torch.tensor(keyed_vectors[query])
    K = torch.tensor(np.stack([keyed_vectors[k] for k in keys]))
    weights = torch.softmax(K @ q / keyed_vectors.vector_size ** 0.5, dim=0)
    return weights.numpy(), (weights[:, None] * K).sum(0).numpy()


def attention_over_words_wrong(kind):
    def attention_over_words(query, keys, keyed_vectors):
        q = keyed_vectors[query].astype(np.float64)
        K = np.stack([keyed_vectors[k] for k in keys]).astype(np.float64)
        scale = {"none": 1.0, "mul": math.sqrt(len(q))}[kind]
        scores = K @ q * scale
        weights = np.exp(scores - scores.max())
        weights /= weights.sum()
        return weights, weights @ K

    return attention_over_words


# =============================================================================================== 02 positional
def pe_numpy(max_len, d_model):
    if d_model % 2:
        raise ValueError("d_model must be even")
    pe = np.zeros((max_len, d_model))
    for p in range(max_len):
        for i in range(d_model // 2):
            angle = p / 10000 ** (2 * i / d_model)
            pe[p, 2 * i], pe[p, 2 * i + 1] = math.sin(angle), math.cos(angle)
    return torch.tensor(pe, dtype=torch.float32)


def pe_exp_log(max_len, d_model):
    if d_model % 2 != 0:
        raise ValueError("odd d_model")
    position = torch.arange(max_len).unsqueeze(1).float()
    div_term = torch.exp(torch.arange(0, d_model, 2).float() * (-math.log(10000.0) / d_model))
    pe = torch.zeros(max_len, d_model)
    pe[:, 0::2] = torch.sin(position * div_term)
    pe[:, 1::2] = torch.cos(position * div_term)
    return pe


def pe_wrong(kind):
    def sinusoidal_positional_encoding(max_len, d_model):
        if d_model % 2 and kind != "no_error":
            raise ValueError("odd")
        pe = torch.zeros(max_len, d_model)
        base = 1000 if kind == "base_1000" else 10000
        for p in range(max_len):
            for j in range(0, d_model - d_model % 2, 2):
                exponent = {"column": j, "no_two": j // 2}.get(kind, j)
                angle = p / base ** (exponent / d_model)
                first, second = (math.cos, math.sin) if kind == "swap" else (math.sin, math.cos)
                if kind == "halves":
                    pe[p, j // 2], pe[p, d_model // 2 + j // 2] = first(angle), second(angle)
                else:
                    pe[p, j] = first(angle)
                    exponent2 = j + 1 if kind == "column" else exponent
                    pe[p, j + 1] = second(p / base ** (exponent2 / d_model))
        return pe

    return sinusoidal_positional_encoding


class PositionalEncodingNumpy(nn.Module):
    def __init__(self, d_model, max_len=512, dropout=0.0):
        super().__init__()
        self.drop = nn.Dropout(dropout)
        self.register_buffer("pe", pe_numpy(max_len, d_model))

    def forward(self, x):
        if x.shape[1] > len(self.pe):
            raise ValueError("too long")
        return self.drop(x + self.pe[None, : x.shape[1], :])


class PositionalEncodingWrong(nn.Module):
    MISTAKE = None

    def __init__(self, d_model, max_len=512, dropout=0.0):
        super().__init__()
        table = pe_exp_log(max_len, d_model)
        if self.MISTAKE == "not_buffer":
            self.pe = table
        else:
            self.register_buffer("pe", table)
        self.dropout = nn.Dropout(dropout)

    def forward(self, x):
        if self.MISTAKE != "no_error" and x.size(1) > self.pe.size(0):
            raise ValueError("too long")
        if self.MISTAKE == "batch_axis":
            return self.dropout(x + self.pe[: x.size(0)].unsqueeze(1))
        return self.dropout(x + self.pe[: x.size(1)])


class PositionalEncodingFunctionalDropout(nn.Module):
    """F.dropout with training=self.training instead of an nn.Dropout submodule."""

    def __init__(self, d_model, max_len=512, dropout=0.0):
        super().__init__()
        self.p = dropout
        self.register_buffer("pe", pe_exp_log(max_len, d_model))

    def forward(self, x):
        if x.size(1) > self.pe.size(0):
            raise ValueError("too long")
        return F.dropout(x + self.pe[: x.size(1)], self.p, training=self.training)


class PositionalEncodingDropoutWrong(PositionalEncodingFunctionalDropout):
    """MISTAKE: "ignored" (no dropout at all), "always" (dropout in eval mode too), "before" (dropout on x only)."""

    MISTAKE = None

    def forward(self, x):
        if x.size(1) > self.pe.size(0):
            raise ValueError("too long")
        table = self.pe[: x.size(1)]
        if self.MISTAKE == "ignored":
            return x + table
        if self.MISTAKE == "always":
            return F.dropout(x + table, self.p, training=True)
        return F.dropout(x, self.p, training=self.training) + table


class LearnedPositionalEmbeddingWeight(nn.Module):
    def __init__(self, max_len, d_model):
        super().__init__()
        self.embedding = nn.Embedding(max_len, d_model)

    def forward(self, x):
        return x + self.embedding.weight[: x.size(1)].unsqueeze(0)


class LearnedPositionalEmbeddingWrong(nn.Module):
    MISTAKE = None

    def __init__(self, max_len, d_model):
        super().__init__()
        self.embedding = nn.Embedding(max_len, d_model)

    def forward(self, x):
        if self.MISTAKE == "batch_axis":
            return x + self.embedding(torch.arange(x.size(0), device=x.device)).unsqueeze(1)
        positions = self.embedding(torch.arange(x.size(1), device=x.device)).expand_as(x)
        return positions if self.MISTAKE == "no_x" else x + positions


# ================================================================================================ 03 attention
def padding_mask_unsqueeze(ids, pad_id=0):
    return ids.ne(pad_id).unsqueeze(1).unsqueeze(2)


def padding_mask_wrong(kind):
    def make_padding_mask(ids, pad_id=0):
        if kind == "inverted":
            return (ids == pad_id)[:, None, None, :]
        if kind == "shape":
            return ids != pad_id
        return (ids != pad_id)[:, None, None, :].float()

    return make_padding_mask


def causal_mask_arange(size, device=None):
    i = torch.arange(size, device=device)
    return i[:, None] >= i[None, :]


def causal_mask_triu(size, device=None):
    return ~torch.triu(torch.ones(size, size, device=device), diagonal=1).bool()


def causal_mask_wrong(kind):
    def make_causal_mask(size, device=None):
        ones = torch.ones(size, size, dtype=torch.bool, device=device)
        return {"inverted": torch.triu(ones, 1), "strict": torch.tril(ones, -1), "upper": torch.triu(ones)}[kind]

    return make_causal_mask


def sdpa_einsum_inf(query, key, value, mask=None):
    scores = torch.einsum("...qd,...kd->...qk", query, key) / math.sqrt(query.shape[-1])
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    weights = scores.softmax(-1)
    return torch.einsum("...qk,...kd->...qd", weights, value), weights


def sdpa_additive_float(query, key, value, mask=None):
    scores = query @ key.transpose(-1, -2) / query.size(-1) ** 0.5
    if mask is not None:
        scores = scores + (1.0 - mask.float()) * -1e9        # mask used as 0/1 floats
    weights = F.softmax(scores, dim=-1)
    return torch.matmul(weights, value), weights


def sdpa_torch_builtin(query, key, value, mask=None):
    output = F.scaled_dot_product_attention(query, key, value, attn_mask=None if mask is None else mask.bool())
    scores = query @ key.transpose(-2, -1) / math.sqrt(query.size(-1))
    if mask is not None:
        scores = scores.masked_fill(mask == 0, -1e9)
    return output, torch.softmax(scores, dim=-1)


def sdpa_wrong(kind, fill=-1e9):
    def scaled_dot_product_attention(query, key, value, mask=None):
        d_k = query.size(-1)
        scores = query @ key.transpose(-2, -1)
        scores = {"none": scores, "mul": scores * math.sqrt(d_k), "by_d": scores / d_k,
                  "by_length": scores / math.sqrt(key.size(-2))}.get(kind, scores / d_k ** 0.5)
        if mask is not None and kind not in ("ignore", "after"):
            blocked = mask if kind == "inverted" else ~mask
            scores = scores.masked_fill(blocked, fill)
        weights = torch.softmax(scores, dim=-2 if kind == "dim" else -1)
        if mask is not None and kind == "after":
            weights = weights * mask
        if kind == "transposed_weights":
            weights = weights.transpose(-2, -1)
        return weights @ value if kind != "transposed_weights" else weights.transpose(-2, -1) @ value, weights

    return scaled_dot_product_attention


# =============================================================================================== 04 multi-head
def split_heads_stack(x, num_heads):
    d_head = x.size(-1) // num_heads
    return torch.stack(x.split(d_head, dim=-1), dim=1)


def split_heads_permute(x, num_heads):
    B, T, D = x.shape
    return x.reshape(B, T, num_heads, D // num_heads).permute(0, 2, 1, 3)


def split_heads_wrong(kind):
    def split_heads(x, num_heads):
        B, T, D = x.shape
        if kind == "no_transpose":
            return x.view(B, num_heads, T, D // num_heads)
        return x.view(B, T, D // num_heads, num_heads).permute(0, 3, 1, 2)

    return split_heads


def merge_heads_cat(x):
    return torch.cat(x.unbind(dim=1), dim=-1)


def merge_heads_permute(x):
    B, H, T, d = x.shape
    return x.permute(0, 2, 1, 3).contiguous().view(B, T, H * d)


def merge_heads_wrong(kind):
    def merge_heads(x):
        B, H, T, d = x.shape
        if kind == "no_transpose":
            return x.reshape(B, T, H * d)
        return x.transpose(1, 2).view(B, T, H * d)          # .view on a non-contiguous tensor

    return merge_heads


class MultiHeadAttentionBase(nn.Module):
    """Configurable student MHA: correct unless MISTAKE is set."""

    MISTAKE = None

    def __init__(self, d_model, num_heads, dropout=0.0, bias=True):
        super().__init__()
        if d_model % num_heads and self.MISTAKE != "no_value_error":
            raise ValueError("d_model must be divisible by num_heads")
        self.h, self.d_k = num_heads, d_model // max(num_heads, 1)
        self.w_q = nn.Linear(d_model, d_model, bias=bias)
        self.w_k = nn.Linear(d_model, d_model, bias=bias)
        self.w_v = nn.Linear(d_model, d_model, bias=bias)
        if self.MISTAKE == "renamed":
            self.out_proj = nn.Linear(d_model, d_model, bias=bias)
        else:
            self.w_o = nn.Linear(d_model, d_model, bias=bias)
        self.dropout = nn.Dropout(dropout)

    def forward(self, query, key, value, mask=None):
        B, T_q, D = query.shape
        m = self.MISTAKE

        def split(x):
            if m == "split_no_transpose":
                return x.view(B, self.h, -1, self.d_k)
            return x.view(B, -1, self.h, self.d_k).transpose(1, 2)

        q, k, v = split(self.w_q(query)), split(self.w_k(key)), split(self.w_v(value))
        scale = {"no_scale": 1.0, "d_model": math.sqrt(D)}.get(m, math.sqrt(self.d_k))
        scores = q @ k.transpose(-2, -1) / scale
        if mask is not None:
            scores = scores.masked_fill(mask if m == "inverted" else ~mask, -1e9)
        weights = scores.softmax(dim=-2 if m == "softmax_dim" else -1)
        heads = self.dropout(weights) @ v                                   # (B, H, T_q, d_k)
        if m == "merge_no_transpose":
            merged = heads.reshape(B, T_q, D)
        else:
            merged = heads.transpose(1, 2).reshape(B, T_q, D)
        out = (self.out_proj if m == "renamed" else self.w_o)(merged)
        return out, weights.mean(1) if m == "averaged" else weights


class MultiHeadAttentionInputsMixed(MultiHeadAttentionBase):
    """Correct attention on mixed-up inputs (MISTAKE: kv_swapped, value_from_key, key_from_value, query_from_key);
    invisible whenever the same tensor is passed as query, key and value."""

    def forward(self, query, key, value, mask=None):
        m = self.MISTAKE
        if m == "kv_swapped":
            key, value = value, key
        elif m == "value_from_key":
            value = key
        elif m == "key_from_value":
            key = value
        elif m == "query_from_key" and query.shape == key.shape:   # a student who tested self-attention only
            query = key
        return super().forward(query, key, value, mask)


class MultiHeadAttentionLoop(nn.Module):
    """One head at a time, slicing the projection outputs; the mask filled with -inf."""

    def __init__(self, d_model, num_heads, dropout=0.0, bias=True):
        super().__init__()
        if d_model % num_heads:
            raise ValueError("bad heads")
        self.num_heads = num_heads
        self.w_q, self.w_k = nn.Linear(d_model, d_model, bias=bias), nn.Linear(d_model, d_model, bias=bias)
        self.w_v, self.w_o = nn.Linear(d_model, d_model, bias=bias), nn.Linear(d_model, d_model, bias=bias)

    def forward(self, query, key, value, mask=None):
        q, k, v = self.w_q(query), self.w_k(key), self.w_v(value)
        d = q.size(-1) // self.num_heads
        outputs, maps = [], []
        for h in range(self.num_heads):
            part = slice(h * d, (h + 1) * d)
            scores = torch.einsum("bqd,bkd->bqk", q[..., part], k[..., part]) / math.sqrt(d)
            if mask is not None:
                m = mask[:, 0] if mask.dim() == 4 else mask          # (B, T_q or 1, T_k) or (T_q, T_k)
                scores = scores.masked_fill(~m, float("-inf"))
            w = torch.softmax(scores, dim=-1)
            maps.append(w)
            outputs.append(w @ v[..., part])
        return self.w_o(torch.cat(outputs, dim=-1)), torch.stack(maps, dim=1)


class MultiHeadAttentionTorchSDPA(nn.Module):
    """F.scaled_dot_product_attention for the output, weights computed separately."""

    def __init__(self, d_model, num_heads, dropout=0.0, bias=True):
        super().__init__()
        if d_model % num_heads != 0:
            raise ValueError("d_model % num_heads")
        self.num_heads = num_heads
        for name in ("w_q", "w_k", "w_v", "w_o"):
            setattr(self, name, nn.Linear(d_model, d_model, bias=bias))

    def forward(self, query, key, value, mask=None):
        q = split_heads_permute(self.w_q(query), self.num_heads)
        k = split_heads_permute(self.w_k(key), self.num_heads)
        v = split_heads_permute(self.w_v(value), self.num_heads)
        out = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
        _, weights = sdpa_additive_float(q, k, v, mask)
        return self.w_o(merge_heads_cat(out)), weights


class MultiHeadAttentionSDPADropout(MultiHeadAttentionTorchSDPA):
    """F.scaled_dot_product_attention with dropout_p in training mode (its own dropout draws)."""

    def __init__(self, d_model, num_heads, dropout=0.0, bias=True):
        super().__init__(d_model, num_heads, dropout, bias)
        self.p = dropout

    def forward(self, query, key, value, mask=None):
        q, k, v = (split_heads_permute(w(x), self.num_heads)
                   for w, x in ((self.w_q, query), (self.w_k, key), (self.w_v, value)))
        out = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, dropout_p=self.p if self.training else 0.0)
        _, weights = sdpa_additive_float(q, k, v, mask)
        return self.w_o(merge_heads_cat(out)), weights


# ================================================================================================== 05 encoder
def fails_partially(check, obj, criterion, *fragments):
    """`check(obj)`'s core passes and only the criterion `criterion` (a stated edge case or an argument with teeth)
    fails: PartialCredit (an AssertionError) keeping at least 1 - that kind's share of the points (80% for an edge
    case, 75% for an argument), its message listing that criterion with a cross, plus every fragment."""
    from autograder.checks.kit.criteria import SHARES, PartialCredit
    from coursekit.criteria import CRITERIA

    with pytest.raises(PartialCredit) as info:
        check(obj)
    message = str(info.value)
    assert info.value.fraction >= 1 - SHARES[CRITERIA[criterion].kind] - 1e-9, message
    assert f"✗ {CRITERIA[criterion].text}" in message, message
    crossed = [line for line in message.splitlines() if line.startswith("  ✗ ")]
    assert crossed == [f"  ✗ {CRITERIA[criterion].text}"], message  # that criterion only
    for fragment in fragments:
        assert fragment in message, message
    return message


def fails_plainly(check, obj, *fragments):
    """`check(obj)` fails outright (its core fails: no partial credit), with every fragment in its message."""
    from autograder.checks.kit.criteria import PartialCredit

    message = fails_with(check, obj, *fragments)
    with pytest.raises(AssertionError) as info:
        check(obj)
    assert not isinstance(info.value, PartialCredit), message
    return message


class FeedForwardFunctional(nn.Module):
    def __init__(self, d_model, d_ff, dropout=0.0):
        super().__init__()
        self.linear1, self.linear2 = nn.Linear(d_model, d_ff), nn.Linear(d_ff, d_model)
        self.p = dropout

    def forward(self, x):
        return self.linear2(F.dropout(F.relu(self.linear1(x)), self.p, self.training))


class FeedForwardWrong(nn.Module):
    MISTAKE = None

    def __init__(self, d_model, d_ff, dropout=0.0):
        super().__init__()
        self.linear1, self.linear2 = nn.Linear(d_model, d_ff), nn.Linear(d_ff, d_model)

    def forward(self, x):
        h = self.linear1(x)
        if self.MISTAKE == "gelu":
            h = F.gelu(h)
        elif self.MISTAKE != "no_relu":
            h = h.relu()
        out = self.linear2(h)
        return out.relu() if self.MISTAKE == "relu_after" else out


class EncoderBlockStudent(nn.Module):
    """Configurable EncoderBlock built on the loop-over-heads MHA."""

    MISTAKE = None
    ATTENTION = MultiHeadAttentionLoop

    def __init__(self, d_model, num_heads, d_ff, dropout=0.0, norm_first=False):
        super().__init__()
        self.norm_first = (not norm_first) if self.MISTAKE == "norm_swapped" else norm_first
        self.self_attn = self.ATTENTION(d_model, num_heads, dropout)
        self.ffn = FeedForwardFunctional(d_model, d_ff, dropout)
        self.norm1, self.norm2 = nn.LayerNorm(d_model), nn.LayerNorm(d_model)
        self.drop = nn.Dropout(dropout)

    def forward(self, x, mask=None):
        m = self.MISTAKE
        if mask is not None and m == "inverted":
            mask = ~mask
        attn = lambda h: self.drop(self.self_attn(h, h, h, mask)[0])  # noqa: E731
        ff = lambda h: self.drop(self.ffn(h))  # noqa: E731
        keep_attn, keep_ff = m != "no_residual_attn", m != "no_residual_ffn"
        if self.norm_first:
            x = (x if keep_attn else 0) + attn(self.norm1(x))
            return (x if keep_ff else 0) + ff(self.norm2(x))
        x = self.norm1((x if keep_attn else 0) + attn(x))
        return self.norm2((x if keep_ff else 0) + ff(x))


class EncoderStudent(nn.Module):
    MISTAKE = None
    BLOCK = EncoderBlockStudent

    def __init__(self, vocab_size, d_model, num_heads, d_ff, num_layers, max_len=512, dropout=0.0,
                 norm_first=False):
        super().__init__()
        self.embedding = TokenEmbeddingSubclass(vocab_size, d_model)
        self.pos_encoding = PositionalEncodingNumpy(d_model, max_len, dropout)
        block = mistake(self.BLOCK, self.MISTAKE) if self.MISTAKE in ("norm_swapped",) else self.BLOCK
        self.layers = nn.ModuleList([block(d_model, num_heads, d_ff, dropout, norm_first) for _ in range(num_layers)])
        with_norm = norm_first != (self.MISTAKE == "final_norm")
        self.norm = nn.LayerNorm(d_model) if with_norm else nn.Identity()
        self.scale = 1.0 if self.MISTAKE == "no_scale" else math.sqrt(d_model)

    def forward(self, src_ids, src_mask=None):
        x = self.embedding(src_ids) * self.scale
        x = x if self.MISTAKE == "no_positions" else self.pos_encoding(x)
        mask = None if self.MISTAKE == "ignore_mask" else src_mask
        for layer in self.layers:
            x = layer(x, mask)
        return self.norm(x)


# ================================================================================================ 06 transformer
class DecoderBlockStudent(nn.Module):
    MISTAKE = None

    def __init__(self, d_model, num_heads, d_ff, dropout=0.0, norm_first=False):
        super().__init__()
        self.norm_first = (not norm_first) if self.MISTAKE == "norm_swapped" else norm_first
        self.self_attn = MultiHeadAttentionTorchSDPA(d_model, num_heads, dropout)
        self.cross_attn = MultiHeadAttentionLoop(d_model, num_heads, dropout)
        self.ffn = FeedForwardFunctional(d_model, d_ff, dropout)
        self.norm1, self.norm2, self.norm3 = (nn.LayerNorm(d_model) for _ in range(3))

    def forward(self, x, memory, tgt_mask=None, memory_mask=None):
        m = self.MISTAKE
        self_mask = None if m == "ignore_tgt_mask" else tgt_mask
        sa = lambda h: self.self_attn(h, h, h, self_mask)[0]  # noqa: E731
        kv = lambda h: h if m == "cross_from_decoder" else memory  # noqa: E731
        ca = lambda h: self.cross_attn(h, kv(h), kv(h), memory_mask)[0]  # noqa: E731
        res = lambda name, a, b: b if m == name else a + b  # noqa: E731
        if self.norm_first:
            x = res("no_residual_attn", x, sa(self.norm1(x)))
            x = res("no_residual_cross", x, ca(self.norm2(x)))
            return res("no_residual_ffn", x, self.ffn(self.norm3(x)))
        x = self.norm1(res("no_residual_attn", x, sa(x)))
        x = self.norm2(res("no_residual_cross", x, ca(x)))
        return self.norm3(res("no_residual_ffn", x, self.ffn(x)))


class DecoderStudent(nn.Module):
    MISTAKE = None

    def __init__(self, vocab_size, d_model, num_heads, d_ff, num_layers, max_len=512, dropout=0.0,
                 norm_first=False):
        super().__init__()
        self.embedding = TokenEmbeddingFunctional(vocab_size, d_model)
        self.pos_encoding = solutions.PositionalEncoding(d_model, max_len, dropout)
        block = mistake(DecoderBlockStudent, self.MISTAKE)
        self.layers = nn.ModuleList([block(d_model, num_heads, d_ff, dropout, norm_first) for _ in range(num_layers)])
        with_norm = norm_first != (self.MISTAKE == "final_norm")
        self.norm = nn.LayerNorm(d_model) if with_norm else nn.Identity()
        self.d_model = d_model

    def forward(self, tgt_ids, memory, tgt_mask=None, memory_mask=None):
        scale = 1.0 if self.MISTAKE == "no_scale" else math.sqrt(self.d_model)
        x = self.pos_encoding(self.embedding(tgt_ids) * scale)
        for layer in self.layers:
            x = layer(x, memory, tgt_mask, memory_mask)
        return self.norm(x)


class TransformerStudent(nn.Module):
    MISTAKE = None

    def __init__(self, src_vocab_size, tgt_vocab_size, d_model=64, num_heads=4, d_ff=128, num_layers=2, max_len=512,
                 dropout=0.0, pad_id=0, norm_first=False):
        super().__init__()
        self.pad_id = 0 if self.MISTAKE == "pad_zero" else pad_id
        self.encoder = EncoderStudent(src_vocab_size, d_model, num_heads, d_ff, num_layers, max_len,
                                      dropout, norm_first)
        self.decoder = DecoderStudent(tgt_vocab_size, d_model, num_heads, d_ff, num_layers, max_len, dropout,
                                      norm_first)
        self.generator = nn.Linear(d_model, tgt_vocab_size)

    def encode(self, src_ids):
        src_mask = make_padding_mask(src_ids, self.pad_id)
        if self.MISTAKE == "inverted_src":
            src_mask = ~src_mask
        memory = self.encoder(src_ids, None if self.MISTAKE == "no_src_mask" else src_mask)
        return memory, src_mask

    def decode(self, tgt_ids, memory, src_mask):
        T = tgt_ids.size(1)
        tgt_mask = (tgt_ids != self.pad_id).view(tgt_ids.size(0), 1, 1, T)
        if self.MISTAKE != "no_causal":
            tgt_mask = tgt_mask & ~torch.triu(torch.ones(T, T, dtype=torch.bool, device=tgt_ids.device), 1)
        memory_mask = None if self.MISTAKE == "no_src_mask" else src_mask
        return self.generator(self.decoder(tgt_ids, memory, tgt_mask, memory_mask))

    def forward(self, src_ids, tgt_ids):
        memory, src_mask = self.encode(src_ids)
        return self.decode(tgt_ids, memory, src_mask)


def greedy_forward(model, src_ids, max_len, bos_id=2, eos_id=3):
    """Re-runs the whole model(src, ys) each step; builds the output with a Python list of finished flags."""
    ys = torch.full((src_ids.size(0), 1), bos_id, dtype=torch.long, device=src_ids.device)
    done = [False] * src_ids.size(0)
    with torch.no_grad():
        for _ in range(max_len):
            nxt = model(src_ids, ys)[:, -1, :].argmax(-1)
            for b in range(len(done)):
                if done[b]:
                    nxt[b] = model.pad_id
                elif nxt[b].item() == eos_id:
                    done[b] = True
            ys = torch.cat([ys, nxt.unsqueeze(1)], dim=1)
            if all(done):
                break
    return ys[:, 1:]


def greedy_per_sequence(model, src_ids, max_len, bos_id=2, eos_id=3):
    """One source at a time with encode/decode, then padded to a common length."""
    outputs = []
    for row in src_ids:
        memory, src_mask = model.encode(row[None])
        ys = torch.tensor([[bos_id]], device=src_ids.device)
        for _ in range(max_len):
            token = model.decode(ys, memory, src_mask)[0, -1].argmax()
            ys = torch.cat([ys, token.view(1, 1)], dim=1)
            if token.item() == eos_id:
                break
        outputs.append(ys[0, 1:])
    length = max(len(o) for o in outputs)
    return torch.stack([F.pad(o, (0, length - len(o)), value=model.pad_id) for o in outputs])


def greedy_wrong(kind):
    def greedy_decode(model, src_ids, max_len, bos_id=2, eos_id=3):
        memory, src_mask = model.encode(src_ids)
        ys = torch.full((src_ids.size(0), 1), bos_id, dtype=torch.long, device=src_ids.device)
        finished = torch.zeros(src_ids.size(0), dtype=torch.bool, device=src_ids.device)
        for _ in range(max_len):
            token = model.decode(ys, memory, src_mask)[:, -1].argmax(-1)
            if kind != "no_pad":
                token[finished] = model.pad_id
            ys = torch.cat([ys, token[:, None]], dim=1)
            finished = finished | (token == eos_id)
            if kind == "stop_any" and finished.any():
                break
            if kind not in ("no_stop", "stop_any") and finished.all():
                break
        out = ys if kind == "with_bos" else ys[:, 1:]
        if kind == "no_eos":
            out = torch.where(out == eos_id, torch.full_like(out, model.pad_id), out)
        return out

    return greedy_decode

