"""09 - The modern block: RMSNorm, rotary positions, SwiGLU and grouped-query attention (the Llama recipe).

Shapes: B = batch, T = sequence length, H = query heads, H_kv = key/value heads, d_head = d_model // H,
d_ff = feed-forward width, V = vocabulary size.
"""
from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from solutions.attention import make_causal_mask, scaled_dot_product_attention
from solutions.embeddings import TokenEmbedding
from solutions.multi_head import merge_heads, split_heads


class RMSNorm(nn.Module):
    """LayerNorm without the mean and the bias: x / rms(x) * weight, with rms over the features."""

    def __init__(self, d_model: int, eps: float = 1e-6):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(d_model))  # (d_model,)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        # x: (..., d_model); the mean of the squares runs over the features only
        return x * torch.rsqrt(x.pow(2).mean(dim=-1, keepdim=True) + self.eps) * self.weight


def rotary_cos_sin(max_len: int, d_head: int, base: float = 10000.0) -> tuple[torch.Tensor, torch.Tensor]:
    """cos and sin of angle[p, i] = p * base ** (-2i / d_head), each (max_len, d_head // 2) float32."""
    if d_head % 2 != 0:
        raise ValueError(f"d_head must be even (features are rotated in pairs), got {d_head}")
    if max_len < 0:
        raise ValueError(f"max_len must be >= 0, got {max_len}")
    position = torch.arange(max_len, dtype=torch.float64)[:, None]                      # (max_len, 1)
    pair = torch.arange(d_head // 2, dtype=torch.float64)                               # (d_head/2,)
    angle = position * base ** (-2.0 * pair / d_head)                                   # (max_len, d_head/2)
    return torch.cos(angle).float(), torch.sin(angle).float()


def apply_rotary(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """Rotate each interleaved pair (x[..., 2i], x[..., 2i+1]) at position p by angle[p, i]."""
    T, d_head = x.shape[-2], x.shape[-1]
    if tuple(cos.shape) != (T, d_head // 2) or tuple(sin.shape) != (T, d_head // 2):
        raise ValueError(f"cos and sin must be (T, d_head // 2) = ({T}, {d_head // 2}), "
                         f"got {tuple(cos.shape)} and {tuple(sin.shape)}")
    cos, sin = cos.to(x.dtype), sin.to(x.dtype)
    even, odd = x[..., 0::2], x[..., 1::2]                                               # (..., T, d_head/2)
    rotated = torch.stack([even * cos - odd * sin, even * sin + odd * cos], dim=-1)      # (..., T, d_head/2, 2)
    return rotated.flatten(-2)                                                           # (..., T, d_head)


class SwiGLU(nn.Module):
    """w_down(silu(w_gate(x)) * w_up(x)): a gated feed-forward with three bias-free matrices."""

    def __init__(self, d_model: int, d_ff: int):
        super().__init__()
        self.w_gate = nn.Linear(d_model, d_ff, bias=False)
        self.w_up = nn.Linear(d_model, d_ff, bias=False)
        self.w_down = nn.Linear(d_ff, d_model, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        # x: (B, T, d_model) -> (B, T, d_ff) -> (B, T, d_model)
        return self.w_down(F.silu(self.w_gate(x)) * self.w_up(x))


class GroupedQueryAttention(nn.Module):
    """Self-attention with rotary positions where groups of query heads share one key/value head."""

    def __init__(self, d_model: int, num_heads: int, num_kv_heads: int, max_len: int = 512,
                 rope_base: float = 10000.0):
        super().__init__()
        if d_model % num_heads != 0:
            raise ValueError(f"d_model {d_model} is not divisible by num_heads {num_heads}")
        if num_heads % num_kv_heads != 0:
            raise ValueError(f"num_heads {num_heads} is not divisible by num_kv_heads {num_kv_heads}")
        d_head = d_model // num_heads
        if d_head % 2 != 0:
            raise ValueError(f"d_head = d_model // num_heads = {d_head} must be even for rotary positions")
        self.num_heads, self.num_kv_heads, self.max_len = num_heads, num_kv_heads, max_len
        self.w_q = nn.Linear(d_model, d_model, bias=False)
        self.w_k = nn.Linear(d_model, num_kv_heads * d_head, bias=False)
        self.w_v = nn.Linear(d_model, num_kv_heads * d_head, bias=False)
        self.w_o = nn.Linear(d_model, d_model, bias=False)
        cos, sin = rotary_cos_sin(max_len, d_head, rope_base)                            # (max_len, d_head/2)
        # recomputable from the arguments, so kept out of the state_dict
        self.register_buffer("cos", cos, persistent=False)
        self.register_buffer("sin", sin, persistent=False)

    def forward(self, x: torch.Tensor, mask=None) -> torch.Tensor:
        # x: (B, T, d_model); mask broadcasts to (B, H, T, T), True = may attend
        T = x.size(1)
        if T > self.max_len:
            raise ValueError(f"sequence length {T} is longer than max_len {self.max_len}")
        q = split_heads(self.w_q(x), self.num_heads)                                     # (B, H, T, d_head)
        k = split_heads(self.w_k(x), self.num_kv_heads)                                  # (B, H_kv, T, d_head)
        v = split_heads(self.w_v(x), self.num_kv_heads)                                  # (B, H_kv, T, d_head)
        cos, sin = self.cos[:T], self.sin[:T]
        q, k = apply_rotary(q, cos, sin), apply_rotary(k, cos, sin)                      # positions 0 .. T-1
        groups = self.num_heads // self.num_kv_heads
        # query head h uses key/value head h // groups: repeat each kv head `groups` times, side by side
        k = k.repeat_interleave(groups, dim=1)                                           # (B, H, T, d_head)
        v = v.repeat_interleave(groups, dim=1)                                           # (B, H, T, d_head)
        heads, _ = scaled_dot_product_attention(q, k, v, mask)                           # (B, H, T, d_head)
        return self.w_o(merge_heads(heads))                                              # (B, T, d_model)


class LlamaBlock(nn.Module):
    """Pre-norm block: x + attn(norm1(x)), then x + ffn(norm2(x)); no biases, no dropout."""

    def __init__(self, d_model: int, num_heads: int, num_kv_heads: int, d_ff: int, max_len: int = 512,
                 rope_base: float = 10000.0, eps: float = 1e-6):
        super().__init__()
        self.norm1 = RMSNorm(d_model, eps)                                               # weight (d_model,)
        self.attn = GroupedQueryAttention(d_model, num_heads, num_kv_heads, max_len, rope_base)
        self.norm2 = RMSNorm(d_model, eps)                                               # weight (d_model,)
        self.ffn = SwiGLU(d_model, d_ff)

    def forward(self, x: torch.Tensor, mask=None) -> torch.Tensor:
        # x: (B, T, d_model)
        x = x + self.attn(self.norm1(x), mask)
        return x + self.ffn(self.norm2(x))


class ModernGPT(nn.Module):
    """Token embedding (no position table), LlamaBlocks, a final RMSNorm and a tied output layer."""

    def __init__(self, vocab_size: int, d_model: int = 128, num_heads: int = 4, num_kv_heads: int = 2,
                 d_ff: int = 344, num_layers: int = 4, max_len: int = 256, rope_base: float = 10000.0,
                 eps: float = 1e-6):
        super().__init__()
        self.max_len = max_len
        self.token_embedding = TokenEmbedding(vocab_size, d_model)                       # (V, d_model)
        self.blocks = nn.ModuleList(
            [LlamaBlock(d_model, num_heads, num_kv_heads, d_ff, max_len, rope_base, eps) for _ in range(num_layers)])
        self.norm = RMSNorm(d_model, eps)                                                # weight (d_model,)
        self.lm_head = nn.Linear(d_model, vocab_size, bias=False)
        self.lm_head.weight = self.token_embedding.weight                                # one tied Parameter

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        # ids: (B, T) -> logits (B, T, V)
        T = ids.size(1)
        if T > self.max_len:
            raise ValueError(f"sequence length {T} is longer than max_len {self.max_len}")
        x = self.token_embedding(ids)                                                    # (B, T, d_model)
        mask = make_causal_mask(T, ids.device)                                           # (T, T)
        for block in self.blocks:
            x = block(x, mask)
        return self.lm_head(self.norm(x))                                                # (B, T, V)
