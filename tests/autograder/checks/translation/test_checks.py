"""Hidden checks of notebook 10: the reference and differently written answers pass; each known mistake fails with
its catalogue id named; answers that break what the contract states without a catalogue id fail readably; the
checks' own references (the exhaustive search, the probes' inputs) do what they claim."""
from __future__ import annotations

import pytest
import torch.nn.functional as F

import solutions
import variants as V
import variants_translation as X
from autograder.checks.translation import checks as checks
from autograder.checks.kit.criteria import PartialCredit
from coursekit.api import by_name
from coursekit.criteria import CRITERIA


def check_of(api_name: str):
    return getattr(checks, by_name(api_name).check_name)


@pytest.mark.parametrize("api_name, answer", [(name, answer) for name, answers in X.CORRECT.items()
                                               for answer in [getattr(solutions, name), *answers]])
def test_correct_answers_pass(api_name, answer):
    check_of(api_name)(answer)


@pytest.mark.parametrize("api_name, answer, diagnosis", X.WRONG, ids=[diagnosis for _, _, diagnosis in X.WRONG])
def test_each_known_mistake_is_named(api_name, answer, diagnosis):
    V.fails_with(check_of(api_name), answer, diagnosis)


@pytest.mark.parametrize("api_name, answer, words", X.UNNAMED, ids=[words for _, _, words in X.UNNAMED])
def test_unnamed_mistakes_fail_readably(api_name, answer, words):
    V.fails_with(check_of(api_name), answer, words)


def test_every_translation_mistake_of_the_catalogue_is_made_by_a_wrong_answer():
    from coursekit.mistakes import MISTAKES

    topics = ("smoothing.", "noam.", "beam.", "bleu.")
    assert {m for m in MISTAKES if m.startswith(topics)} == {diagnosis for _, _, diagnosis in X.WRONG}


def test_stubs_and_broken_answers_fail_readably():
    def stub(*args, **kwargs):
        raise NotImplementedError()

    for name in ("label_smoothed_cross_entropy", "noam_lr", "beam_search", "corpus_bleu"):
        V.fails_with(check_of(name), stub, "not implemented yet")
    V.fails_with(checks.check_noam_lr, lambda *a, **k: "fast", "must return a float")
    V.fails_with(checks.check_corpus_bleu, lambda h, r, max_n=4: [1.0], "must return a float")
    V.fails_with(checks.check_beam_search, lambda *a, **k: "a dog", "list of int token ids")
    def per_position(logits, targets, smoothing=0.1, ignore_index=0):
        return F.cross_entropy(logits, targets, ignore_index=ignore_index, label_smoothing=smoothing,
                               reduction="none")

    V.fails_with(checks.check_label_smoothed_cross_entropy, per_position, "scalar tensor")
    V.fails_with(checks.check_corpus_bleu, lambda h, r, max_n=4: X.make_corpus_bleu()(h[:len(r)], r, max_n),
                 "should raise ValueError")


def test_a_beam_that_searches_on_after_enough_finished_hypotheses_is_not_the_contract_search():
    """Searching on to max_len finds other (here better-scoring) hypotheses than the contract's stopping rule: the
    check compares with the contract's search, not with the best it can find."""
    V.fails_with(checks.check_beam_search, X.make_beam_search("no_early_stop"), "not the best-ranked hypothesis")


# ---------------------------------------------------------------------------------------- the checks' references
def test_the_exhaustive_search_is_the_best_over_every_sequence_enumerated_one_by_one():
    """exhaustive_best against a plain enumeration of every finished sequence, each scored on its own."""
    import itertools

    beams = checks._Beams(checks.BEAM_SEED, "cpu")
    probe, model = beams.probes[0], beams.models[0]
    src, max_len, vocab = probe.sources[0], 3, range(checks.TGT_VOCAB)
    finished = [list(s) + [probe.eos_id] for n in range(max_len) for s in itertools.product(vocab, repeat=n)
                if probe.eos_id not in s]
    finished += [list(s) for s in itertools.product(vocab, repeat=max_len) if probe.eos_id not in s[:-1]]
    for lp in (0.0, 0.6, 1.0):
        case = checks.BeamCase(0, 0, checks.WIDE_BEAM, max_len, lp, False, False)
        best = max(beams.rank(case, tokens) for tokens in finished)
        got = checks.exhaustive_best(model, src, max_len, probe.bos_id, probe.eos_id, lp)
        assert got == pytest.approx(best, abs=1e-6)


def test_a_wide_beam_is_an_exhaustive_search():
    beams = checks._Beams(checks.BEAM_SEED, "cpu")
    for case in (c for c in beams.cases if c.beam_size == checks.WIDE_BEAM):
        probe = beams.probes[case.probe]
        tokens = solutions.beam_search(beams.models[case.probe], beams.source(case), case.beam_size, case.max_len,
                                       probe.bos_id, probe.eos_id, beams.length_penalty(case))
        assert beams.rank(case, tokens) == pytest.approx(beams.expected(case)[0], abs=1e-6)


def test_the_beam_probes_exercise_what_they_claim():
    """Finished hypotheses of several lengths, some unfinished at max_len, greedy differing from a wider beam, the
    length penalty and the training mode each changing some result."""
    beams = checks._Beams(checks.BEAM_SEED, "cpu")
    lengths, unfinished, beam_beats_greedy, penalty_matters, dropout_matters = set(), 0, 0, 0, 0
    for case in beams.cases:
        probe, model, src = beams.probes[case.probe], beams.models[case.probe], beams.source(case)
        lp = beams.length_penalty(case)
        tokens = solutions.beam_search(model, src, case.beam_size, case.max_len, probe.bos_id, probe.eos_id, lp)
        lengths.add(len(tokens))
        unfinished += tokens[-1] != probe.eos_id
        if case.beam_size not in (1, checks.WIDE_BEAM):
            greedy = beams.greedy(case)
            beam_beats_greedy += beams.rank(case, tokens) > beams.rank(case, greedy) + 1e-6
            penalty_matters += tokens != solutions.beam_search(model, src, case.beam_size, case.max_len,
                                                               probe.bos_id, probe.eos_id, 0.6 if lp != 0.6 else 0.0)
        if case.training:
            dropout_matters += beams.variant(case, eval_mode=False) != tokens
    assert len(lengths) >= 3 and unfinished and beam_beats_greedy and penalty_matters and dropout_matters


def test_the_smoothing_probes_have_ignored_positions_and_class_zero_as_a_target():
    cases = checks.smoothing_probes(checks.SMOOTHING_SEED, "cpu")
    assert any(case.kwargs.get("ignore_index", 0) != 0 for case in cases)
    assert any(case.kwargs.get("smoothing") == 0.0 for case in cases) and any(not case.kwargs for case in cases)
    for logits, targets, kwargs in cases:
        ignore_index = kwargs.get("ignore_index", 0)
        assert (targets != ignore_index).any()
        if ignore_index != 0:
            assert (targets == 0).any() and (targets == ignore_index).any()


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
POINTS = {"label_smoothed_cross_entropy": 20, "noam_lr": 15, "beam_search": 35, "corpus_bleu": 20}  # the notebook's

ONLY_ONE_EDGE_CASE = [
    ("label_smoothed_cross_entropy.bad_smoothing", "label_smoothed_cross_entropy", X.make_smoothing("no_check")),
    ("noam_lr.bad_warmup", "noam_lr", X.make_noam("no_check")),
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


def test_a_mistake_in_the_core_with_a_missing_edge_case_gets_nothing():
    """A known mistake of the core and no ValueError: a plain failure naming the core's mistake."""
    def wrong(step, d_model, warmup_steps, factor=1.0):
        return X.make_noam("no_d_model_scale")(step, d_model, max(warmup_steps, 1), factor)

    with pytest.raises(AssertionError) as info:
        checks.check_noam_lr(wrong)
    assert not isinstance(info.value, PartialCredit), str(info.value)
    assert getattr(info.value, "mistake_id", None) == "noam.no_d_model_scale"


# --------------------------------------------------------------------------- arguments with teeth: partial credit
def ignoring(function, **fixed):
    """`function` with the keyword arguments `fixed` held at their defaults, whatever the caller passes: an answer
    right in everything but that argument."""
    import inspect

    signature = inspect.signature(function)

    def wrong(*args, **kwargs):
        bound = signature.bind(*args, **kwargs)
        bound.arguments.update(fixed)
        return function(*bound.args, **bound.kwargs)
    wrong.__name__ = f"{function.__name__}_ignores_{'_'.join(fixed)}"
    return wrong


def smoothing_always_default(logits, targets, smoothing=0.1, ignore_index=0):
    """Checks `smoothing` (the stated edge case) but smooths with 0.1 whatever it is."""
    if not 0 <= smoothing < 1:
        raise ValueError("smoothing must lie in [0, 1)")
    return X.make_smoothing()(logits, targets, 0.1, ignore_index)


ONLY_ONE_ARGUMENT = [
    ("label_smoothed_cross_entropy.smoothing", smoothing_always_default),
    ("label_smoothed_cross_entropy.ignore_index", ignoring(X.make_smoothing(), ignore_index=0)),
    ("label_smoothed_cross_entropy.ignore_index", ignoring(X.smoothing_by_pytorch, ignore_index=0)),
    ("noam_lr.factor", X.make_noam("factor_ignored")),
    ("noam_lr.factor", ignoring(X.noam_if_else, factor=1.0)),
    ("beam_search.length_penalty", ignoring(X.make_beam_search(), length_penalty=0.6)),
    ("beam_search.bos_id", ignoring(X.make_beam_search(), bos_id=2)),
    ("beam_search.eos_id", ignoring(X.make_beam_search(), eos_id=3)),
    ("beam_search.eos_id", ignoring(X.beam_search_tensors, eos_id=3)),
    ("corpus_bleu.max_n", ignoring(X.make_corpus_bleu(), max_n=4)),
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


WRONG_PENALTIES = ["no_length_penalty", "length_counts_bos", "penalty_on_unfinished"]


@pytest.mark.parametrize("answer", [X.make_beam_search(m) for m in WRONG_PENALTIES], ids=WRONG_PENALTIES)
def test_a_length_penalty_computed_wrongly_fails_at_the_default_penalty(answer):
    """Ranking by the raw score, counting <bos> in L or dividing while walking is wrong at the default 0.6 as well:
    the searched sources show it in the core (not only with another length_penalty), so it gets no partial credit
    on any submission."""
    with pytest.raises(AssertionError) as info:
        check_of("beam_search")(answer)
    assert not isinstance(info.value, PartialCredit), str(info.value)


def test_each_beam_call_tries_one_argument_at_most():
    """The second probe passes another bos_id only, the third another eos_id only; both leave the length penalty at
    0.6; the core calls leave all three at their defaults."""
    beams = checks._Beams(checks.BEAM_SEED, "cpu")
    assert [(p.bos_id == 2, p.eos_id == 3) for p in beams.probes] == [(True, True), (False, True), (True, False)]
    for case in beams.cases:
        if case.probe:
            assert case.length_penalty in (None, 0.6) and case.explicit_ids
    assert any(c.probe == 0 and c.length_penalty not in (None, 0.6) for c in beams.cases)


def test_each_smoothing_probe_tries_one_argument_at_most():
    cases = checks.smoothing_probes(checks.SMOOTHING_SEED, "cpu")
    for case in cases:
        assert case.kwargs.get("smoothing", 0.1) == 0.1 or case.kwargs.get("ignore_index", 0) == 0, case.kwargs
    assert sum(case.kwargs.get("smoothing", 0.1) != 0.1 for case in cases) >= 2
    assert sum(case.kwargs.get("ignore_index", 0) != 0 for case in cases) >= 2
