"""Known-mistake variants of notebook 06 (decoder and Transformer): see the package doc."""
from __future__ import annotations

import torch

from autograder.checks.encoder.mistakes import _embed, _final_norm, encoder
from autograder.checks.multi_head.mistakes import mha


def decoder_block(block, x, memory, tgt_mask=None, memory_mask=None, *, norm_first=None, attn_residual=True,
                  cross_residual=True, ffn_residual=True, cross_from_decoder=False, swap_masks=False,
                  ignore_tgt_mask=False, attn_flags=None):
    norm_first = block.norm_first if norm_first is None else norm_first
    flags = attn_flags or {}
    if swap_masks:
        tgt_mask, memory_mask = memory_mask, tgt_mask
    self_mask = None if ignore_tgt_mask else tgt_mask

    def self_attend(h):
        return mha(block.self_attn, h, h, h, self_mask, **flags)[0]

    def cross_attend(h):
        source = h if cross_from_decoder else memory
        return mha(block.cross_attn, h, source, source, memory_mask, **flags)[0]

    def residual(x, y, keep):
        return x + y if keep else y

    if norm_first:
        x = residual(x, self_attend(block.norm1(x)), attn_residual)
        x = residual(x, cross_attend(block.norm2(x)), cross_residual)
        return residual(x, block.ffn(block.norm3(x)), ffn_residual)
    x = block.norm1(residual(x, self_attend(x), attn_residual))
    x = block.norm2(residual(x, cross_attend(x), cross_residual))
    return block.norm3(residual(x, block.ffn(x), ffn_residual))


def decoder(stack, ids, memory, tgt_mask=None, memory_mask=None, *, scale_embeddings=True, positions=True,
            final_norm=None, **block_flags):
    x = _embed(stack, ids, scale_embeddings=scale_embeddings, positions=positions)
    for layer in stack.layers:
        x = decoder_block(layer, x, memory, tgt_mask, memory_mask, **block_flags)
    return _final_norm(stack, x, final_norm)


def transformer(model, src_ids, tgt_ids, *, causal=True, src_mask=True, pad_id=None, invert_src_mask=False,
                **decoder_flags):
    """Transformer.forward with switches; pad_id overrides model.pad_id (the hard-coded-0 mistake)."""
    pad = model.pad_id if pad_id is None else pad_id
    source_keep = (src_ids != pad)[:, None, None, :]                                        # (B, 1, 1, S)
    if invert_src_mask:
        source_keep = ~source_keep
    T = tgt_ids.size(1)
    target_keep = (tgt_ids != pad)[:, None, None, :]                                        # (B, 1, 1, T)
    if causal:
        target_keep = target_keep & torch.tril(torch.ones(T, T, dtype=torch.bool, device=tgt_ids.device))
    memory_mask = source_keep if src_mask else None
    memory = encoder(model.encoder, src_ids, memory_mask)
    x = decoder(model.decoder, tgt_ids, memory, target_keep, memory_mask, **decoder_flags)
    return model.generator(x)                                                               # (B, T, V)


@torch.no_grad()
def greedy(model, src_ids, max_len, bos_id=2, eos_id=3, *, keep_bos=False, early_stop=True, stop_any=False,
           pad_after_eos=True, keep_eos=True):
    """Greedy decoding through model.decode, with switches."""
    memory, src_mask = model.encode(src_ids)
    B = src_ids.size(0)
    ys = torch.full((B, 1), bos_id, dtype=torch.long, device=src_ids.device)                # (B, 1)
    finished = torch.zeros(B, dtype=torch.bool, device=src_ids.device)
    for _ in range(max_len):
        token = model.decode(ys, memory, src_mask)[:, -1].argmax(dim=-1)                    # (B,)
        if pad_after_eos:
            token = token.masked_fill(finished, model.pad_id)
        ys = torch.cat([ys, token[:, None]], dim=1)
        finished |= token == eos_id
        if early_stop and (finished.any() if stop_any else finished.all()):
            break
    out = ys if keep_bos else ys[:, 1:]
    if not keep_eos:
        out = out.masked_fill(out == eos_id, model.pad_id)
    return out
