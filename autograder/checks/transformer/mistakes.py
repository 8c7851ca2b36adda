"""Known-mistake variants of notebook 06 (decoder and Transformer): see the package doc.

Two tables, since one id means two things here: `TABLE` holds the rows of DecoderBlock and Decoder (the encoder's
block and stack rows, 05's `encoder.mistakes`, run through the decoder, plus the decoder's own) and of greedy
decoding; `TRANSFORMER_TABLE` the Transformer's own masks, where "attention.mask_inverted" is the source padding
mask inverted in `encode` (in `TABLE` it is the attention's inversion of every mask). A block's switches reach
every block of a stack (`decoder` passes them on), and the stack's reach the Transformer's decoder (`transformer`).
"""
from __future__ import annotations

import torch

from autograder.checks.encoder import mistakes as E
from autograder.checks.encoder.mistakes import apply_final_norm, embed, encoder
from autograder.checks.multi_head.mistakes import mha


def decoder_block(block, x, memory, tgt_mask=None, memory_mask=None, *, swap_norm=False, attn_residual=True,
                  cross_residual=True, ffn_residual=True, cross_from_decoder=False, swap_masks=False,
                  ignore_tgt_mask=False, attn_flags=None):
    norm_first = block.norm_first != swap_norm
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
            swap_final_norm=False, **block_flags):
    x = embed(stack, ids, scale_embeddings=scale_embeddings, positions=positions)
    for layer in stack.layers:
        x = decoder_block(layer, x, memory, tgt_mask, memory_mask, **block_flags)
    return apply_final_norm(stack, x, swap_final_norm)


def transformer(model, src_ids, tgt_ids, *, causal=True, src_mask=True, pad_id=None, invert_src_mask=False,
                part="logits", **decoder_flags):
    """Transformer.forward with switches; pad_id overrides model.pad_id (the hard-coded-0 mistake). `part`: what
    to return, the logits (forward and decode), or encode's "memory" or "src_mask"."""
    pad = model.pad_id if pad_id is None else pad_id
    source_keep = (src_ids != pad)[:, None, None, :]                                        # (B, 1, 1, S)
    if invert_src_mask:
        source_keep = ~source_keep
    if part == "src_mask":
        return source_keep
    memory_mask = source_keep if src_mask else None
    memory = encoder(model.encoder, src_ids, memory_mask)
    if part == "memory":
        return memory
    T = tgt_ids.size(1)
    target_keep = (tgt_ids != pad)[:, None, None, :]                                        # (B, 1, 1, T)
    if causal:
        target_keep = target_keep & torch.tril(torch.ones(T, T, dtype=torch.bool, device=tgt_ids.device))
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


TABLE = {
    # DecoderBlock: 05's block rows (and the attention's, through both attention sublayers), plus its own
    **{mistake_id: (decoder_block, switches) for mistake_id, (variant, switches) in E.TABLE.items()
       if variant is E.encoder_block},
    "decoder.missing_residual_cross": (decoder_block, {"cross_residual": False}),
    "decoder.cross_from_decoder": (decoder_block, {"cross_from_decoder": True}),
    "decoder.tgt_mask_ignored": (decoder_block, {"ignore_tgt_mask": True}),
    "decoder.masks_swapped": (decoder_block, {"swap_masks": True}),
    # Decoder: 05's stack rows
    **{mistake_id: (decoder, switches) for mistake_id, (variant, switches) in E.TABLE.items() if variant is E.encoder},
    # greedy_decode
    "greedy.keeps_bos": (greedy, {"keep_bos": True}),
    "greedy.no_early_stop": (greedy, {"early_stop": False}),
    "greedy.stops_at_first_eos": (greedy, {"stop_any": True}),
    "greedy.no_pad_after_eos": (greedy, {"pad_after_eos": False}),
    "greedy.drops_eos": (greedy, {"keep_eos": False}),
}
TRANSFORMER_TABLE = {
    "transformer.no_causal_mask": (transformer, {"causal": False}),
    "transformer.no_src_mask": (transformer, {"src_mask": False}),
    "transformer.pad_id_hardcoded": (transformer, {"pad_id": 0}),
    "attention.mask_inverted": (transformer, {"invert_src_mask": True}),
}
GREEDY_IDS = ("greedy.keeps_bos", "greedy.no_early_stop", "greedy.stops_at_first_eos", "greedy.no_pad_after_eos",
              "greedy.drops_eos")
DECODER_RESIDUAL_IDS = ("encoder.missing_residual_attn", "decoder.missing_residual_cross",
                        "encoder.missing_residual_ffn")


def decoder_ids(has_tgt_mask: bool, has_memory_mask: bool, stack: bool = False) -> list[str]:
    """The ids a DecoderBlock's (or, `stack`, a Decoder's) check tries, in order: the cross-attention's source,
    the masks ignored or swapped, then the encoder's block (or stack) mistakes with the decoder's residuals."""
    own = ["decoder.cross_from_decoder", *(["decoder.tgt_mask_ignored"] if has_tgt_mask else []),
           *(["decoder.masks_swapped"] if has_tgt_mask and has_memory_mask else [])]
    shared = E.stack_ids if stack else E.block_ids
    return own + shared(has_tgt_mask or has_memory_mask, DECODER_RESIDUAL_IDS)
