"""The public checks of notebook 08's data and loss helpers (`coursekit/checks/gpt/data.py`) pass the reference and
differently written answers, and name the likely mistake for the wrong answers the hidden-check tests use
(tests/autograder/checks/variants_gpt.py)."""
from __future__ import annotations

import variants_gpt as G
from coursekit.checks.gpt import data as checks
from part_suite import from_hidden_tests, public_suite

APIS = ("get_batch", "lm_loss", "estimate_loss")

# Mistakes a public check cannot see on its few examples, or reports without naming (the hidden check names them).
NOT_NAMED_PUBLICLY = {
    "estimate_loss.overlapping": "averaging every window gives another number; the check names it when it matches",
}

# the answers that ignore one argument each, the hidden-check tests' (tests/autograder/checks/gpt/test_data.py)
ARGUMENT_ONLY = from_hidden_tests("gpt", "data", "ARGUMENT_ONLY")

# the tests every part runs (tests/autograder/checks/part_suite.py), with this part's data
globals().update(public_suite(checks, APIS, correct=G.correct(APIS), wrong=G.wrong(APIS),
                              not_named=NOT_NAMED_PUBLICLY, argument_only=ARGUMENT_ONLY))
