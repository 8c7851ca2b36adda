"""11 - Pre-trained: SmolLM2-135M in your own ModernGPT (4-bit weights, a key/value cache, LoRA, hidden states).

Shapes: B = batch, T = new tokens of a call, T_past = positions already in the cache, H = query heads,
H_kv = key/value heads, d_head = d_model // H, V = vocabulary size, r = LoRA rank.
"""
from __future__ import annotations

import math
import numbers
import re

import numpy as np
import torch
from torch import nn

from solutions.attention import make_causal_mask, scaled_dot_product_attention
from solutions.modern import ModernGPT, apply_rotary
from solutions.multi_head import merge_heads, split_heads


# ------------------------------------------------------------------------------------------ Q4_1 weights

Q4_1_BLOCK_BYTES = 20    # float16 d, float16 m, 16 bytes holding 32 four-bit numbers
Q4_1_BLOCK_WEIGHTS = 32


def dequantize_q4_1(raw: np.ndarray) -> np.ndarray:
    """GGML Q4_1 blocks (n_blocks, 20) uint8 -> (n_blocks * 32,) float32: weight = q * d + m, q in 0..15.

    In each block the low nibbles of the 16 bytes are weights 0..15 and the high nibbles weights 16..31.
    """
    raw = np.asarray(raw)
    if raw.dtype != np.uint8:
        raise ValueError(f"raw must be uint8 bytes, got dtype {raw.dtype}")
    if raw.ndim != 2 or raw.shape[1] != Q4_1_BLOCK_BYTES:
        raise ValueError(f"raw must have shape (n_blocks, {Q4_1_BLOCK_BYTES}), got {raw.shape}")
    header = np.ascontiguousarray(raw[:, :4]).view("<f2").astype(np.float32)     # (n, 2): d, m
    d, m = header[:, 0:1], header[:, 1:2]                                          # (n, 1) each
    qs = raw[:, 4:]                                                                # (n, 16)
    q = np.concatenate([qs & 0x0F, qs >> 4], axis=1).astype(np.float32)           # (n, 32), 0..15
    return (q * d + m).reshape(-1)                                                 # (n * 32,)


# ------------------------------------------------------------------------------------------ GGUF names

# the tensors of block i, GGUF name after "blk.{i}." -> ModernGPT name after "blocks.{i}."
_BLOCK_NAMES = {
    "attn_norm.weight": "norm1.weight",
    "attn_q.weight": "attn.w_q.weight",
    "attn_k.weight": "attn.w_k.weight",
    "attn_v.weight": "attn.w_v.weight",
    "attn_output.weight": "attn.w_o.weight",
    "ffn_norm.weight": "norm2.weight",
    "ffn_gate.weight": "ffn.w_gate.weight",
    "ffn_up.weight": "ffn.w_up.weight",
    "ffn_down.weight": "ffn.w_down.weight",
}
_BLOCK_PATTERN = re.compile(r"blk\.(0|[1-9][0-9]*)\.(.+)")   # no leading zeros: "blk.01" is not block 1


def _gguf_names(num_layers: int) -> list[str]:
    """Every GGUF tensor name a tied llama model of `num_layers` blocks needs."""
    names = ["token_embd.weight", "output_norm.weight"]
    names += [f"blk.{i}.{suffix}" for i in range(num_layers) for suffix in _BLOCK_NAMES]
    return names


def _model_name(gguf_name: str, num_layers: int) -> str:
    """The ModernGPT name of one GGUF tensor (not the embedding, which has two); ValueError if there is none."""
    if gguf_name == "output_norm.weight":
        return "norm.weight"
    match = _BLOCK_PATTERN.fullmatch(gguf_name)
    if match is None or match.group(2) not in _BLOCK_NAMES:
        raise ValueError(f"tensor {gguf_name!r} has no place in ModernGPT (unknown name)")
    index = int(match.group(1))
    if index >= num_layers:
        raise ValueError(f"tensor {gguf_name!r} belongs to block {index}, but the model has {num_layers} blocks")
    return f"blocks.{index}.{_BLOCK_NAMES[match.group(2)]}"


def llama_state_dict(tensors: dict[str, torch.Tensor], num_layers: int) -> dict[str, torch.Tensor]:
    """GGUF-named tensors -> the state_dict of the matching ModernGPT (tensors passed through, not copied)."""
    if isinstance(num_layers, bool) or not isinstance(num_layers, numbers.Integral) or num_layers < 0:
        raise ValueError(f"num_layers must be an integer >= 0, got {num_layers!r}")
    state = {}
    for name, tensor in tensors.items():
        if name == "token_embd.weight":
            # tied: the output layer is the embedding table itself, one tensor under two names
            state["token_embedding.weight"] = tensor                               # (V, d_model)
            state["lm_head.weight"] = tensor                                       # (V, d_model)
        else:
            state[_model_name(name, num_layers)] = tensor
    for name in _gguf_names(num_layers):
        if name not in tensors:
            raise KeyError(f"tensor {name!r} is missing (needed by a ModernGPT of {num_layers} blocks)")
    return state


# ------------------------------------------------------------------------------------------ key/value cache

def _check_cache(model: ModernGPT, cache: list, batch: int) -> int:
    """T_past of a cache returned by cached_forward; ValueError when it cannot belong to this model and batch."""
    if len(cache) != len(model.blocks):
        raise ValueError(f"cache has {len(cache)} layers, the model has {len(model.blocks)} blocks")
    T_past = cache[0][0].size(2) if cache else 0
    for i, ((k, v), block) in enumerate(zip(cache, model.blocks)):
        want = (batch, block.attn.num_kv_heads, T_past, 2 * block.attn.cos.size(1))   # d_head = 2 * pairs
        if tuple(k.shape) != want or tuple(v.shape) != want:
            raise ValueError(f"cache layer {i}: keys and values must be {want}, "
                             f"got {tuple(k.shape)} and {tuple(v.shape)}")
    return T_past


def _cached_attention(attn, x: torch.Tensor, past, T_past: int, mask: torch.Tensor):
    """09's grouped-query attention for new positions T_past.., reading and extending one layer's cache."""
    T = x.size(1)
    q = split_heads(attn.w_q(x), attn.num_heads)                                 # (B, H, T, d_head)
    k = split_heads(attn.w_k(x), attn.num_kv_heads)                              # (B, H_kv, T, d_head)
    v = split_heads(attn.w_v(x), attn.num_kv_heads)                              # (B, H_kv, T, d_head)
    cos, sin = attn.cos[T_past:T_past + T], attn.sin[T_past:T_past + T]          # (T, d_head/2)
    q, k = apply_rotary(q, cos, sin), apply_rotary(k, cos, sin)                  # at their own positions
    if past is not None:
        k = torch.cat([past[0], k], dim=2)                                       # (B, H_kv, T_past+T, d_head)
        v = torch.cat([past[1], v], dim=2)                                       # (B, H_kv, T_past+T, d_head)
    groups = attn.num_heads // attn.num_kv_heads
    k_all = k.repeat_interleave(groups, dim=1)                                   # (B, H, T_past+T, d_head)
    v_all = v.repeat_interleave(groups, dim=1)                                   # (B, H, T_past+T, d_head)
    heads, _ = scaled_dot_product_attention(q, k_all, v_all, mask)               # (B, H, T, d_head)
    return attn.w_o(merge_heads(heads)), (k, v)                                  # (B, T, d_model)


def cached_forward(model: ModernGPT, ids: torch.Tensor, cache: list | None = None):
    """Logits of the new tokens `ids` (B, T) at positions T_past..T_past+T-1, and the cache extended by them.

    The cache is a list of one (k, v) pair per block, each (B, H_kv, T_past, d_head), keys already rotated.
    """
    if ids.dim() != 2:
        raise ValueError(f"ids must have shape (B, T), got {tuple(ids.shape)}")
    B, T = ids.shape
    T_past = 0 if cache is None else _check_cache(model, cache, B)
    if T_past + T > model.max_len:
        raise ValueError(f"{T_past} cached + {T} new positions is longer than max_len {model.max_len}")
    # query i (position T_past + i) sees every cached position and the new ones up to itself
    mask = torch.ones(T, T_past + T, dtype=torch.bool, device=ids.device).tril(diagonal=T_past)  # (T, T_past+T)
    x = model.token_embedding(ids)                                               # (B, T, d_model)
    new_cache = []
    for i, block in enumerate(model.blocks):
        past = None if cache is None else cache[i]
        attended, kv = _cached_attention(block.attn, block.norm1(x), past, T_past, mask)
        x = x + attended                                                         # (B, T, d_model)
        x = x + block.ffn(block.norm2(x))                                        # (B, T, d_model)
        new_cache.append(kv)
    return model.lm_head(model.norm(x)), new_cache                              # (B, T, V)


def cached_generate(model: ModernGPT, prompt_ids: list[int], max_new_tokens: int,
                    eos_id: int | None = None) -> list[int]:
    """Greedy decoding with the cache: the prompt in one call, then one call per new token; new tokens only."""
    prompt_ids = [int(i) for i in prompt_ids]
    vocab_size = model.token_embedding.weight.size(0)
    if not prompt_ids:
        raise ValueError("prompt_ids is empty: greedy decoding needs at least one token to continue")
    if any(not 0 <= i < vocab_size for i in prompt_ids):
        raise ValueError(f"prompt_ids must lie in 0..{vocab_size - 1}")
    if isinstance(max_new_tokens, bool) or not isinstance(max_new_tokens, numbers.Integral) or max_new_tokens < 0:
        raise ValueError(f"max_new_tokens must be an integer >= 0, got {max_new_tokens!r}")
    # the last new token is never fed back, so the model sees len(prompt) + max_new_tokens - 1 positions
    if len(prompt_ids) + max(max_new_tokens - 1, 0) > model.max_len:
        raise ValueError(f"a prompt of {len(prompt_ids)} tokens and {max_new_tokens} new tokens do not fit "
                         f"in max_len {model.max_len}")
    if max_new_tokens == 0:
        return []
    device = model.token_embedding.weight.device
    was_training = model.training
    model.eval()
    try:
        with torch.no_grad():
            ids = torch.tensor([prompt_ids], dtype=torch.long, device=device)   # (1, T_prompt)
            logits, cache = cached_forward(model, ids)                           # (1, T_prompt, V)
            new_tokens = []
            while True:
                token = int(logits[0, -1].argmax())                              # first index on ties
                new_tokens.append(token)
                if token == eos_id or len(new_tokens) == max_new_tokens:
                    return new_tokens
                ids = torch.tensor([[token]], dtype=torch.long, device=device)  # (1, 1)
                logits, cache = cached_forward(model, ids, cache)                # (1, 1, V)
    finally:
        model.train(was_training)


# ------------------------------------------------------------------------------------------ LoRA

class LoRALinear(nn.Module):
    """A frozen linear plus a trainable low-rank update: base(x) + (alpha / r) * x A^T B^T (Hu et al. 2021)."""

    def __init__(self, base: nn.Linear, rank: int = 8, alpha: float = 16.0):
        super().__init__()
        if not isinstance(base, nn.Linear):
            raise TypeError(f"LoRALinear wraps an nn.Linear, got {type(base).__name__}")
        if isinstance(rank, bool) or not isinstance(rank, numbers.Integral) or rank < 1:
            raise ValueError(f"rank must be an integer >= 1, got {rank!r}")
        self.base = base
        for p in self.base.parameters():
            p.requires_grad_(False)
        self.rank, self.alpha = int(rank), float(alpha)
        self.scaling = alpha / rank
        like = dict(device=base.weight.device, dtype=base.weight.dtype)
        self.lora_A = nn.Parameter(torch.empty(rank, base.in_features, **like))  # (r, in)
        nn.init.kaiming_uniform_(self.lora_A, a=math.sqrt(5))                    # as nn.Linear's own weights
        self.lora_B = nn.Parameter(torch.zeros(base.out_features, rank, **like)) # (out, r): starts as `base`

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        # x: (..., in) -> (..., r) -> (..., out)
        return self.base(x) + self.scaling * (x @ self.lora_A.T) @ self.lora_B.T

    def merged(self) -> nn.Linear:
        """A plain nn.Linear computing the same function: weight = base.weight + scaling * B A."""
        base = self.base
        merged = nn.Linear(base.in_features, base.out_features, bias=base.bias is not None,
                           device=base.weight.device, dtype=base.weight.dtype)
        with torch.no_grad():
            merged.weight.copy_(base.weight + self.scaling * self.lora_B @ self.lora_A)  # (out, in)
            if base.bias is not None:
                merged.bias.copy_(base.bias)
        return merged


LORA_TARGETS = ("w_q", "w_k", "w_v", "w_o")


def add_lora(model: ModernGPT, rank: int = 8, alpha: float = 16.0, targets: tuple[str, ...] = ("w_q", "w_v"),
             blocks: list[int] | None = None) -> int:
    """Freeze `model`, put LoRA adapters on the chosen attention linears; the number of trainable parameters."""
    if isinstance(targets, str):
        targets = (targets,)
    targets = tuple(dict.fromkeys(targets))                                      # in order, each once
    unknown = [t for t in targets if t not in LORA_TARGETS]
    if unknown:
        raise ValueError(f"unknown LoRA target(s) {unknown}: choose among {LORA_TARGETS}")
    num_layers = len(model.blocks)
    indices = list(range(num_layers)) if blocks is None else list(dict.fromkeys(blocks))
    bad = [i for i in indices if isinstance(i, bool) or not isinstance(i, numbers.Integral)
           or not 0 <= i < num_layers]
    if bad:
        raise ValueError(f"block index(es) {bad} out of range: the model has blocks 0..{num_layers - 1}")
    if isinstance(rank, bool) or not isinstance(rank, numbers.Integral) or rank < 1:
        raise ValueError(f"rank must be an integer >= 1, got {rank!r}")
    for i in indices:                                                            # check all before changing any
        for name in targets:
            if not isinstance(getattr(model.blocks[i].attn, name), nn.Linear):
                raise ValueError(f"blocks.{i}.attn.{name} is not a plain nn.Linear (LoRA already added?)")
    for p in model.parameters():
        p.requires_grad_(False)
    for i in indices:
        attn = model.blocks[i].attn
        for name in targets:
            setattr(attn, name, LoRALinear(getattr(attn, name), rank, alpha))
    return sum(p.numel() for p in model.parameters() if p.requires_grad)


# ------------------------------------------------------------------------------------------ features

def final_hidden(model: ModernGPT, ids: torch.Tensor) -> torch.Tensor:
    """(B, T) ids -> (B, T, d_model): what ModernGPT.forward computes just before lm_head."""
    T = ids.size(1)
    if T > model.max_len:
        raise ValueError(f"sequence length {T} is longer than max_len {model.max_len}")
    x = model.token_embedding(ids)                                               # (B, T, d_model)
    mask = make_causal_mask(T, ids.device)                                       # (T, T), True = may attend
    for block in model.blocks:
        x = block(x, mask)                                                       # (B, T, d_model)
    return model.norm(x)                                                         # (B, T, d_model)
