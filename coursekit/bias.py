"""Two offline bias probes for a trained review classifier and its word vectors (notebook 07).

* Counterfactual probes: the same review with one slot filled by different words (names, pronouns, cuisines,
  neighbourhoods). A fair rating model gives every version the same score; `counterfactual_shifts` measures how far
  each word moves the score away from the mean of its group, and `vocabulary_status` says which words the model
  can see at all (a word outside the vocabulary becomes `<unk>`, so every such word gives the same ids).
* Word-embedding association tests in the spirit of WEAT (Caliskan, Bryson and Narayanan, Science 2017): do the
  vectors of target words X sit closer to attribute words A than the vectors of target words Y do?
  `weat` returns Caliskan et al.'s effect size and a one-sided permutation p-value.

Nothing here downloads anything or imports the reference solutions; pandas is imported only by
`counterfactual_shifts`.
"""
from __future__ import annotations

import itertools
import math
import random
from dataclasses import dataclass
from typing import Callable, Mapping, Sequence

import numpy as np

from .text import tokenize

__all__ = ["vocabulary_status", "fill", "counterfactual_shifts", "association", "weat_effect_size", "weat",
           "WeatResult", "missing_words"]

SLOT = "{}"


# --------------------------------------------------------------------------------------- counterfactual probes
def vocabulary_status(word: str, vocab: Mapping[str, int]) -> str:
    """'known' when every token of `word` is in `vocab`, 'unknown' when none is, else 'partly known'."""
    tokens = tokenize(word)
    if not tokens:
        raise ValueError(f"{word!r} has no tokens")
    known = sum(token in vocab for token in tokens)
    return "known" if known == len(tokens) else "unknown" if known == 0 else "partly known"


def fill(template: str, word: str) -> str:
    """The template with its one `{}` slot replaced by `word` (capitalised at the start of a sentence)."""
    if template.count(SLOT) != 1:
        raise ValueError(f"a probe template needs exactly one {SLOT} slot: {template!r}")
    start = template.index(SLOT)
    if start == 0 or template[:start].rstrip().endswith((".", "!", "?")):
        word = word[:1].upper() + word[1:]
    return template.replace(SLOT, word)


def counterfactual_shifts(score: Callable[[list[str]], Sequence[float]], probes: Mapping[str, tuple],
                          vocab: Mapping[str, int]):
    """A pandas DataFrame with one row per (group, template, word).

    score: texts -> one number per text (e.g. the expected number of stars).
    probes: group name -> (templates, words); each template has one `{}` slot that each word fills.
    Columns: group, template (its index in the group), text, word, status (vocabulary_status), score, and shift:
    the score minus the mean score of the group's words in the same template (0 for every word when the model
    rates them all alike).
    """
    import pandas as pd

    rows = []
    for group, (templates, words) in probes.items():
        if len(words) < 2 or not templates:
            raise ValueError(f"probe group {group!r} needs at least one template and two words")
        statuses = {word: vocabulary_status(word, vocab) for word in words}
        for index, template in enumerate(templates):
            texts = [fill(template, word) for word in words]
            scores = [float(value) for value in score(texts)]
            if len(scores) != len(texts):
                raise ValueError(f"score returned {len(scores)} values for {len(texts)} texts")
            mean = sum(scores) / len(scores)
            rows += [{"group": group, "template": index, "text": text, "word": word, "status": statuses[word],
                      "score": value, "shift": value - mean}
                     for text, word, value in zip(texts, words, scores)]
    return pd.DataFrame(rows)


# --------------------------------------------------------------------------------------- association tests
def missing_words(words: Sequence[str], vectors) -> list[str]:
    """The words that have no vector in `vectors` (gensim KeyedVectors or a word -> vector mapping)."""
    return [word for word in words if word not in vectors]


def _unit_matrix(words: Sequence[str], vectors) -> np.ndarray:
    missing = missing_words(words, vectors)
    if missing:
        raise KeyError(f"no vector for {missing}: drop them or train the vectors on text that has them")
    matrix = np.stack([np.asarray(vectors[word], dtype=np.float64) for word in words])   # (n, d)
    norms = np.linalg.norm(matrix, axis=1, keepdims=True)
    if (norms == 0).any():
        raise ValueError("a word vector is all zeros: its cosine similarity is undefined")
    return matrix / norms


def association(words: Sequence[str], A: Sequence[str], B: Sequence[str], vectors) -> np.ndarray:
    """s(w, A, B) for each w: mean cosine similarity with the words of A minus that with the words of B."""
    W, UA, UB = (_unit_matrix(group, vectors) for group in (words, A, B))
    return (W @ UA.T).mean(axis=1) - (W @ UB.T).mean(axis=1)                             # (len(words),)


def weat_effect_size(X: Sequence[str], Y: Sequence[str], A: Sequence[str], B: Sequence[str], vectors) -> float:
    """Caliskan et al.'s d: (mean s(x) over X - mean s(y) over Y) / standard deviation of s(w) over X and Y.

    The standard deviation is the sample one (ddof=1) of the associations of all |X| + |Y| target words.
    """
    _check_sets(X, Y, A, B)
    s = association(list(X) + list(Y), A, B, vectors)
    return _effect_size(s, len(X))


def _effect_size(s: np.ndarray, size_x: int) -> float:
    spread = s.std(ddof=1)
    if spread == 0:
        return 0.0
    return float((s[:size_x].mean() - s[size_x:].mean()) / spread)


def _check_sets(X, Y, A, B) -> None:
    for name, group in (("X", X), ("Y", Y), ("A", A), ("B", B)):
        if isinstance(group, str) or len(group) < 1:
            raise ValueError(f"{name} must be a non-empty list of words, got {group!r}")
    if set(X) & set(Y):
        raise ValueError(f"X and Y share words: {sorted(set(X) & set(Y))}")
    if len(X) + len(Y) < 3:
        raise ValueError("X and Y need three words together to have a spread")


@dataclass(frozen=True)
class WeatResult:
    effect_size: float     # Caliskan et al.'s d (about -2..2)
    p_value: float         # one-sided: share of equal-size re-partitions of X + Y with a statistic >= the observed
    statistic: float       # S = sum over X of s(x, A, B) - sum over Y of s(y, A, B)
    partitions: int        # how many re-partitions the p-value counts
    exact: bool            # True when every re-partition was counted, False when they were sampled
    associations: dict     # word -> s(word, A, B), for X and Y


def weat(X: Sequence[str], Y: Sequence[str], A: Sequence[str], B: Sequence[str], vectors,
         max_partitions: int = 100_000, seed: int = 0) -> WeatResult:
    """Effect size and permutation p-value of the association of X (vs Y) with A (vs B).

    The p-value is the share of ways of splitting X + Y into two sets of sizes |X| and |Y| whose statistic is at
    least the observed one. All C(|X| + |Y|, |X|) splits are counted when there are at most `max_partitions`
    (then the smallest possible p-value is 1 / C(...), e.g. 0.1 for 3 + 2 words); otherwise `max_partitions`
    random splits are drawn with `seed` and the observed split is counted once more, (k + 1) / (n + 1).
    """
    _check_sets(X, Y, A, B)
    targets = list(X) + list(Y)
    s = association(targets, A, B, vectors)                                              # (|X| + |Y|,)
    n, size_x = len(targets), len(X)
    total = s.sum()

    def statistic(x_indices) -> float:
        in_x = s[list(x_indices)].sum()
        return float(in_x - (total - in_x))

    observed = statistic(range(size_x))
    tolerance = 1e-12 * max(1.0, abs(observed))
    count = math.comb(n, size_x)
    if count <= max_partitions:
        at_least = sum(statistic(c) >= observed - tolerance for c in itertools.combinations(range(n), size_x))
        p_value, partitions, exact = at_least / count, count, True
    else:
        rng = random.Random(seed)
        at_least = sum(statistic(rng.sample(range(n), size_x)) >= observed - tolerance
                       for _ in range(max_partitions))
        p_value, partitions, exact = (at_least + 1) / (max_partitions + 1), max_partitions, False
    return WeatResult(effect_size=_effect_size(s, size_x), p_value=float(p_value), statistic=observed,
                      partitions=partitions, exact=exact, associations=dict(zip(targets, s.tolist())))
