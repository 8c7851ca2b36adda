"""Hidden checks of notebook 10's loss and schedule (label_smoothed_cross_entropy, noam_lr): the reference and
differently written answers pass; each known mistake fails with its catalogue id named; answers that break what the
contract states without a catalogue id fail readably; the probes' inputs do what they claim."""
from __future__ import annotations

import pytest
import torch.nn.functional as F

import variants as V
import variants_translation as X
from autograder.checks.kit.criteria import PartialCredit
from autograder.checks.translation import loss as checks
from part_suite import hidden_suite

APIS = ("label_smoothed_cross_entropy", "noam_lr")
MISTAKE_PREFIXES = ("smoothing.", "noam.")  # its catalogue ids
WRONG = X.of(APIS, X.WRONG)


# ------------------------------------------ the answers that fail only a stated edge case or ignore only an argument
def smoothing_always_default(logits, targets, smoothing=0.1, ignore_index=0):
    """Checks `smoothing` (the stated edge case) but smooths with 0.1 whatever it is."""
    if not 0 <= smoothing < 1:
        raise ValueError("smoothing must lie in [0, 1)")
    return X.make_smoothing()(logits, targets, 0.1, ignore_index)


EDGE_ONLY = [  # (api name, a correct answer that fails only this stated edge case, criterion)
    ("label_smoothed_cross_entropy", X.make_smoothing("no_check"), "label_smoothed_cross_entropy.bad_smoothing"),
    ("noam_lr", X.make_noam("no_check"), "noam_lr.bad_warmup"),
]
ARGUMENT_ONLY = [  # (api name, a correct answer that ignores only this argument, criterion)
    ("label_smoothed_cross_entropy", smoothing_always_default, "label_smoothed_cross_entropy.smoothing"),
    ("label_smoothed_cross_entropy", X.ignoring(X.make_smoothing(), ignore_index=0),
     "label_smoothed_cross_entropy.ignore_index"),
    ("label_smoothed_cross_entropy", X.ignoring(X.smoothing_by_pytorch, ignore_index=0),
     "label_smoothed_cross_entropy.ignore_index"),
    ("noam_lr", X.make_noam("factor_ignored"), "noam_lr.factor"),
    ("noam_lr", X.ignoring(X.noam_if_else, factor=1.0), "noam_lr.factor"),
]

# The catalogue's mistakes that lie in an argument's non-default values (or a stated edge case): the core passes,
# so they keep a fraction of the points (the criteria they cross, and what they keep). The others get 0.
PARTIAL_MISTAKES = {
    "noam.factor_ignored": (("noam_lr.factor",), 1 - 0.25),  # right with factor 1.0 (the core), wrong with any other
    # right with ignore_index 0 (the core), wrong with any other: one of the two arguments
    "smoothing.ignore_index_hardcoded": (("label_smoothed_cross_entropy.ignore_index",), 1 - 0.25 / 2),
}


# the tests every part runs (tests/autograder/checks/part_suite.py), with this part's data
globals().update(hidden_suite(checks, APIS, correct=X.correct(APIS), wrong=WRONG, unnamed=X.of(APIS, X.UNNAMED),
                              mistake_prefixes=MISTAKE_PREFIXES, partial_mistakes=PARTIAL_MISTAKES,
                              edge_only=EDGE_ONLY, edge_says=("should raise ValueError",), argument_only=ARGUMENT_ONLY))


def test_broken_answers_fail_readably():
    V.fails_with(checks.check_noam_lr, lambda *a, **k: "fast", "must return a float")

    def per_position(logits, targets, smoothing=0.1, ignore_index=0):
        return F.cross_entropy(logits, targets, ignore_index=ignore_index, label_smoothing=smoothing,
                               reduction="none")

    V.fails_with(checks.check_label_smoothed_cross_entropy, per_position, "scalar tensor")


# ------------------------------------------------------------------------------------------- the probes' inputs
def test_the_smoothing_probes_have_ignored_positions_and_class_zero_as_a_target():
    cases = checks.smoothing_probes(checks.SMOOTHING_SEED, "cpu")
    assert any(case.kwargs.get("ignore_index", 0) != 0 for case in cases)
    assert any(case.kwargs.get("smoothing") == 0.0 for case in cases) and any(not case.kwargs for case in cases)
    for logits, targets, kwargs in cases:
        ignore_index = kwargs.get("ignore_index", 0)
        assert (targets != ignore_index).any()
        if ignore_index != 0:
            assert (targets == 0).any() and (targets == ignore_index).any()


def test_a_mistake_in_the_core_with_a_missing_edge_case_gets_nothing():
    """A known mistake of the core and no ValueError: a plain failure naming the core's mistake."""
    def wrong(step, d_model, warmup_steps, factor=1.0):
        return X.make_noam("no_d_model_scale")(step, d_model, max(warmup_steps, 1), factor)

    with pytest.raises(AssertionError) as info:
        checks.check_noam_lr(wrong)
    assert not isinstance(info.value, PartialCredit), str(info.value)
    assert getattr(info.value, "mistake_id", None) == "noam.no_d_model_scale"


def test_each_smoothing_probe_tries_one_argument_at_most():
    cases = checks.smoothing_probes(checks.SMOOTHING_SEED, "cpu")
    for case in cases:
        assert case.kwargs.get("smoothing", 0.1) == 0.1 or case.kwargs.get("ignore_index", 0) == 0, case.kwargs
    assert sum(case.kwargs.get("smoothing", 0.1) != 0.1 for case in cases) >= 2
    assert sum(case.kwargs.get("ignore_index", 0) != 0 for case in cases) >= 2
