"""The tests that every part of a topic's checks runs, written once (`coursekit.api.PART_MODULES`: gpt.bpe, gpt.model,
gpt.data, gpt.training, gpt.sampling, translation.loss, translation.beam, translation.bleu).

A part's test file keeps its own data (its exercises, the answers that fail only an edge case or ignore only an
argument, the mistakes that keep a share of the points) and its own tests, and takes the shared ones with

    globals().update(hidden_suite(checks, APIS, ...))   # tests/autograder/checks/<topic>/test_<part>.py
    globals().update(public_suite(checks, APIS, ...))   # tests/coursekit/checks/<topic>/test_<part>.py

(pytest collects the `test_*` functions of a test module's namespace, wherever they were written). Every test is
built anew for each file, with that file's data; a list that is empty adds no test.
"""
from __future__ import annotations

import importlib.util
import inspect
from pathlib import Path

import pytest
import torch

import solutions
import variants as V
from coursekit.api import PART_MODULES, by_name
from coursekit.criteria import CRITERIA

_HERE = Path(__file__).resolve().parent


def check_of(checks, api_name: str):
    """The check of the exercise `api_name` in the check module `checks` (hidden or public)."""
    return getattr(checks, by_name(api_name).check_name)


def raising(api_name: str, error: type[Exception]):
    """An answer to `api_name` that raises `error` whatever it is given; for an exercise that is a class (GPT), a
    module whose constructor raises."""
    if inspect.isclass(getattr(solutions, api_name)):
        class Raising(torch.nn.Module):
            def __init__(self, *args, **kwargs):
                raise error()
        return Raising

    def answer(*args, **kwargs):
        raise error()
    return answer


def from_hidden_tests(topic: str, part: str, name: str):
    """The data `name` (ARGUMENT_ONLY, ...) of a part's hidden-check tests (tests/autograder/checks/<topic>/
    test_<part>.py), for the public tests that try the same answers."""
    path = _HERE / topic / f"test_{part}.py"
    spec = importlib.util.spec_from_file_location(f"hidden_test_{topic}_{part}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return getattr(module, name)


def _name(value):
    return getattr(value, "__name__", None) or str(value)


def _the_part_tests_each_of_its_exercises(checks, apis):
    def test_the_part_tests_each_of_its_exercises():
        """The part's exercises (the course API's PART_MODULES) are the ones this file tests."""
        part = checks.__name__.split(".checks.", 1)[1]
        assert tuple(name for name, module in PART_MODULES.items() if module == part) == tuple(apis)
    return test_the_part_tests_each_of_its_exercises


class _Catching:
    """`check`, keeping the failure it raised: one run gives both the message (V's helpers) and the failure."""

    def __init__(self, check):
        self.check, self.failure = check, None

    def __call__(self, answer):
        try:
            return self.check(answer)
        except AssertionError as failure:
            self.failure = failure
            raise


# ====================================================================================================== hidden
def hidden_suite(checks, apis, *, correct, wrong, mistake_prefixes, unnamed=(), partial_mistakes=None,
                 edge_only=(), argument_only=(), edge_says=()) -> dict:
    """The tests of a part's hidden checks (`checks`, the module of the exercises `apis`):

    - `correct`, (API name, answer): pass; `wrong`, (API name, answer, catalogue id): fail naming that id, which
      is a catalogue mistake of the part (the ids starting with `mistake_prefixes`, each made by one answer); a
      mistake of `partial_mistakes` ({id: (criteria crossed, fraction kept)}) keeps that share, any other none;
    - `unnamed`, (API name, answer, words): fail with those words;
    - a stub fails plainly ("not implemented yet"), and an answer that always raises ValueError gets nothing;
    - `edge_only` and `argument_only`, (API name, answer, criterion): an answer failing only that stated edge case
      (its message saying `edge_says` too) or ignoring only that argument keeps most points; every criterion of the
      exercises is one of theirs.
    """
    from autograder.checks.kit.criteria import PartialCredit

    partial_mistakes = partial_mistakes or {}

    def check(api_name):
        return _Catching(check_of(checks, api_name))

    @pytest.mark.parametrize("api_name, answer", correct, ids=_name)
    def test_correct_answers_pass(api_name, answer):
        check(api_name)(answer)

    @pytest.mark.parametrize("api_name, answer, diagnosis", wrong, ids=[diagnosis for _, _, diagnosis in wrong])
    def test_each_known_mistake_is_named_and_keeps_its_share(api_name, answer, diagnosis):
        """Named; a mistake in an argument's non-default values (or a stated edge case) keeps a share of the points
        (the core passes), a core mistake none."""
        caught = check(api_name)
        message = V.fails_with(caught, answer, diagnosis)
        failure = caught.failure
        if diagnosis not in partial_mistakes:
            assert not isinstance(failure, PartialCredit), message
            return
        failed, fraction = partial_mistakes[diagnosis]
        assert isinstance(failure, PartialCredit), message
        assert set(failure.failed) == set(failed), message
        assert failure.fraction == pytest.approx(fraction), message

    def test_every_mistake_of_the_catalogue_is_made_by_a_wrong_answer():
        from coursekit.mistakes import MISTAKES

        named = {diagnosis for _, _, diagnosis in wrong}
        assert {m for m in MISTAKES if m.startswith(tuple(mistake_prefixes))} == named

    @pytest.mark.parametrize("api_name, answer, words", unnamed, ids=[words for _, _, words in unnamed])
    def test_unnamed_mistakes_fail_readably(api_name, answer, words):
        V.fails_with(check(api_name), answer, words)

    @pytest.mark.parametrize("api_name", apis)
    def test_a_stub_gets_a_plain_failure(api_name):
        caught = check(api_name)
        message = V.fails_with(caught, raising(api_name, NotImplementedError), "not implemented yet")
        assert not isinstance(caught.failure, PartialCredit), message

    @pytest.mark.parametrize("api_name", apis)
    def test_an_answer_that_always_raises_value_error_gets_nothing(api_name):
        """Edge cases count on top of a working core only: raising ValueError for everything earns no point."""
        with pytest.raises(AssertionError) as info:
            check(api_name)(raising(api_name, ValueError))
        assert not isinstance(info.value, PartialCredit), str(info.value)

    tests = [test_correct_answers_pass, test_each_known_mistake_is_named_and_keeps_its_share,
             test_every_mistake_of_the_catalogue_is_made_by_a_wrong_answer, test_a_stub_gets_a_plain_failure,
             test_an_answer_that_always_raises_value_error_gets_nothing,
             _the_part_tests_each_of_its_exercises(checks, apis),
             *([test_unnamed_mistakes_fail_readably] if unnamed else []),
             *_partial_credit_tests(check, apis, edge_only, argument_only, edge_says)]
    return {test.__name__: test for test in tests}


def _partial_credit_tests(check, apis, edge_only, argument_only, edge_says) -> list:
    """The hidden tests of the stated edge cases and the arguments with teeth (see `hidden_suite`)."""
    def test_every_criterion_is_tried_by_a_test():
        assert {c.id for c in CRITERIA.values() if c.api in apis} == {
            criterion for _, _, criterion in [*edge_only, *argument_only]}

    @pytest.mark.parametrize("api_name, answer, criterion", edge_only, ids=[c for _, _, c in edge_only])
    def test_an_answer_failing_only_a_stated_edge_case_keeps_most_points(api_name, answer, criterion):
        """Right in everything but what the statement asks at the rim: PartialCredit of at least 80 % (at most a
        fifth of the exercise's points lost), the edge case listed with a cross, the main behaviour with a tick."""
        caught = check(api_name)
        message = V.fails_partially(caught, answer, criterion, "✓ the main behaviour", *edge_says)
        assert caught.failure.fraction >= 0.8, message
        assert message.count("✗") == 1, message

    @pytest.mark.parametrize("api_name, answer, criterion", argument_only,
                             ids=[f"{c}-{_name(a)}" for _, a, c in argument_only])
    def test_an_answer_ignoring_only_an_argument_keeps_three_quarters_of_its_points(api_name, answer, criterion):
        """Right with the argument at its default (the core), wrong with its other values: PartialCredit, the
        argument listed with a cross. An exercise's arguments share a quarter of its points: one of n failing costs
        25 / n %."""
        caught = check(api_name)
        message = V.fails_partially(caught, answer, criterion)
        tried = [c for c in CRITERIA.values() if c.api == api_name and c.kind == "argument"]
        assert caught.failure.fraction == pytest.approx(1 - 0.25 / len(tried)), message

    return [test_every_criterion_is_tried_by_a_test,
            *([test_an_answer_failing_only_a_stated_edge_case_keeps_most_points] if edge_only else []),
            *([test_an_answer_ignoring_only_an_argument_keeps_three_quarters_of_its_points] if argument_only else [])]


# ====================================================================================================== public
def public_suite(checks, apis, *, correct, wrong, not_named=(), edge_only=(), argument_only=(),
                 edge_says=()) -> dict:
    """The tests of a part's public checks (`checks`, the module of the exercises `apis`):

    - `correct`, (API name, answer) pairs or {API name: answers}: pass, saying so;
    - `wrong`, (API name, answer, catalogue id or None): fail, with the id's text as the HINT unless the id is None
      (no catalogue mistake) or in `not_named` ({id: why not}); every catalogue mistake of the exercises is named by
      one of them or said why not;
    - a stub says it is not implemented;
    - `edge_only` and `argument_only`, (API name, answer, criterion): the failure names that stated edge case (and
      says `edge_says`) or that argument of the exercise.
    """
    from coursekit.mistakes import mistakes_for, text_of

    def check(api_name):
        return check_of(checks, api_name)

    if isinstance(correct, dict):
        correct = [(name, answer) for name, answers in correct.items() for answer in answers]

    @pytest.mark.parametrize("api_name, answer", correct, ids=_name)
    def test_correct_answers_pass(api_name, answer, capsys):
        check(api_name)(answer)
        assert "all public checks passed" in capsys.readouterr().out

    @pytest.mark.parametrize("api_name, answer, diagnosis", wrong, ids=[d or _name(w) for _, w, d in wrong])
    def test_wrong_answers_fail_and_name_the_mistake(api_name, answer, diagnosis):
        named = diagnosis is not None and diagnosis not in not_named
        V.fails_publicly(check(api_name), answer, *([f"HINT: {text_of(diagnosis)}"] if named else []))

    def test_every_catalogue_mistake_is_named_here_or_said_why_not():
        named = {diagnosis for _, _, diagnosis in wrong if diagnosis is not None and diagnosis not in not_named}
        for name in apis:
            for mistake in mistakes_for(name):
                assert mistake.id in named or mistake.id in not_named, mistake.id

    def test_a_stub_says_it_is_not_implemented():
        for name in apis:
            V.fails_publicly(check(name), raising(name, NotImplementedError), "not implemented yet")

    @pytest.mark.parametrize("api_name, answer, criterion", edge_only, ids=[c for _, _, c in edge_only])
    def test_a_missing_stated_edge_case_is_named(api_name, answer, criterion):
        """An answer right but for one stated edge case fails the public check, which says which edge case it was."""
        V.fails_publicly(check(api_name), answer, *edge_says,
                         f"an edge case the exercise states: {CRITERIA[criterion].text}")

    @pytest.mark.parametrize("api_name, answer, criterion", argument_only, ids=[c for _, _, c in argument_only])
    def test_an_ignored_argument_is_named_as_an_argument_of_the_exercise(api_name, answer, criterion):
        V.fails_publicly(check(api_name), answer, f"(an argument the exercise states: {CRITERIA[criterion].text})")

    tests = [test_correct_answers_pass, test_wrong_answers_fail_and_name_the_mistake,
             test_every_catalogue_mistake_is_named_here_or_said_why_not, test_a_stub_says_it_is_not_implemented,
             _the_part_tests_each_of_its_exercises(checks, apis),
             *([test_a_missing_stated_edge_case_is_named] if edge_only else []),
             *([test_an_ignored_argument_is_named_as_an_argument_of_the_exercise] if argument_only else [])]
    return {test.__name__: test for test in tests}
