"""Public self-checks of notebook 08's byte-level BPE: `train_bpe`, `bpe_encode`, `bpe_decode`, on small texts worked
out by hand and by round trips (an independent encoder written here)."""
from __future__ import annotations

import math

from coursekit.checks.toolkit import expect_type, fail, mistake_hint, passed, run
from coursekit.criteria import edge_case

_A, _B, _C, _D = (ord(c) for c in "abcd")


def _as_pairs(merges, name):
    if not isinstance(merges, list) or not all(isinstance(p, tuple) and len(p) == 2 for p in merges):
        fail(f"{name} should return a list of (int, int) tuples, got {type(merges).__name__} "
             f"{str(merges)[:60]}.", "append each merged pair as a tuple: merges.append(pair)")
    return merges


def check_train_bpe(train_bpe) -> None:
    # "aaabdaaabac": aa occurs 4 times -> 256; then (256, a) and (a, b) both occur twice and (256, a) comes first
    # -> 257; then (257, b) -> 258; then every pair occurs once, so training stops after 3 merges.
    got = _as_pairs(run("train_bpe", train_bpe, "aaabdaaabac", 10), "train_bpe")
    worked = [(_A, _A), (256, _A), (257, _B)]
    if got != worked:
        hint = None
        if len(got) > 3 and got[:3] == worked:
            hint = mistake_hint("bpe.no_early_stop")
        elif got[:1] == [(_A, _A)] and len(got) > 1 and got[1] == (256, 256):
            hint = mistake_hint("bpe.merge_overlapping")
        elif got[:1] == [(_A, _A)] and len(got) > 1 and got[1] == (_A, _B):
            hint = mistake_hint("bpe.ties")
        elif got[:1] == [(_A, _A)] and len(got) > 1 and got[1][0] != 256:
            hint = mistake_hint("bpe.new_id")
        fail(f"train_bpe('aaabdaaabac', 10) should give {worked}, got {got}.", hint)
    # ties: "cdcd abab" -> (c, d) comes first although (a, b) is smaller
    got = _as_pairs(run("train_bpe", train_bpe, "cdcd abab", 1), "train_bpe")
    if got != [(_C, _D)]:
        fail(f"train_bpe('cdcd abab', 1) should give [(99, 100)], got {got}.",
             mistake_hint("bpe.ties"))
    # overlapping counts: in "aaa-bcbc" aa is counted twice (positions 0 and 1), as often as bc; aa comes first
    got = _as_pairs(run("train_bpe", train_bpe, "aaa-bcbc", 1), "train_bpe")
    if got != [(_A, _A)]:
        fail(f"train_bpe('aaa-bcbc', 1) should give [(97, 97)], got {got}.",
             mistake_hint("bpe.count_without_overlap"))
    # "aaaa" -> [256, 256] after the first merge (left to right without overlap), then nothing repeats
    got = _as_pairs(run("train_bpe", train_bpe, "aaaa", 5), "train_bpe")
    if got != [(_A, _A)]:
        fail(f"train_bpe('aaaa', 5) should give [(97, 97)], got {got}.",
             mistake_hint("bpe.merge_overlapping") if len(got) > 1 else None)
    if run("train_bpe", train_bpe, "abcdef", 3) != []:
        fail("train_bpe('abcdef', 3) should give [] (no pair occurs twice).",
             mistake_hint("bpe.no_early_stop"))
    with edge_case("train_bpe.empty_text"):
        for text in ("", "a"):
            got = run("train_bpe", train_bpe, text, 3)
            if got != []:
                fail(f"train_bpe({text!r}, 3) should give [] (a text of fewer than two bytes has no pair), got "
                     f"{got}.", "stop as soon as there is no pair to count (an empty Counter has no max).")
    passed("train_bpe", "(a worked example, ties, overlapping pairs, early stop, a text without pairs)")


def _lowest_rank_encode(text, merges):
    """An independent encoder: repeatedly merge the present pair with the lowest rank."""
    rank = {tuple(pair): k for k, pair in enumerate(merges)}
    ids = list(text.encode("utf-8"))
    while len(ids) >= 2:
        pair = min(zip(ids, ids[1:]), key=lambda p: rank.get(p, math.inf))
        if pair not in rank:
            break
        out, i = [], 0
        while i < len(ids):
            if i + 1 < len(ids) and (ids[i], ids[i + 1]) == pair:
                out.append(256 + rank[pair])
                i += 2
            else:
                out.append(ids[i])
                i += 1
        ids = out
    return ids


_MERGES = [(_A, _A), (256, _A), (257, _B), (0xC3, 0xA9), (ord("t"), ord("h")), (260, ord("e"))]  # ..., "é", "the"
_TEXTS = ("aaabdaaabac", "the café", "naïve café — 日本語", "", "aaaaa")


def check_bpe_encode(bpe_encode) -> None:
    for text in _TEXTS:
        got = run("bpe_encode", bpe_encode, text, _MERGES)
        expect_type(got, list, f"bpe_encode({text!r}, merges)", "return a list of ints.")
        expected = _lowest_rank_encode(text, _MERGES)
        if got != expected:
            hint = None
            if any(ord(c) in got for c in text if ord(c) > 127):
                hint = mistake_hint("bpe.encode_characters")
            elif text == "aaabdaaabac":
                hint = mistake_hint("bpe.encode_order")
            fail(f"bpe_encode({text!r}, merges) should give {expected}, got {got}.", hint)
    # the order learned, not the frequency in the text: (b, c) was learned before (a, b), which is commoner here
    merges = [(_B, _C), (_A, _B), (_C, _A)]
    got = run("bpe_encode", bpe_encode, "abcabab", merges)
    expected = _lowest_rank_encode("abcabab", merges)                     # [97, 256, 257, 257]
    if got != expected:
        fail(f"bpe_encode('abcabab', {merges}) should give {expected}, got {got}.",
             mistake_hint("bpe.encode_most_frequent")
             if got == [257, 99, 257, 257] else None)
    passed("bpe_encode", "(ASCII and non-ASCII texts, merges applied in the order learned)")


def check_bpe_decode(bpe_decode) -> None:
    for text in _TEXTS:
        ids = _lowest_rank_encode(text, _MERGES)
        got = run("bpe_decode", bpe_decode, ids, _MERGES)
        if got != text:
            hint = None
            if "\ufffd" in str(got):
                hint = mistake_hint("bpe.decode_per_token")
            elif isinstance(got, str) and len(got) > len(text):
                hint = mistake_hint("bpe.decode_latin1")
            fail(f"bpe_decode(bpe_encode({text!r}, merges), merges) should give back {text!r}, got {got!r}.", hint)
    got = run("bpe_decode", bpe_decode, [0xE6, 0x97], [])
    if got != "\ufffd":
        fail(f"bpe_decode([0xE6, 0x97], []) (half of a character) should give '\\ufffd', got {got!r}.",
             "decode with errors='replace' so that invalid bytes never raise.")
    passed("bpe_decode", "(round trips, including characters that span several bytes)")
