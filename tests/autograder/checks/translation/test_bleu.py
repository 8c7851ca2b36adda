"""Hidden check of notebook 10's corpus BLEU: the reference and differently written answers pass; each known mistake
fails with its catalogue id named; broken answers fail readably; the probes' corpora do what they claim."""
from __future__ import annotations

import solutions
import variants as V
import variants_translation as X
from autograder.checks.translation import bleu as checks
from part_suite import hidden_suite

APIS = ("corpus_bleu",)
MISTAKE_PREFIXES = ("bleu.",)  # its catalogue ids
WRONG = X.of(APIS, X.WRONG)

EDGE_ONLY = [  # (api name, a correct answer that fails only this stated edge case, criterion)
    ("corpus_bleu", X.make_corpus_bleu("no_check"), "corpus_bleu.length_mismatch"),
]
ARGUMENT_ONLY = [  # (api name, a correct answer that ignores only this argument, criterion)
    ("corpus_bleu", X.ignoring(X.make_corpus_bleu(), max_n=4), "corpus_bleu.max_n"),
]
# The catalogue's mistakes that lie in an argument's non-default values: the core passes, so they keep a fraction of
# the points (the criteria they cross, and what they keep). The others get 0.
PARTIAL_MISTAKES = {
    "bleu.max_n_ignored": (("corpus_bleu.max_n",), 1 - 0.25),  # right with max_n 4 (the core), wrong with any other
}

# the tests every part runs (tests/autograder/checks/part_suite.py), with this part's data
globals().update(hidden_suite(checks, APIS, correct=X.correct(APIS), wrong=WRONG,
                              mistake_prefixes=MISTAKE_PREFIXES, partial_mistakes=PARTIAL_MISTAKES,
                              edge_only=EDGE_ONLY, edge_says=("should raise ValueError",), argument_only=ARGUMENT_ONLY))


def test_broken_answers_fail_readably():
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
