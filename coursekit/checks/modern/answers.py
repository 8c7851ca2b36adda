"""The NumPy answers of notebook 09's public self-checks: float64 loops (angle by angle, head by head) over a
module's own weights, after `randomize` has set them to fixed values, so they share no code (and no mistake) with a
tensor implementation. Each answer takes `mistake=` to compute one known wrong answer instead.

Shapes: B batch, T length, H query heads, H_kv key/value heads, d_head = d_model // H.
"""
from __future__ import annotations

import math

import numpy as np
import torch
from torch import nn

DEFAULT_EPS = 1e-6  # RMSNorm's default eps


def randomize(module: nn.Module, seed: int) -> dict[str, np.ndarray]:
    """Fixed values for every parameter (vectors, i.e. norm weights, around 1); returned as float64 arrays."""
    generator = torch.Generator().manual_seed(seed)
    params = {}
    with torch.no_grad():
        for name, parameter in sorted(module.named_parameters()):
            values = torch.randn(parameter.shape, generator=generator)
            parameter.copy_(1.0 + 0.3 * values if parameter.dim() == 1 else 0.5 * values)
        for name, parameter in module.named_parameters(remove_duplicate=False):
            params[name] = parameter.detach().cpu().double().numpy()
    return params


def or_none(answer, *args, **kwargs):
    """A known wrong answer, or None where that mistake cannot even run on these sizes (it then matches nothing)."""
    try:
        with np.errstate(all="ignore"):
            return answer(*args, **kwargs)
    except (ValueError, IndexError):
        return None


def rms_norm(x, weight, eps, mistake=None):
    out = np.zeros_like(x)
    flat, flat_out = x.reshape(-1, x.shape[-1]), out.reshape(-1, x.shape[-1])
    for row in range(flat.shape[0]):
        v = flat[row] - flat[row].mean() if mistake == "center" else flat[row]
        mean_square = (v ** 2).mean()
        if mistake == "axis":  # the mean over the sequence axis instead (x is (B, T, d))
            b, t = divmod(row, x.shape[1])
            mean_square = (x[b, :, :] ** 2).mean(axis=0)
        root = math.sqrt(mean_square) + eps if mistake == "eps_outside" else np.sqrt(mean_square + eps)
        flat_out[row] = v / root * (1.0 if mistake == "no_weight" else weight)
    return out


def angles(max_len, d_head, base, mistake=None):
    table = np.zeros((max_len, d_head // 2))
    for p in range(max_len):
        for i in range(d_head // 2):
            exponent = (i if mistake == "no_two" else 2 * i) / d_head
            table[p, i] = p * base ** (-exponent)
    return table


def rotate(x, angle, mistake=None):
    """Rotate each pair (x[2i], x[2i+1]) of the last axis at position p (the second-to-last axis) by angle[p, i]."""
    out = np.zeros_like(x)
    T, d = x.shape[-2], x.shape[-1]
    for index in np.ndindex(*x.shape[:-2]):
        for p in range(T):
            for i in range(d // 2):
                a, b = (i, i + d // 2) if mistake == "halves" else (2 * i, 2 * i + 1)
                c, s = math.cos(angle[p, i]), math.sin(angle[p, i])
                if mistake == "negative":
                    s = -s
                u, v = x[index + (p, a)], x[index + (p, b)]
                out[index + (p, a)] = u * c - v * s
                out[index + (p, b)] = u * s + v * c
    return out


def silu(z):
    return z / (1.0 + np.exp(-z))


def swiglu(params, prefix, x, mistake=None):
    gate, up = x @ params[prefix + "w_gate.weight"].T, x @ params[prefix + "w_up.weight"].T
    if mistake == "swapped":
        gate, up = up, gate
    act = np.maximum(gate, 0.0) if mistake == "relu" else silu(gate)
    return (act * up) @ params[prefix + "w_down.weight"].T


def softmax(scores):
    shifted = scores - scores.max(axis=-1, keepdims=True)
    e = np.exp(shifted)
    return e / e.sum(axis=-1, keepdims=True)


def gqa(params, prefix, x, num_heads, num_kv_heads, keep, base=10000.0, mistake=None):
    """Grouped-query attention head by head; `keep` (T, T) bool or None."""
    B, T, d_model = x.shape
    d_head = d_model // num_heads
    groups = num_heads // num_kv_heads
    q, k, v = (x @ params[prefix + name + ".weight"].T for name in ("w_q", "w_k", "w_v"))
    angle = angles(T, d_head, base)
    out = np.zeros((B, T, d_model))
    for b in range(B):
        for h in range(num_heads):
            j = {"tile": h % num_kv_heads, "mod_groups": h % groups}.get(mistake, h // groups)
            qh = q[b, :, h * d_head:(h + 1) * d_head]
            kh = k[b, :, j * d_head:(j + 1) * d_head]
            vh = v[b, :, j * d_head:(j + 1) * d_head]
            if mistake != "no_rotary":
                qh, kh = rotate(qh, angle), rotate(kh, angle)
            if mistake == "rotates_values":
                vh = rotate(vh, angle)
            scores = qh @ kh.T / math.sqrt(d_head)
            if keep is not None:
                scores = np.where(keep, scores, -1e30)
            out[b, :, h * d_head:(h + 1) * d_head] = softmax(scores) @ vh
    return out @ params[prefix + "w_o.weight"].T


def llama_block(params, prefix, x, num_heads, num_kv_heads, keep, mistake=None, base=10000.0, eps=DEFAULT_EPS):
    """The block with rotary base `base` and the norms' `eps`."""
    attend = lambda h: gqa(params, prefix + "attn.", h, num_heads, num_kv_heads, keep, base)   # noqa: E731
    norm = lambda name, h: rms_norm(h, params[prefix + name + ".weight"], eps)          # noqa: E731
    ffn = lambda h: swiglu(params, prefix + "ffn.", h)                                   # noqa: E731
    if mistake == "post_norm":
        x = norm("norm1", x + attend(x))
        return norm("norm2", x + ffn(x))
    a = attend(norm("norm1", x))
    x = a if mistake == "no_attn_residual" else x + a
    f = ffn(norm("norm2", x))
    return f if mistake == "no_ffn_residual" else x + f
