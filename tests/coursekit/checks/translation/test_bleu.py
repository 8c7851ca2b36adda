"""The public check of notebook 10's corpus BLEU passes the reference and answers written differently, and names the
likely mistake for wrong answers built here from the reference with one change each."""
from __future__ import annotations

import math
import sys
from collections import Counter
from pathlib import Path

import pytest

import solutions
from coursekit.api import by_name
from coursekit.checks import CheckFailed
from coursekit.checks.translation import bleu as checks
from coursekit.mistakes import mistakes_for, text_of

sys.path.insert(0, str(Path(__file__).resolve().parent))
from translation_public_answers import fixed, variant  # noqa: E402

NAMES = ("corpus_bleu",)


def check_of(api_name):
    return getattr(checks, by_name(api_name).check_name)


def grams(tokens, n):
    return Counter(tuple(tokens[i:i + n]) for i in range(len(tokens) - n + 1))


def bleu(hypotheses, references, max_n=4, mistake=None):
    """The reference's computation with one mistake switched on."""
    if len(hypotheses) != len(references) and mistake != "no_value_error":
        raise ValueError("one reference per hypothesis")
    if mistake == "sentence_average":
        scores = [bleu([h], [r], max_n) for h, r in zip(hypotheses, references)]
        return sum(scores) / len(scores)
    if mistake == "max_n_ignored":
        max_n = 4
    matches, totals, c, r = [0] * max_n, [0] * max_n, 0, 0
    for hyp, ref in zip(hypotheses, references):
        c, r = c + len(hyp), r + len(ref)
        for n in range(1, max_n + 1):
            h, f = grams(hyp, n), grams(ref, n)
            matches[n - 1] += sum(count if mistake == "no_clipping" else min(count, f[g]) for g, count in h.items())
            totals[n - 1] += max(len(hyp) - n + 1, 0)
    if c == 0 or min(matches) == 0:
        return 0.0
    precisions = [m / t for m, t in zip(matches, totals)]
    mean = (sum(precisions) / max_n if mistake == "arithmetic_mean"
            else math.exp(sum(math.log(p) for p in precisions) / max_n))
    if mistake == "no_brevity_penalty":
        bp = 1.0
    elif mistake == "brevity_inverted":
        bp = math.exp(1 - c / r) if c < r else 1.0
    elif mistake == "brevity_when_longer":
        bp = math.exp(1 - r / c) if c > r else 1.0
    else:
        bp = math.exp(1 - r / c) if c < r else 1.0
    return (1.0 if mistake == "fraction_not_percent" else 100.0) * bp * mean


def bleu_with_logs(hypotheses, references, max_n=4):
    """Written differently: Counter intersections, the brevity penalty as min(0, 1 - r / c) in log space."""
    if len(hypotheses) != len(references):
        raise ValueError("one reference per hypothesis")
    log_bleu, c, r = 0.0, sum(map(len, hypotheses)), sum(map(len, references))
    for n in range(1, max_n + 1):
        hit = sum(sum((grams(h, n) & grams(ref, n)).values()) for h, ref in zip(hypotheses, references))
        total = sum(max(0, len(h) - n + 1) for h in hypotheses)
        if hit == 0:
            return 0.0
        log_bleu += math.log(hit / total) / max_n
    return 100 * math.exp(log_bleu + min(0.0, 1 - r / c))


CORRECT = {
    "corpus_bleu": [solutions.corpus_bleu, bleu, bleu_with_logs],
}


# (api name, wrong answer, catalogue id named in the hint, or None where the failure names no catalogue mistake)
WRONG = [
    ("corpus_bleu", variant(bleu, "no_clipping"), "bleu.no_clipping"),
    ("corpus_bleu", variant(bleu, "brevity_inverted"), "bleu.brevity_inverted"),
    ("corpus_bleu", variant(bleu, "brevity_when_longer"), "bleu.brevity_inverted"),
    ("corpus_bleu", variant(bleu, "no_brevity_penalty"), "bleu.no_brevity_penalty"),
    ("corpus_bleu", variant(bleu, "arithmetic_mean"), "bleu.arithmetic_mean"),
    ("corpus_bleu", variant(bleu, "sentence_average"), "bleu.sentence_average"),
    ("corpus_bleu", variant(bleu, "fraction_not_percent"), "bleu.fraction_not_percent"),
    ("corpus_bleu", variant(bleu, "max_n_ignored"), None),
    ("corpus_bleu", variant(bleu, "no_value_error"), None),
]


@pytest.mark.parametrize("api_name, answer", [(name, answer) for name, answers in CORRECT.items()
                                               for answer in answers],
                         ids=lambda value: getattr(value, "__name__", value))
def test_correct_answers_pass(api_name, answer, capsys):
    check_of(api_name)(answer)
    assert "all public checks passed" in capsys.readouterr().out


@pytest.mark.parametrize("api_name, answer, diagnosis", WRONG, ids=[w.__name__ for _, w, _ in WRONG])
def test_wrong_answers_fail_and_name_the_mistake(api_name, answer, diagnosis):
    with pytest.raises(CheckFailed) as info:
        check_of(api_name)(answer)
    if diagnosis is not None:
        assert f"HINT: {text_of(diagnosis)}" in str(info.value), str(info.value)


def test_every_catalogue_mistake_of_corpus_bleu_is_diagnosed_here():
    named = {diagnosis for _, _, diagnosis in WRONG if diagnosis}
    for name in NAMES:
        for mistake in mistakes_for(name):
            assert mistake.id in named, mistake.id


def test_the_switches_off_are_the_reference():
    hyps = [["a", "b", "a", "c"], ["b", "b"], []]
    refs = [["a", "b", "c"], ["b", "a", "b", "c"], ["c"]]
    assert all(bleu(hyps, refs, n) == solutions.corpus_bleu(hyps, refs, n) for n in (1, 2, 3))


def test_a_stub_says_it_is_not_implemented():
    def stub(*args, **kwargs):
        raise NotImplementedError()

    for name in NAMES:
        with pytest.raises(CheckFailed, match="not implemented yet"):
            check_of(name)(stub)


@pytest.mark.parametrize("api_name, answer, criterion", [
    ("corpus_bleu", variant(bleu, "no_value_error"), "corpus_bleu.length_mismatch"),
], ids=lambda value: value if isinstance(value, str) and "." in value else "")
def test_a_missing_stated_edge_case_is_named(api_name, answer, criterion):
    """An answer right but for one stated edge case fails the public check, which says which edge case it was."""
    from coursekit.criteria import CRITERIA

    with pytest.raises(CheckFailed) as info:
        check_of(api_name)(answer)
    message = str(info.value)
    assert "should raise ValueError" in message, message
    assert f"an edge case the exercise states: {CRITERIA[criterion].text}" in message, message


# ------------------------------------------------------------------------- arguments with teeth, publicly
IGNORED_ARGUMENTS = [
    ("corpus_bleu", fixed(bleu, max_n=4), "corpus_bleu.max_n"),
]


@pytest.mark.parametrize("api_name, answer, criterion", IGNORED_ARGUMENTS, ids=[c for _, _, c in IGNORED_ARGUMENTS])
def test_an_ignored_argument_is_named_as_the_argument_the_exercise_states(api_name, answer, criterion):
    from coursekit.criteria import CRITERIA

    with pytest.raises(CheckFailed) as info:
        check_of(api_name)(answer)
    assert f"(an argument the exercise states: {CRITERIA[criterion].text})" in str(info.value), str(info.value)
