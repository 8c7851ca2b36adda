"""The public checks of notebook 08's byte-level BPE (`coursekit/checks/gpt/bpe.py`) pass the reference and differently
written answers, and name the likely mistake for the wrong answers the hidden-check tests use
(tests/autograder/checks/variants_gpt.py)."""
from __future__ import annotations

import pytest

import variants_gpt as G
from coursekit.api import by_name
from coursekit.checks import CheckFailed
from coursekit.checks.gpt import bpe as checks
from coursekit.mistakes import text_of

APIS = G.apis_of("bpe")
WRONG = G.wrong(APIS)


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
    if diagnosis not in {"bpe.decode_latin1"}:
        assert text_of(diagnosis) in str(info.value), str(info.value)


def test_a_stub_says_it_is_not_implemented():
    def stub(*args, **kwargs):
        raise NotImplementedError()

    for name in APIS:
        with pytest.raises(CheckFailed, match="not implemented yet"):
            check_of(name)(stub)
