"""Hidden checks of notebook 08's data and loss helpers (`autograder/checks/gpt/data.py`): the reference and
differently written answers pass; each known mistake fails with its catalogue id named; hostile or broken answers
fail with a readable message; an answer failing only a stated edge case or ignoring only an argument keeps most
points."""
from __future__ import annotations

import pytest
import torch

import solutions
import variants as V
import variants_gpt as G
from autograder.checks.gpt import data as checks
from part_suite import hidden_suite

APIS = ("get_batch", "lm_loss", "estimate_loss")
MISTAKE_PREFIXES = ("get_batch.", "lm_loss.", "estimate_loss.")  # its catalogue ids
WRONG = G.wrong(APIS)


# ------------------------------------------ the answers that fail only a stated edge case or ignore only an argument
def _estimate_loss_without_check(model, data, block_size, device):
    if len(data) < block_size + 1:
        return 0.0
    return solutions.estimate_loss(model, data, block_size, device)


def _get_batch_without_generator(data, block_size, batch_size, generator=None):
    return solutions.get_batch(data, block_size, batch_size)          # torch's global generator


EDGE_ONLY = [  # (api name, a correct answer that fails only this stated edge case, criterion)
    ("estimate_loss", _estimate_loss_without_check, "estimate_loss.too_short"),
]
ARGUMENT_ONLY = [  # (api name, a correct answer that ignores only this argument, criterion)
    ("get_batch", _get_batch_without_generator, "get_batch.generator"),
]
PARTIAL_MISTAKES = {}  # no mistake of the catalogue keeps a share of the points


# the tests every part runs (tests/autograder/checks/part_suite.py), with this part's data
globals().update(hidden_suite(checks, APIS, correct=G.correct(APIS), wrong=WRONG,
                              mistake_prefixes=MISTAKE_PREFIXES, partial_mistakes=PARTIAL_MISTAKES,
                              edge_only=EDGE_ONLY, argument_only=ARGUMENT_ONLY))


def test_broken_answers_fail_readably():
    V.fails_with(checks.check_get_batch, lambda data, b, n, g=None: data, "pair (x, y)")


def test_the_variants_with_their_switches_off_are_the_reference():
    """A known mistake's variant with no switch on reproduces the reference, so a match names that one mistake."""
    from autograder.checks.gpt import mistakes as M
    from coursekit.probe.models import LanguageModelProbe

    generator = torch.Generator().manual_seed(5)
    logits, targets = torch.randn(3, 6, 11, generator=generator), torch.randint(11, (3, 6), generator=generator)
    torch.testing.assert_close(M.lm_loss_variant(logits, targets), solutions.lm_loss(logits, targets))
    torch.manual_seed(6)
    model = LanguageModelProbe(13, d_model=8, max_len=16, dropout=0.5).train()
    for n, block_size in ((75, 8), (73, 8), (40, 13)):
        data = torch.randint(13, (n,), generator=generator)
        expected = solutions.estimate_loss(model, data, block_size, "cpu")
        assert M.estimate_loss_variant(model, data, block_size, "cpu") == pytest.approx(expected, rel=1e-5)
