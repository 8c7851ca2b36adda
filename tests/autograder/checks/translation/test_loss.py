"""Hidden checks of notebook 10's loss and schedule (label_smoothed_cross_entropy, noam_lr): the reference and
differently written answers pass; each known mistake fails with its catalogue id named; answers that break what the
contract states without a catalogue id fail readably; the probes' inputs do what they claim."""
from __future__ import annotations

import pytest
import torch.nn.functional as F

import solutions
import variants as V
import variants_translation as X
from autograder.checks.translation import loss as checks
from autograder.checks.kit.criteria import PartialCredit
from coursekit.api import by_name
from coursekit.criteria import CRITERIA

NAMES = ("label_smoothed_cross_entropy", "noam_lr")


def check_of(api_name: str):
    return getattr(checks, by_name(api_name).check_name)


@pytest.mark.parametrize("api_name, answer", [(name, answer) for name, answers in X.CORRECT.items() if name in NAMES
                                               for answer in [getattr(solutions, name), *answers]])
def test_correct_answers_pass(api_name, answer):
    check_of(api_name)(answer)


WRONG = X.of(NAMES, X.WRONG)


@pytest.mark.parametrize("api_name, answer, diagnosis", WRONG, ids=[diagnosis for _, _, diagnosis in WRONG])
def test_each_known_mistake_is_named(api_name, answer, diagnosis):
    V.fails_with(check_of(api_name), answer, diagnosis)


UNNAMED = X.of(NAMES, X.UNNAMED)


@pytest.mark.parametrize("api_name, answer, words", UNNAMED, ids=[words for _, _, words in UNNAMED])
def test_unnamed_mistakes_fail_readably(api_name, answer, words):
    V.fails_with(check_of(api_name), answer, words)


def test_every_smoothing_and_noam_mistake_of_the_catalogue_is_made_by_a_wrong_answer():
    from coursekit.mistakes import MISTAKES

    topics = ("smoothing.", "noam.")
    assert {m for m in MISTAKES if m.startswith(topics)} == {diagnosis for _, _, diagnosis in WRONG}


def test_stubs_and_broken_answers_fail_readably():
    def stub(*args, **kwargs):
        raise NotImplementedError()

    for name in NAMES:
        V.fails_with(check_of(name), stub, "not implemented yet")
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


# ------------------------------------------------------------------------------- stated edge cases: partial credit
POINTS = {"label_smoothed_cross_entropy": 20, "noam_lr": 15}  # the notebook's

ONLY_ONE_EDGE_CASE = [
    ("label_smoothed_cross_entropy.bad_smoothing", "label_smoothed_cross_entropy", X.make_smoothing("no_check")),
    ("noam_lr.bad_warmup", "noam_lr", X.make_noam("no_check")),
]


@pytest.mark.parametrize("criterion, api_name, answer", ONLY_ONE_EDGE_CASE, ids=[c for c, _a, _x in ONLY_ONE_EDGE_CASE])
def test_an_answer_failing_only_one_stated_edge_case_keeps_most_of_its_points(criterion, api_name, answer):
    """Right in everything but the ValueError the statement asks for: PartialCredit of at least 80 % (at most a
    fifth of the exercise's points lost), the edge case listed with a cross, the main behaviour with a tick."""
    with pytest.raises(PartialCredit) as info:
        check_of(api_name)(answer)
    failure, message = info.value, str(info.value)
    assert failure.fraction >= 0.8, message
    assert POINTS[api_name] * (1 - failure.fraction) <= POINTS[api_name] / 5
    assert f"✗ {CRITERIA[criterion].text}" in message, message
    assert "✓ the main behaviour" in message and message.count("✗") == 1, message
    assert "should raise ValueError" in message, message


@pytest.mark.parametrize("api_name", list(POINTS))
def test_a_stub_gets_a_plain_failure(api_name):
    def stub(*args, **kwargs):
        raise NotImplementedError()

    with pytest.raises(AssertionError) as info:
        check_of(api_name)(stub)
    assert not isinstance(info.value, PartialCredit), str(info.value)
    assert "not implemented yet" in str(info.value)


@pytest.mark.parametrize("api_name", list(POINTS))
def test_an_answer_that_always_raises_value_error_gets_nothing(api_name):
    """Edge cases count on top of a working core only: raising ValueError for everything earns no point."""
    def always(*args, **kwargs):
        raise ValueError("no")

    with pytest.raises(AssertionError) as info:
        check_of(api_name)(always)
    assert not isinstance(info.value, PartialCredit), str(info.value)


def test_a_mistake_in_the_core_with_a_missing_edge_case_gets_nothing():
    """A known mistake of the core and no ValueError: a plain failure naming the core's mistake."""
    def wrong(step, d_model, warmup_steps, factor=1.0):
        return X.make_noam("no_d_model_scale")(step, d_model, max(warmup_steps, 1), factor)

    with pytest.raises(AssertionError) as info:
        checks.check_noam_lr(wrong)
    assert not isinstance(info.value, PartialCredit), str(info.value)
    assert getattr(info.value, "mistake_id", None) == "noam.no_d_model_scale"


# --------------------------------------------------------------------------- arguments with teeth: partial credit
def smoothing_always_default(logits, targets, smoothing=0.1, ignore_index=0):
    """Checks `smoothing` (the stated edge case) but smooths with 0.1 whatever it is."""
    if not 0 <= smoothing < 1:
        raise ValueError("smoothing must lie in [0, 1)")
    return X.make_smoothing()(logits, targets, 0.1, ignore_index)


ONLY_ONE_ARGUMENT = [
    ("label_smoothed_cross_entropy.smoothing", smoothing_always_default),
    ("label_smoothed_cross_entropy.ignore_index", X.ignoring(X.make_smoothing(), ignore_index=0)),
    ("label_smoothed_cross_entropy.ignore_index", X.ignoring(X.smoothing_by_pytorch, ignore_index=0)),
    ("noam_lr.factor", X.make_noam("factor_ignored")),
    ("noam_lr.factor", X.ignoring(X.noam_if_else, factor=1.0)),
]


@pytest.mark.parametrize("criterion, answer", ONLY_ONE_ARGUMENT,
                         ids=[f"{c}-{a.__name__}" for c, a in ONLY_ONE_ARGUMENT])
def test_an_answer_that_ignores_one_argument_keeps_three_quarters_of_its_points(criterion, answer):
    """Right with the argument at its default (the core), wrong with its other values: PartialCredit, the argument
    listed with a cross. An exercise's arguments share a quarter of its points: one of n failing costs 25 / n %."""
    api_name = CRITERIA[criterion].api
    message = V.fails_partially(check_of(api_name), answer, criterion)
    tried = [c for c in CRITERIA.values() if c.api == api_name and c.kind == "argument"]
    with pytest.raises(PartialCredit) as info:
        check_of(api_name)(answer)
    assert info.value.fraction == pytest.approx(1 - 0.25 / len(tried)), message
    assert POINTS[api_name] * (1 - info.value.fraction) <= POINTS[api_name] / 4


def test_ignoring_factor_is_named_and_keeps_three_quarters():
    """noam.factor_ignored: right with factor left out or 1.0 (the core), wrong with every other factor."""
    with pytest.raises(PartialCredit) as info:
        check_of("noam_lr")(X.make_noam("factor_ignored"))
    assert info.value.mistake_id == "noam.factor_ignored" and info.value.fraction == pytest.approx(0.75)


def test_each_smoothing_probe_tries_one_argument_at_most():
    cases = checks.smoothing_probes(checks.SMOOTHING_SEED, "cpu")
    for case in cases:
        assert case.kwargs.get("smoothing", 0.1) == 0.1 or case.kwargs.get("ignore_index", 0) == 0, case.kwargs
    assert sum(case.kwargs.get("smoothing", 0.1) != 0.1 for case in cases) >= 2
    assert sum(case.kwargs.get("ignore_index", 0) != 0 for case in cases) >= 2
