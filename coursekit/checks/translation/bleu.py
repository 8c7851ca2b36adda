"""Public self-check for notebook 10's corpus BLEU.

BLEU is checked on captions whose n-gram counts are worked out in the comments (and against sacrebleu when it is
installed).
"""
from __future__ import annotations

import math

from coursekit.checks.toolkit import fail, isclose, mistake_hint, passed, run
from coursekit.checks.translation.common import expect_value_error
from coursekit.criteria import argument, edge_case
from coursekit.tolerance import FORMULA_FLOAT64


def _bleu(precisions, c, r, brevity=True):
    """100 * BP * geometric mean of `precisions` (c, r: hypothesis and reference lengths)."""
    if min(precisions) == 0:
        return 0.0
    bp = math.exp(1 - r / c) if brevity and c < r else 1.0
    return 100 * bp * math.exp(sum(math.log(p) for p in precisions) / len(precisions))


# worked examples (one reference each); the n-gram counts are in the comments
_MAN = ("a man in a blue shirt is riding a bike".split(), "a man in a red shirt is riding a bicycle".split())
# 10 and 10 tokens. 1-grams: a a a man in shirt is riding = 8/10; 2-grams: a man, man in, in a, shirt is, is riding,
# riding a = 6/9; 3-grams: a man in, man in a, shirt is riding, is riding a = 4/8; 4-grams: a man in a, shirt is
# riding a = 2/7.
_DOGS = ("two dogs play in snow".split(), "two dogs are playing in the snow".split())
# 5 and 7 tokens. 1-grams: two dogs in snow = 4/5; 2-grams: two dogs = 1/4; 3-grams 0/3; 4-grams 0/2.
_MAN_P = [8 / 10, 6 / 9, 4 / 8, 2 / 7]
_CORPUS_P = [12 / 15, 7 / 13, 4 / 11, 2 / 9]                                  # both sentences' counts summed


def _bleu_case(fn, hyps, refs, max_n, expected, what, wrong=()):
    got = run("corpus_bleu", fn, hyps, refs, max_n)
    if not isinstance(got, (int, float)) or isinstance(got, bool):
        fail(f"corpus_bleu should return a float, got {type(got).__name__}.", "return a Python float (float(...)).")
    if isclose(got, expected, FORMULA_FLOAT64):
        return
    hint = None
    if expected > 1 and isclose(got * 100, expected, FORMULA_FLOAT64):
        hint = mistake_hint("bleu.fraction_not_percent")
    else:
        for value, text in wrong:
            if isclose(got, value, FORMULA_FLOAT64):
                hint = text
                break
    if hint is None and not 0 <= got <= 100:
        hint = "BLEU lies in [0, 100]."
    fail(f"corpus_bleu on {what} should be {expected:.6g}, got {got}.", hint)


def check_corpus_bleu(corpus_bleu) -> None:
    fn = corpus_bleu
    same = "a girl is climbing a rock wall".split()
    _bleu_case(fn, [same], [same], 4, 100.0, "a hypothesis equal to its reference")
    # clipping: 'the' 6 times, but only twice in the reference -> 2/6 (c = r = 6: no brevity penalty)
    with argument("corpus_bleu.max_n"):                 # with max_n 4 this corpus scores 0 (no matching 2-gram)
        got = run("corpus_bleu", fn, [["the"] * 6], ["the cat is on the mat".split()], 1)
        if isinstance(got, (int, float)) and not isinstance(got, bool) and got == 0:
            fail("corpus_bleu on 'the the the the the the' vs 'the cat is on the mat', max_n=1 should be "
                 f"{100 * 2 / 6:.6g}, got 0 (the score with max_n=4).", mistake_hint("bleu.max_n_ignored"))
    _bleu_case(fn, [["the"] * 6], ["the cat is on the mat".split()], 1, 100 * 2 / 6,
               "'the the the the the the' vs 'the cat is on the mat', max_n=1",
               [(100.0, mistake_hint("bleu.no_clipping")),
                (0.0, mistake_hint("bleu.max_n_ignored"))])
    # the geometric mean of the four precisions (c = r = 10)
    _bleu_case(fn, [_MAN[0]], [_MAN[1]], 4, _bleu(_MAN_P, 10, 10), "'a man in a blue shirt ...'",
               [(100 * sum(_MAN_P) / 4, mistake_hint("bleu.arithmetic_mean"))])
    with argument("corpus_bleu.max_n"):
        _bleu_case(fn, [_MAN[0]], [_MAN[1]], 2, _bleu(_MAN_P[:2], 10, 10), "'a man in a blue shirt ...' with max_n=2",
                   [(_bleu(_MAN_P, 10, 10), mistake_hint("bleu.max_n_ignored")),
                    (100 * sum(_MAN_P[:2]) / 2, mistake_hint("bleu.arithmetic_mean"))])
    short, long, ref = ("a dog runs".split(), "a dog runs on the beach today".split(),
                        "a dog runs on the beach".split())
    # a longer hypothesis is not penalised for its length (its extra words already lower the precisions)
    _bleu_case(fn, [long], [ref], 2, 100 * math.sqrt(6 / 7 * 5 / 6),
               "'a dog runs on the beach today' vs 'a dog runs on the beach', max_n=2",
               [(100 * math.sqrt(6 / 7 * 5 / 6) * math.exp(1 - 7 / 6), mistake_hint("bleu.brevity_inverted")),
                (100 * math.sqrt(6 / 7 * 5 / 6) * math.exp(1 - 6 / 7), mistake_hint("bleu.brevity_inverted"))])
    # the brevity penalty: a short hypothesis whose every n-gram matches (p1 = p2 = 1), c = 3 < r = 6
    _bleu_case(fn, [short], [ref], 2, 100 * math.exp(1 - 6 / 3), "'a dog runs' vs 'a dog runs on the beach', max_n=2",
               [(100.0, mistake_hint("bleu.no_brevity_penalty")),
                (100 * math.exp(1 - 3 / 6), mistake_hint("bleu.brevity_inverted"))])
    # the corpus: counts summed over both sentences (the dogs sentence alone has no matching 3-gram)
    hyps, refs = [_MAN[0], _DOGS[0]], [_MAN[1], _DOGS[1]]
    expected = _bleu(_CORPUS_P, 15, 17)
    _bleu_case(fn, hyps, refs, 4, expected, "a corpus of two captions",
               [((_bleu(_MAN_P, 10, 10) + 0.0) / 2,
                 mistake_hint("bleu.sentence_average")),
                (100 * math.exp(1 - 17 / 15) * sum(_CORPUS_P) / 4, mistake_hint("bleu.arithmetic_mean")),
                (_bleu(_CORPUS_P, 15, 17, brevity=False), mistake_hint("bleu.no_brevity_penalty"))])
    # zero precisions and empty hypotheses give 0 (no smoothing)
    _bleu_case(fn, [_DOGS[0]], [_DOGS[1]], 4, 0.0, "'two dogs play in snow' (no matching 3-gram)")
    _bleu_case(fn, [["a", "cat"]], [["a", "cat", "sits"]], 4, 0.0, "'a cat' vs 'a cat sits' (no 4-gram at all)")
    with argument("corpus_bleu.max_n"):
        _bleu_case(fn, [["a", "cat"]], [["a", "cat", "sits"]], 2, 100 * math.exp(1 - 3 / 2),
                   "'a cat' vs 'a cat sits', max_n=2")
    _bleu_case(fn, [[], []], [["a", "cat"], ["a", "dog"]], 4, 0.0, "two empty hypotheses")
    with_sacrebleu = _against_sacrebleu(fn, hyps, refs)
    with edge_case("corpus_bleu.length_mismatch"):
        expect_value_error("corpus_bleu", lambda: fn([_MAN[0]], [_MAN[1], _DOGS[1]]),
                           "corpus_bleu with 1 hypothesis and 2 references should raise ValueError",
                           "check len(hypotheses) == len(references) first.")
    passed("corpus_bleu", "(clipping, the brevity penalty, the geometric mean, corpus counts, max_n, zero "
                          "precisions" + (", sacrebleu)" if with_sacrebleu else ")"))


def _against_sacrebleu(fn, hyps, refs) -> bool:
    """corpus_bleu(hyps, refs) with max_n left out equals sacrebleu's score (True), or sacrebleu is not installed
    (False)."""
    try:
        import sacrebleu
    except ImportError:
        return False
    reference = sacrebleu.corpus_bleu([" ".join(h) for h in hyps], [[" ".join(r) for r in refs]],
                                      tokenize="none", smooth_method="none", force=True).score
    got = run("corpus_bleu", fn, hyps, refs)
    if not isclose(got, reference, FORMULA_FLOAT64):
        fail(f"corpus_bleu on the two captions should equal sacrebleu's {reference:.6g}, got {got}.")
    return True
