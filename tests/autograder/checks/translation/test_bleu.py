"""Hidden check of notebook 10's corpus BLEU: the reference and differently written answers pass; each known mistake
fails with its catalogue id named; broken answers fail readably; the probes' corpora do what they claim."""
from __future__ import annotations

import pytest

import solutions
import variants as V
import variants_translation as X
from autograder.checks.translation import bleu as checks
from autograder.checks.kit.criteria import PartialCredit
from coursekit.api import by_name
from coursekit.criteria import CRITERIA

NAMES = ("corpus_bleu",)


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


def test_every_bleu_mistake_of_the_catalogue_is_made_by_a_wrong_answer():
    from coursekit.mistakes import MISTAKES

    assert {m for m in MISTAKES if m.startswith("bleu.")} == {diagnosis for _, _, diagnosis in WRONG}


def test_stubs_and_broken_answers_fail_readably():
    def stub(*args, **kwargs):
        raise NotImplementedError()

    V.fails_with(check_of("corpus_bleu"), stub, "not implemented yet")
    V.fails_with(checks.check_corpus_bleu, lambda h, r, max_n=4: [1.0], "must return a float")
    V.fails_with(checks.check_corpus_bleu, lambda h, r, max_n=4: X.make_corpus_bleu()(h[:len(r)], r, max_n),
                 "should raise ValueError")


# ------------------------------------------------------------------------------------------ the probes' corpora
def test_the_bleu_corpora_clip_shorten_lengthen_and_zero():
    """The corpora make each part of BLEU matter: sacrebleu's statistics show clipping, both length regimes, zero
    precisions, and a non-zero score at max_n 1 or 2 where max_n 4 gives 0."""
    import sacrebleu

    corpora = checks.bleu_probes(checks.BLEU_SEED)
    clipped = shorter = longer = zero = 0
    for hypotheses, references, max_n in corpora:
        stats = sacrebleu.corpus_bleu([" ".join(h) for h in hypotheses], [[" ".join(r) for r in references]],
                                      tokenize="none", smooth_method="none", force=True)
        clipped += X.make_corpus_bleu("no_clipping")(hypotheses, references, 1) != \
            X.make_corpus_bleu()(hypotheses, references, 1)
        shorter += stats.sys_len < stats.ref_len
        longer += stats.sys_len > stats.ref_len
        zero += stats.score == 0 and stats.sys_len > 0
    assert clipped and shorter and longer and zero
    pairs = [(h, r, n) for h, r, n in corpora if n is not None and n < 3]
    assert any(solutions.corpus_bleu(h, r, n) > 0 and solutions.corpus_bleu(h, r, 4) == 0 for h, r, n in pairs)


# ------------------------------------------------------------------------------- stated edge cases: partial credit
POINTS = {"corpus_bleu": 20}  # the notebook's

ONLY_ONE_EDGE_CASE = [
    ("corpus_bleu.length_mismatch", "corpus_bleu", X.make_corpus_bleu("no_check")),
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


# --------------------------------------------------------------------------- arguments with teeth: partial credit
ONLY_ONE_ARGUMENT = [
    ("corpus_bleu.max_n", X.ignoring(X.make_corpus_bleu(), max_n=4)),
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
