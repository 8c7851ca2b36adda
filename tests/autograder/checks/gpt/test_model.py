"""Hidden check of notebook 08's GPT (`autograder/checks/gpt/model.py`): the reference and differently written answers
pass; each known mistake fails with its catalogue id named; an answer that ignores only the dropout argument or the
length limit keeps most points."""
from __future__ import annotations

import solutions
import variants_gpt as G
from autograder.checks.gpt import model as checks
from part_suite import hidden_suite

APIS = ("GPT",)
MISTAKE_PREFIXES = ("gpt.",)  # its catalogue ids
WRONG = G.wrong(APIS)


# ------------------------------------------ the answers that fail only a stated edge case or ignore only an argument
class _GPTWithoutLengthCheck(solutions.GPT):
    """The reference GPT, but a sequence longer than max_len is cropped instead of raising ValueError."""

    def forward(self, ids):
        return super().forward(ids[:, -self.max_len:])


class _GPTWithoutDropout(solutions.GPT):
    """The reference GPT, but its dropout argument is ignored (always the default 0.0)."""

    def __init__(self, vocab_size, d_model=128, num_heads=4, d_ff=512, num_layers=4, max_len=256, dropout=0.0):
        super().__init__(vocab_size, d_model, num_heads, d_ff, num_layers, max_len, 0.0)


EDGE_ONLY = [  # (api name, a correct answer that fails only this stated edge case, criterion)
    ("GPT", _GPTWithoutLengthCheck, "GPT.too_long"),
]
ARGUMENT_ONLY = [  # (api name, a correct answer that ignores only this argument, criterion)
    ("GPT", _GPTWithoutDropout, "GPT.dropout"),
]
PARTIAL_MISTAKES = {}  # no mistake of the catalogue keeps a share of the points


# the tests every part runs (tests/autograder/checks/part_suite.py), with this part's data
globals().update(hidden_suite(checks, APIS, correct=G.correct(APIS), wrong=WRONG,
                              mistake_prefixes=MISTAKE_PREFIXES, partial_mistakes=PARTIAL_MISTAKES,
                              edge_only=EDGE_ONLY, argument_only=ARGUMENT_ONLY))
