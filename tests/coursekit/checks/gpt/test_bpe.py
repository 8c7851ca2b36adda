"""The public checks of notebook 08's byte-level BPE (`coursekit/checks/gpt/bpe.py`) pass the reference and differently
written answers, and name the likely mistake for the wrong answers the hidden-check tests use
(tests/autograder/checks/variants_gpt.py)."""
from __future__ import annotations

import variants_gpt as G
from coursekit.checks.gpt import bpe as checks
from part_suite import public_suite

APIS = ("train_bpe", "bpe_encode", "bpe_decode")

# the tests every part runs (tests/autograder/checks/part_suite.py), with this part's data
globals().update(public_suite(checks, APIS, correct=G.correct(APIS), wrong=G.wrong(APIS)))
