"""Public self-checks for notebook 11's checkpoint part: dequantize_q4_1 and llama_state_dict.

dequantize_q4_1 is checked on three hand-written Q4_1 blocks whose weights are worked out here by a plain Python loop
(the float16 header read with `struct`, one nibble at a time), so the check shares no code, and no mistake, with a
vectorised answer. llama_state_dict is checked on random tensors under the GGUF names of a small two-block model: the
result must hold, under each of ModernGPT's names, exactly the tensor the exercise's table maps there.
"""
from __future__ import annotations

import struct

import numpy as np
import torch

from coursekit.checks.toolkit import expect_type, fail, mistake_hint, passed, run
from coursekit.criteria import edge_case


def _expect_error(kind: type[Exception], label: str, action, names: tuple[str, ...], hint: str | None = None,
                  returned_hint: str | None = None) -> None:
    """`action()` raises `kind` (ValueError, KeyError) whose message contains one of `names` ("" for any message);
    otherwise a failure naming `label`; `returned_hint` is the hint when it returns instead."""
    try:
        result = action()
    except kind as error:
        if any(name in str(error) for name in names):
            return
        fail(f"{label} raised {kind.__name__}, but its message does not name {names[0]!r}: {error}",
             f"put the name in the message: raise {kind.__name__}(f\"... {{name}} ...\").")
    except NotImplementedError:
        run(label.split("(")[0], action)
    except Exception as error:  # noqa: BLE001
        fail(f"{label} raised {type(error).__name__}: {error}; it should raise {kind.__name__}.", hint)
    fail(f"{label} should raise {kind.__name__}" + (f" naming {names[0]!r}" if names[0] else "")
         + f", but it returned a {type(result).__name__}.", returned_hint or hint)


# ------------------------------------------------------------------------------------------------ Q4_1 blocks
# Three blocks, 20 bytes each: d (float16, little-endian), m (float16, little-endian), 16 bytes qs.
_BLOCKS = [
    # d = 0.5 (0x3800), m = -1.0 (0xBC00); byte j holds j in its low nibble and 15 - j in its high nibble
    [0x00, 0x38, 0x00, 0xBC, *(j | (15 - j) << 4 for j in range(16))],
    # d = 0.125 (0x3000), m = 3 * 2**-24 (0x0003, a subnormal float16): 1 + 3 * 2**-24 rounds to 1 + 2**-22 in float32
    [0x00, 0x30, 0x03, 0x00, 0x9F, 0x01, 0xE2, 0x73, 0x5C, 0x48, 0xB6, 0x0D, 0xFA, 0x37, 0x81, 0x6E, 0xC5, 0x29,
     0x54, 0xD0],
    # d = -2.5 (0xC100), m = 7.0 (0x4700)
    [0x00, 0xC1, 0x00, 0x47, 0x10, 0x32, 0x54, 0x76, 0x98, 0xBA, 0xDC, 0xFE, 0xEF, 0xCD, 0xAB, 0x89, 0x67, 0x45,
     0x23, 0x01],
]


def _float16(two_bytes) -> float:
    """A little-endian float16 as a Python float."""
    return struct.unpack("<e", bytes(two_bytes))[0]


def _signed(code: int) -> int:
    return code - 16 if code >= 8 else code


def q4_1_weights(blocks, mistake=None) -> np.ndarray:
    """The weights of `blocks` (lists of 20 ints) by the contract, one weight at a time, in float64 (exact: q * d and
    the sum fit in 53 bits), rounded once to float32 at the end (as float32 arithmetic rounds the exact sum). With
    `mistake`, a known wrong answer instead."""
    out = []
    for row in blocks:
        d, m = _float16(row[0:2]), _float16(row[2:4])
        if mistake == "swapped":
            d, m = m, d
        lows = [byte & 0x0F for byte in row[4:]]
        highs = [byte & 0xF0 if mistake == "unshifted" else byte >> 4 for byte in row[4:]]
        if mistake == "signed":
            lows, highs = [_signed(q) for q in lows], [_signed(q) for q in highs]
        elif mistake == "offset":
            lows, highs = [q - 8 for q in lows], [q - 8 for q in highs]
        if mistake == "interleaved":
            codes = [q for pair in zip(lows, highs) for q in pair]
        elif mistake == "interleaved_high_first":
            codes = [q for pair in zip(highs, lows) for q in pair]
        else:
            codes = lows + highs
        if mistake == "float16":                      # each product and sum rounded to float16, as numpy does
            out += [float(np.float16(np.float16(q * d) + np.float16(m))) for q in codes]
        else:
            out += [q * d + m for q in codes]
    return np.array(out, dtype=np.float32)


def check_dequantize_q4_1(dequantize_q4_1) -> None:
    raw = np.array(_BLOCKS, dtype=np.uint8)                                          # (3, 20)
    label = "dequantize_q4_1(raw of shape (3, 20))"
    out = run("dequantize_q4_1", dequantize_q4_1, raw.copy())
    expect_type(out, np.ndarray, label, "return a numpy array (a torch tensor: convert it with .numpy()).")
    if out.dtype == np.float16:
        fail(f"{label} should have dtype float32, got float16.", mistake_hint("q4_1.float16_arithmetic"))
    if out.dtype != np.float32:
        fail(f"{label} should have dtype float32, got {out.dtype}.",
             "read d and m as float32 (.astype(np.float32)) and compute q * d + m in float32.")
    if out.shape != (96,):
        fail(f"{label} should have shape (96,): 32 weights per block, one flat array; got {out.shape}.",
             "put the blocks one after the other: .reshape(-1).")
    expected = q4_1_weights(_BLOCKS)
    if not np.array_equal(out, expected):
        known = [("interleaved", mistake_hint("q4_1.interleaved_nibbles")),
                 ("interleaved_high_first", mistake_hint("q4_1.interleaved_nibbles")),
                 ("signed", mistake_hint("q4_1.signed_nibbles")), ("offset", mistake_hint("q4_1.signed_nibbles")),
                 ("swapped", mistake_hint("q4_1.swapped_scale_min")),
                 ("unshifted", mistake_hint("q4_1.high_nibble_unshifted")),
                 ("float16", mistake_hint("q4_1.float16_arithmetic"))]
        hint = next((hint for wrong, hint in known if np.array_equal(out, q4_1_weights(_BLOCKS, wrong))),
                    "weight j of a block is (qs[j] & 0x0F) * d + m, weight j + 16 is (qs[j] >> 4) * d + m, in "
                    "float32 (the result must match bit for bit).")
        k = int(np.flatnonzero(out != expected)[0])
        fail(f"{label} gives wrong weights: weight {k} (block {k // 32}, weight {k % 32} of it) should be "
             f"{float(expected[k])!r}, got {float(out[k])!r}.", hint)
    with edge_case("dequantize_q4_1.bad_input"):
        for bad, what in ((raw.view(np.int8), "int8 of shape (3, 20)"), (raw[:, :19], "uint8 of shape (3, 19)"),
                          (raw.reshape(-1), "uint8 of shape (60,)")):
            _expect_error(ValueError, f"dequantize_q4_1(raw {what})", lambda bad=bad: dequantize_q4_1(bad), ("",),
                          "check raw.dtype == np.uint8 and raw.shape == (n_blocks, 20) first; raise ValueError "
                          "otherwise.")
    passed("dequantize_q4_1", "(three hand-written blocks, bit for bit; other dtypes and shapes)")


# ------------------------------------------------------------------------------------------------- GGUF names
# the contract's table: GGUF name after "blk.{i}." -> ModernGPT name after "blocks.{i}."
_BLOCK_NAMES = (("attn_norm", "norm1"), ("attn_q", "attn.w_q"), ("attn_k", "attn.w_k"), ("attn_v", "attn.w_v"),
                ("attn_output", "attn.w_o"), ("ffn_norm", "norm2"), ("ffn_gate", "ffn.w_gate"),
                ("ffn_up", "ffn.w_up"), ("ffn_down", "ffn.w_down"))
_OTHER = {"norm1": "norm2", "norm2": "norm1", "ffn.w_gate": "ffn.w_up", "ffn.w_up": "ffn.w_gate"}
_VOCAB, _D_MODEL, _KV, _D_FF, _LAYERS = 11, 8, 4, 6, 2   # 4 query heads of 2 over 2 key/value heads


def _gguf_tensors() -> dict[str, torch.Tensor]:
    """Random tensors under the GGUF names of a 2-block model (square and non-square matrices, norms not ones)."""
    generator = torch.Generator().manual_seed(110)
    shapes = {"attn_norm": (_D_MODEL,), "attn_q": (_D_MODEL, _D_MODEL), "attn_k": (_KV, _D_MODEL),
              "attn_v": (_KV, _D_MODEL), "attn_output": (_D_MODEL, _D_MODEL), "ffn_norm": (_D_MODEL,),
              "ffn_gate": (_D_FF, _D_MODEL), "ffn_up": (_D_FF, _D_MODEL), "ffn_down": (_D_MODEL, _D_FF)}
    tensors = {"token_embd.weight": torch.randn(_VOCAB, _D_MODEL, generator=generator),
               "output_norm.weight": 1 + 0.3 * torch.randn(_D_MODEL, generator=generator)}
    for i in range(_LAYERS):
        for suffix, _ in _BLOCK_NAMES:
            tensors[f"blk.{i}.{suffix}.weight"] = torch.randn(shapes[suffix], generator=generator)
    return tensors


def _sources(num_layers: int) -> dict[str, str]:
    """{ModernGPT name: the GGUF name of the tensor it holds}, in the order of ModernGPT's state_dict."""
    sources = {"token_embedding.weight": "token_embd.weight"}
    for i in range(num_layers):
        for suffix, name in _BLOCK_NAMES:
            sources[f"blocks.{i}.{name}.weight"] = f"blk.{i}.{suffix}.weight"
    sources["norm.weight"] = "output_norm.weight"
    sources["lm_head.weight"] = "token_embd.weight"                                   # tied: the same tensor
    return sources


def _value_hint(name: str, value: torch.Tensor, tensors: dict, sources: dict) -> str | None:
    """The known mistake that puts `value` under `name`, if one does."""
    want = tensors[sources[name]]
    if name == "lm_head.weight":
        return mistake_hint("state_dict.untied_head")
    if want.dim() == 2 and tuple(value.shape) == tuple(want.T.shape) and torch.equal(value, want.T):
        return mistake_hint("state_dict.transposed")
    prefix, _, module = name.partition(".")[2].partition(".")                        # "0", "norm1.weight"
    module = module.removesuffix(".weight")
    if module in _OTHER:
        other = tensors[sources[f"blocks.{prefix}.{_OTHER[module]}.weight"]]
        if tuple(value.shape) == tuple(other.shape) and torch.equal(value, other):
            return mistake_hint("state_dict.norms_swapped") if "norm" in module else \
                mistake_hint("state_dict.gate_up_swapped")
    return None


def check_llama_state_dict(llama_state_dict) -> None:
    tensors = _gguf_tensors()
    label = f"llama_state_dict({len(tensors)} tensors of a 2-block model, 2)"
    state = run("llama_state_dict", llama_state_dict, dict(tensors), _LAYERS)
    expect_type(state, dict, label, "return a dict {ModernGPT name: tensor}.")
    sources = _sources(_LAYERS)
    missing = [name for name in sources if name not in state]
    extra = sorted(name for name in state if name not in sources)
    if missing == ["lm_head.weight"] and not extra:
        fail(f"{label} has no lm_head.weight: load_state_dict(..., strict=True) needs it.",
             mistake_hint("state_dict.untied_head"))
    if missing or extra:
        fail(f"{label} should hold exactly the names of ModernGPT's state_dict (strict=True loads nothing else); "
             + (f"missing: {', '.join(missing[:3])}" if missing else "")
             + ("; " if missing and extra else "") + (f"not ModernGPT's: {', '.join(extra[:3])}" if extra else "")
             + ".", "map every GGUF name by the exercise's table; token_embd.weight goes under two names.")
    for name, source in sources.items():
        value = state[name]
        expect_type(value, torch.Tensor, f"{label}[{name!r}]")
        want = tensors[source]
        if tuple(value.shape) == tuple(want.shape) and torch.equal(value.detach().cpu().to(want.dtype), want):
            continue
        fail(f"{label}[{name!r}] should be the tensor {source} as it is (shape {tuple(want.shape)}), got "
             f"a different tensor of shape {tuple(value.shape)}.",
             _value_hint(name, value.detach().cpu(), tensors, sources))
    unknown_hint = mistake_hint("state_dict.unknown_accepted")
    with edge_case("llama_state_dict.missing"):
        fewer = {k: v for k, v in tensors.items() if k != "blk.1.ffn_down.weight"}
        _expect_error(KeyError, f"llama_state_dict({len(fewer)} tensors without blk.1.ffn_down.weight, 2)",
                      lambda: llama_state_dict(fewer, _LAYERS), ("blk.1.ffn_down.weight",),
                      "after mapping, look for every name the model needs and raise KeyError(name) for the first "
                      "one that is missing.")
        _expect_error(KeyError, f"llama_state_dict({len(tensors)} tensors of 2 blocks, num_layers=3)",
                      lambda: llama_state_dict(dict(tensors), 3), ("blk.2.",),
                      "the names the model needs come from num_layers, not from the tensors given.")
    with edge_case("llama_state_dict.unknown"):
        for extra_name, shape in (("blk.2.attn_q.weight", (_D_MODEL, _D_MODEL)), ("rope_freqs.weight", (2,))):
            given = {**tensors, extra_name: torch.zeros(shape)}
            _expect_error(ValueError, f"llama_state_dict({len(given)} tensors with {extra_name}, 2)",
                          lambda given=given: llama_state_dict(given, _LAYERS), (extra_name,),
                          "raise ValueError(name) for a name that is unknown or has a block index >= num_layers.",
                          unknown_hint)
        _expect_error(ValueError, f"llama_state_dict({len(tensors)} tensors of 2 blocks, num_layers=1)",
                      lambda: llama_state_dict(dict(tensors), 1), ("blk.1.",),
                      "a tensor of block 1 has no place in a model of num_layers=1 block: raise ValueError(name).",
                      unknown_hint)
    passed("llama_state_dict", "(every name mapped, tensors unchanged, the head tied; missing and unknown names)")
