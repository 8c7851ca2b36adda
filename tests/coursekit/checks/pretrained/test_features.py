"""The public check of notebook 11's features part (final_hidden) passes the reference and answers written
differently, and names the likely mistake of each wrong answer (the hidden checks' student answers, reused); the small
model it hands to final_hidden makes every mistake show."""
from __future__ import annotations

import torch

import variants as V
import variants_pretrained_features as F
from coursekit.checks.pretrained import features as checks
from part_suite import public_suite

APIS = ("final_hidden",)

# the tests every part runs (tests/autograder/checks/part_suite.py), with this part's data
WRONG = F.of(APIS, F.WRONG) + [(api, answer, None) for api, answer, _words in F.of(APIS, F.UNNAMED)]
globals().update(public_suite(checks, APIS, correct=F.correct(APIS), wrong=WRONG))


def test_returning_the_logits_names_the_shape_expected():
    V.fails_publicly(checks.check_final_hidden, F.make_final_hidden("returns_logits"), "should have shape",
                     "not the logits")


def test_the_probe_model_is_causal_and_its_norm_and_mask_matter():
    model = checks.probe_model(111)
    ids = torch.tensor([[3, 7, 1, 12, 5, 9], [8, 8, 2, 0, 11, 4]])
    before, after = checks.forward_states(model, ids)
    _, unmasked = checks.forward_states(model, ids, causal=False)
    assert (after - before).abs().max() > 0.1 and (after - unmasked).abs().max() > 0.1
    _, prefix = checks.forward_states(model, ids[:, :3])
    torch.testing.assert_close(prefix, after[:, :3])
    assert model.training is False and all(p.requires_grad for p in model.parameters())
