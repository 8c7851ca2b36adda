"""The public check of notebook 10's corpus BLEU passes the reference and answers written differently, and names the
likely mistake for wrong answers built here from the reference with one change each."""
from __future__ import annotations

import math
from collections import Counter

import solutions
import variants_translation as X
from coursekit.checks.translation import bleu as checks
from part_suite import public_suite

APIS = ("corpus_bleu",)


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
    ("corpus_bleu", X.variant(bleu, "no_clipping"), "bleu.no_clipping"),
    ("corpus_bleu", X.variant(bleu, "brevity_inverted"), "bleu.brevity_inverted"),
    ("corpus_bleu", X.variant(bleu, "brevity_when_longer"), "bleu.brevity_inverted"),
    ("corpus_bleu", X.variant(bleu, "no_brevity_penalty"), "bleu.no_brevity_penalty"),
    ("corpus_bleu", X.variant(bleu, "arithmetic_mean"), "bleu.arithmetic_mean"),
    ("corpus_bleu", X.variant(bleu, "sentence_average"), "bleu.sentence_average"),
    ("corpus_bleu", X.variant(bleu, "fraction_not_percent"), "bleu.fraction_not_percent"),
    ("corpus_bleu", X.variant(bleu, "max_n_ignored"), "bleu.max_n_ignored"),
    ("corpus_bleu", X.variant(bleu, "no_value_error"), None),
]

EDGE_ONLY = [  # (api name, an answer right but for this stated edge case, criterion)
    ("corpus_bleu", X.variant(bleu, "no_value_error"), "corpus_bleu.length_mismatch"),
]
ARGUMENT_ONLY = [  # (api name, an answer that ignores only this argument, criterion)
    ("corpus_bleu", X.ignoring(bleu, max_n=4), "corpus_bleu.max_n"),
]

# the tests every part runs (tests/autograder/checks/part_suite.py), with this part's data
globals().update(public_suite(checks, APIS, correct=CORRECT, wrong=WRONG,
                              edge_only=EDGE_ONLY, edge_says=("should raise ValueError",), argument_only=ARGUMENT_ONLY))


def test_the_switches_off_are_the_reference():
    hyps = [["a", "b", "a", "c"], ["b", "b"], []]
    refs = [["a", "b", "c"], ["b", "a", "b", "c"], ["c"]]
    assert all(bleu(hyps, refs, n) == solutions.corpus_bleu(hyps, refs, n) for n in (1, 2, 3))
