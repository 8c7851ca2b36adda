"""The public checks of notebook 08's GPT (`coursekit/checks/gpt/model.py`) pass the reference and differently written
answers, and name the likely mistake for the wrong answers the hidden-check tests use
(tests/autograder/checks/variants_gpt.py)."""
from __future__ import annotations

import variants_gpt as G
from coursekit.checks.gpt import model as checks
from part_suite import from_hidden_tests, public_suite

APIS = ("GPT",)

# the answers that ignore one argument each, the hidden-check tests' (tests/autograder/checks/gpt/test_model.py)
ARGUMENT_ONLY = from_hidden_tests("gpt", "model", "ARGUMENT_ONLY")

# the tests every part runs (tests/autograder/checks/part_suite.py), with this part's data
globals().update(public_suite(checks, APIS, correct=G.correct(APIS), wrong=G.wrong(APIS), argument_only=ARGUMENT_ONLY))
