"""Byte-pair encoding (BPE), small and in pure Python, to show how sub-word vocabularies are learned.

The algorithm of Sennrich et al. (2016), on characters:

1. spell every word as its characters plus an end-of-word symbol: "low" -> ("l", "o", "w", "</w>");
2. count every pair of neighbouring symbols over the corpus (a word seen 5 times counts 5 times);
3. merge the most frequent pair into one new symbol everywhere ("l" + "o" -> "lo"); ties go to the pair that comes
   first in alphabetical order, so the result is the same on every machine;
4. repeat 2-3 `num_merges` times. The merges, in the order they were learned, are the tokenizer.

A new word is split by the same merges: spell it as characters, then repeatedly merge the neighbouring pair that was
learned earliest (what GPT-2's tokenizer does), until no learned pair is left. A word is never unknown, as long as
its characters are in the alphabet; GPT-2 starts from the 256 byte values instead of characters, so even that holds.

    >>> merges = learn_bpe({"low": 5, "lower": 2}, num_merges=2)
    >>> [m.symbol for m in merges]
    ['lo', 'low']
    >>> segment("lowest", merges)
    ['low', 'e', 's', 't', '</w>']
"""
from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping
from typing import NamedTuple

__all__ = ["END_OF_WORD", "Merge", "spell", "pair_counts", "merge_pair", "learn_bpe", "segment", "segment_all",
           "bpe_vocabulary"]

END_OF_WORD = "</w>"  # marks the last symbol of a word, so "st</w>" (word end) differs from "st" (inside a word)


class Merge(NamedTuple):
    """One learned merge: the pair (left, right) became the symbol left + right; `count` is how often the pair
    occurred in the corpus when it was chosen."""
    left: str
    right: str
    count: int

    @property
    def symbol(self) -> str:
        return self.left + self.right


def _check_word(word) -> str:
    if not isinstance(word, str):
        raise TypeError(f"a word must be a str, got {type(word).__name__}")
    if not word:
        raise ValueError("a word must not be empty")
    return word


def spell(word: str) -> tuple[str, ...]:
    """The word as single characters plus the end-of-word symbol: "low" -> ("l", "o", "w", "</w>")."""
    return (*_check_word(word), END_OF_WORD)


def pair_counts(spelled: Mapping[tuple[str, ...], int]) -> Counter:
    """Counter (left, right) -> how often the two symbols stand side by side, each word weighted by its count."""
    counts = Counter()
    for symbols, count in spelled.items():
        for pair in zip(symbols, symbols[1:]):
            counts[pair] += count
    return counts


def merge_pair(symbols: tuple[str, ...], left: str, right: str) -> tuple[str, ...]:
    """Replace every (left, right) neighbour pair by one symbol, scanning from the left:
    ("a", "a", "a") with ("a", "a") -> ("aa", "a")."""
    merged, i = [], 0
    while i < len(symbols):
        if i + 1 < len(symbols) and symbols[i] == left and symbols[i + 1] == right:
            merged.append(left + right)
            i += 2
        else:
            merged.append(symbols[i])
            i += 1
    return tuple(merged)


def learn_bpe(word_counts: Mapping[str, int], num_merges: int) -> list[Merge]:
    """Learn up to `num_merges` merges from word counts {word: how often it occurs}, most frequent pair first.

    Stops early when every word is a single symbol (nothing is left to merge).
    """
    if isinstance(num_merges, bool) or not isinstance(num_merges, int) or num_merges < 0:
        raise ValueError(f"num_merges must be a non-negative int, got {num_merges!r}")
    if not isinstance(word_counts, Mapping):
        raise TypeError(f"word_counts must be a mapping word -> count (a dict, a Counter), "
                        f"got {type(word_counts).__name__}")
    spelled = {}
    for word, count in word_counts.items():
        if isinstance(count, bool) or not isinstance(count, int) or count < 1:
            raise ValueError(f"the count of {word!r} must be a positive int, got {count!r}")
        spelled[spell(word)] = count
    merges = []
    for _ in range(num_merges):
        counts = pair_counts(spelled)
        if not counts:
            break
        (left, right), count = min(counts.items(), key=lambda item: (-item[1], item[0]))  # most frequent, then a-z
        merges.append(Merge(left, right, count))
        spelled = {merge_pair(symbols, left, right): n for symbols, n in spelled.items()}
    return merges


def _ranks(merges: Iterable[Merge | tuple[str, str]]) -> dict[tuple[str, str], int]:
    """(left, right) -> the position of its merge in the learned order (the earliest one, if learned twice)."""
    ranks = {}
    for rank, merge in enumerate(merges):
        if not (isinstance(merge, tuple) and len(merge) >= 2 and isinstance(merge[0], str)
                and isinstance(merge[1], str)):
            raise TypeError(f"a merge is a Merge or a (left, right) pair of str, got {merge!r}")
        ranks.setdefault((merge[0], merge[1]), rank)
    return ranks


def _segment(word: str, ranks: Mapping[tuple[str, str], int]) -> list[str]:
    symbols = spell(word)
    while len(symbols) > 1:
        known = [pair for pair in zip(symbols, symbols[1:]) if pair in ranks]
        if not known:
            break
        left, right = min(known, key=ranks.__getitem__)
        symbols = merge_pair(symbols, left, right)
    return list(symbols)


def segment(word: str, merges: Iterable[Merge | tuple[str, str]]) -> list[str]:
    """Split one word into sub-word symbols with the learned merges, earliest-learned pair first.

    The last symbol carries the end-of-word mark: segment("lower", ...) may give ["low", "er</w>"].
    """
    return _segment(word, _ranks(merges))


def segment_all(words: Iterable[str], merges: Iterable[Merge | tuple[str, str]]) -> list[str]:
    """The symbols of a list of words (e.g. the tokens of one review), one word after the other."""
    ranks = _ranks(merges)
    cache: dict[str, list[str]] = {}
    symbols = []
    for word in words:
        if word not in cache:
            cache[word] = _segment(word, ranks)
        symbols.extend(cache[word])
    return symbols


def bpe_vocabulary(word_counts: Iterable[str], merges: Iterable[Merge | tuple[str, str]]) -> list[str]:
    """Every symbol the tokenizer can produce: the alphabet of the training words (sorted, end-of-word mark
    included), then each merged symbol once, in the order it was learned."""
    alphabet = sorted({symbol for word in word_counts for symbol in spell(word)})
    vocabulary = dict.fromkeys(alphabet)
    for left, right in _ranks(merges):  # in the learned order (a dict keeps it)
        vocabulary.setdefault(left + right)
    return list(vocabulary)
