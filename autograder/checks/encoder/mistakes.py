"""Known-mistake variants of notebook 05 (encoder): see the package doc.

`TABLE` holds one row per mistake id the checks of 05 diagnose: (variant, switches). A block's switches
(`encoder_block`) also reach every block of a stack (`encoder` passes them on), so the Encoder's check runs every
row through `encoder`; notebook 06 reuses the block and stack rows for its decoder (`block_ids`, `stack_ids` give
the order in which a check tries them: the first match wins).
"""
from __future__ import annotations

import math

import torch
from torch import nn

from autograder.checks.multi_head.mistakes import mha
from autograder.checks.attention.mistakes import ATTENTION_MISTAKES


def feed_forward(ffn, x, *, relu=True, relu_after=False, activation="relu"):
    h = ffn.linear1(x)                                                                      # (B, T, d_ff)
    h = getattr(torch.nn.functional, activation)(h) if relu else h
    out = ffn.linear2(h)                                                                    # (B, T, d_model)
    return torch.relu(out) if relu_after else out


def encoder_block(block, x, mask=None, *, swap_norm=False, attn_residual=True, ffn_residual=True, attn_flags=None):
    """EncoderBlock with switches; `swap_norm`: the other arrangement than the block's own (pre-norm for post-norm)."""
    norm_first = block.norm_first != swap_norm
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


def embed(stack, ids, *, scale_embeddings=True, positions=True):
    """An Encoder's or Decoder's input: token embeddings * sqrt(d_model) plus the positional encoding, with
    switches."""
    d_model = stack.embedding.weight.shape[1]
    x = stack.embedding.weight[ids] * (math.sqrt(d_model) if scale_embeddings else 1.0)    # (B, T, d_model)
    if positions:
        x = x + stack.pos_encoding.pe[: ids.size(1)].to(x)
    return x


def apply_final_norm(stack, x, swap_final_norm=False):
    """The stack's final norm (a LayerNorm for pre-norm, nn.Identity for post-norm); swap_final_norm: the other
    arrangement (a post-norm stack with a final LayerNorm, a pre-norm stack without)."""
    if not swap_final_norm:
        return stack.norm(x)
    if isinstance(stack.norm, nn.LayerNorm):
        return x
    return nn.functional.layer_norm(x, x.shape[-1:])


def encoder(stack, ids, mask=None, *, scale_embeddings=True, positions=True, swap_final_norm=False, **block_flags):
    x = embed(stack, ids, scale_embeddings=scale_embeddings, positions=positions)
    for layer in stack.layers:
        x = encoder_block(layer, x, mask, **block_flags)
    return apply_final_norm(stack, x, swap_final_norm)


# The block's rows (`encoder_block`), then the stack's own (`encoder`); the rows of the attention's mistakes
# (ATTENTION_MISTAKES, through the block's self-attention) come last.
BLOCK_ROWS = {
    "encoder.norm_swapped": (encoder_block, {"swap_norm": True}),
    "encoder.missing_residual_attn": (encoder_block, {"attn_residual": False}),
    "encoder.missing_residual_ffn": (encoder_block, {"ffn_residual": False}),
}
STACK_ROWS = {
    "encoder.no_embedding_scale": (encoder, {"scale_embeddings": False}),
    "encoder.no_positions": (encoder, {"positions": False}),
    "encoder.final_norm": (encoder, {"swap_final_norm": True}),
}
TABLE = {
    "encoder.no_relu": (feed_forward, {"relu": False}),
    "encoder.relu_after_linear2": (feed_forward, {"relu_after": True}),
    "encoder.gelu": (feed_forward, {"activation": "gelu"}),
    **BLOCK_ROWS,
    **STACK_ROWS,
    **{mistake_id: (encoder_block, {"attn_flags": flags}) for mistake_id, flags in ATTENTION_MISTAKES.items()},
}
FEED_FORWARD_IDS = ("encoder.no_relu", "encoder.relu_after_linear2", "encoder.gelu")
RESIDUAL_IDS = ("encoder.missing_residual_attn", "encoder.missing_residual_ffn")


def attention_ids(has_mask: bool) -> list[str]:
    """The attention's mistakes a block can show: those about the mask only when there is one."""
    return [mistake_id for mistake_id, flags in ATTENTION_MISTAKES.items()
            if has_mask or "mask" not in next(iter(flags))]


def block_ids(has_mask: bool, residual_ids=RESIDUAL_IDS) -> list[str]:
    """The ids a block's check tries, in order: pre/post-norm swapped, each residual missing, the attention's."""
    return ["encoder.norm_swapped", *residual_ids, *attention_ids(has_mask)]


def stack_ids(has_mask: bool, residual_ids=RESIDUAL_IDS) -> list[str]:
    """The ids a stack's check tries, in order: embedding scale, positions, final norm, the mask not handed on
    (with a mask), then every block mistake (an id listed twice is tried once, at its first place)."""
    return ["encoder.no_embedding_scale", "encoder.no_positions", "encoder.final_norm",
            *(["attention.mask_ignored"] if has_mask else []), *block_ids(has_mask, residual_ids)]
