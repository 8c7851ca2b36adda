"""Hidden checks of notebook 08's byte-level BPE (`autograder/checks/gpt/bpe.py`): the reference and differently
written answers pass; each known mistake fails with its catalogue id named; hostile or broken answers fail with a
readable message; an answer failing only the stated edge case keeps most points."""
from __future__ import annotations

import solutions
import variants as V
import variants_gpt as G
from autograder.checks.gpt import bpe as checks
from part_suite import hidden_suite

APIS = ("train_bpe", "bpe_encode", "bpe_decode")
MISTAKE_PREFIXES = ("bpe.",)  # its catalogue ids
WRONG = G.wrong(APIS)


# ------------------------------------------ the answers that fail only a stated edge case or ignore only an argument
def _bpe_without_empty_guard(text, num_merges):
    """The reference, but taking the max of an empty count: fails on a text of fewer than two bytes only."""
    if len(text.encode("utf-8")) < 2:
        raise ValueError("max() arg is an empty sequence")
    return solutions.train_bpe(text, num_merges)


EDGE_ONLY = [  # (api name, a correct answer that fails only this stated edge case, criterion)
    ("train_bpe", _bpe_without_empty_guard, "train_bpe.empty_text"),
]
ARGUMENT_ONLY = []  # no argument of these exercises has teeth
PARTIAL_MISTAKES = {}  # no mistake of the catalogue keeps a share of the points


# the tests every part runs (tests/autograder/checks/part_suite.py), with this part's data
globals().update(hidden_suite(checks, APIS, correct=G.correct(APIS), wrong=WRONG,
                              mistake_prefixes=MISTAKE_PREFIXES, partial_mistakes=PARTIAL_MISTAKES,
                              edge_only=EDGE_ONLY, argument_only=ARGUMENT_ONLY))


def test_broken_answers_fail_readably():
    V.fails_with(checks.check_train_bpe, lambda text, n: "not merges", "list of (int, int) pairs")
    V.fails_with(checks.check_bpe_encode, lambda text, merges: text, "list of int token ids")


def test_the_variants_with_their_switches_off_are_the_reference():
    """A known mistake's variant with no switch on reproduces the reference, so a match names that one mistake."""
    from autograder.checks.gpt import mistakes as M

    for text, num_merges in (("aaabdaaabac", 10), ("naïve café, naïve café 日本日本", 12), ("cdcd abab", 3), ("", 2)):
        merges = solutions.train_bpe(text, num_merges)
        assert M.bpe_train_variant(text, num_merges) == merges
        ids = solutions.bpe_encode(text, merges)
        assert M.bpe_encode_variant(text, merges) == ids
        assert M.bpe_decode_variant(ids, merges) == solutions.bpe_decode(ids, merges)
    assert M.bpe_decode_variant([0xE6, 0x97], []) == solutions.bpe_decode([0xE6, 0x97], [])
