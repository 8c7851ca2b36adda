"""The public check of notebook 10's beam search passes the reference and answers written differently, and names the
likely mistake for wrong answers built here from the reference with one change each."""
from __future__ import annotations

import math

import torch

import solutions
import variants_translation as X
from coursekit.checks.translation import beam as checks
from part_suite import public_suite

APIS = ("beam_search",)

# Catalogue mistakes no output of a public example can show (the hidden check names them where it can).
NOT_NAMED_PUBLICLY = {
    "beam.penalty_on_unfinished": "every extension of one step has the same length L, so dividing the scores by "
                                  "((5 + L) / 6) ** alpha while pruning keeps their order: the walk is unchanged",
}


@torch.no_grad()
def beam(model, src_ids, beam_size, max_len, bos_id=2, eos_id=3, length_penalty=0.6, mistake=None):
    """The reference's algorithm with one mistake switched on."""
    was_training = model.training
    if mistake != "dropout_on":
        model.eval()
    memory, src_mask = model.encode(src_ids)
    hyps, finished = [([bos_id], 0.0)], []
    if mistake == "greedy_only":
        beam_size = 1
    for _ in range(max_len):
        ys = torch.tensor([tokens for tokens, _ in hyps])
        k = ys.size(0)
        logits = model.decode(ys, memory.expand(k, -1, -1), src_mask.expand(k, -1, -1, -1))[:, -1]
        scores = torch.tensor([score for _, score in hyps], dtype=torch.float64)[:, None] \
            + logits.double().log_softmax(-1)
        ranked = scores
        if mistake == "penalty_on_unfinished":                             # every extension has L = ys.size(1)
            ranked = scores / ((5 + ys.size(1)) / 6) ** length_penalty
        order = ranked.flatten().argsort(descending=True).tolist()
        new = []
        for index in order:
            row, token = divmod(index, scores.size(1))
            extended = (hyps[row][0] + [token], scores[row, token].item())
            if token == eos_id and mistake != "continues_after_eos":
                finished.append(extended)
            else:
                new.append(extended)
                if len(new) == beam_size:
                    break
        hyps = new
        if (len(finished) >= beam_size and mistake != "searches_on") or (finished and
                                                                         mistake == "stops_at_first_finished"):
            break
    else:
        if mistake != "drops_unfinished":
            finished.extend(hyps)
    if not finished:
        finished = hyps
    length = (lambda tokens: len(tokens)) if mistake == "length_counts_bos" else (lambda tokens: len(tokens) - 1)
    alpha = 0.0 if mistake == "no_length_penalty" else length_penalty
    best = max(finished, key=lambda hyp: hyp[1] / ((5 + length(hyp[0])) / 6) ** alpha)
    if mistake not in ("dropout_on", "mode_not_restored"):
        model.train(was_training)
    return best[0] if mistake == "returns_bos" else best[0][1:]


def beam_with_a_priority_list(model, src_ids, beam_size, max_len, bos_id=2, eos_id=3, length_penalty=0.6):
    """Written differently: hypotheses as lists of log-probabilities, a Python sort, the GNMT penalty as a helper."""
    def penalised(steps):
        return sum(steps) / (((5 + len(steps)) / 6) ** length_penalty)

    mode = model.training
    model.eval()
    with torch.no_grad():
        memory, mask = model.encode(src_ids)
        alive, done = [([bos_id], [])], []
        for _ in range(max_len):
            candidates = []
            for tokens, steps in alive:
                log_p = model.decode(torch.tensor([tokens]), memory, mask)[0, -1].double().log_softmax(-1)
                candidates += [(tokens + [v], steps + [lp]) for v, lp in enumerate(log_p.tolist())]
            candidates.sort(key=lambda c: sum(c[1]), reverse=True)
            alive = []
            for tokens, steps in candidates:
                if len(alive) == beam_size:
                    break
                (done if tokens[-1] == eos_id else alive).append((tokens, steps))
            if len(done) >= beam_size:
                break
        else:
            done += alive
    model.train(mode)
    tokens, _ = max(done or alive, key=lambda hyp: penalised(hyp[1]))
    return tokens[1:]


CORRECT = {
    "beam_search": [solutions.beam_search, beam, beam_with_a_priority_list],
}


# (api name, wrong answer, catalogue id named in the hint, or None where the failure names no catalogue mistake)
WRONG = [
    ("beam_search", X.variant(beam, "no_length_penalty"), "beam.no_length_penalty"),
    ("beam_search", X.variant(beam, "continues_after_eos"), "beam.continues_after_eos"),
    ("beam_search", X.variant(beam, "length_counts_bos"), "beam.length_counts_bos"),
    ("beam_search", X.variant(beam, "returns_bos"), "beam.returns_bos"),
    ("beam_search", X.variant(beam, "dropout_on"), "beam.dropout_on"),
    ("beam_search", X.variant(beam, "mode_not_restored"), "beam.mode_not_restored"),
    ("beam_search", X.variant(beam, "stops_at_first_finished"), "beam.stops_at_first_finished"),
    ("beam_search", X.variant(beam, "searches_on"), "beam.searches_past_stop"),
    ("beam_search", X.beam_search_keeping_finished, "beam.searches_past_stop"),
    ("beam_search", X.variant(beam, "greedy_only"), None),
    ("beam_search", X.variant(beam, "drops_unfinished"), None),
]
ARGUMENT_ONLY = [  # (api name, an answer that ignores only this argument, criterion)
    ("beam_search", X.ignoring(beam, length_penalty=0.6), "beam_search.length_penalty"),
    ("beam_search", X.ignoring(beam, bos_id=2), "beam_search.bos_id"),
    ("beam_search", X.ignoring(beam, eos_id=3), "beam_search.eos_id"),
]

# the tests every part runs (tests/autograder/checks/part_suite.py), with this part's data
globals().update(public_suite(checks, APIS, correct=CORRECT, wrong=WRONG,
                              not_named=NOT_NAMED_PUBLICLY, argument_only=ARGUMENT_ONLY))


def test_the_switches_off_are_the_reference():
    for make in (checks.greedy_vs_beam_translator, checks.length_penalty_translator):
        for beam_size, max_len, alpha in ((1, 6, 0.6), (2, 8, 0.0), (2, 8, 1.0), (3, 2, 0.6)):
            src = torch.tensor([[5, 6]])
            assert beam(make(), src, beam_size, max_len, length_penalty=alpha) == \
                solutions.beam_search(make(), src, beam_size, max_len, length_penalty=alpha)


def test_the_translators_behave_as_their_docstrings_say():
    """The tables' claims, recomputed from the models' own log-probabilities."""
    A, B, EOS = checks.A, checks.B, checks.EOS

    def log_prob(model, tokens):
        return sum(model.next_logits(tuple(tokens[:i])).log_softmax(-1)[t].item() for i, t in enumerate(tokens))

    model = checks.greedy_vs_beam_translator()
    assert math.isclose(math.exp(log_prob(model, [A, EOS])), 0.20, rel_tol=1e-4)
    assert math.isclose(math.exp(log_prob(model, [B, EOS])), 0.38, rel_tol=1e-4)
    model = checks.length_penalty_translator()
    short, long = log_prob(model, [EOS]), log_prob(model, [A, A, A, EOS])
    assert math.isclose(short, math.log(0.4), rel_tol=1e-4) and math.isclose(long, -1.34, rel_tol=1e-4)
    for alpha, long_wins in ((0.0, False), (0.6, False), (1.0, True), (2.0, True)):
        assert (long / ((5 + 4) / 6) ** alpha > short / ((5 + 1) / 6) ** alpha) == long_wins
    for alpha, long_wins in ((1.0, False), (2.0, True)):                       # L counting <bos>
        assert (long / ((5 + 5) / 6) ** alpha > short / ((5 + 2) / 6) ** alpha) == long_wins


def test_pruning_by_penalised_scores_changes_nothing():
    """Why beam.penalty_on_unfinished is not named publicly: under the contract's walk its answers are the
    reference's (the hidden check can only name it where a student's beam mixes lengths)."""
    wrong = X.variant(beam, "penalty_on_unfinished")
    for make in (checks.greedy_vs_beam_translator, checks.length_penalty_translator):
        for beam_size, max_len, alpha in ((1, 6, 0.6), (2, 8, 0.0), (2, 8, 1.0), (2, 8, 2.0), (3, 2, 0.6)):
            src = torch.tensor([[5, 6]])
            assert wrong(make(), src, beam_size, max_len, length_penalty=alpha) == \
                solutions.beam_search(make(), src, beam_size, max_len, length_penalty=alpha)

