"""Hidden checks of notebook 11's checkpoint part: `check_dequantize_q4_1` and `check_llama_state_dict`.

Judged here, in the grader's process, never on the real model file: on random Q4_1 blocks and on the weights of a
small random ModernGPT, both this submission's (autograder/checks/kit/draws.py). Every size and choice below is drawn
with `pick` from the space written next to it (the first option is the input of salt 0), every number from
`seed_for`.

- dequantize_q4_1: blocks whose float16 scale d and minimum m are positive, negative, subnormal ("tiny") and large,
  and random bytes qs; the weights must equal the reference's bit for bit (float32, `np.array_equal`), and gguf's own
  decoder (`gguf.quants.dequantize`, installed with the course) as a second, independent reference agrees with it.
  A mismatch is diagnosed with the known mistakes (`mistakes_checkpoint.TABLE`, ids `q4_1.*`). The stated edge case:
  another dtype (a drawn one) or shape (a drawn row width, and a drawn other layout) raises ValueError.
- llama_state_dict: the GGUF-named weights of a ModernGPT of drawn sizes (2 or 3 blocks; d_model, d_ff, the key/value
  width and the vocabulary all different, so square and non-square matrices are there), handed in in a drawn order;
  the result must be the reference's state_dict tensor for tensor (names, shapes, values: passed through), the head
  tied to the embedding, and must load with strict=True into a fresh ModernGPT that then gives the source model's
  logits. A mismatch is diagnosed with the known mistakes (ids `state_dict.*`). The stated edge cases: a drawn
  needed tensor left out, or num_layers one larger than the tensors hold, raises KeyError naming the missing name; a
  tensor of block num_layers, a drawn unknown name, or num_layers one smaller than the tensors hold, raises ValueError
  naming the name that maps to nothing (returning instead is diagnosed: `state_dict.unknown_accepted`). num_layers
  is drawn, and the edge cases give it its teeth: an answer that reads the number of blocks off the names fails them.
"""
from __future__ import annotations

import numpy as np
import torch

from autograder.checks.kit.compare import candidates, expect_tensor
from autograder.checks.kit.draws import pick, rng, seed_for
from autograder.checks.kit.inputs import reference
from autograder.checks.kit.remote import hidden_check
from autograder.checks.kit.toolkit import (
    call, expect_callable, expect_raises, fail, randint, seeded, shape_of, start_check, type_name,
)
from autograder.checks.pretrained import mistakes_checkpoint as M
from autograder.errors import GradingError

Q4_1_SEED, STATE_SEED = 1100, 1110


def known_mistakes(prefix: str, run, skip=()) -> list:
    """[(mistake id, thunk)]: the rows of M.TABLE whose id starts with `prefix` (one exercise's; not those in
    `skip`), each followed by its other forms (M.FORMS); a thunk runs `run(variant, switches)` on the check's own
    inputs."""
    ids = [mistake_id for mistake_id in M.TABLE if mistake_id.startswith(prefix) and mistake_id not in skip]
    forms = {mistake_id: switches for (variant, mistake_id), switches in M.FORMS.items()
             if mistake_id in ids and M.TABLE[mistake_id][0] is variant}
    return candidates(M.TABLE, run, ids, forms)


# ================================================================================================= Q4_1 blocks
BLOCK_COUNTS = [6, 5, 7, 9, 11]          # >= 5: every kind of header below is there
BAD_DTYPES = ["int8", "float32", "int16", "int64", "float16"]   # int8: the same bytes, only the dtype is wrong
BAD_WIDTHS = [19, 21, 24, 16]
BAD_LAYOUTS = ["flat", "two_per_row", "3d"]


def _float16_bytes(values: np.ndarray) -> np.ndarray:
    """(n,) float16 -> (n, 2) uint8, little-endian."""
    return np.ascontiguousarray(values.astype("<f2")).view(np.uint8).reshape(-1, 2)


def _subnormal(draw: np.random.Generator) -> np.float16:
    """A float16 below 2**-14 (subnormal, not zero), of either sign, an odd multiple of 2**-24 (next to a number of
    size 1 its lowest bit is below float32's precision: the sum rounds)."""
    bits = (2 * int(draw.integers(0, 0x200)) + 1) | (int(draw.integers(0, 2)) << 15)
    return np.array([bits], dtype="<u2").view("<f2")[0]


def q4_1_blocks(seed: int) -> np.ndarray:
    """(n, 20) uint8 Q4_1 blocks, this submission's: block 0 a positive d and a negative m, block 1 the other way,
    block 2 a subnormal d with an m of size 1 to 8, block 3 a subnormal m with a d of size 0.1 to 1 (so that the
    float32 sums round: float16 or float64 arithmetic shows), block 4 large d and m; the others N(0, 0.02) scales
    and N(0, 0.1) minima; every qs byte random. All headers finite."""
    n = pick("q4_1.blocks", BLOCK_COUNTS)
    draw = np.random.default_rng(seed_for(seed))
    d = (draw.standard_normal(n) * 0.02).astype(np.float16)
    m = (draw.standard_normal(n) * 0.1).astype(np.float16)
    d[0], m[0] = abs(d[0]) + np.float16(1e-3), -abs(m[0]) - np.float16(1e-2)
    d[1], m[1] = -abs(d[1]) - np.float16(1e-3), abs(m[1]) + np.float16(1e-2)
    d[2], m[2] = _subnormal(draw), np.float16(draw.uniform(1, 8) * draw.choice([-1, 1]))
    d[3], m[3] = np.float16(draw.uniform(0.1, 1) * draw.choice([-1, 1])), _subnormal(draw)
    d[4] = np.float16(draw.uniform(50, 500) * draw.choice([-1, 1]))
    m[4] = np.float16(draw.uniform(-3e4, 3e4))
    qs = draw.integers(0, 256, (n, 16), dtype=np.uint8)
    return np.concatenate([_float16_bytes(d), _float16_bytes(m), qs], axis=1)


def expected_weights(raw: np.ndarray, solution) -> np.ndarray:
    """The reference's weights, checked against gguf's own decoder when it is installed (it is, with the course)."""
    expected = solution.dequantize_q4_1(raw)
    try:
        import gguf
    except ImportError:  # pragma: no cover - gguf is a dependency of the course
        return expected
    independent = gguf.quants.dequantize(raw, gguf.GGMLQuantizationType.Q4_1).reshape(-1)
    if not np.array_equal(expected, independent):
        raise GradingError("dequantize_q4_1: the reference and gguf.quants.dequantize disagree on the check's blocks")
    return expected


def bad_inputs(raw: np.ndarray) -> list[tuple[str, np.ndarray, str]]:
    """(label, input, why) of the stated edge case, this submission's: a drawn other dtype of the same shape, a drawn
    other row width, a drawn other layout of the same bytes."""
    n = raw.shape[0]
    dtype = pick("q4_1.bad_dtype", BAD_DTYPES)
    wrong_dtype = raw.view(np.int8) if dtype == "int8" else raw.astype(dtype)
    width = pick("q4_1.bad_width", BAD_WIDTHS)
    wrong_width = raw[:, :width] if width < 20 else \
        np.concatenate([raw, np.zeros((n, width - 20), np.uint8)], axis=1)
    layout = pick("q4_1.bad_layout", BAD_LAYOUTS)
    wrong_layout = {"flat": raw.reshape(-1), "two_per_row": raw[:n - n % 2].reshape(-1, 40),
                    "3d": raw[None]}[layout]
    return [(f"raw {dtype} {shape_of(wrong_dtype)}", wrong_dtype, "for a dtype other than uint8"),
            (f"raw uint8 {shape_of(wrong_width)}", wrong_width, "for rows of other than 20 bytes"),
            (f"raw uint8 {shape_of(wrong_layout)}", wrong_layout, "for a shape other than (n_blocks, 20)")]


@hidden_check
def check_dequantize_q4_1(dequantize_q4_1) -> None:
    """dequantize_q4_1(raw (n_blocks, 20) uint8) -> (n_blocks * 32,) float32, bit for bit gguf's."""
    start_check()
    expect_callable(dequantize_q4_1, "dequantize_q4_1")
    solution = reference("pretrained")
    raw = q4_1_blocks(Q4_1_SEED)
    n = raw.shape[0]
    tested = (f"dequantize_q4_1(raw uint8 {shape_of(raw)}): {n} blocks with positive, negative, subnormal and large "
              "scales and minima")
    expected = expected_weights(raw, solution)
    got = call("dequantize_q4_1", dequantize_q4_1, raw.copy(), tested=tested)
    if isinstance(got, torch.Tensor):
        fail("dequantize_q4_1 must return a numpy array, got a torch.Tensor.", tested=tested,
             hint="keep to numpy, or convert at the end with .numpy()")
    if not isinstance(got, np.ndarray):
        fail(f"dequantize_q4_1 must return a numpy array, got {type_name(got)}.", tested=tested)
    if got.dtype != np.float32:
        fail(f"dequantize_q4_1 must return float32 weights, got dtype {got.dtype}.", tested=tested,
             mistake="q4_1.float16_arithmetic" if got.dtype == np.float16 else None,
             hint="compute q * d + m with d and m as float32 (or cast the result with .astype(np.float32))")
    if got.shape != expected.shape:
        fail("dequantize_q4_1's weights have the wrong shape.", tested=tested,
             details=[f"expected shape {expected.shape}, got {got.shape}"],
             hint="one flat array of 32 weights per block, block after block: .reshape(-1)")

    def mistakes():
        return known_mistakes("q4_1.", lambda variant, switches: torch.from_numpy(variant(raw, **switches)))

    expect_tensor(torch.from_numpy(np.array(got)), torch.from_numpy(expected), "dequantize_q4_1's weights", "cpu",
                  tested=tested, exact=True, mistakes=mistakes,
                  note="in block b, weight j is (qs[j] & 0x0F) * d + m and weight j + 16 is (qs[j] >> 4) * d + m, "
                       "with d (bytes 0-1) and m (bytes 2-3) little-endian float16 read as float32")
    # the stated edge case: another dtype or shape raises ValueError
    for label, bad, why in bad_inputs(raw):
        expect_raises(ValueError, f"dequantize_q4_1({label})", dequantize_q4_1, bad, why=why,
                      criterion="dequantize_q4_1.bad_input")


# ================================================================================================ GGUF names
VOCABS = [23, 19, 29, 31]                 # never a d_model, d_ff or key/value width
D_MODELS = [24, 48]                       # divisible by 4 and 6 with an even d_head
HEADS = [(6, 2), (4, 2), (6, 3), (4, 1)]  # (num_heads, num_kv_heads): key/value width d_model / 3, / 2 or / 4
D_FFS = [36, 20, 44, 52]                  # never d_model
LAYERS = [3, 2]                           # >= 2: num_layers - 1 still has a block
LENGTH = 6                                # the logits' probe length (max_len 8)
UNKNOWN_NAMES = ["rope_freqs.weight", "output.weight", "blk.0.attn_qkv.weight", "token_types.weight",
                 "blk.1.ffn_norm.bias"]  # what other llama-style GGUF files hold; none of them is ModernGPT's


def model_sizes() -> dict:
    """ModernGPT's constructor arguments, this submission's."""
    heads, kv_heads = pick("state_dict.heads", HEADS)
    return {"vocab_size": pick("state_dict.vocab", VOCABS), "d_model": pick("state_dict.d_model", D_MODELS),
            "num_heads": heads, "num_kv_heads": kv_heads, "d_ff": pick("state_dict.d_ff", D_FFS),
            "num_layers": pick("state_dict.num_layers", LAYERS), "max_len": LENGTH + 2}


def _shown(sizes: dict) -> str:
    return (f"ModernGPT({sizes['vocab_size']}, d_model={sizes['d_model']}, num_heads={sizes['num_heads']}, "
            f"num_kv_heads={sizes['num_kv_heads']}, d_ff={sizes['d_ff']}, num_layers={sizes['num_layers']})")


def source_model(ModernGPT, seed: int, sizes: dict):
    """A reference ModernGPT built under this submission's seed, its RMSNorm weights randomised (so that a norm
    in the wrong place shows)."""
    with seeded(seed):
        model = ModernGPT(**sizes)
        for parameter in model.parameters():
            if parameter.dim() == 1:          # the only vectors of a ModernGPT are RMSNorm weights
                torch.nn.init.normal_(parameter, 1.0, 0.3)
    return model.eval()


def gguf_names(num_layers: int) -> dict[str, str]:
    """{ModernGPT name: GGUF name} of every tensor (the head's: the embedding's), written from the contract."""
    names = {"token_embedding.weight": "token_embd.weight", "lm_head.weight": "token_embd.weight",
             "norm.weight": "output_norm.weight"}
    for i in range(num_layers):
        for suffix, module in M.GGUF_BLOCK.items():
            names[f"blocks.{i}.{module}.weight"] = f"blk.{i}.{suffix}.weight"
    return names


def gguf_tensors(model, num_layers: int) -> dict[str, torch.Tensor]:
    """The model's weights under their GGUF names (copies on the CPU), in this submission's order."""
    state = model.state_dict()
    tensors = {gguf: state[name].detach().cpu().clone() for name, gguf in gguf_names(num_layers).items()}
    order = sorted(tensors)
    rng("state_dict.order").shuffle(order)
    return {name: tensors[name] for name in order}


def same_state(got: dict, expected: dict) -> bool:
    """The same names, and under each the same shape and values."""
    if set(got) != set(expected):
        return False
    for name, value in expected.items():
        theirs = got[name]
        if not isinstance(theirs, torch.Tensor) or tuple(theirs.shape) != tuple(value.shape):
            return False
        if not torch.equal(theirs.detach().cpu().to(value.dtype), value.detach().cpu()):
            return False
    return True


def diagnose_state(got: dict, tensors: dict, num_layers: int, expected: dict) -> str | None:
    """The first known mistake (M.TABLE's `state_dict.*` rows) whose state dict equals `got`; else
    `state_dict.untied_head` when only lm_head.weight is wrong (another tensor than the embedding's)."""
    for mistake_id, produce in known_mistakes("state_dict.", lambda variant, switches: variant(
            tensors, num_layers, **switches), skip=("state_dict.unknown_accepted",)):
        try:
            candidate = produce()
        except Exception:  # noqa: BLE001 -- a variant that cannot run on these inputs does not match
            continue
        if same_state(got, candidate):
            return mistake_id
    head = "lm_head.weight"
    if head in got and not same_state({head: got[head]}, {head: expected[head]}) and \
            same_state({k: v for k, v in got.items() if k != head}, {k: v for k, v in expected.items() if k != head}):
        return "state_dict.untied_head"
    return None


def _listed(names) -> str:
    names = sorted(names)
    return ", ".join(names[:3]) + (f" and {len(names) - 3} more" if len(names) > 3 else "")


def expect_state(got, expected: dict, tensors: dict, num_layers: int, tested: str) -> dict:
    """The student's result equals the reference's state_dict: names, shapes, values (the head's too)."""
    if not isinstance(got, dict) or not all(isinstance(k, str) for k in got):
        fail(f"llama_state_dict must return a dict of tensors by name, got {type_name(got)}.", tested=tested)
    wrong_type = sorted(k for k, v in got.items() if not isinstance(v, torch.Tensor))
    if wrong_type:
        fail("llama_state_dict's values must be tensors.", tested=tested,
             details=[f"{wrong_type[0]} is a {type_name(got[wrong_type[0]])}"])
    names = gguf_names(num_layers)

    def mistake():
        return diagnose_state(got, tensors, num_layers, expected)

    missing, extra = set(expected) - set(got), set(got) - set(expected)
    if missing or extra:
        fail("llama_state_dict's result does not load into ModernGPT with strict=True.", tested=tested,
             details=([f"missing: {_listed(missing)}"] if missing else [])
             + ([f"not in ModernGPT: {_listed(extra)}"] if extra else []), mistake=mistake(),
             hint="the result holds exactly the names of ModernGPT's state_dict: lm_head.weight too")
    shapes = sorted(k for k in expected if tuple(got[k].shape) != tuple(expected[k].shape))
    if shapes:
        fail("llama_state_dict's result has tensors of the wrong shape (they would not load).", tested=tested,
             details=[f"{k}: expected {tuple(expected[k].shape)}, got {tuple(got[k].shape)}" for k in shapes[:3]],
             mistake=mistake(), hint="the tensors are already in (out_features, in_features) order: pass them through")
    differ = [k for k in gguf_names(num_layers) if not same_state({k: got[k]}, {k: expected[k]})]
    if differ:
        fail(f"llama_state_dict: {differ[0]} does not hold the tensor {names[differ[0]]}.", tested=tested,
             details=[f"{len(differ)} of {len(expected)} tensors differ from the reference's"], mistake=mistake(),
             hint="map each GGUF name to its ModernGPT name as the table of the exercise says, tensors unchanged")
    return got


@hidden_check
def check_llama_state_dict(llama_state_dict) -> None:
    """llama_state_dict(tensors by GGUF name, num_layers) -> ModernGPT's state_dict, lm_head tied to the embedding;
    KeyError naming a missing tensor, ValueError naming one that maps to nothing."""
    device = start_check()
    expect_callable(llama_state_dict, "llama_state_dict")
    solution, modern = reference("pretrained"), reference("modern")
    sizes = model_sizes()
    L = sizes["num_layers"]
    source = source_model(modern.ModernGPT, STATE_SEED, sizes)
    tensors = gguf_tensors(source, L)
    tested = f"llama_state_dict({len(tensors)} tensors of a {_shown(sizes)}, {L})"
    got = call("llama_state_dict", llama_state_dict, dict(tensors), L, tested=tested)
    state = expect_state(got, solution.llama_state_dict(tensors, L), tensors, L, tested)
    # what the contract promises of it: it loads strictly into a fresh ModernGPT, which then computes the source's
    # logits (its head tied to its embedding)
    fresh = source_model(modern.ModernGPT, STATE_SEED + 1, sizes).to(device)
    try:
        fresh.load_state_dict({k: v.detach() for k, v in state.items()}, strict=True)
    except RuntimeError as error:
        fail("llama_state_dict's result does not load into ModernGPT with strict=True.", tested=tested,
             details=[" ".join(str(error).split())[:200]])
    ids = randint(0, sizes["vocab_size"], (2, LENGTH), seed=STATE_SEED + 2, device=device)
    source.to(device)
    with torch.no_grad():
        expect_tensor(fresh(ids), source(ids), "the logits of a ModernGPT loaded with your state dict", device,
                      tested=f"{tested}, loaded into a fresh ModernGPT, on ids {shape_of(ids)}")
    _missing_tensors(llama_state_dict, tensors, L, tested)
    _unknown_tensors(llama_state_dict, tensors, L, sizes)


def _shown_call(count: int, num_layers: int, what: str) -> str:
    return f"llama_state_dict({count} tensors{what}, {num_layers})"


def _missing_tensors(llama_state_dict, tensors: dict, L: int, tested: str) -> None:
    """The stated edge case: a needed tensor missing raises KeyError naming it (a drawn one left out; num_layers one
    larger than the tensors hold: a name of block L)."""
    left_out = pick("state_dict.missing", sorted(tensors))
    fewer = {k: v for k, v in tensors.items() if k != left_out}
    expect_raises(KeyError, _shown_call(len(fewer), L, f" without {left_out}"), llama_state_dict, fewer, L,
                  why="naming the missing tensor", names=(left_out,), criterion="llama_state_dict.missing")
    expect_raises(KeyError, _shown_call(len(tensors), L + 1, f" of {L} blocks"), llama_state_dict, dict(tensors),
                  L + 1, why=f"naming a missing tensor of block {L}", names=(f"blk.{L}.",),
                  criterion="llama_state_dict.missing")


def _unknown_tensors(llama_state_dict, tensors: dict, L: int, sizes: dict) -> None:
    """The stated edge case: a tensor that maps to nothing raises ValueError naming it (a tensor of block L; a drawn
    unknown name; num_layers one smaller than the tensors hold: a name of block L - 1). Returning instead is
    diagnosed with the variant that skips such names."""
    suffix = pick("state_dict.extra_block", list(M.GGUF_BLOCK))
    extra_block = f"blk.{L}.{suffix}.weight"
    unknown = pick("state_dict.unknown", UNKNOWN_NAMES)
    d_model = sizes["d_model"]
    cases = [({**tensors, extra_block: tensors[f"blk.0.{suffix}.weight"].clone()}, L, [extra_block],
              f" and {extra_block}"),
             ({**tensors, unknown: torch.ones(d_model // sizes["num_heads"] // 2 if "rope" in unknown else d_model)},
              L, [unknown], f" and {unknown}"),
             (dict(tensors), L - 1, [f"blk.{L - 1}."], f" of {L} blocks")]
    for given, num_layers, names, what in cases:
        def accepted(result, given=given, num_layers=num_layers):
            variant, switches = M.TABLE["state_dict.unknown_accepted"]
            if isinstance(result, dict) and same_state(result, variant(given, num_layers, **switches)):
                return "state_dict.unknown_accepted"
            return None

        expect_raises(ValueError, _shown_call(len(tensors), num_layers, what), llama_state_dict, given, num_layers,
                      why="naming the tensor that maps to nothing", names=tuple(names),
                      criterion="llama_state_dict.unknown", returned_mistake=accepted)
