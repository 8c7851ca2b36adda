"""The public checks of notebook 11's checkpoint part (`coursekit/checks/pretrained/checkpoint.py`) pass the reference
and differently written answers, and name the likely mistake for the wrong answers the hidden-check tests use
(tests/autograder/checks/variants_pretrained_checkpoint.py)."""
from __future__ import annotations

import gguf
import numpy as np

import variants as V
import variants_pretrained_checkpoint as C
from coursekit.checks.pretrained import checkpoint as checks
from part_suite import from_hidden_tests, public_suite

APIS = ("dequantize_q4_1", "llama_state_dict")

# the answers that fail one stated edge case each, the hidden-check tests' (tests/autograder/checks/pretrained/
# test_checkpoint.py)
EDGE_ONLY = from_hidden_tests("pretrained", "checkpoint", "EDGE_ONLY")
# the wrong answers without a catalogue id fail too (their words are the hidden check's, not checked here)
UNNAMED = [(api, answer, None) for api, answer, _words in C.of(APIS, C.UNNAMED)]

# the tests every part runs (tests/autograder/checks/part_suite.py), with this part's data
globals().update(public_suite(checks, APIS, correct=C.correct(APIS), wrong=C.of(APIS, C.WRONG) + UNNAMED,
                              edge_only=EDGE_ONLY, edge_says=("should raise",)))


def test_the_loop_is_gguf_bit_for_bit_on_the_hand_written_blocks():
    """The check's own answer (a plain loop) is gguf's decoder's, bit for bit; each hand-written block rounds or
    shows what it was written for."""
    raw = np.array(checks._BLOCKS, dtype=np.uint8)
    expected = gguf.quants.dequantize(raw, gguf.GGMLQuantizationType.Q4_1).reshape(-1)
    assert np.array_equal(checks.q4_1_weights(checks._BLOCKS).view(np.uint32), expected.view(np.uint32))
    assert expected[32 + 5] == np.float32(1 + 2.0 ** -22)      # block 1, weight 5: code 8 * 0.125 + 3 * 2**-24
    for mistake in ("interleaved", "signed", "offset", "swapped", "unshifted", "float16"):
        assert not np.array_equal(checks.q4_1_weights(checks._BLOCKS, mistake), expected), mistake


def test_a_wrong_dtype_or_shape_is_reported_plainly():
    V.fails_publicly(checks.check_dequantize_q4_1, C.make_dequantize("float64"), "dtype float32")
    V.fails_publicly(checks.check_dequantize_q4_1, C.make_dequantize("blocks_2d"), "shape (96,)")
    V.fails_publicly(checks.check_llama_state_dict, C.make_llama_state_dict("infers_layers"), "should raise KeyError",
                     "num_layers")
