"""Known-mistake variants of notebook 05 (encoder): see the package doc."""
from __future__ import annotations

import math

import torch
from torch import nn

from autograder.checks.multi_head.mistakes import mha
from autograder.checks.attention.mistakes import ATTENTION_MISTAKES  # noqa: F401 (the checks name them too)


def feed_forward(ffn, x, *, relu=True, relu_after=False, activation="relu"):
    h = ffn.linear1(x)                                                                      # (B, T, d_ff)
    h = getattr(torch.nn.functional, activation)(h) if relu else h
    out = ffn.linear2(h)                                                                    # (B, T, d_model)
    return torch.relu(out) if relu_after else out


def encoder_block(block, x, mask=None, *, norm_first=None, attn_residual=True, ffn_residual=True, attn_flags=None):
    """EncoderBlock with switches; `norm_first=None` keeps the block's own arrangement."""
    norm_first = block.norm_first if norm_first is None else norm_first
    flags = attn_flags or {}

    def attend(h):
        return mha(block.self_attn, h, h, h, mask, **flags)[0]

    if norm_first:
        a = attend(block.norm1(x))
        x = x + a if attn_residual else a
        f = block.ffn(block.norm2(x))
        return x + f if ffn_residual else f
    a = attend(x)
    x = block.norm1(x + a if attn_residual else a)
    f = block.ffn(x)
    return block.norm2(x + f if ffn_residual else f)


def _embed(stack, ids, *, scale_embeddings=True, positions=True):
    d_model = stack.embedding.weight.shape[1]
    x = stack.embedding.weight[ids] * (math.sqrt(d_model) if scale_embeddings else 1.0)    # (B, T, d_model)
    if positions:
        x = x + stack.pos_encoding.pe[: ids.size(1)].to(x)
    return x


def _final_norm(stack, x, final_norm):
    """final_norm None: as the reference (norm only for pre-norm); True/False force it on/off."""
    has_norm = isinstance(stack.norm, nn.LayerNorm)
    if final_norm is None:
        return stack.norm(x)
    if final_norm and has_norm:
        return stack.norm(x)
    if final_norm and not has_norm:
        return nn.functional.layer_norm(x, x.shape[-1:])
    return x


def encoder(stack, ids, mask=None, *, scale_embeddings=True, positions=True, final_norm=None, **block_flags):
    x = _embed(stack, ids, scale_embeddings=scale_embeddings, positions=positions)
    for layer in stack.layers:
        x = encoder_block(layer, x, mask, **block_flags)
    return _final_norm(stack, x, final_norm)
