"""Hidden checks of notebook 11's checkpoint part (`autograder/checks/pretrained/checkpoint.py`): the reference and
differently written answers pass; each known mistake fails with its catalogue id named; broken answers fail readably;
an answer failing only a stated edge case keeps most points; the probes' blocks and models are what they claim; the
variants with their switches off are the reference."""
from __future__ import annotations

import gguf
import numpy as np
import pytest
import torch

import solutions
import variants as V
import variants_pretrained_checkpoint as C
from autograder.checks.kit.criteria import PartialCredit
from autograder.checks.kit.draws import salted
from autograder.checks.pretrained import checkpoint as checks
from autograder.checks.pretrained import mistakes_checkpoint as M
from part_suite import hidden_suite

APIS = ("dequantize_q4_1", "llama_state_dict")
MISTAKE_PREFIXES = ("q4_1.", "state_dict.")  # its catalogue ids


def _state_dict_without_key_error(tensors, num_layers):
    """Right but for the stated edge case: a missing tensor is left out of the result instead of raising KeyError."""
    return C.make_llama_state_dict("no_key_error")(tensors, num_layers)


def _state_dict_accepting_unknown(tensors, num_layers):
    """Right but for the stated edge case: names that map to nothing are skipped."""
    return M.gguf_state_dict(tensors, num_layers, accept_unknown=True)


EDGE_ONLY = [  # (api name, a correct answer that fails only this stated edge case, criterion)
    ("dequantize_q4_1", C.make_dequantize("no_check"), "dequantize_q4_1.bad_input"),
    ("llama_state_dict", _state_dict_without_key_error, "llama_state_dict.missing"),
    ("llama_state_dict", _state_dict_accepting_unknown, "llama_state_dict.unknown"),
]
# The catalogue's mistakes that lie in a stated edge case: the core passes, so they keep a share of the points (the
# criteria they cross, and what they keep: llama_state_dict tries two edge cases, which share a fifth of its points).
PARTIAL_MISTAKES = {
    "state_dict.unknown_accepted": (("llama_state_dict.unknown",), 1 - 0.2 / 2),
}

# the tests every part runs (tests/autograder/checks/part_suite.py), with this part's data
globals().update(hidden_suite(checks, APIS, correct=C.correct(APIS), wrong=C.of(APIS, C.WRONG),
                              mistake_prefixes=MISTAKE_PREFIXES, unnamed=C.of(APIS, C.UNNAMED),
                              partial_mistakes=PARTIAL_MISTAKES, edge_only=EDGE_ONLY, edge_says=("should raise",)))


# ------------------------------------------------------------------------------------------------ broken answers
def test_broken_answers_fail_readably():
    V.fails_with(checks.check_dequantize_q4_1, lambda raw: [0.0] * (32 * len(raw)), "numpy array")
    V.fails_with(checks.check_llama_state_dict, lambda tensors, n: list(tensors), "must return a dict")
    V.fails_with(checks.check_llama_state_dict,
                 lambda tensors, n: {k: v.tolist() for k, v in solutions.llama_state_dict(tensors, n).items()},
                 "must be tensors")
    V.fails_with(checks.check_llama_state_dict,                      # norm.weight left out: no known mistake
                 lambda tensors, n: {k: v for k, v in solutions.llama_state_dict(tensors, n).items()
                                     if k != "norm.weight"}, "strict=True", "missing: norm.weight")


def test_an_answer_that_reads_the_blocks_off_the_names_fails_both_edge_cases():
    """num_layers has teeth: counting the blocks in the names passes the core but neither edge case."""
    with pytest.raises(PartialCredit) as info:
        checks.check_llama_state_dict(C.make_llama_state_dict("infers_layers"))
    message = str(info.value)
    assert set(info.value.failed) == {"llama_state_dict.missing", "llama_state_dict.unknown"}, message
    assert info.value.fraction == pytest.approx(0.8), message


def test_an_error_that_does_not_name_the_tensor_fails_the_edge_case():
    def quiet(tensors, num_layers):
        try:
            return solutions.llama_state_dict(tensors, num_layers)
        except KeyError:
            raise KeyError("a tensor is missing") from None

    V.fails_partially(checks.check_llama_state_dict, quiet, "llama_state_dict.missing",
                      "does not name the tensor")


# ---------------------------------------------------------------------------------------------- the probes' inputs
@pytest.mark.parametrize("salt", [0, 1, 2, 3, 4, 5])
def test_the_blocks_hold_every_kind_of_header_and_gguf_agrees(salt):
    with salted(salt):
        raw = checks.q4_1_blocks(checks.Q4_1_SEED)
        assert raw.dtype == np.uint8 and raw.shape[1] == 20 and raw.shape[0] >= 5
        header = raw[:, :4].copy().view("<f2").astype(np.float64)
        d, m = header[:, 0], header[:, 1]
        assert np.isfinite(header).all() and (d != 0).all()
        assert (d < 0).any() and (d > 0).any() and (m < 0).any() and (m > 0).any()
        tiny = 2.0 ** -14                                                 # the smallest normal float16
        assert (np.abs(d) < tiny).any() and (np.abs(m) < tiny).any() and (np.abs(d) > 10).any()
        expected = checks.expected_weights(raw, solutions)
        assert np.array_equal(expected, gguf.quants.dequantize(raw, gguf.GGMLQuantizationType.Q4_1).reshape(-1))
        # the float32 sums round somewhere (so float64 or float16 arithmetic would show)
        q = np.concatenate([raw[:, 4:] & 15, raw[:, 4:] >> 4], axis=1).astype(np.float64)
        assert (q * d[:, None] + m[:, None]).reshape(-1).astype(np.float32).astype(np.float64).tolist() != \
            (q * d[:, None] + m[:, None]).reshape(-1).tolist()
        # every known mistake gives other weights
        for mistake_id, (variant, switches) in M.TABLE.items():
            if mistake_id.startswith("q4_1."):
                assert not np.array_equal(variant(raw, **switches), expected), mistake_id


@pytest.mark.parametrize("salt", [0, 1, 2, 3, 4, 5])
def test_the_model_has_distinct_sizes_and_square_and_other_matrices(salt):
    with salted(salt):
        sizes = checks.model_sizes()
        d_model, d_ff = sizes["d_model"], sizes["d_ff"]
        kv_width = sizes["num_kv_heads"] * d_model // sizes["num_heads"]
        assert len({sizes["vocab_size"], d_model, d_ff, kv_width}) == 4 and sizes["num_layers"] >= 2
        assert (d_model // sizes["num_heads"]) % 2 == 0
        L = sizes["num_layers"]
        tensors = checks.gguf_tensors(checks.source_model(solutions.ModernGPT, checks.STATE_SEED, sizes), L)
        assert len(tensors) == 2 + 9 * L
        assert tensors["blk.0.attn_q.weight"].shape == (d_model, d_model)
        assert tensors["blk.0.attn_k.weight"].shape == (kv_width, d_model)
        assert not torch.equal(tensors["blk.0.attn_norm.weight"], tensors["blk.0.ffn_norm.weight"])
        state = solutions.llama_state_dict(tensors, L)
        for mistake_id, (variant, switches) in M.TABLE.items():
            if mistake_id.startswith("state_dict.") and mistake_id != "state_dict.unknown_accepted":
                assert not checks.same_state(variant(tensors, L, **switches), state), mistake_id


def test_the_unknown_names_and_the_extra_block_map_to_nothing():
    tensors = {f"blk.{i}.{suffix}.weight": torch.zeros(1) for i in range(2) for suffix in M.GGUF_BLOCK}
    tensors |= {"token_embd.weight": torch.zeros(1), "output_norm.weight": torch.zeros(1)}
    for name in [*checks.UNKNOWN_NAMES, "blk.2.attn_q.weight"]:
        with pytest.raises(ValueError, match=name.replace(".", r"\.")):
            solutions.llama_state_dict({**tensors, name: torch.zeros(1)}, 2)


# ------------------------------------------------------------------------------------------------- the variants
def test_the_variants_with_their_switches_off_are_the_reference():
    """A known mistake's variant with no switch on reproduces the reference, so a match names that one mistake."""
    rng = np.random.default_rng(3)
    raw = np.concatenate([np.stack([rng.standard_normal(40) * 0.05, rng.standard_normal(40) * 0.3], axis=1)
                          .astype("<f2").view(np.uint8), rng.integers(0, 256, (40, 16), dtype=np.uint8)], axis=1)
    assert raw.shape == (40, 20)
    got = M.q4_1(raw)
    assert got.dtype == np.float32
    assert np.array_equal(got.view(np.uint32), solutions.dequantize_q4_1(raw).view(np.uint32))
    for bad in (raw.view(np.int8), raw[:, :19], raw.reshape(-1)):
        with pytest.raises(ValueError):
            M.q4_1(bad)
    model = solutions.ModernGPT(13, d_model=8, num_heads=2, num_kv_heads=1, d_ff=12, num_layers=2, max_len=4)
    tensors = checks.gguf_tensors(model, 2)
    ours, theirs = M.gguf_state_dict(tensors, 2), solutions.llama_state_dict(tensors, 2)
    assert list(ours) and set(ours) == set(theirs) and all(ours[k] is theirs[k] for k in theirs)
    with pytest.raises(KeyError, match=r"blk\.1\.ffn_up\.weight"):
        M.gguf_state_dict({k: v for k, v in tensors.items() if k != "blk.1.ffn_up.weight"}, 2)
    with pytest.raises(ValueError, match=r"rope_freqs\.weight"):
        M.gguf_state_dict({**tensors, "rope_freqs.weight": torch.ones(2)}, 2)
