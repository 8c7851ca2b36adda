"""Hidden checks of notebook 08's byte-level BPE: `train_bpe`, `bpe_encode`, `bpe_decode`.

Each is run on texts drawn for the submission (repeats, ties, overlapping runs, non-ASCII characters), completed until
every known mistake (`mistakes.TABLE`) shows and no two are confused, and compared with the reference
(`solutions.gpt`).
"""
from __future__ import annotations

import functools
from collections import Counter

import torch

from autograder.checks.gpt import mistakes as M
from autograder.checks.gpt.mistakes import merge_pair
from autograder.checks.kit.compare import candidates, from_table, is_integer
from autograder.checks.kit.criteria import edge_case
from autograder.checks.kit.draws import pick, rng, sample
from autograder.checks.kit.inputs import reference
from autograder.checks.kit.remote import hidden_check
from autograder.checks.kit.toolkit import call, expected_got, fail, start_check

# Every input below is drawn for the submission (autograder/checks/kit/draws.py): each space lists today's value first
# (what a salt of 0 probes with) and keeps the property its case was chosen for; a case chosen to reveal a known
# mistake is kept revealing by drawing until it does (bounded), else falling back to the written case.

# Texts the BPE checks train and encode on: repeats, ties, overlapping runs and non-ASCII characters.
BPE_TRAIN = ("abab cdcd aaaa-bcbc the theme then there; naïve café, naïve café 日本 日本 "
             "To be, or not to be: that is the question. ") * 3
BPE_TRAIN_POOL = (
    BPE_TRAIN,
    ("Now is the winter of our discontent made glorious summer; aaa-bbb abab naïve naïve 東京 東京 ") * 3,
    ("All the world's a stage, and all the men and women merely players: cdcd ccc-dd über über 日本語 ") * 3,
    ("Friends, Romans, countrymen, lend me your ears; xyxy zzzz-yz café crème café 中文 中文 ") * 3,
    ("If music be the food of love, play on; mnmn oooo-pn fiancée fiancée ñandú 日本 日本 ") * 3,
)
BPE_TEXTS = ("aaabdaaabac", "cdcd abab", "aaa-bcbc", "the theme of the thesis", "naïve café — 日本語 🤖", "", "é",
             "To be, or not to be")
BPE_TEXT_POOL = BPE_TEXTS + (
    "Now is the winter", "über-naïve crème brûlée", "東京 and 日本 — ok", "zzz-zyzy the then", "mnmnm oooo",
    "¿Qué tal? ñandú 🦙", "all the world's a stage", "ab", "Ω≈ç√∫ 42", "thethethe", "café café café",
    "players: 日本 日本", "xyxyx aaab", "O Romeo, Romeo!", "ḿ ẘ ÿ", "a")
# bpe_encode with merges learned in an order that the pairs' frequencies in the text contradict: merge 0 is (b, c),
# merge 1 is (a, b); in "abcabab" (a, b) occurs 3 times and (b, c) once, so applying the most frequent pair first
# gives other ids than the order learned. Drawn: other texts over {a, b, c} with that property, and the three
# letters relabelled (which changes no count, no order and no tie).
ENCODE_ORDER_MERGES = [(98, 99), (97, 98), (99, 97)]
ENCODE_ORDER_TEXTS = ("abcabab", "ababcab abcbc")
# characters of two and three bytes in UTF-8 (bpe_decode's cases on split characters)
TWO_BYTE_CHARS, THREE_BYTE_CHARS = "éüñçøßжλ", "日本語中文€東京"


def _as_id_list(got, label, tested):
    if isinstance(got, torch.Tensor) and got.dim() == 1 and not got.is_floating_point():
        got = got.tolist()
    if not isinstance(got, (list, tuple)) or not all(is_integer(i) for i in got):
        fail(f"{label} must be a list of int token ids.", tested=tested,
             details=[f"got a {type(got).__name__}"])
    return [int(i) for i in got]


def _as_merges(got, label, tested):
    if not isinstance(got, (list, tuple)) or not all(
            isinstance(pair, (list, tuple)) and len(pair) == 2 and all(is_integer(i) for i in pair) for pair in got):
        fail(f"{label} must be a list of (int, int) pairs, the merges in the order learned.", tested=tested,
             details=[f"got a {type(got).__name__}"])
    return [(int(a), int(b)) for a, b in got]


def _first_matching(got, candidates: dict):
    """The first id of `candidates` ({id: thunk}, `from_table`) whose thunk gives `got`."""
    for mistake_id, produce in candidates.items():
        try:
            if produce() == got:
                return mistake_id
        except Exception:  # noqa: BLE001 -- a variant that cannot run does not match
            continue
    return None


def _covering(label, chosen, pool, behaviours, limit=60):
    """`chosen` plus cases of `pool` (in this submission's order) until every two behaviours named differently
    (("right", the reference) and the known mistakes, as (name, fn(case))) give different results on some case:
    each known mistake then fails, and a mistake's results on all cases name it alone. Bounded by `limit` cases."""
    chosen = list(chosen)
    outputs: dict = {}

    def result(k, case):
        key = (k, repr(case))
        if key not in outputs:
            try:
                outputs[key] = behaviours[k][1](case)
            except Exception as error:  # noqa: BLE001 -- a variant that cannot run behaves differently
                outputs[key] = ("raised", type(error).__name__)
        return outputs[key]

    def separated(i, j, cases):
        return any(result(i, c) != result(j, c) for c in cases)

    extra = list(pool)
    rng(label + ".more").shuffle(extra)
    for i in range(len(behaviours)):
        for j in range(i + 1, len(behaviours)):
            if behaviours[i][0] == behaviours[j][0] or separated(i, j, chosen):
                continue
            found = next((c for c in extra[:limit] if separated(i, j, [c])), None)
            if found is not None:
                chosen.append(found)
    return chosen


def _generated_texts(label: str, count: int, non_ascii="éü日本ñ") -> list[str]:
    """Short texts of this submission: a few letters in repeated words (runs, overlaps, ties), sometimes a
    non-ASCII character."""
    draw = rng(label)
    texts = []
    for _ in range(count):
        letters = draw.sample("abcdefghijklmnopqrstuvwxyz", draw.randint(2, 4))
        if draw.random() < 0.4:
            letters.append(draw.choice(non_ascii))
        words = ["".join(draw.choice(letters) for _ in range(draw.randint(1, 4))) for _ in range(draw.randint(3, 5))]
        text = " ".join(draw.choice(words) for _ in range(draw.randint(4, 10)))
        texts.append(text if len(text.encode("utf-8")) >= 2 else text + "aa")
    return texts


# train_bpe's cases (text, num_merges): today's, then more texts; each of at least two bytes (an empty text, or one
# of one byte, is the stated edge case, tried on its own)
TRAIN_BPE_CASES = [("aaabdaaabac", 10), ("cdcd abab", 1), ("aaa-bcbc", 1), ("abab cdcd", 3), ("aaaa", 5),
                   ("abcdef", 4), (BPE_TRAIN, 0), (BPE_TRAIN, 40), ("naïve café, naïve café 日本日本", 12)]
# train_bpe's known mistakes, each form on its own (a tie broken another way, another first id), in table order:
# (id, the mistaken train_bpe)
TRAIN_BPE_MISTAKES = [(mistake_id, make()) for mistake_id, make in candidates(
    M.TABLE, lambda variant, switches: functools.partial(variant, **switches), M.ids_of(M.bpe_train_variant), M.FORMS)]


def train_bpe_cases() -> list[tuple[str, int]]:
    """This submission's train_bpe cases: drawn from a pool (today's cases first), completed until every known
    mistake shows and no two are confused."""
    draw = rng("gpt.train_bpe.merges")
    pool = TRAIN_BPE_CASES + [(text, draw.choice([0, 12, 25, 40])) for text in BPE_TRAIN_POOL[1:]] + [
        (text, draw.choice([1, 2, 3, 5, 8, 12])) for text in _generated_texts("gpt.train_bpe.texts", 24)] + [
        (text, draw.choice([1, 2, 4, 10])) for text in BPE_TEXT_POOL
        if len(text.encode("utf-8")) >= 2 and text not in {t for t, _ in TRAIN_BPE_CASES}]
    chosen = sample("gpt.train_bpe.cases", pool, len(TRAIN_BPE_CASES))
    solution = reference("gpt")
    behaviours = [("right", lambda case: solution.train_bpe(*case))] + [
        (mistake_id, lambda case, mistaken=mistaken: mistaken(*case)) for mistake_id, mistaken in TRAIN_BPE_MISTAKES]
    return _covering("gpt.train_bpe.cases", chosen, pool, behaviours)


@hidden_check
def check_train_bpe(train_bpe) -> None:
    """train_bpe(text, num_merges) -> the merges byte-level BPE learns, in order."""
    start_check()
    solution = reference("gpt")
    cases = train_bpe_cases()
    results = []
    for text, num_merges in cases:
        tested = f"train_bpe(text of {len(text)} characters, num_merges={num_merges})"
        results.append(_as_merges(call("train_bpe", train_bpe, text, num_merges, tested=tested),
                                  "train_bpe's result", tested))
    for (text, num_merges), got in zip(cases, results):
        expected = solution.train_bpe(text, num_merges)
        if got == expected:
            continue
        # the mistake whose merges equal the student's on every text (one text alone may not tell two apart)
        mistake = next((mistake_id for mistake_id, mistaken in TRAIN_BPE_MISTAKES
                        if all(mistaken(t, n) == r for (t, n), r in zip(cases, results))), None)
        first = next((k for k, (a, b) in enumerate(zip(got, expected)) if a != b), min(len(got), len(expected)))
        fail("train_bpe: the merges differ from the reference solution.",
             tested=f"train_bpe(text of {len(text)} characters, num_merges={num_merges})",
             details=[f"expected {len(expected)} merges, got {len(got)}; first difference at merge {first}"],
             mistake=mistake)
    # the stated edge case: an empty text (or one byte) has no pair, so no merge
    num_merges = pick("gpt.train_bpe.empty_merges", [3, 1, 5, 10])
    with edge_case("train_bpe.empty_text"):
        for text in ("", pick("gpt.train_bpe.one_byte", ["a", "z", "q", "!", "7"])):
            tested = f"train_bpe({text!r}, num_merges={num_merges})"
            got = _as_merges(call("train_bpe", train_bpe, text, num_merges, tested=tested), "train_bpe's result",
                             tested)
            if got != []:
                fail("train_bpe: a text of fewer than two bytes has no pair to merge: expected no merges.",
                     tested=tested, details=expected_got("[]", str(got)[:60]),
                     hint="stop as soon as there is no pair to count (an empty Counter has no max)")


def _letters(label: str) -> dict[int, int]:
    """A relabelling of the bytes of a, b, c (the order cases' letters) for this submission."""
    draw = rng(label + ".options")
    options = [("a", "b", "c")] + [tuple(draw.sample("abcdefghijklmnopqrstuvwxyz", 3)) for _ in range(24)]
    chosen = pick(label, options)
    return {ord(x): ord(y) for x, y in zip("abc", chosen)}


def _most_frequent_ties(text: str, merges) -> bool:
    """Whether applying the most frequent present merge first meets a tie on `text` (students break ties
    differently: such a text cannot name the mistake)."""
    rank = {tuple(pair): k for k, pair in enumerate(merges)}
    ids = list(text.encode("utf-8"))
    while True:
        counts = Counter(pair for pair in zip(ids, ids[1:]) if pair in rank)
        if not counts:
            return False
        best = max(counts.values())
        if sum(1 for c in counts.values() if c == best) > 1:
            return True
        pair = max(counts, key=counts.get)
        ids = merge_pair(ids, pair, 256 + rank[pair])


def encode_order_cases() -> list[tuple[str, list]]:
    """The order cases: texts over {a, b, c} whose ids differ between the order learned, the reversed order and the
    most frequent pair first (without a tie there), drawn, then the three letters relabelled."""
    solution = reference("gpt")
    draw = rng("gpt.bpe_encode.order_texts")
    generated = []
    for _ in range(200):
        text = "".join(draw.choice("abc") for _ in range(draw.randint(7, 14)))
        if draw.random() < 0.3:
            cut = draw.randint(2, len(text) - 2)
            text = text[:cut] + " " + text[cut:]
        right = solution.bpe_encode(text, ENCODE_ORDER_MERGES)
        reversed_, frequent = (M.bpe_encode_variant(text, ENCODE_ORDER_MERGES, **M.TABLE[mistake_id][1])
                               for mistake_id in ("bpe.encode_order", "bpe.encode_most_frequent"))
        if len({repr(right), repr(reversed_), repr(frequent)}) == 3 and not _most_frequent_ties(
                text, ENCODE_ORDER_MERGES) and text not in generated:
            generated.append(text)
        if len(generated) >= 8:
            break
    texts = sample("gpt.bpe_encode.order_cases", list(ENCODE_ORDER_TEXTS) + generated, 2)
    relabel = _letters("gpt.bpe_encode.order_letters")
    merges = [(relabel[a], relabel[b]) for a, b in ENCODE_ORDER_MERGES]
    table = {x: chr(y) for x, y in relabel.items()}
    return [(text.translate(table), merges) for text in texts]


@hidden_check
def check_bpe_encode(bpe_encode) -> None:
    """bpe_encode(text, merges): UTF-8 bytes, then every merge in the order learned."""
    start_check()
    solution = reference("gpt")
    train_text = pick("gpt.bpe.train_text", BPE_TRAIN_POOL)
    merges = solution.train_bpe(train_text, pick("gpt.bpe.num_merges", [40, 30, 45, 50]))
    few = pick("gpt.bpe_encode.few_merges", [5, 3, 4, 7, 9])
    texts = sample("gpt.bpe_encode.texts", BPE_TEXT_POOL, len(BPE_TEXTS))
    if not any(ord(ch) > 127 for text in texts for ch in text):   # a non-ASCII text: bytes, not characters
        texts.append(pick("gpt.bpe_encode.non_ascii", [t for t in BPE_TEXT_POOL if any(ord(c) > 127 for c in t)]))
    texts.append(train_text[:80])
    # merges whose order matters first: (b, c) was learned before (a, b), but (a, b) is the more frequent pair there
    cases = encode_order_cases() + [(text, used) for text in texts for used in (merges, merges[:few], [])]
    for text, used in cases:
        tested = f"bpe_encode(text of {len(text)} characters, {len(used)} merges)"
        got = _as_id_list(call("bpe_encode", bpe_encode, text, [list(m) for m in used], tested=tested),
                          "bpe_encode's result", tested)
        expected = solution.bpe_encode(text, used)
        if got != expected:
            fail("bpe_encode: the token ids differ from the reference solution.", tested=tested,
                 details=expected_got(f"{len(expected)} ids", f"{len(got)} ids"),
                 mistake=_first_matching(got, from_table(M.TABLE, lambda variant, switches: variant(
                     text, used, **switches), M.ids_of(M.bpe_encode_variant))))


def bpe_decode_cases() -> list[tuple[list, list]]:
    """This submission's bpe_decode cases: encoded texts, then raw bytes of a non-ASCII text, a merged character
    followed by a lone first byte, and a three-byte character cut after two bytes."""
    solution = reference("gpt")
    merges = solution.train_bpe(pick("gpt.bpe.train_text", BPE_TRAIN_POOL), pick("gpt.bpe.num_merges",
                                                                                  [40, 30, 45, 50]))
    texts = sample("gpt.bpe_decode.texts", BPE_TEXT_POOL, len(BPE_TEXTS))
    cases = [(solution.bpe_encode(text, merges), merges) for text in texts]
    raw = pick("gpt.bpe_decode.raw", ["naïve 日本", "über 東京", "crème 中文", "ñandú €5", "λx 語"])
    two = pick("gpt.bpe_decode.two_bytes", TWO_BYTE_CHARS).encode("utf-8")
    three = pick("gpt.bpe_decode.three_bytes", THREE_BYTE_CHARS).encode("utf-8")
    cases += [(list(raw.encode("utf-8")), []), ([256, two[0]], [(two[0], two[1])]), (list(three[:2]), [])]
    return cases


@hidden_check
def check_bpe_decode(bpe_decode) -> None:
    """bpe_decode(ids, merges): every id expanded to its bytes, then one UTF-8 decode with errors="replace"."""
    start_check()
    solution = reference("gpt")
    for ids, used in bpe_decode_cases():
        tested = f"bpe_decode({len(ids)} ids, {len(used)} merges)"
        got = call("bpe_decode", bpe_decode, list(ids), [list(m) for m in used], tested=tested)
        expected = solution.bpe_decode(ids, used)
        if not isinstance(got, str):
            fail("bpe_decode must return a str.", tested=tested, details=[f"got a {type(got).__name__}"])
        if got != expected:
            fail("bpe_decode: the text differs from the reference solution.", tested=tested,
                 details=expected_got(repr(expected[:40]), repr(got[:40])),
                 mistake=_first_matching(got, from_table(M.TABLE, lambda variant, switches: variant(
                     ids, used, **switches), M.ids_of(M.bpe_decode_variant))))
