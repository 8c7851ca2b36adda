"""Hidden checks of notebook 08's training helpers (`autograder/checks/gpt/training.py`): the reference and differently
written answers pass; each known mistake fails with its catalogue id named; hostile or broken answers fail with a
readable message; an answer failing only a stated edge case or ignoring only an argument keeps most points."""
from __future__ import annotations

import solutions
import variants as V
import variants_gpt as G
from autograder.checks.gpt import training as checks
from part_suite import hidden_suite

APIS = ("lr_at", "train_step")
MISTAKE_PREFIXES = ("lr_at.", "train_step.")  # its catalogue ids
WRONG = G.wrong(APIS)


# ------------------------------------------ the answers that fail only a stated edge case or ignore only an argument
def _lr_at_without_check(step, max_lr, warmup_steps, max_steps, min_lr=0.0):
    if not 0 <= warmup_steps <= max_steps:
        return min_lr
    return solutions.lr_at(step, max_lr, warmup_steps, max_steps, min_lr)


def _lr_at_without_floor(step, max_lr, warmup_steps, max_steps, min_lr=0.0):
    return solutions.lr_at(step, max_lr, warmup_steps, max_steps)     # the default floor, 0.0


def _train_step_fixed_clip(model, optimizer, x, y, lr, grad_clip=1.0):
    return solutions.train_step(model, optimizer, x, y, lr)           # always the default threshold, 1.0


EDGE_ONLY = [  # (api name, a correct answer that fails only this stated edge case, criterion)
    ("lr_at", _lr_at_without_check, "lr_at.bad_warmup"),
]
ARGUMENT_ONLY = [  # (api name, a correct answer that ignores only this argument, criterion)
    ("lr_at", _lr_at_without_floor, "lr_at.min_lr"),
    ("train_step", _train_step_fixed_clip, "train_step.grad_clip"),
]

# The catalogue's mistakes that lie in an argument's non-default values (or a stated edge case): the core passes,
# so they keep a fraction of the points (the criteria they cross, and what they keep). The others get 0.
PARTIAL_MISTAKES = {
    "lr_at.min_lr_ignored": (("lr_at.min_lr",), 1 - 0.25),
}


# the tests every part runs (tests/autograder/checks/part_suite.py), with this part's data
globals().update(hidden_suite(checks, APIS, correct=G.correct(APIS), wrong=WRONG,
                              mistake_prefixes=MISTAKE_PREFIXES, partial_mistakes=PARTIAL_MISTAKES,
                              edge_only=EDGE_ONLY, argument_only=ARGUMENT_ONLY))


def test_broken_answers_fail_readably():
    V.fails_with(checks.check_lr_at, lambda *a, **k: "fast", "must return a float")
