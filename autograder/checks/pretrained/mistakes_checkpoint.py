"""Known-mistake variants of notebook 11's checkpoint part (GGML Q4_1 blocks, GGUF tensor names), and the table of the
mistakes they make (`TABLE`, at the end), in the format of `autograder/checks/modern/mistakes.py`.

`TABLE` = {mistake id: (variant, switches)}: the variant run with those switches on the check's own inputs gives that
mistake's answer (`kit.compare.from_table`); the check tries the rows of its exercise (the ids `q4_1.*` for
dequantize_q4_1, `state_dict.*` for llama_state_dict) in the table's order, the first match naming the mistake.
`FORMS` = {(variant, mistake id): [switches, ...]}: other switches of the same variant that make the same mistake,
tried right after its row. With every switch off, each variant is the reference (bit for bit: the weights are
float32 `q * d + m`, the state dict passes the given tensors through). Written here from the contract
(docs/course-api.md, notebook 11), not from `solutions`.
"""
from __future__ import annotations

import re

import numpy as np
import torch

Q4_1_BLOCK_BYTES = 20


# ----------------------------------------------------------------------------------------------------- Q4_1 blocks
def q4_1(raw, *, order="halves", signed=None, swap_header=False, high="shifted", precision="float32"):
    """(n_blocks, 20) uint8 Q4_1 blocks -> (n_blocks * 32,) float32 `q * d + m`, with switches:

    order: "halves" (correct: the low nibbles of the 16 bytes are weights 0-15, the high nibbles weights 16-31) |
    "pairs" (byte j's low and high nibble are weights 2j and 2j + 1) | "pairs_high_first" (2j high, 2j + 1 low);
    signed: None (correct: codes 0..15) | "twos" (a nibble read as a 4-bit two's complement number, -8..7) |
    "offset" (the code minus 8, Q4_0's convention); swap_header: d read from bytes 2-3 and m from bytes 0-1;
    high: "shifted" (correct: qs >> 4) | "unshifted" (qs & 0xF0); precision: "float32" (correct) | "float16" (q * d + m
    computed in float16, as numpy does for integer codes times float16 d and m, then converted to float32)."""
    raw = np.asarray(raw)
    if raw.dtype != np.uint8 or raw.ndim != 2 or raw.shape[1] != Q4_1_BLOCK_BYTES:
        raise ValueError(f"Q4_1 blocks are uint8 of shape (n_blocks, 20), got {raw.dtype} {raw.shape}")
    n = raw.shape[0]
    header = np.ascontiguousarray(raw[:, :4]).view("<f2").astype(np.dtype(precision))  # (n, 2): d, m
    d, m = header[:, 0:1], header[:, 1:2]                                                # (n, 1) each
    if swap_header:
        d, m = m, d
    qs = raw[:, 4:].astype(np.int32)                                                     # (n, 16)
    low = qs & 0x0F
    top = qs >> 4 if high == "shifted" else qs & 0xF0
    if signed == "twos":
        low, top = np.where(low >= 8, low - 16, low), np.where(top >= 8, top - 16, top)
    elif signed == "offset":
        low, top = low - 8, top - 8
    if order == "halves":
        q = np.concatenate([low, top], axis=1)                                           # (n, 32)
    elif order == "pairs":
        q = np.stack([low, top], axis=2).reshape(n, 32)
    else:  # "pairs_high_first"
        q = np.stack([top, low], axis=2).reshape(n, 32)
    return (q.astype(header.dtype) * d + m).astype(np.float32).reshape(-1)               # (n * 32,) float32


# -------------------------------------------------------------------------------------------------- GGUF names
# the tensors of block i: GGUF name after "blk.{i}." -> ModernGPT name after "blocks.{i}."
GGUF_BLOCK = {
    "attn_norm": "norm1", "attn_q": "attn.w_q", "attn_k": "attn.w_k", "attn_v": "attn.w_v",
    "attn_output": "attn.w_o", "ffn_norm": "norm2", "ffn_gate": "ffn.w_gate", "ffn_up": "ffn.w_up",
    "ffn_down": "ffn.w_down",
}
_SWAPPED = {"attn_norm": "ffn_norm", "ffn_norm": "attn_norm", "ffn_gate": "ffn_up", "ffn_up": "ffn_gate"}
_BLOCK_NAME = re.compile(r"blk\.(0|[1-9][0-9]*)\.([a-z_]+)\.weight")


def _transposed(suffix: str, tensor: torch.Tensor, transpose) -> bool:
    """Whether the `transpose` switch turns this tensor (`suffix`: a block tensor's GGUF suffix, "token_embd" for the
    embedding): None (never), "square" (every square matrix), "blocks" (every matrix of a block), "all" (every
    matrix, the embedding too), or a GGUF suffix ("attn_q": that matrix in every block)."""
    if transpose is None or tensor.dim() != 2:
        return False
    if transpose == "square":
        return tensor.size(0) == tensor.size(1)
    if transpose == "blocks":
        return suffix != "token_embd"
    return transpose == "all" or transpose == suffix


def gguf_state_dict(tensors, num_layers, *, transpose=None, head="tied", swap_norms=False, swap_gate_up=False,
                    accept_unknown=False):
    """GGUF-named tensors -> ModernGPT's state_dict (the tensors passed through), with switches:

    transpose: None | "square" | "blocks" | "all" | a GGUF suffix (`_transposed`); head: "tied" (correct:
    lm_head.weight is token_embd.weight) | "missing" (no lm_head.weight) | "transposed" (lm_head.weight is
    token_embd.weight.T);
    swap_norms: attn_norm -> norm2 and ffn_norm -> norm1; swap_gate_up: ffn_gate -> w_up and ffn_up -> w_gate;
    accept_unknown: a name that maps to nothing (unknown, or a block index >= num_layers) is skipped instead of
    raising ValueError. A needed name that is missing raises KeyError naming it."""
    state = {}
    for name, tensor in tensors.items():
        if name == "token_embd.weight":
            tensor = tensor.T if _transposed("token_embd", tensor, transpose) else tensor
            state["token_embedding.weight"] = tensor
            if head == "tied":
                state["lm_head.weight"] = tensor
            elif head == "transposed":
                state["lm_head.weight"] = tensor.T
            continue
        if name == "output_norm.weight":
            state["norm.weight"] = tensor
            continue
        match = _BLOCK_NAME.fullmatch(name)
        known = match is not None and match.group(2) in GGUF_BLOCK and int(match.group(1)) < num_layers
        if not known:
            if accept_unknown:
                continue
            raise ValueError(f"{name!r} maps to no tensor of a ModernGPT with {num_layers} blocks")
        index, suffix = int(match.group(1)), match.group(2)
        if (swap_norms and suffix in ("attn_norm", "ffn_norm")) or \
                (swap_gate_up and suffix in ("ffn_gate", "ffn_up")):
            suffix_to = _SWAPPED[suffix]
        else:
            suffix_to = suffix
        value = tensor.T if _transposed(suffix, tensor, transpose) else tensor
        state[f"blocks.{index}.{GGUF_BLOCK[suffix_to]}.weight"] = value
    needed = ["token_embd.weight", "output_norm.weight",
              *(f"blk.{i}.{suffix}.weight" for i in range(num_layers) for suffix in GGUF_BLOCK)]
    for name in needed:
        if name not in tensors:
            raise KeyError(f"{name!r} is missing")
    return state


# --------------------------------------------------------------------------------------------------- the table
TABLE = {
    # dequantize_q4_1(raw): q4_1(raw, **switches)
    "q4_1.interleaved_nibbles": (q4_1, {"order": "pairs"}),
    "q4_1.signed_nibbles": (q4_1, {"signed": "twos"}),
    "q4_1.swapped_scale_min": (q4_1, {"swap_header": True}),
    "q4_1.high_nibble_unshifted": (q4_1, {"high": "unshifted"}),
    "q4_1.float16_arithmetic": (q4_1, {"precision": "float16"}),
    # llama_state_dict(tensors, num_layers): gguf_state_dict(tensors, num_layers, **switches)
    "state_dict.transposed": (gguf_state_dict, {"transpose": "square"}),
    "state_dict.untied_head": (gguf_state_dict, {"head": "missing"}),
    "state_dict.norms_swapped": (gguf_state_dict, {"swap_norms": True}),
    "state_dict.gate_up_swapped": (gguf_state_dict, {"swap_gate_up": True}),
    "state_dict.unknown_accepted": (gguf_state_dict, {"accept_unknown": True}),
}
FORMS = {
    (q4_1, "q4_1.interleaved_nibbles"): [{"order": "pairs_high_first"}],
    (q4_1, "q4_1.signed_nibbles"): [{"signed": "offset"}],
    # one square matrix turned (the queries' or the output's), every matrix of the blocks, or every matrix
    (gguf_state_dict, "state_dict.transposed"): [{"transpose": "attn_q"}, {"transpose": "attn_output"},
                                                 {"transpose": "blocks"}, {"transpose": "all"}],
    (gguf_state_dict, "state_dict.untied_head"): [{"head": "transposed"}],
}
