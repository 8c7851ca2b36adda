"""Student answers for testing the checks of notebook 11's checkpoint part (dequantize_q4_1, llama_state_dict).

CORRECT answers are written differently from the reference (a loop over blocks with `struct` in float64, torch
instead of numpy, nibbles stacked and reshaped; the names matched with a regular expression and the tensors cloned,
or the names the model needs generated from num_layers first) and must pass. WRONG answers each contain one known
mistake, written the way a student would; `WRONG` maps each to the catalogue id its check must name. `UNNAMED` are
wrong answers whose mistake has no catalogue id: they must fail with the given words in the message.
"""
from __future__ import annotations

import re
import struct

import numpy as np
import torch

import solutions


# ================================================================================================= Q4_1 blocks
def dequantize_by_block(raw):
    """One block at a time: the header with struct, the weights in float64, rounded to float32 once."""
    if not isinstance(raw, np.ndarray) or raw.dtype != np.uint8 or raw.ndim != 2 or raw.shape[1] != 20:
        raise ValueError("expected uint8 blocks of shape (n, 20)")
    out = np.empty(raw.shape[0] * 32, dtype=np.float32)
    for b, block in enumerate(raw):
        d, m = struct.unpack("<ee", block[:4].tobytes())
        codes = [byte & 15 for byte in block[4:]] + [byte >> 4 for byte in block[4:]]
        out[32 * b:32 * (b + 1)] = np.array(codes, dtype=np.float64) * d + m
    return out


def dequantize_torch(raw):
    """torch: the header viewed as float16 and widened to float32, the nibbles by integer division."""
    if raw.dtype != np.uint8:
        raise ValueError(f"wrong dtype {raw.dtype}")
    if raw.ndim != 2 or raw.shape[-1] != 20:
        raise ValueError(f"wrong shape {raw.shape}")
    blocks = torch.from_numpy(np.ascontiguousarray(raw))
    header = blocks[:, :4].contiguous().view(torch.float16).float()                 # (n, 2)
    qs = blocks[:, 4:].long()
    q = torch.cat([qs % 16, qs // 16], dim=1).float()                                # (n, 32)
    return (q * header[:, :1] + header[:, 1:]).flatten().numpy()


def dequantize_stacked(raw):
    """The nibbles stacked on a new axis and reshaped; d and m as float32 columns."""
    if raw.dtype != np.uint8 or raw.shape[1:] != (20,) or raw.ndim != 2:
        raise ValueError("Q4_1 blocks are (n_blocks, 20) uint8")
    d = raw[:, 0:2].copy().view(np.float16).astype(np.float32)                     # (n, 1)
    m = raw[:, 2:4].copy().view(np.float16).astype(np.float32)                     # (n, 1)
    qs = raw[:, 4:]
    q = np.stack([qs & 0x0F, qs >> 4], axis=1).reshape(len(raw), 32)                # lows, then highs
    return (q * d + m).ravel()


def make_dequantize(mistake=None):
    """A vectorised answer with one mistake switched on."""
    def dequantize_q4_1(raw):
        if mistake != "no_check":
            if raw.dtype != np.uint8 or raw.ndim != 2 or raw.shape[1] != 20:
                raise ValueError("bad blocks")
        n = raw.shape[0]
        d = raw[:, 0:2].copy().view(np.float16)
        m = raw[:, 2:4].copy().view(np.float16)
        if mistake != "float16":
            d, m = d.astype(np.float32), m.astype(np.float32)
        if mistake == "swapped":
            d, m = m, d
        qs = raw[:, 4:]
        low, high = qs & 0x0F, (qs & 0xF0 if mistake == "unshifted" else qs >> 4)
        if mistake == "signed":                     # two's complement nibbles, -8..7
            low, high = ((low << 4).astype(np.int8) >> 4), ((high << 4).astype(np.int8) >> 4)
        elif mistake == "offset":                   # Q4_0's convention
            low, high = low.astype(np.int16) - 8, high.astype(np.int16) - 8
        if mistake == "interleaved":
            q = np.stack([low, high], axis=-1).reshape(n, 32)
        elif mistake == "interleaved_high_first":
            q = np.stack([high, low], axis=-1).reshape(n, 32)
        else:
            q = np.concatenate([low, high], axis=1)
        weights = q * d + m                                                         # float16 for "float16"
        if mistake == "float64":
            return weights.astype(np.float64).reshape(-1)
        if mistake == "blocks_2d":
            return weights.astype(np.float32)
        if mistake == "tensor":
            return torch.from_numpy(weights.astype(np.float32).reshape(-1))
        return weights.astype(np.float32).reshape(-1)

    return dequantize_q4_1


def dequantize_float16_kept(raw):
    """WRONG (q4_1.float16_arithmetic): the float16 result returned as it is."""
    if raw.dtype != np.uint8 or raw.ndim != 2 or raw.shape[1] != 20:
        raise ValueError("bad blocks")
    d, m = raw[:, 0:2].copy().view(np.float16), raw[:, 2:4].copy().view(np.float16)
    return (np.concatenate([raw[:, 4:] & 15, raw[:, 4:] >> 4], axis=1) * d + m).reshape(-1)


# ================================================================================================== GGUF names
BLOCK_RENAMES = {"attn_norm": "norm1", "attn_q": "attn.w_q", "attn_k": "attn.w_k", "attn_v": "attn.w_v",
                 "attn_output": "attn.w_o", "ffn_norm": "norm2", "ffn_gate": "ffn.w_gate", "ffn_up": "ffn.w_up",
                 "ffn_down": "ffn.w_down"}


def state_dict_by_regex(tensors, num_layers):
    """A regular expression per name, the tensors cloned, the missing names by set difference."""
    state = {}
    for name, tensor in tensors.items():
        if name == "token_embd.weight":
            state["token_embedding.weight"] = state["lm_head.weight"] = tensor.clone()
            continue
        if name == "output_norm.weight":
            state["norm.weight"] = tensor.clone()
            continue
        match = re.fullmatch(r"blk\.(\d+)\.(\w+)\.weight", name)
        if not match or match.group(2) not in BLOCK_RENAMES or int(match.group(1)) >= num_layers:
            raise ValueError(f"cannot place {name}")
        state[f"blocks.{match.group(1)}.{BLOCK_RENAMES[match.group(2)]}.weight"] = tensor.clone()
    needed = {"token_embd.weight", "output_norm.weight"} | {
        f"blk.{i}.{k}.weight" for i in range(num_layers) for k in BLOCK_RENAMES}
    missing = sorted(needed - set(tensors))
    if missing:
        raise KeyError(missing[0])
    return state


def state_dict_from_needed_names(tensors, num_layers):
    """The names the model needs generated from num_layers first (a GGUF -> ModernGPT table), then looked up."""
    table = {"token_embd.weight": "token_embedding.weight", "output_norm.weight": "norm.weight"}
    for i in range(num_layers):
        for gguf, ours in BLOCK_RENAMES.items():
            table[f"blk.{i}.{gguf}.weight"] = f"blocks.{i}.{ours}.weight"
    for name in tensors:
        if name not in table:
            raise ValueError(f"unexpected tensor {name}")
    state = {}
    for gguf, ours in table.items():
        if gguf not in tensors:
            raise KeyError(f"missing tensor {gguf}")
        state[ours] = tensors[gguf]
    state["lm_head.weight"] = state["token_embedding.weight"]
    return state


def make_llama_state_dict(mistake=None):
    """The needed-names answer with one mistake switched on."""
    renames = dict(BLOCK_RENAMES)
    if mistake == "norms_swapped":
        renames["attn_norm"], renames["ffn_norm"] = "norm2", "norm1"
    if mistake == "gate_up_swapped":
        renames["ffn_gate"], renames["ffn_up"] = "ffn.w_up", "ffn.w_gate"

    def llama_state_dict(tensors, num_layers):
        if mistake == "infers_layers":                      # the blocks counted from the names
            num_layers = 1 + max(int(n.split(".")[1]) for n in tensors if n.startswith("blk."))
        table = {"token_embd.weight": "token_embedding.weight", "output_norm.weight": "norm.weight"}
        for i in range(num_layers):
            for gguf, ours in renames.items():
                table[f"blk.{i}.{gguf}.weight"] = f"blocks.{i}.{ours}.weight"
        state = {}
        for name, tensor in tensors.items():
            if name not in table:
                if mistake == "unknown_ignored":
                    continue
                if mistake == "infers_layers":
                    continue
                raise ValueError(f"unknown tensor {name}")
            if mistake == "transposed_square" and tensor.dim() == 2 and tensor.size(0) == tensor.size(1):
                tensor = tensor.T
            elif mistake == "transposed_q" and ".attn_q." in name:
                tensor = tensor.t()
            elif mistake == "transposed_all" and tensor.dim() == 2:
                tensor = tensor.T.contiguous()
            elif mistake == "transposed_blocks" and tensor.dim() == 2 and name.startswith("blk."):
                tensor = tensor.T
            state[table[name]] = tensor
        if mistake != "no_key_error":
            for name in table:
                if name not in tensors:
                    raise KeyError(name)
        if mistake == "untied_random":
            state["lm_head.weight"] = torch.randn_like(state["token_embedding.weight"])
        elif mistake == "untied_zeros":
            state["lm_head.weight"] = torch.zeros_like(state["token_embedding.weight"])
        elif mistake != "untied_missing" and "token_embedding.weight" in state:
            state["lm_head.weight"] = state["token_embedding.weight"]
        return state

    return llama_state_dict


# ============================================================================================== the catalogue
CORRECT = {
    "dequantize_q4_1": [dequantize_by_block, dequantize_torch, dequantize_stacked, make_dequantize()],
    "llama_state_dict": [state_dict_by_regex, state_dict_from_needed_names, make_llama_state_dict()],
}

WRONG = [
    ("dequantize_q4_1", make_dequantize("interleaved"), "q4_1.interleaved_nibbles"),
    ("dequantize_q4_1", make_dequantize("interleaved_high_first"), "q4_1.interleaved_nibbles"),
    ("dequantize_q4_1", make_dequantize("signed"), "q4_1.signed_nibbles"),
    ("dequantize_q4_1", make_dequantize("offset"), "q4_1.signed_nibbles"),
    ("dequantize_q4_1", make_dequantize("swapped"), "q4_1.swapped_scale_min"),
    ("dequantize_q4_1", make_dequantize("unshifted"), "q4_1.high_nibble_unshifted"),
    ("dequantize_q4_1", make_dequantize("float16"), "q4_1.float16_arithmetic"),
    ("dequantize_q4_1", dequantize_float16_kept, "q4_1.float16_arithmetic"),
    ("llama_state_dict", make_llama_state_dict("transposed_square"), "state_dict.transposed"),
    ("llama_state_dict", make_llama_state_dict("transposed_q"), "state_dict.transposed"),
    ("llama_state_dict", make_llama_state_dict("transposed_all"), "state_dict.transposed"),
    ("llama_state_dict", make_llama_state_dict("transposed_blocks"), "state_dict.transposed"),
    ("llama_state_dict", make_llama_state_dict("untied_missing"), "state_dict.untied_head"),
    ("llama_state_dict", make_llama_state_dict("untied_random"), "state_dict.untied_head"),
    ("llama_state_dict", make_llama_state_dict("untied_zeros"), "state_dict.untied_head"),
    ("llama_state_dict", make_llama_state_dict("norms_swapped"), "state_dict.norms_swapped"),
    ("llama_state_dict", make_llama_state_dict("gate_up_swapped"), "state_dict.gate_up_swapped"),
    ("llama_state_dict", make_llama_state_dict("unknown_ignored"), "state_dict.unknown_accepted"),
]

UNNAMED = [  # (api name, wrong answer, words of its failure)
    ("dequantize_q4_1", make_dequantize("float64"), "float32"),
    ("dequantize_q4_1", make_dequantize("blocks_2d"), "wrong shape"),
    ("dequantize_q4_1", make_dequantize("tensor"), "numpy array"),
]


def correct(api_names) -> list[tuple[str, object]]:
    """(API name, answer): the reference and the CORRECT answers of the exercises `api_names`."""
    return [(name, answer) for name, answers in CORRECT.items() if name in api_names
            for answer in [getattr(solutions, name), *answers]]


def of(api_names, rows):
    """The rows of WRONG or UNNAMED whose API name is one of `api_names`."""
    return [row for row in rows if row[0] in api_names]
