"""The public checks of notebook 08's training helpers (`coursekit/checks/gpt/training.py`) pass the reference and
differently written answers, and name the likely mistake for the wrong answers the hidden-check tests use
(tests/autograder/checks/variants_gpt.py)."""
from __future__ import annotations

import pytest

import variants_gpt as G
from coursekit.api import by_name
from coursekit.checks import CheckFailed
from coursekit.checks.gpt import training as checks
from coursekit.mistakes import text_of

APIS = G.apis_of("training")
WRONG = G.wrong(APIS)


def _ignoring_answers():
    """The hidden-check tests' answers that ignore one argument each (tests/autograder/checks/gpt/test_training.py)."""
    import importlib.util
    from pathlib import Path

    path = Path(__file__).resolve().parents[3] / "autograder" / "checks" / "gpt" / "test_training.py"
    spec = importlib.util.spec_from_file_location("hidden_test_gpt_training", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.ARGUMENT_ONLY


ARGUMENT_ONLY = _ignoring_answers()


def check_of(api_name):
    return getattr(checks, by_name(api_name).check_name)


@pytest.mark.parametrize("api_name, answer", G.correct(APIS))
def test_correct_answers_pass(api_name, answer, capsys):
    check_of(api_name)(answer)
    assert "all public checks passed" in capsys.readouterr().out


@pytest.mark.parametrize("api_name, answer, diagnosis", WRONG, ids=[d for _, _, d in WRONG])
def test_wrong_answers_fail_and_most_are_named(api_name, answer, diagnosis):
    with pytest.raises(CheckFailed) as info:
        check_of(api_name)(answer)
    assert text_of(diagnosis) in str(info.value), str(info.value)


def test_a_stub_says_it_is_not_implemented():
    def stub(*args, **kwargs):
        raise NotImplementedError()

    for name in APIS:
        with pytest.raises(CheckFailed, match="not implemented yet"):
            check_of(name)(stub)


@pytest.mark.parametrize("api_name, answer, criterion", ARGUMENT_ONLY, ids=[c for _, _, c in ARGUMENT_ONLY])
def test_an_ignored_argument_is_named_as_an_argument_of_the_exercise(api_name, answer, criterion):
    from coursekit.criteria import CRITERIA

    with pytest.raises(CheckFailed) as info:
        check_of(api_name)(answer)
    assert f"(an argument the exercise states: {CRITERIA[criterion].text})" in str(info.value), str(info.value)
