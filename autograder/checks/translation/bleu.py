"""Hidden check of notebook 10's corpus BLEU: `check_corpus_bleu`.

Judged here, in the grader's process, against `sacrebleu` at max_n 4 (sacrebleu's) and the reference
(`solutions.translation`) at the other max_n. The corpora, their words and the max_n of the cases that do not need
max_n 4 are this submission's (autograder/checks/kit/draws.py), drawn with `pick` / `sample` from the spaces
documented at each draw, whose first option is the value used with no salt.

The core leaves max_n at its default (left out or passed 4); the corpora scored with another max_n (the argument with
teeth, coursekit/criteria.py) run in its `argument` block, so an answer that ignores max_n only fails that criterion.
"""
from __future__ import annotations

import contextlib
import random

from autograder.checks.kit.criteria import argument
from autograder.checks.kit.draws import pick, sample, seed_for
from autograder.checks.kit.inputs import reference
from autograder.checks.kit.remote import hidden_check
from autograder.checks.kit.toolkit import call, expect_callable, expect_raises, expected_got, fail, start_check
from autograder.checks.translation.common import as_float, close64, first, known_mistakes

BLEU_SEED = 175


WORDS = ("a", "dog", "the", "runs", "in", "park", "red", "ball",   # the words with no salt: the first 8
         "man", "on", "street", "girl", "blue", "shirt", "water", "two", "with", "jumps", "at", "woman")
VOCABULARY = 8           # words of the corpora, sampled from WORDS (never "zebra": a word no reference holds)


def bleu_probes(seed: int) -> list[tuple[list[list[str]], list[list[str]], int | None]]:
    """(hypotheses, references, max_n or None = left out) on corpora of a small vocabulary: hypotheses shorter than
    their references (the brevity penalty) and longer, repeated words beyond the reference's count (clipping),
    corpora whose 3- and 4-gram precision is 0 (BLEU 0 at max_n 4, not at max_n 2), empty hypotheses, one
    sentence, a perfect corpus; max_n 1 to 4. The words, the corpora and the max_n of the cases that do not need
    max_n 4 (sacrebleu's) are this submission's."""
    draw = random.Random(seed_for(seed))
    words = sample("translation.bleu.words", WORDS, VOCABULARY)

    def sentence(length):
        return [draw.choice(words) for _ in range(length)]

    def max_n(label, value, options=(1, 2, 3)):
        return pick(f"translation.bleu.max_n.{label}", first(value, options))

    refs = [sentence(draw.randint(5, 10)) for _ in range(6)]
    shorter = [r[:len(r) - draw.randint(1, 3)] for r in refs]                      # c < r
    shorter[0] = shorter[0] + [shorter[0][0]] * 3                                  # repeats beyond the reference
    longer = [r + sentence(draw.randint(1, 3)) for r in refs]                      # c > r
    longer[1] = [refs[1][1]] * 4 + longer[1]
    edited = [[w if draw.random() < 0.75 else draw.choice(words) for w in r] for r in refs]
    pairs = [r[:2] + ["zebra"] + r[3:5] + ["zebra"] for r in refs]                   # no 3-gram can match
    other = [sentence(draw.randint(3, 9)) for _ in range(5)]
    other_refs = [sentence(draw.randint(4, 9)) for _ in range(5)]
    one = [words[2]] * 6                                                              # clipped to the reference's 3
    cases = [(shorter, refs, None), (longer, refs, 4), (edited, refs, 4), (pairs, refs, 4),
             (pairs, refs, max_n("pairs", 2, (1, 2))),                                # no 3-gram: > 0 at max_n <= 2
             (shorter, refs, max_n("shorter", 2)), (longer, refs, max_n("longer", 3)),
             (edited, refs, max_n("edited", 1)), (other, other_refs, 4), (other, other_refs, max_n("other", 1)),
             ([[] for _ in refs], refs, 4), ([[]] + shorter[1:], refs, 4), ([shorter[2]], [refs[2]], 4),
             ([one], [[words[2], words[1], words[4], words[2], words[5], words[2]]], max_n("one", 1, (1, 2))),
             (refs, refs, 4)]
    return [([list(h) for h in hyps], [list(r) for r in references], max_n) for hyps, references, max_n in cases]


def length_mismatches() -> list[tuple[list[list[str]], list[list[str]]]]:
    """(hypotheses, references) of different lengths, this submission's: more hypotheses than references (3 and 2
    with no salt), then fewer; never an empty list (an early return for it would hide the comparison)."""
    more, fewer = pick("translation.bleu.mismatch", [(3, 2), (2, 1), (4, 2), (3, 1), (5, 3), (4, 3)])
    words = sample("translation.bleu.mismatch.words", WORDS, 5)
    sentences = [[word] for word in words[:more]]
    return [([list(s) for s in sentences], [list(s) for s in sentences[:fewer]]),
            ([list(s) for s in sentences[:fewer]], [list(s) for s in sentences])]


def _bleu_block(max_n: int | None):
    """The criterion block of one corpus: the core (max_n left out or 4, its default), or the argument max_n."""
    return contextlib.nullcontext() if max_n in (None, 4) else argument("corpus_bleu.max_n")


def _sacrebleu(hypotheses, references) -> float:
    import sacrebleu

    return sacrebleu.corpus_bleu([" ".join(h) for h in hypotheses], [[" ".join(r) for r in references]],
                                 tokenize="none", smooth_method="none", force=True).score


@hidden_check
def check_corpus_bleu(corpus_bleu) -> None:
    """corpus_bleu(hypotheses, references, max_n=4) -> corpus BLEU in [0, 100], equal to sacrebleu's."""
    start_check()
    solution = reference("translation")
    expect_callable(corpus_bleu, "corpus_bleu")
    runs = []
    # every call first (one corpus alone may not tell two known mistakes apart), then the verdicts in order
    for hypotheses, references, max_n in bleu_probes(BLEU_SEED):
        c, r = sum(map(len, hypotheses)), sum(map(len, references))
        tested = (f"corpus_bleu({len(hypotheses)} hypotheses of {c} tokens in all, references of {r}"
                  + ("" if max_n is None else f", max_n={max_n}") + ")")
        extra = () if max_n is None else (max_n,)
        with _bleu_block(max_n):
            got = as_float(call("corpus_bleu", corpus_bleu, [list(h) for h in hypotheses],
                                [list(x) for x in references], *extra, tested=tested), "corpus_bleu", tested)
            runs.append((hypotheses, references, max_n or 4, got, tested))
    # each known mistake's score of every corpus, computed corpus by corpus (stopping at the first that differs)
    rows = known_mistakes("bleu.", lambda variant, switches: (variant(h, x, n, **switches) for h, x, n, _g, _t in runs))

    def verdict(hypotheses, references, max_n, got, tested):
        if max_n == 4:
            expected, source = _sacrebleu(hypotheses, references), "sacrebleu.corpus_bleu"
        else:
            expected, source = solution.corpus_bleu(hypotheses, references, max_n), "the reference solution"
        if close64(got, expected):
            return
        mistake = next((m for m, produce in rows
                        if all(close64(g, score) for (_h, _x, _n, g, _t), score in zip(runs, produce()))), None)
        fail(f"corpus_bleu: the score differs from {source}.", tested=tested,
             details=expected_got(f"{expected:.6f}", f"{got:.6f}"), mistake=mistake)

    for hypotheses, references, max_n, got, tested in runs:
        with _bleu_block(max_n):
            verdict(hypotheses, references, max_n, got, tested)
    for hypotheses, references in length_mismatches():
        expect_raises(ValueError, f"corpus_bleu({len(hypotheses)} hypotheses, {len(references)} references)",
                      corpus_bleu, hypotheses, references, why="when the two lists differ in length",
                      criterion="corpus_bleu.length_mismatch")
