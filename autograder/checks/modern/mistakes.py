"""Known-mistake variants of notebook 09 (the modern block): see the package doc."""
from __future__ import annotations

import math

import torch

from autograder.checks.attention.mistakes import sdpa
from autograder.checks.multi_head.mistakes import merge, split
from autograder.checks.attention.mistakes import ATTENTION_MISTAKES  # noqa: F401 (the checks name them too)
from torch import nn


def rms_norm(weight, x, eps, *, axis=-1, eps_outside=False, center=False, use_weight=True):
    """RMSNorm with switches: the mean over another axis (`axis`), eps outside the root, LayerNorm's centring,
    the weight left out."""
    if center:
        x = x - x.mean(dim=-1, keepdim=True)
    mean_square = x.pow(2).mean(dim=axis, keepdim=True) if axis is not None else x.pow(2).mean()
    scaled = x / (mean_square.sqrt() + eps) if eps_outside else x * torch.rsqrt(mean_square + eps)
    return scaled * weight if use_weight else scaled


def rotary_tables(max_len, d_head, base=10000.0, *, exponent="two", swap=False):
    """(cos, sin) with the exponent switched: "two" (correct, -2i/d_head), "no_two" (-i/d_head), "four"."""
    position = torch.arange(max_len, dtype=torch.float64)[:, None]                          # (max_len, 1)
    pair = torch.arange(d_head // 2, dtype=torch.float64)                                   # (d_head/2,)
    factor = {"two": 2.0, "no_two": 1.0, "four": 4.0}[exponent]
    angle = position * base ** (-factor * pair / d_head)                                    # (max_len, d_head/2)
    cos, sin = torch.cos(angle).float(), torch.sin(angle).float()
    return (sin, cos) if swap else (cos, sin)


def rotate(x, cos, sin, *, halves=False, negative=False):
    """The rotation of apply_rotary; `halves`: pairs (x[i], x[i + d/2]) (the GPT-NeoX layout) instead of
    (x[2i], x[2i+1]); `negative`: rotated by minus the angle."""
    cos, sin = cos.to(x), (-sin if negative else sin).to(x)
    half = x.size(-1) // 2
    first, second = (x[..., :half], x[..., half:]) if halves else (x[..., 0::2], x[..., 1::2])
    out_first, out_second = first * cos - second * sin, first * sin + second * cos
    if halves:
        return torch.cat([out_first, out_second], dim=-1)
    return torch.stack([out_first, out_second], dim=-1).flatten(-2)


def swiglu(ffn, x, *, swap=False, activation="silu"):
    gate, up = ffn.w_gate(x), ffn.w_up(x)                                                   # (B, T, d_ff)
    if swap:
        gate, up = up, gate
    act = {"silu": nn.functional.silu, "relu": torch.relu, "gelu": nn.functional.gelu,
           "sigmoid": torch.sigmoid}[activation]
    return ffn.w_down(act(gate) * up)


def gqa(attn, x, mask=None, *, kv_map="interleave", rotary="qk", halves=False, exponent="two", base=None,
        **sdpa_flags):
    """GroupedQueryAttention with the reference module's weights and switches.

    kv_map: which kv head query head h uses: "interleave" (correct, h // groups), "tile" (h % num_kv_heads),
    "mod_groups" (h % groups). rotary: "qk" (correct), "qkv" (values rotated too), "none", "q" (queries only).
    """
    B, T, _ = x.shape
    H, H_kv = attn.num_heads, attn.num_kv_heads
    groups = H // H_kv
    q, k, v = split(attn.w_q(x), H), split(attn.w_k(x), H_kv), split(attn.w_v(x), H_kv)   # (B, *, T, d_head)
    d_head = q.size(-1)
    if exponent == "two" and base is None:
        cos, sin = attn.cos[:T], attn.sin[:T]
    else:  # another exponent, or another base than the module's (`base`)
        base = base_of(attn, d_head) if base is None else base
        cos, sin = (t.to(x.device) for t in rotary_tables(T, d_head, base, exponent=exponent))
    turn = lambda t: rotate(t, cos, sin, halves=halves)  # noqa: E731
    if "q" in rotary:
        q = turn(q)
    if "k" in rotary:
        k = turn(k)
    if "v" in rotary:
        v = turn(v)
    index = {"interleave": torch.arange(H) // groups, "tile": torch.arange(H) % H_kv,
             "mod_groups": torch.arange(H) % groups}[kv_map].to(x.device)
    k, v = k[:, index], v[:, index]                                                         # (B, H, T, d_head)
    heads, _ = sdpa(q, k, v, mask, **sdpa_flags)
    return attn.w_o(merge(heads))                                                           # (B, T, d_model)


def base_of(attn, d_head):
    """The rope base a module's tables were made with (angle[1, 1] = base ** (-2 / d_head))."""
    angle = float(torch.atan2(attn.sin[1, 1], attn.cos[1, 1]))
    return angle ** (-d_head / 2)


def llama_block(block, x, mask=None, *, post_norm=False, attn_residual=True, ffn_residual=True, attn_flags=None):
    flags = attn_flags or {}
    attend = lambda h: gqa(block.attn, h, mask, **flags)  # noqa: E731
    if post_norm:
        x = block.norm1(x + attend(x) if attn_residual else attend(x))
        return block.norm2(x + block.ffn(x) if ffn_residual else block.ffn(x))
    a = attend(block.norm1(x))
    x = x + a if attn_residual else a
    f = block.ffn(block.norm2(x))
    return x + f if ffn_residual else f


def modern_gpt(model, ids, *, causal=True, final_norm=True, scale_embeddings=False, **block_flags):
    T = ids.size(1)
    x = model.token_embedding.weight[ids]                                                   # (B, T, d_model)
    if scale_embeddings:
        x = x * math.sqrt(x.size(-1))
    mask = torch.tril(torch.ones(T, T, dtype=torch.bool, device=ids.device)) if causal else None
    for block in model.blocks:
        x = llama_block(block, x, mask, **block_flags)
    if final_norm:
        x = model.norm(x)
    return model.lm_head(x)                                                                 # (B, T, V)
