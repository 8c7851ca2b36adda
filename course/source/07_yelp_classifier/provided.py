"""Provided components for 07_yelp_classifier: GENERATED from the reference, do not edit.

Written by autograder.provided.write_provided_module; sources: solutions/embeddings.py, solutions/positional.py, solutions/attention.py, solutions/multi_head.py, solutions/encoder.py, solutions/transformer.py.
These are the pieces you built in the earlier notebooks; import what you need, e.g.
    from provided import greedy_decode
"""
from __future__ import annotations

# ====================================================================================================
# source: solutions/embeddings.py: 01 - Tokens and embeddings: a vocabulary, token ids, an embedding table, and word2vec vectors.
# ====================================================================================================
import math
from collections import Counter
from typing import Iterable

import numpy as np
import torch
from torch import nn

SPECIALS = ("<pad>", "<unk>", "<bos>", "<eos>")


def build_vocab(tokenized_texts: Iterable[list[str]], min_freq: int = 1, specials=SPECIALS) -> dict[str, int]:
    """Map each token to an id: specials first, then by descending count, ties in alphabetical order."""
    counts = Counter()
    for tokens in tokenized_texts:
        if isinstance(tokens, str):
            raise TypeError("build_vocab expects lists of tokens, got a plain string; tokenize it first")
        counts.update(tokens)
    vocab = {}
    for token in specials:
        if token not in vocab:
            vocab[token] = len(vocab)
    # Sort key: most frequent first (-count), then alphabetical (token).
    for token, count in sorted(counts.items(), key=lambda item: (-item[1], item[0])):
        if count >= min_freq and token not in vocab:
            vocab[token] = len(vocab)
    return vocab


def encode(tokens: list[str], vocab: dict[str, int]) -> list[int]:
    """Token strings -> ids; a token missing from `vocab` becomes the id of "<unk>"."""
    if "<unk>" not in vocab:
        raise KeyError('the vocabulary has no "<unk>" token, so unknown words cannot be encoded')
    unk_id = vocab["<unk>"]
    return [vocab.get(token, unk_id) for token in tokens]


def pad_batch(sequences: list[list[int]], pad_id: int = 0, max_len: int | None = None) -> torch.LongTensor:
    """Lists of ids -> one (B, T) tensor, padded (and cut, when `max_len` is given) at the end."""
    if max_len is not None and max_len < 0:
        raise ValueError(f"max_len must be >= 0, got {max_len}")
    longest = max((len(seq) for seq in sequences), default=0)
    T = longest if max_len is None else max_len
    batch = torch.full((len(sequences), T), pad_id, dtype=torch.long)  # (B, T)
    for row, seq in enumerate(sequences):
        kept = list(seq)[:T]
        if kept:
            batch[row, : len(kept)] = torch.tensor(kept, dtype=torch.long)
    return batch


class TokenEmbedding(nn.Module):
    """A lookup table: row `i` of `weight` is the vector of token id `i` (no scaling here)."""

    def __init__(self, vocab_size: int, d_model: int, padding_idx: int | None = None):
        super().__init__()
        if padding_idx is not None and not 0 <= padding_idx < vocab_size:
            raise ValueError(f"padding_idx {padding_idx} is outside the vocabulary (size {vocab_size})")
        self.padding_idx = padding_idx
        self.weight = nn.Parameter(torch.randn(vocab_size, d_model))  # (V, d_model), N(0, 1)
        if padding_idx is not None:
            with torch.no_grad():
                self.weight[padding_idx].zero_()

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        # ids: (B, T) int64 -> (B, T, d_model)
        return self.weight[ids]


def embedding_matrix_from_word2vec(vocab: dict[str, int], keyed_vectors) -> torch.FloatTensor:
    """A (len(vocab), vector_size) matrix: the word2vec vector for known words, zeros for the rest."""
    if len(set(vocab.values())) != len(vocab) or sorted(vocab.values()) != list(range(len(vocab))):
        raise ValueError("vocab ids must be exactly 0..len(vocab)-1, each used once")
    matrix = torch.zeros(len(vocab), keyed_vectors.vector_size)  # (V, vector_size)
    for word, index in vocab.items():
        if word in keyed_vectors.key_to_index:
            matrix[index] = torch.tensor(np.array(keyed_vectors[word]), dtype=torch.float32)
    return matrix


def attention_over_words(query: str, keys: list[str], keyed_vectors) -> tuple[np.ndarray, np.ndarray]:
    """Scaled dot-product attention of one word over a list of words (the keys are also the values)."""
    missing = [word for word in [query, *keys] if word not in keyed_vectors.key_to_index]
    if missing:
        raise KeyError(f"not in the word2vec vocabulary: {missing}")
    if not keys:
        raise ValueError("keys must contain at least one word")
    q = np.asarray(keyed_vectors[query], dtype=np.float64)                     # (d,)
    K = np.stack([np.asarray(keyed_vectors[w], dtype=np.float64) for w in keys])  # (n, d)
    scores = K @ q / math.sqrt(keyed_vectors.vector_size)                     # (n,)
    scores = scores - scores.max()  # same softmax, no overflow
    weights = np.exp(scores) / np.exp(scores).sum()                           # (n,)
    value = weights @ K                                                       # (d,)
    return weights, value


# ====================================================================================================
# source: solutions/positional.py: 02 - Positional encoding: tell the model where each token sits in the sequence.
# ====================================================================================================
import torch
from torch import nn


def sinusoidal_positional_encoding(max_len: int, d_model: int) -> torch.FloatTensor:
    """PE[p, 2i] = sin(p / 10000**(2i/d_model)), PE[p, 2i+1] = cos(same angle); shape (max_len, d_model)."""
    if d_model % 2 != 0:
        raise ValueError(f"d_model must be even for sine/cosine pairs, got {d_model}")
    if max_len < 0:
        raise ValueError(f"max_len must be >= 0, got {max_len}")
    position = torch.arange(max_len, dtype=torch.float64).unsqueeze(1)        # (max_len, 1)
    two_i = torch.arange(0, d_model, 2, dtype=torch.float64)                  # (d_model/2,)
    angle = position / (10000.0 ** (two_i / d_model))                         # (max_len, d_model/2)
    pe = torch.zeros(max_len, d_model, dtype=torch.float64)
    pe[:, 0::2] = torch.sin(angle)
    pe[:, 1::2] = torch.cos(angle)
    return pe.float()


class PositionalEncoding(nn.Module):
    """Adds the fixed sinusoidal table to the embeddings, then dropout."""

    def __init__(self, d_model: int, max_len: int = 512, dropout: float = 0.0):
        super().__init__()
        self.dropout = nn.Dropout(dropout)
        self.register_buffer("pe", sinusoidal_positional_encoding(max_len, d_model))  # (max_len, d_model)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        # x: (B, T, d_model)
        T = x.size(1)
        if T > self.pe.size(0):
            raise ValueError(f"sequence length {T} is longer than max_len {self.pe.size(0)}")
        return self.dropout(x + self.pe[:T].to(x.dtype))


class LearnedPositionalEmbedding(nn.Module):
    """Adds a trained vector per position (as BERT and GPT do)."""

    def __init__(self, max_len: int, d_model: int):
        super().__init__()
        self.embedding = nn.Embedding(max_len, d_model)  # (max_len, d_model)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        # x: (B, T, d_model)
        T = x.size(1)
        if T > self.embedding.num_embeddings:
            raise ValueError(f"sequence length {T} is longer than max_len {self.embedding.num_embeddings}")
        positions = torch.arange(T, device=x.device)  # (T,)
        return x + self.embedding(positions)           # (T, d_model) broadcasts over B


# ====================================================================================================
# source: solutions/attention.py: 03 - Scaled dot-product attention and the two masks (True = may attend).
# ====================================================================================================
import math

import torch


def make_padding_mask(ids: torch.Tensor, pad_id: int = 0) -> torch.Tensor:
    """(B, T) ids -> (B, 1, 1, T) bool, True at real tokens; broadcasts over heads and query positions."""
    if ids.dim() != 2:
        raise ValueError(f"ids must have shape (B, T), got {tuple(ids.shape)}")
    return (ids != pad_id)[:, None, None, :]


def make_causal_mask(size: int, device=None) -> torch.Tensor:
    """(size, size) bool, lower triangle True: position i may look at positions j <= i."""
    return torch.tril(torch.ones(size, size, dtype=torch.bool, device=device))


def scaled_dot_product_attention(query, key, value, mask=None):
    """softmax(q k^T / sqrt(d_k)) v, with blocked scores set to the dtype's most negative value."""
    d_k = query.size(-1)
    scores = query @ key.transpose(-2, -1) / math.sqrt(d_k)   # (..., T_q, T_k)
    if mask is not None:
        scores = scores.masked_fill(~mask.to(torch.bool), torch.finfo(scores.dtype).min)
    weights = torch.softmax(scores, dim=-1)                   # (..., T_q, T_k), rows sum to 1
    output = weights @ value                                  # (..., T_q, d_v)
    return output, weights


# ====================================================================================================
# source: solutions/multi_head.py: 04 - Multi-head attention: H attentions side by side on slices of the features.
# ====================================================================================================
import torch
from torch import nn



def split_heads(x: torch.Tensor, num_heads: int) -> torch.Tensor:
    """(B, T, d_model) -> (B, H, T, d_head); head h gets features h*d_head .. (h+1)*d_head - 1."""
    if x.dim() != 3:
        raise ValueError(f"split_heads expects (B, T, d_model), got shape {tuple(x.shape)}")
    B, T, d_model = x.shape
    if d_model % num_heads != 0:
        raise ValueError(f"d_model {d_model} is not divisible by num_heads {num_heads}")
    return x.reshape(B, T, num_heads, d_model // num_heads).transpose(1, 2)


def merge_heads(x: torch.Tensor) -> torch.Tensor:
    """(B, H, T, d_head) -> (B, T, H * d_head), the inverse of split_heads."""
    if x.dim() != 4:
        raise ValueError(f"merge_heads expects (B, H, T, d_head), got shape {tuple(x.shape)}")
    B, H, T, d_head = x.shape
    return x.transpose(1, 2).reshape(B, T, H * d_head)


class MultiHeadAttention(nn.Module):
    """Project q, k, v; attend in H heads; concatenate the heads; project back."""

    def __init__(self, d_model: int, num_heads: int, dropout: float = 0.0, bias: bool = True):
        super().__init__()
        if d_model % num_heads != 0:
            raise ValueError(f"d_model {d_model} is not divisible by num_heads {num_heads}")
        self.d_model = d_model
        self.num_heads = num_heads
        self.w_q = nn.Linear(d_model, d_model, bias=bias)
        self.w_k = nn.Linear(d_model, d_model, bias=bias)
        self.w_v = nn.Linear(d_model, d_model, bias=bias)
        self.w_o = nn.Linear(d_model, d_model, bias=bias)
        self.dropout = nn.Dropout(dropout)

    def forward(self, query, key, value, mask=None):
        # query: (B, T_q, d_model); key, value: (B, T_k, d_model); mask broadcasts to (B, H, T_q, T_k)
        q = split_heads(self.w_q(query), self.num_heads)  # (B, H, T_q, d_head)
        k = split_heads(self.w_k(key), self.num_heads)    # (B, H, T_k, d_head)
        v = split_heads(self.w_v(value), self.num_heads)  # (B, H, T_k, d_head)
        heads, weights = scaled_dot_product_attention(q, k, v, mask)  # (B, H, T_q, d_head), (B, H, T_q, T_k)
        if self.training and self.dropout.p > 0:
            heads = self.dropout(weights) @ v             # dropout on the attention weights, then mix values
        output = self.w_o(merge_heads(heads))             # (B, T_q, d_model)
        return output, weights


# ====================================================================================================
# source: solutions/encoder.py: 05 - The encoder: blocks of self-attention and feed-forward, each wrapped in residual + LayerNorm.
# ====================================================================================================
import math

import torch
from torch import nn



class PositionwiseFeedForward(nn.Module):
    """The same two-layer MLP applied at every position: linear2(dropout(relu(linear1(x))))."""

    def __init__(self, d_model: int, d_ff: int, dropout: float = 0.0):
        super().__init__()
        self.linear1 = nn.Linear(d_model, d_ff)
        self.linear2 = nn.Linear(d_ff, d_model)
        self.dropout = nn.Dropout(dropout)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        # x: (B, T, d_model) -> (B, T, d_ff) -> (B, T, d_model)
        return self.linear2(self.dropout(torch.relu(self.linear1(x))))


class EncoderBlock(nn.Module):
    """Self-attention then feed-forward; post-norm (original paper) or pre-norm (norm_first=True)."""

    def __init__(self, d_model: int, num_heads: int, d_ff: int, dropout: float = 0.0, norm_first: bool = False):
        super().__init__()
        self.norm_first = norm_first
        self.self_attn = MultiHeadAttention(d_model, num_heads, dropout)
        self.ffn = PositionwiseFeedForward(d_model, d_ff, dropout)
        self.norm1 = nn.LayerNorm(d_model)
        self.norm2 = nn.LayerNorm(d_model)
        self.dropout1 = nn.Dropout(dropout)
        self.dropout2 = nn.Dropout(dropout)

    def _attend(self, x, mask):
        return self.dropout1(self.self_attn(x, x, x, mask)[0])  # (B, T, d_model)

    def forward(self, x: torch.Tensor, mask=None) -> torch.Tensor:
        # x: (B, T, d_model); mask broadcasts to (B, H, T, T), True = may attend
        if self.norm_first:
            x = x + self._attend(self.norm1(x), mask)
            x = x + self.dropout2(self.ffn(self.norm2(x)))
        else:
            x = self.norm1(x + self._attend(x, mask))
            x = self.norm2(x + self.dropout2(self.ffn(x)))
        return x


class Encoder(nn.Module):
    """Token embedding * sqrt(d_model) + positions, then num_layers EncoderBlocks, then a final norm (pre-norm)."""

    def __init__(self, vocab_size: int, d_model: int, num_heads: int, d_ff: int, num_layers: int,
                 max_len: int = 512, dropout: float = 0.0, norm_first: bool = False):
        super().__init__()
        self.d_model = d_model
        self.embedding = TokenEmbedding(vocab_size, d_model)
        self.pos_encoding = PositionalEncoding(d_model, max_len, dropout)
        self.layers = nn.ModuleList(
            EncoderBlock(d_model, num_heads, d_ff, dropout, norm_first) for _ in range(num_layers)
        )
        # Pre-norm stacks leave the residual stream un-normalised, so they end with one more LayerNorm.
        self.norm = nn.LayerNorm(d_model) if norm_first else nn.Identity()

    def forward(self, src_ids: torch.Tensor, src_mask=None) -> torch.Tensor:
        # src_ids: (B, T) -> x: (B, T, d_model)
        x = self.embedding(src_ids) * math.sqrt(self.d_model)
        x = self.pos_encoding(x)
        for layer in self.layers:
            x = layer(x, src_mask)
        return self.norm(x)


# ====================================================================================================
# source: solutions/transformer.py: 06 - The decoder, the full encoder-decoder Transformer, and greedy decoding (with a key/value cache).
# ====================================================================================================
import math

import torch
from torch import nn



class DecoderBlock(nn.Module):
    """Masked self-attention, cross-attention over the encoder output, feed-forward; residual + norm around each."""

    def __init__(self, d_model: int, num_heads: int, d_ff: int, dropout: float = 0.0, norm_first: bool = False):
        super().__init__()
        self.norm_first = norm_first
        self.self_attn = MultiHeadAttention(d_model, num_heads, dropout)
        self.cross_attn = MultiHeadAttention(d_model, num_heads, dropout)
        self.ffn = PositionwiseFeedForward(d_model, d_ff, dropout)
        self.norm1 = nn.LayerNorm(d_model)
        self.norm2 = nn.LayerNorm(d_model)
        self.norm3 = nn.LayerNorm(d_model)
        self.dropout1 = nn.Dropout(dropout)
        self.dropout2 = nn.Dropout(dropout)
        self.dropout3 = nn.Dropout(dropout)

    def _self_attend(self, x, tgt_mask):
        return self.dropout1(self.self_attn(x, x, x, tgt_mask)[0])                    # (B, T, d_model)

    def _cross_attend(self, x, memory, memory_mask):
        return self.dropout2(self.cross_attn(x, memory, memory, memory_mask)[0])      # (B, T, d_model)

    def forward(self, x, memory, tgt_mask=None, memory_mask=None):
        # x: (B, T, d_model); memory: (B, S, d_model)
        # tgt_mask broadcasts to (B, H, T, T), memory_mask to (B, H, T, S); True = may attend
        if self.norm_first:
            x = x + self._self_attend(self.norm1(x), tgt_mask)
            x = x + self._cross_attend(self.norm2(x), memory, memory_mask)
            x = x + self.dropout3(self.ffn(self.norm3(x)))
        else:
            x = self.norm1(x + self._self_attend(x, tgt_mask))
            x = self.norm2(x + self._cross_attend(x, memory, memory_mask))
            x = self.norm3(x + self.dropout3(self.ffn(x)))
        return x


class Decoder(nn.Module):
    """Token embedding * sqrt(d_model) + positions, then num_layers DecoderBlocks, then a final norm (pre-norm)."""

    def __init__(self, vocab_size: int, d_model: int, num_heads: int, d_ff: int, num_layers: int,
                 max_len: int = 512, dropout: float = 0.0, norm_first: bool = False):
        super().__init__()
        self.d_model = d_model
        self.embedding = TokenEmbedding(vocab_size, d_model)
        self.pos_encoding = PositionalEncoding(d_model, max_len, dropout)
        self.layers = nn.ModuleList(
            DecoderBlock(d_model, num_heads, d_ff, dropout, norm_first) for _ in range(num_layers)
        )
        self.norm = nn.LayerNorm(d_model) if norm_first else nn.Identity()

    def forward(self, tgt_ids, memory, tgt_mask=None, memory_mask=None):
        # tgt_ids: (B, T) -> x: (B, T, d_model)
        x = self.embedding(tgt_ids) * math.sqrt(self.d_model)
        x = self.pos_encoding(x)
        for layer in self.layers:
            x = layer(x, memory, tgt_mask, memory_mask)
        return self.norm(x)


class Transformer(nn.Module):
    """Encoder-decoder Transformer that builds its own masks from pad_id."""

    def __init__(self, src_vocab_size: int, tgt_vocab_size: int, d_model: int = 64, num_heads: int = 4,
                 d_ff: int = 128, num_layers: int = 2, max_len: int = 512, dropout: float = 0.0,
                 pad_id: int = 0, norm_first: bool = False):
        super().__init__()
        self.pad_id = pad_id
        self.encoder = Encoder(src_vocab_size, d_model, num_heads, d_ff, num_layers, max_len, dropout, norm_first)
        self.decoder = Decoder(tgt_vocab_size, d_model, num_heads, d_ff, num_layers, max_len, dropout, norm_first)
        self.generator = nn.Linear(d_model, tgt_vocab_size)

    def encode(self, src_ids):
        # src_ids: (B, S) -> memory (B, S, d_model), src_mask (B, 1, 1, S)
        src_mask = make_padding_mask(src_ids, self.pad_id)
        return self.encoder(src_ids, src_mask), src_mask

    def decode(self, tgt_ids, memory, src_mask):
        # tgt_ids: (B, T) -> logits (B, T, V)
        T = tgt_ids.size(1)
        tgt_mask = make_padding_mask(tgt_ids, self.pad_id) & make_causal_mask(T, tgt_ids.device)  # (B, 1, T, T)
        x = self.decoder(tgt_ids, memory, tgt_mask, src_mask)
        return self.generator(x)

    def forward(self, src_ids, tgt_ids):
        memory, src_mask = self.encode(src_ids)
        return self.decode(tgt_ids, memory, src_mask)


# ---------------------------------------------------------------------------------------------------------------
# Greedy decoding.
#
# Without a cache, step t runs the whole decoder on all t tokens generated so far and keeps only the last row of
# logits: the work of every earlier position is redone at every step.  Because of the causal mask, the earlier
# positions never change, so each self-attention layer can instead keep the keys and values it has already
# computed and, at step t, project only the newest token (one query row).  The cross-attention keys and values
# come from the fixed encoder output, so they are projected once.  Both paths compute the same numbers.
# ---------------------------------------------------------------------------------------------------------------


def _project_heads(linear: nn.Linear, x: torch.Tensor, num_heads: int) -> torch.Tensor:
    return split_heads(linear(x), num_heads)                                          # (B, H, T, d_head)


def _attend_projected(attn: MultiHeadAttention, x_new, keys, values, mask):
    """One query row against already-projected keys/values: (B, 1, d_model) -> (B, 1, d_model)."""
    q = _project_heads(attn.w_q, x_new, keys.size(1))                                 # (B, H, 1, d_head)
    heads, _ = scaled_dot_product_attention(q, keys, values, mask)                    # (B, H, 1, d_head)
    return attn.w_o(merge_heads(heads))                                               # (B, 1, d_model)


def _decoder_block_step(block: DecoderBlock, x_new, cache: dict, key_keep, memory_mask, norm_first: bool):
    """The newest position through one DecoderBlock, appending its self-attention keys/values to `cache`.

    x_new: (B, 1, d_model); key_keep: (B, 1, 1, t) True where the generated token is not padding.
    cache: "k", "v" (B, H, t-1, d_head) self-attention so far; "mem_k", "mem_v" (B, H, S, d_head) cross-attention.
    """
    H = cache["mem_k"].size(1)

    def self_attend(h):                                                               # h: (B, 1, d_model)
        cache["k"] = torch.cat([cache["k"], _project_heads(block.self_attn.w_k, h, H)], dim=2)  # (B, H, t, d_head)
        cache["v"] = torch.cat([cache["v"], _project_heads(block.self_attn.w_v, h, H)], dim=2)
        return _attend_projected(block.self_attn, h, cache["k"], cache["v"], key_keep)

    def cross_attend(h):
        return _attend_projected(block.cross_attn, h, cache["mem_k"], cache["mem_v"], memory_mask)

    x = x_new
    if norm_first:
        x = x + self_attend(block.norm1(x))
        x = x + cross_attend(block.norm2(x))
        x = x + block.ffn(block.norm3(x))
    else:
        x = block.norm1(x + self_attend(x))
        x = block.norm2(x + cross_attend(x))
        x = block.norm3(x + block.ffn(x))
    return x


def _num_heads(attn) -> int:
    num_heads = getattr(attn, "num_heads", None)
    if not isinstance(num_heads, int):
        raise AttributeError("the key/value cache needs MultiHeadAttention.num_heads; call with use_cache=False")
    return num_heads


def _start_cache(model: Transformer, memory: torch.Tensor) -> list[dict]:
    """Per decoder layer: empty self-attention keys/values, and the cross-attention keys/values of `memory`."""
    caches = []
    B = memory.size(0)
    for block in model.decoder.layers:
        H = _num_heads(block.cross_attn)
        d_head = memory.size(-1) // H
        empty = memory.new_zeros(B, H, 0, d_head)                                     # (B, H, 0, d_head)
        caches.append({
            "k": empty, "v": empty,
            "mem_k": _project_heads(block.cross_attn.w_k, memory, H),                 # (B, H, S, d_head)
            "mem_v": _project_heads(block.cross_attn.w_v, memory, H),
        })
    return caches


def _next_logits_cached(model: Transformer, ys, caches, src_mask, norm_first: bool):
    """Logits for the token after `ys` (B, t), feeding only its last token through the cached layers."""
    decoder = model.decoder
    t = ys.size(1)
    d_model = decoder.pos_encoding.pe.size(1)
    x = decoder.embedding(ys[:, -1:]) * math.sqrt(d_model)                           # (B, 1, d_model)
    x = x + decoder.pos_encoding.pe[t - 1]                                            # position t-1 (eval: no dropout)
    key_keep = (ys != model.pad_id)[:, None, None, :]                                 # (B, 1, 1, t)
    for block, cache in zip(decoder.layers, caches):
        x = _decoder_block_step(block, x, cache, key_keep, src_mask, norm_first)
    return model.generator(decoder.norm(x))[:, -1]                                    # (B, V)


@torch.no_grad()
def greedy_decode(model: Transformer, src_ids, max_len: int, bos_id: int = 2, eos_id: int = 3,
                  use_cache: bool = True) -> torch.Tensor:
    """Generate up to max_len tokens per source, always taking the most likely next token.

    Returns (B, <= max_len) int64 tokens without the leading bos_id; after a sequence's eos_id come pad_ids.
    """
    if max_len < 0:
        raise ValueError(f"max_len must be >= 0, got {max_len}")
    if bos_id == model.pad_id:
        raise ValueError(f"bos_id ({bos_id}) must differ from the model's pad_id: padding is masked out")
    positions = model.decoder.pos_encoding.pe.size(0)
    if max_len > positions:
        raise ValueError(f"max_len {max_len} is longer than the decoder's positional table ({positions})")
    device = next(model.parameters()).device
    src_ids = src_ids.to(device)
    was_training = model.training
    model.eval()  # dropout off: decoding is deterministic, and both paths compute the same thing
    try:
        memory, src_mask = model.encode(src_ids)                                      # (B, S, d), (B, 1, 1, S)
        B = src_ids.size(0)
        ys = torch.full((B, 1), bos_id, dtype=torch.long, device=device)             # (B, 1): <bos>
        finished = torch.zeros(B, dtype=torch.bool, device=device)                   # (B,)
        norm_first = not isinstance(model.decoder.norm, nn.Identity)
        caches = _start_cache(model, memory) if use_cache else None
        for _ in range(max_len):
            if use_cache:
                logits = _next_logits_cached(model, ys, caches, src_mask, norm_first)  # (B, V)
            else:
                logits = model.decode(ys, memory, src_mask)[:, -1]                   # (B, V)
            next_token = logits.argmax(dim=-1)                                       # (B,)
            next_token = next_token.masked_fill(finished, model.pad_id)              # after <eos>: padding
            ys = torch.cat([ys, next_token[:, None]], dim=1)                         # (B, t+1)
            finished |= next_token == eos_id
            if finished.all():
                break
        return ys[:, 1:]
    finally:
        model.train(was_training)
