"""coursekit.bpe: byte-pair encoding on a corpus small enough to run by hand.

The corpus is Sennrich et al.'s example, {"low": 5, "lower": 2, "newest": 6, "widest": 3}. The expected merges below
are worked out in the comments, pair by pair, from the counts of the corpus (ties: alphabetical order of the pair).
"""
from __future__ import annotations

import pytest

from coursekit.bpe import (END_OF_WORD, Merge, bpe_vocabulary, learn_bpe, merge_pair, pair_counts, segment,
                           segment_all, spell)

E = END_OF_WORD
CORPUS = {"low": 5, "lower": 2, "newest": 6, "widest": 3}
LOW, LOWER, NEWEST, WIDEST = 5, 2, 6, 3

# Start: low = l o w </w>, lower = l o w e r </w>, newest = n e w e s t </w>, widest = w i d e s t </w>.
HAND_MERGES = [
    # (e,s), (s,t) and (t,</w>) each occur in newest and widest: 6 + 3; (l,o) and (o,w) only 5 + 2; (w,e) 2 + 6.
    # Three-way tie at 9: alphabetically "e" < "s" < "t", so (e, s) wins.
    Merge("e", "s", NEWEST + WIDEST),
    # Now (es,t) and (t,</w>) tie at 6 + 3; "es" < "t".
    Merge("es", "t", NEWEST + WIDEST),
    Merge("est", E, NEWEST + WIDEST),
    # (l,o) and (o,w) tie at 5 + 2 (w,e lost its "e" of newest to "est</w>": only lower's 2 are left).
    Merge("l", "o", LOW + LOWER),
    Merge("lo", "w", LOW + LOWER),
    # low = low </w>; lower = low e r </w>; newest = n e w est</w>; widest = w i d est</w>.
    # (n,e), (e,w) and (w,est</w>) tie at 6, above (low,</w>) at 5: "e" < "n" < "w".
    Merge("e", "w", NEWEST),
    # newest = n ew est</w>: (ew,est</w>) and (n,ew) tie at 6; "ew" < "n".
    Merge("ew", "est" + E, NEWEST),
    Merge("n", "ewest" + E, NEWEST),
    Merge("low", E, LOW),
    # Left: (w,i), (i,d), (d,est</w>) at 3 and (low,e), (e,r), (r,</w>) at 2; "d" < "i" < "w".
    Merge("d", "est" + E, WIDEST),
]


def test_spell_splits_into_characters_and_marks_the_end():
    assert spell("low") == ("l", "o", "w", E)
    with pytest.raises(ValueError, match="empty"):
        spell("")
    with pytest.raises(TypeError, match="str"):
        spell(3)


def test_pair_counts_weight_each_word_by_its_count():
    counts = pair_counts({spell(w): n for w, n in CORPUS.items()})
    assert counts[("l", "o")] == LOW + LOWER
    assert counts[("w", "e")] == LOWER + NEWEST
    assert counts[("e", "s")] == NEWEST + WIDEST
    assert counts[("r", E)] == LOWER
    assert ("o", "l") not in counts


def test_merge_pair_scans_from_the_left_without_overlap():
    assert merge_pair(("a", "a", "a"), "a", "a") == ("aa", "a")
    assert merge_pair(("a", "a", "a", "a"), "a", "a") == ("aa", "aa")
    assert merge_pair(("l", "o", "w", "l", "o"), "l", "o") == ("lo", "w", "lo")
    assert merge_pair(("a", "b"), "b", "a") == ("a", "b")


def test_learned_merges_match_the_hand_computation():
    assert learn_bpe(CORPUS, num_merges=len(HAND_MERGES)) == HAND_MERGES
    assert learn_bpe(CORPUS, num_merges=3) == HAND_MERGES[:3]
    assert [m.symbol for m in HAND_MERGES[:3]] == ["es", "est", "est" + E]


def test_learning_does_not_depend_on_the_order_of_the_words():
    reordered = dict(reversed(list(CORPUS.items())))
    assert learn_bpe(reordered, 10) == learn_bpe(CORPUS, 10)


def test_learning_stops_when_every_word_is_one_symbol():
    # "ab" -> (a, b, </w>): merge (a,b), then (ab,</w>); then nothing is left to merge.
    assert learn_bpe({"ab": 4}, num_merges=5) == [Merge("a", "b", 4), Merge("ab", E, 4)]
    assert learn_bpe({"ab": 4}, num_merges=0) == []


def test_segment_reproduces_the_training_words():
    # The state of the corpus after the ten hand merges (see the comments of HAND_MERGES).
    assert segment("low", HAND_MERGES) == ["low" + E]
    assert segment("lower", HAND_MERGES) == ["low", "e", "r", E]
    assert segment("newest", HAND_MERGES) == ["newest" + E]
    assert segment("widest", HAND_MERGES) == ["w", "i", "dest" + E]


def test_segment_splits_a_new_word_into_known_pieces():
    # lowest: l o w e s t </w> -> (e,s) -> (es,t) -> (est,</w>) -> (l,o) -> (lo,w); (low, est</w>) was never learned.
    assert segment("lowest", HAND_MERGES) == ["low", "est" + E]
    assert segment("lowest", [(m.left, m.right) for m in HAND_MERGES]) == ["low", "est" + E]  # plain pairs work too
    for word in ("lowest", "slow", "wider", "zoo"):
        assert "".join(segment(word, HAND_MERGES)) == word + E  # nothing is lost or added


def test_segment_with_no_merges_gives_characters():
    assert segment("newest", []) == ["n", "e", "w", "e", "s", "t", E]


def test_characters_outside_the_alphabet_stay_single_and_are_not_in_the_vocabulary():
    vocabulary = bpe_vocabulary(CORPUS, HAND_MERGES)
    assert segment("zoo", HAND_MERGES) == ["z", "o", "o", E]
    assert "z" not in vocabulary and "o" in vocabulary


def test_segment_all_concatenates_the_words():
    assert segment_all(["low", "lowest", "low"], HAND_MERGES) == ["low" + E, "low", "est" + E, "low" + E]


def test_vocabulary_is_the_alphabet_then_each_new_symbol():
    alphabet = sorted(set("low" + "lower" + "newest" + "widest") | {E})
    assert len(alphabet) == 11  # d e i l n o r s t w and </w>
    vocabulary = bpe_vocabulary(CORPUS, HAND_MERGES)
    assert vocabulary == alphabet + [m.symbol for m in HAND_MERGES]
    # two different pairs can spell the same symbol: it is counted once
    assert bpe_vocabulary({"abc": 1}, [("a", "bc"), ("ab", "c")]).count("abc") == 1


@pytest.mark.parametrize("num_merges", [-1, 1.5, True, "3"])
def test_bad_number_of_merges_is_refused(num_merges):
    with pytest.raises(ValueError, match="num_merges"):
        learn_bpe(CORPUS, num_merges)


def test_bad_corpus_is_refused():
    with pytest.raises(ValueError, match="positive"):
        learn_bpe({"low": 0}, 3)
    with pytest.raises(ValueError, match="empty"):
        learn_bpe({"": 2}, 3)
    with pytest.raises(TypeError, match="mapping"):
        learn_bpe(["low", "lower"], 3)
    with pytest.raises(TypeError, match="merge"):
        segment("low", ["lo"])
