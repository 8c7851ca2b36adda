"""Hidden check of notebook 10's beam search: the reference and differently written answers pass; each known mistake
fails with its catalogue id named; a search that is not the contract's fails readably; the check's own references
(the exhaustive search, the probes' inputs) do what they claim."""
from __future__ import annotations

import pytest

import solutions
import variants as V
import variants_translation as X
from autograder.checks.translation import beam as checks
from part_suite import hidden_suite

APIS = ("beam_search",)
MISTAKE_PREFIXES = ("beam.",)  # its catalogue ids
WRONG = X.of(APIS, X.WRONG)

EDGE_ONLY = []  # beam_search states no edge case
ARGUMENT_ONLY = [  # (api name, a correct answer that ignores only this argument, criterion)
    ("beam_search", X.ignoring(X.make_beam_search(), length_penalty=0.6), "beam_search.length_penalty"),
    ("beam_search", X.ignoring(X.make_beam_search(), bos_id=2), "beam_search.bos_id"),
    ("beam_search", X.ignoring(X.make_beam_search(), eos_id=3), "beam_search.eos_id"),
    ("beam_search", X.ignoring(X.beam_search_tensors, eos_id=3), "beam_search.eos_id"),
]
# No mistake of the catalogue keeps a share of the points: ranking by the raw score, counting <bos> in L, dividing
# while walking or searching on past the stopping rule (beam.no_length_penalty, beam.length_counts_bos,
# beam.penalty_on_unfinished, beam.searches_past_stop, and its form that keeps the finished hypotheses in the beam)
# is wrong at the default length penalty 0.6 as well: the searched sources show it in the core (not only with
# another length_penalty), so it gets no partial credit on any submission. Stopping at the first finished
# hypothesis (beam.stops_at_first_finished) needs no search: it changed 10 to 20 of the core's 28 translations on
# each of the nine salts tried when it was added.
PARTIAL_MISTAKES = {}

# the tests every part runs (tests/autograder/checks/part_suite.py), with this part's data
globals().update(hidden_suite(checks, APIS, correct=X.correct(APIS), wrong=WRONG,
                              mistake_prefixes=MISTAKE_PREFIXES, partial_mistakes=PARTIAL_MISTAKES,
                              edge_only=EDGE_ONLY, argument_only=ARGUMENT_ONLY))


def test_broken_answers_fail_readably():
    V.fails_with(checks.check_beam_search, lambda *a, **k: "a dog", "list of int token ids")



# ---------------------------------------------------------------------------------------- the checks' references
def test_the_exhaustive_search_is_the_best_over_every_sequence_enumerated_one_by_one():
    """exhaustive_best against a plain enumeration of every finished sequence, each scored on its own."""
    import itertools

    beams = checks.Beams(checks.BEAM_SEED, "cpu")
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
    beams = checks.Beams(checks.BEAM_SEED, "cpu")
    for case in (c for c in beams.cases if c.beam_size == checks.WIDE_BEAM):
        probe = beams.probes[case.probe]
        tokens = solutions.beam_search(beams.models[case.probe], beams.source(case), case.beam_size, case.max_len,
                                       probe.bos_id, probe.eos_id, beams.length_penalty(case))
        assert beams.rank(case, tokens) == pytest.approx(beams.expected(case)[0], abs=1e-6)


def test_the_beam_probes_exercise_what_they_claim():
    """Finished hypotheses of several lengths, some unfinished at max_len, greedy differing from a wider beam, the
    length penalty and the training mode each changing some result."""
    beams = checks.Beams(checks.BEAM_SEED, "cpu")
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


def test_each_searched_mistake_fails_a_core_call_of_the_first_probe():
    """Every mistake the first probe's sources are searched for (beam_probes.SEARCHED_MISTAKES, its row of the
    table, and SEARCHED_UNLESS_SHOWN, another of its forms) gives, in a call of the core (beam small or large, the
    default penalty, eval mode), a translation whose ranking score is not the expected one: the check fails it
    outright."""
    from autograder.checks.translation import beam_probes, mistakes

    beams = checks.Beams(checks.BEAM_SEED, "cpu")
    core = [case for case in beams.cases if case.probe == 0 and case.length_penalty in (None, 0.6)
            and case.beam_size not in (1, checks.WIDE_BEAM) and not case.training]
    searched = [mistakes.TABLE[name] for name, _others in beam_probes.SEARCHED_MISTAKES]
    for name, switches in beam_probes.SEARCHED_UNLESS_SHOWN:
        assert switches in mistakes.FORMS[name], name                   # a form of that mistake, as the table has it
        searched.append((mistakes.TABLE[name][0], switches))
    for variant, switches in searched:
        assert any(not beams.close(beams.rank(case, beams.run(case, variant, switches)), beams.expected(case)[0])
                   for case in core), switches


def test_each_beam_call_tries_one_argument_at_most():
    """The second probe passes another bos_id only, the third another eos_id only; both leave the length penalty at
    0.6; the core calls leave all three at their defaults."""
    beams = checks.Beams(checks.BEAM_SEED, "cpu")
    assert [(p.bos_id == 2, p.eos_id == 3) for p in beams.probes] == [(True, True), (False, True), (True, False)]
    for case in beams.cases:
        if case.probe:
            assert case.length_penalty in (None, 0.6) and case.explicit_ids
    assert any(c.probe == 0 and c.length_penalty not in (None, 0.6) for c in beams.cases)
