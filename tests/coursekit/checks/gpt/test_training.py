"""The public checks of notebook 08's training helpers (`coursekit/checks/gpt/training.py`) pass the reference and
differently written answers, and name the likely mistake for the wrong answers the hidden-check tests use
(tests/autograder/checks/variants_gpt.py)."""
from __future__ import annotations

import variants_gpt as G
from coursekit.checks.gpt import training as checks
from part_suite import from_hidden_tests, public_suite

APIS = ("lr_at", "train_step")

# the answers that ignore one argument each, the hidden-check tests' (tests/autograder/checks/gpt/test_training.py)
ARGUMENT_ONLY = from_hidden_tests("gpt", "training", "ARGUMENT_ONLY")

# the tests every part runs (tests/autograder/checks/part_suite.py), with this part's data
globals().update(public_suite(checks, APIS, correct=G.correct(APIS), wrong=G.wrong(APIS), argument_only=ARGUMENT_ONLY))
