"""Known-mistake variants of notebook 09 (the modern block), and the tables of the mistakes they make.

One table per check, {mistake id: (variant, switches)}: the variant run with those switches on the check's own inputs
gives that mistake's answer (`kit.compare.from_table`); the check tries the rows in the table's order, the first
match naming the mistake. One id can be made in several exercises (rotary.halves in apply_rotary, in the attention,
in the block), each table holding its exercise's variant. `FORMS` = {(variant, mistake id): [switches, ...]}: other
switches of the same variant that make the same mistake, tried right after its row. With every switch off, each
variant is the reference.
"""
from __future__ import annotations

import math

import torch

from autograder.checks.attention.mistakes import sdpa
from autograder.checks.multi_head.mistakes import merge, split
from autograder.checks.attention.mistakes import ATTENTION_MISTAKES
from torch import nn


def rms_norm(weight, x, eps, *, axis=-1, eps_outside=False, center=False, use_weight=True):
    """RMSNorm with switches: the mean over another axis (`axis`), eps outside the root, LayerNorm's centring,
    the weight left out."""
    if center:
        x = x - x.mean(dim=-1, keepdim=True)
    mean_square = x.pow(2).mean(dim=axis, keepdim=True) if axis is not None else x.pow(2).mean()
    scaled = x / (mean_square.sqrt() + eps) if eps_outside else x * torch.rsqrt(mean_square + eps)
    return scaled * weight if use_weight else scaled


def rotary_tables(max_len, d_head, base=10000.0, *, exponent="two", swap=False, base_divided_by=1.0,
                  ignore_base=False):
    """(cos, sin) with switches: the exponent ("two", correct, -2i/d_head; "no_two", -i/d_head; "four"), the two
    tables swapped, the base divided by `base_divided_by`, the base ignored (always 10000)."""
    base = 10000.0 if ignore_base else base / base_divided_by
    position = torch.arange(max_len, dtype=torch.float64)[:, None]                          # (max_len, 1)
    pair = torch.arange(d_head // 2, dtype=torch.float64)                                   # (d_head/2,)
    factor = {"two": 2.0, "no_two": 1.0, "four": 4.0}[exponent]
    angle = position * base ** (-factor * pair / d_head)                                    # (max_len, d_head/2)
    cos, sin = torch.cos(angle).float(), torch.sin(angle).float()
    return (sin, cos) if swap else (cos, sin)


def rotate(x, cos, sin, *, halves=False, negative=False, swap=False, own_tables=False):
    """The rotation of apply_rotary; `halves`: pairs (x[i], x[i + d/2]) (the GPT-NeoX layout) instead of
    (x[2i], x[2i+1]); `negative`: rotated by minus the angle; `swap`: cos and sin used the other way round;
    `own_tables`: tables of its own (base 10000) instead of the cos and sin given."""
    if own_tables:
        cos, sin = rotary_tables(x.shape[-2], x.shape[-1])
    if swap:
        cos, sin = sin, cos
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
        base_divided_by=None, scale_width="d_head", **sdpa_flags):
    """GroupedQueryAttention with the reference module's weights and switches.

    kv_map: which kv head query head h uses: "interleave" (correct, h // groups), "tile" (h % num_kv_heads),
    "mod_groups" (h % groups). rotary: "qk" (correct), "qkv" (values rotated too), "none", "q" (queries only).
    base: another rope base than the module's; base_divided_by: the module's base divided by it. scale_width:
    "d_model" scales the scores by sqrt(d_model) instead of sqrt(d_head). The other switches are sdpa's.
    """
    if scale_width == "d_model":
        sdpa_flags["d_scale"] = attn.w_q.in_features
    B, T, _ = x.shape
    H, H_kv = attn.num_heads, attn.num_kv_heads
    groups = H // H_kv
    q, k, v = split(attn.w_q(x), H), split(attn.w_k(x), H_kv), split(attn.w_v(x), H_kv)   # (B, *, T, d_head)
    d_head = q.size(-1)
    if exponent == "two" and base is None and base_divided_by is None:
        cos, sin = attn.cos[:T], attn.sin[:T]
    else:  # another exponent, or another base than the module's (`base`, `base_divided_by`)
        base = base_of(attn, d_head) if base is None else base
        base = base if base_divided_by is None else base / base_divided_by
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


def llama_block(block, x, mask=None, *, post_norm=False, attn_residual=True, ffn_residual=True, attn_flags=None,
                norm_eps=None):
    """LlamaBlock with the reference block's weights and switches; `norm_eps`: norm1 and norm2 with that eps instead
    of the block's (the block's eps not passed on); `attn_flags`: gqa's switches (`{"base": 10000.0}`: the block's
    rope_base not passed on)."""
    flags = attn_flags or {}
    attend = lambda h: gqa(block.attn, h, mask, **flags)  # noqa: E731
    norm1, norm2 = block.norm1, block.norm2
    if norm_eps is not None:
        norm1 = lambda h: rms_norm(block.norm1.weight, h, norm_eps)  # noqa: E731
        norm2 = lambda h: rms_norm(block.norm2.weight, h, norm_eps)  # noqa: E731
    if post_norm:
        x = norm1(x + attend(x) if attn_residual else attend(x))
        return norm2(x + block.ffn(x) if ffn_residual else block.ffn(x))
    a = attend(norm1(x))
    x = x + a if attn_residual else a
    f = block.ffn(norm2(x))
    return x + f if ffn_residual else f


def modern_gpt(model, ids, *, causal=True, final_norm=True, scale_embeddings=False, final_eps=None, **block_flags):
    T = ids.size(1)
    x = model.token_embedding.weight[ids]                                                   # (B, T, d_model)
    if scale_embeddings:
        x = x * math.sqrt(x.size(-1))
    mask = torch.tril(torch.ones(T, T, dtype=torch.bool, device=ids.device)) if causal else None
    for block in model.blocks:
        x = llama_block(block, x, mask, **block_flags)
    if final_norm:   # `final_eps`: the final norm with that eps instead of the model's (its eps not passed on)
        x = model.norm(x) if final_eps is None else rms_norm(model.norm.weight, x, final_eps)
    return model.lm_head(x)                                                                 # (B, T, V)


# ------------------------------------------------------------------------------------------------------ the tables
RMSNORM = {  # rms_norm(weight, x, eps, **switches)
    "rms_norm.mean_wrong_axis": (rms_norm, {"axis": -2}),
    "rms_norm.eps_outside_root": (rms_norm, {"eps_outside": True}),
    "rms_norm.subtracts_mean": (rms_norm, {"center": True}),
    "rms_norm.no_weight": (rms_norm, {"use_weight": False}),
}
ROTARY_COS_SIN = {  # rotary_tables(max_len, d_head, base, **switches)[0 or 1]
    "rotary.exponent_no_two": (rotary_tables, {"exponent": "no_two"}),
    "rotary.cos_sin_swapped": (rotary_tables, {"swap": True}),
    "positional.frequency_base": (rotary_tables, {"base_divided_by": 10}),
    "rotary.base_ignored": (rotary_tables, {"ignore_base": True}),           # tried only for a base other than 10000
}
APPLY_ROTARY = {  # rotate(x, cos, sin, **switches)
    "rotary.halves": (rotate, {"halves": True}),
    "rotary.wrong_direction": (rotate, {"negative": True}),
    "rotary.cos_sin_swapped": (rotate, {"swap": True}),
    "rotary.own_tables": (rotate, {"own_tables": True}),                     # tried only for a base other than 10000
}
SWIGLU = {  # swiglu(reference module, x, **switches)
    "swiglu.gate_up_swapped": (swiglu, {"swap": True}),
    "swiglu.relu": (swiglu, {"activation": "relu"}),
}
GQA = {  # gqa(reference module, x, mask, **switches); the mistakes of the mask are tried only with a mask
    "gqa.kv_heads_tiled": (gqa, {"kv_map": "tile"}),
    "gqa.head_mod_groups": (gqa, {"kv_map": "mod_groups"}),
    "gqa.rotates_values": (gqa, {"rotary": "qkv"}),
    "gqa.no_rotary": (gqa, {"rotary": "none"}),
    "gqa.rotary_queries_only": (gqa, {"rotary": "q"}),
    "rotary.halves": (gqa, {"halves": True}),
    "rotary.exponent_no_two": (gqa, {"exponent": "no_two"}),
    "multi_head.scale_d_model": (gqa, ATTENTION_MISTAKES["multi_head.scale_d_model"]),
    "positional.frequency_base": (gqa, {"base_divided_by": 10}),
    **{mistake_id: (gqa, ATTENTION_MISTAKES[mistake_id])
       for mistake_id in ("attention.missing_scale", "attention.scale_by_d", "attention.softmax_dim",
                          "attention.mask_inverted", "attention.mask_ignored")},
}
# the attention's mistakes inside a block or a model: gqa's switches (the block's rope base is 10000)
ATTENTION_IN_BLOCK = {
    "gqa.kv_heads_tiled": {"kv_map": "tile"}, "gqa.head_mod_groups": {"kv_map": "mod_groups"},
    "gqa.rotates_values": {"rotary": "qkv"}, "gqa.no_rotary": {"rotary": "none"},
    "rotary.halves": {"halves": True}, "attention.missing_scale": {"scale": "none"},
    "positional.frequency_base": {"base": 1000.0},
    "attention.mask_inverted": {"invert_mask": True}, "attention.mask_ignored": {"ignore_mask": True},
}
LLAMA_BLOCK = {  # llama_block(reference block, x, mask, **switches)
    "llama.post_norm": (llama_block, {"post_norm": True}),
    "llama.missing_residual": (llama_block, {"attn_residual": False}),
    **{mistake_id: (llama_block, {"attn_flags": flags}) for mistake_id, flags in ATTENTION_IN_BLOCK.items()},
    # the arguments not passed on (a block built with rope_base or eps; with the defaults these are the reference)
    "llama.rope_base_ignored": (llama_block, {"attn_flags": {"base": 10000.0}}),
    "llama.eps_ignored": (llama_block, {"norm_eps": 1e-6}),
}
MODERN_GPT = {  # modern_gpt(reference model, ids, **switches)
    "modern_gpt.no_causal_mask": (modern_gpt, {"causal": False}),
    "modern_gpt.no_final_norm": (modern_gpt, {"final_norm": False}),
    "modern_gpt.embedding_scaled": (modern_gpt, {"scale_embeddings": True}),
    "llama.post_norm": (modern_gpt, {"post_norm": True}),
    **{mistake_id: (modern_gpt, {"attn_flags": flags}) for mistake_id, flags in ATTENTION_IN_BLOCK.items()},
    # the arguments not passed on (a model built with rope_base or eps; with the defaults these are the reference)
    "modern_gpt.rope_base_ignored": (modern_gpt, {"attn_flags": {"base": 10000.0}}),
    "modern_gpt.eps_ignored": (modern_gpt, {"norm_eps": 1e-6, "final_eps": 1e-6}),
}
FORMS = {
    (rms_norm, "rms_norm.mean_wrong_axis"): [{"axis": None}],                # the mean over every axis
    (rotary_tables, "rotary.exponent_no_two"): [{"exponent": "four"}],
    (swiglu, "swiglu.relu"): [{"activation": "gelu"}, {"activation": "sigmoid"}],
    (llama_block, "llama.missing_residual"): [{"ffn_residual": False}],       # around the feed-forward
    # eps reaches the blocks but not the final norm, or the final norm but not the blocks
    (modern_gpt, "modern_gpt.eps_ignored"): [{"final_eps": 1e-6}, {"norm_eps": 1e-6}],
}
