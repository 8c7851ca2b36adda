"""Hidden checks of notebook 08 (byte-level BPE, GPT, training helpers, sampling and generation).

Everything is judged here, in the grader's process: the student's functions run in their kernel on inputs the
grader sends, and what they return is compared with the reference (`solutions.gpt`). Where randomness is involved
the contract fixes the draws (`torch.randint` in `get_batch`, one `torch.multinomial` call in `sample_next_token`),
so with a generator the draws must be exactly the reference's; before that, frequencies over many draws are tested
against the right distribution, so a failure says whether the distribution or only the way of drawing is wrong.
Models the student's `estimate_loss` and `generate` run on are public probes (`coursekit.probe.models`) built in
the kernel with the grader's weights.
"""
from __future__ import annotations

import math
import numbers
from collections import Counter

import torch
import torch.nn.functional as F

from autograder.checks.kit import remote as _remote
from autograder.checks.gpt import mistakes as M
from autograder.checks.gpt.mistakes import _merge as merge_pair
from autograder.checks.kit.toolkit import (
    call, construct, expect_raises, expected_got, fail, fetch, grader_step, lend_model, randint, randn, seeded,
    shape_of, start_check, type_name,
)
from autograder.checks.kit.compare import (
    as_tensor, describe, expect_dropout_acts, expect_shape, expect_tensor, is_integer, prepare, values_close,
)
from autograder.checks.kit.criteria import argument, edge_case
from autograder.checks.kit.parts import given_working_parts
from autograder.checks.kit.draws import draw_sizes, generator as probe_generator, pick, rng, sample, seed_for
from autograder.checks.kit.remote import RemoteObject, probed

# Every input below is drawn for the submission (autograder/checks/kit/draws.py): seeds, sizes, texts,
# temperatures, top-k values, block sizes. Each space lists today's value first (what a salt of 0 probes with) and
# keeps the property its case was chosen for; a case chosen to reveal a known mistake is kept revealing by drawing
# until it does (bounded), else falling back to the written case.

# GPT sizes: heads, widths, lengths and the vocabulary all differ (drawn until they do).
# (Not the contract's defaults either: num_heads=4, num_layers=4, so that an argument left at its default shows.)
GPT_SIZES = {"vocab": [29, 31, 27, 33, 37], "d_model_heads": [(12, 3), (16, 2), (15, 3), (20, 2), (12, 2), (18, 3)],
             "d_ff": [20, 22, 26, 30, 34], "layers": [2, 3], "max_len": [16, 14, 17, 19], "t": [7, 5, 6, 9, 11],
             "b": [2, 3]}

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


def _reference():
    import solutions.gpt as reference

    return reference


# ------------------------------------------------------------------------------------------- BPE: known mistakes


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


def _first_matching(got, candidates):
    for mistake_id, produce in candidates:
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
TRAIN_BPE_VARIANTS = [("bpe.ties", {"ties": v}) for v in ("smallest", "last", "largest")] + [
    ("bpe.count_without_overlap", {"count": "without_overlap"}),
    ("bpe.merge_overlapping", {"merge": "every_position"}),
    ("bpe.no_early_stop", {"stop": False}),
    ("bpe.new_id", {"first_id": 257}), ("bpe.new_id", {"first_id": 255})]


def train_bpe_cases() -> list[tuple[str, int]]:
    """This submission's train_bpe cases: drawn from a pool (today's cases first), completed until every known
    mistake shows and no two are confused."""
    draw = rng("gpt.train_bpe.merges")
    pool = TRAIN_BPE_CASES + [(text, draw.choice([0, 12, 25, 40])) for text in BPE_TRAIN_POOL[1:]] + [
        (text, draw.choice([1, 2, 3, 5, 8, 12])) for text in _generated_texts("gpt.train_bpe.texts", 24)] + [
        (text, draw.choice([1, 2, 4, 10])) for text in BPE_TEXT_POOL
        if len(text.encode("utf-8")) >= 2 and text not in {t for t, _ in TRAIN_BPE_CASES}]
    chosen = sample("gpt.train_bpe.cases", pool, len(TRAIN_BPE_CASES))
    reference = _reference()
    behaviours = [("right", lambda case: reference.train_bpe(*case))] + [
        (mistake_id, lambda case, flags=flags: M.bpe_train_variant(*case, **flags))
        for mistake_id, flags in TRAIN_BPE_VARIANTS]
    return _covering("gpt.train_bpe.cases", chosen, pool, behaviours)


@probed
def check_train_bpe(train_bpe) -> None:
    """train_bpe(text, num_merges) -> the merges byte-level BPE learns, in order."""
    start_check()
    reference = _reference()
    cases = train_bpe_cases()
    results = []
    for text, num_merges in cases:
        tested = f"train_bpe(text of {len(text)} characters, num_merges={num_merges})"
        results.append(_as_merges(call("train_bpe", train_bpe, text, num_merges, tested=tested),
                                  "train_bpe's result", tested))
    for (text, num_merges), got in zip(cases, results):
        expected = reference.train_bpe(text, num_merges)
        if got == expected:
            continue
        # the mistake whose merges equal the student's on every text (one text alone may not tell two apart)
        mistake = next((mistake_id for mistake_id, flags in TRAIN_BPE_VARIANTS
                        if all(M.bpe_train_variant(t, n, **flags) == r for (t, n), r in zip(cases, results))), None)
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
    reference = _reference()
    draw = rng("gpt.bpe_encode.order_texts")
    generated = []
    for _ in range(200):
        text = "".join(draw.choice("abc") for _ in range(draw.randint(7, 14)))
        if draw.random() < 0.3:
            cut = draw.randint(2, len(text) - 2)
            text = text[:cut] + " " + text[cut:]
        right = reference.bpe_encode(text, ENCODE_ORDER_MERGES)
        reversed_ = M.bpe_encode_variant(text, ENCODE_ORDER_MERGES, order="reversed")
        frequent = M.bpe_encode_variant(text, ENCODE_ORDER_MERGES, order="most_frequent")
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


@probed
def check_bpe_encode(bpe_encode) -> None:
    """bpe_encode(text, merges): UTF-8 bytes, then every merge in the order learned."""
    start_check()
    reference = _reference()
    train_text = pick("gpt.bpe.train_text", BPE_TRAIN_POOL)
    merges = reference.train_bpe(train_text, pick("gpt.bpe.num_merges", [40, 30, 45, 50]))
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
        expected = reference.bpe_encode(text, used)
        if got != expected:
            fail("bpe_encode: the token ids differ from the reference solution.", tested=tested,
                 details=expected_got(f"{len(expected)} ids", f"{len(got)} ids"),
                 mistake=_first_matching(got, [
                     ("bpe.encode_order", lambda: M.bpe_encode_variant(text, used, order="reversed")),
                     ("bpe.encode_most_frequent",
                      lambda: M.bpe_encode_variant(text, used, order="most_frequent")),
                     ("bpe.encode_characters", lambda: M.bpe_encode_variant(text, used, units="characters")),
                 ]))


def bpe_decode_cases() -> list[tuple[list, list]]:
    """This submission's bpe_decode cases: encoded texts, then raw bytes of a non-ASCII text, a merged character
    followed by a lone first byte, and a three-byte character cut after two bytes."""
    reference = _reference()
    merges = reference.train_bpe(pick("gpt.bpe.train_text", BPE_TRAIN_POOL), pick("gpt.bpe.num_merges",
                                                                                  [40, 30, 45, 50]))
    texts = sample("gpt.bpe_decode.texts", BPE_TEXT_POOL, len(BPE_TEXTS))
    cases = [(reference.bpe_encode(text, merges), merges) for text in texts]
    raw = pick("gpt.bpe_decode.raw", ["naïve 日本", "über 東京", "crème 中文", "ñandú €5", "λx 語"])
    two = pick("gpt.bpe_decode.two_bytes", TWO_BYTE_CHARS).encode("utf-8")
    three = pick("gpt.bpe_decode.three_bytes", THREE_BYTE_CHARS).encode("utf-8")
    cases += [(list(raw.encode("utf-8")), []), ([256, two[0]], [(two[0], two[1])]), (list(three[:2]), [])]
    return cases


@probed
def check_bpe_decode(bpe_decode) -> None:
    """bpe_decode(ids, merges): every id expanded to its bytes, then one UTF-8 decode with errors="replace"."""
    start_check()
    reference = _reference()
    for ids, used in bpe_decode_cases():
        tested = f"bpe_decode({len(ids)} ids, {len(used)} merges)"
        got = call("bpe_decode", bpe_decode, list(ids), [list(m) for m in used], tested=tested)
        expected = reference.bpe_decode(ids, used)
        if not isinstance(got, str):
            fail("bpe_decode must return a str.", tested=tested, details=[f"got a {type(got).__name__}"])
        if got != expected:
            fail("bpe_decode: the text differs from the reference solution.", tested=tested,
                 details=expected_got(repr(expected[:40]), repr(got[:40])),
                 mistake=_first_matching(got, [
                     ("bpe.decode_per_token", lambda: M.bpe_decode_variant(ids, used, "per_token")),
                     ("bpe.decode_latin1", lambda: M.bpe_decode_variant(ids, used, "latin1")),
                 ]))


# ------------------------------------------------------------------------------------------------------- GPT
def gpt_sizes() -> dict:
    """This submission's GPT sizes (today's with no salt): vocabulary, width, heads, d_ff, layers, max_len, T, B,
    drawn until vocabulary, width, d_ff, max_len and T all differ (T < max_len), and heads and layers differ."""
    def valid(sizes):
        lengths = [sizes["vocab"], sizes["d_model_heads"][0], sizes["d_ff"], sizes["max_len"], sizes["t"]]
        return len(set(lengths)) == len(lengths) and sizes["t"] < sizes["max_len"] \
            and sizes["d_model_heads"][1] != sizes["layers"]

    sizes = draw_sizes("gpt.sizes", GPT_SIZES, valid)
    d_model, heads = sizes["d_model_heads"]
    return {"vocab": sizes["vocab"], "d_model": d_model, "heads": heads, "d_ff": sizes["d_ff"],
            "layers": sizes["layers"], "max_len": sizes["max_len"], "t": sizes["t"], "b": sizes["b"]}


def reference_gpt(seed: int, sizes: dict | None = None, **kwargs):
    """The reference GPT under this submission's seed, its LayerNorms randomised so that a missing or moved norm
    shows."""
    z = sizes or gpt_sizes()
    with seeded(seed):
        model = _reference().GPT(z["vocab"], z["d_model"], z["heads"], z["d_ff"], z["layers"], max_len=z["max_len"],
                                 **kwargs)
        for sub in model.modules():
            if isinstance(sub, torch.nn.LayerNorm):
                torch.nn.init.normal_(sub.weight, 1.0, 0.3)
                torch.nn.init.normal_(sub.bias, 0.0, 0.3)
    return model


def _parameter_names(module: RemoteObject, name: str) -> dict[str, tuple]:
    return {n: tuple(shape) for n, shape, _dtype in describe(module, name).get("parameters", [])}


@probed
def check_gpt(GPT) -> None:
    """GPT(vocab_size, d_model, num_heads, d_ff, num_layers, max_len, dropout): tied head, causal pre-norm blocks."""
    device = start_check()
    z = gpt_sizes()
    VOCAB, D_MODEL, H, D_FF, LAYERS, MAX_LEN, B, T = (z[k] for k in ("vocab", "d_model", "heads", "d_ff", "layers",
                                                                     "max_len", "b", "t"))
    name = f"GPT({VOCAB}, {D_MODEL}, {H}, {D_FF}, {LAYERS}, max_len={MAX_LEN})"
    module = construct(GPT, "GPT", VOCAB, D_MODEL, H, D_FF, LAYERS, max_len=MAX_LEN)  # the default dropout, 0.0
    params = _parameter_names(module, name)
    if "lm_head.weight" in params:
        fail(f"{name}: lm_head has a weight of its own.", mistake="gpt.untied_head",
             hint="tie it: self.lm_head.weight = self.token_embedding.weight (one Parameter, listed once)")
    if params.get("lm_head.bias") is not None:
        fail(f"{name}: lm_head has a bias.", hint="nn.Linear(d_model, vocab_size, bias=False)")
    max_len = fetch(module.attr("max_len"), f"{name}.max_len")
    if max_len != MAX_LEN:
        fail(f"{name}: the attribute max_len is wrong.", details=expected_got(str(MAX_LEN), repr(max_len)[:40]))
    # initialisation: both tables at the tokens' scale, std d_model ** -0.5 (large tables: a tight estimate)
    big_vocab = pick("gpt.init.vocab", [97, 89, 101, 113])
    big_d = pick("gpt.init.d_model", [64, 48, 80, 56])
    big_len = pick("gpt.init.max_len", [128, 96, 112, 120])
    big_name = f"GPT({big_vocab}, {big_d}, 4, 32, 1, max_len={big_len})"
    big = construct(GPT, "GPT", big_vocab, big_d, 4, 32, 1, max_len=big_len)
    state = grader_step(big_name, big.state)
    for key in ("token_embedding.weight", "position_embedding.embedding.weight"):
        table = state.get(key) if isinstance(state, dict) else None
        if not isinstance(table, torch.Tensor):
            fail(f"GPT: expected the parameter `{key}` as named in the exercise.")
        std = float(table.double().std())
        if not 0.8 * big_d ** -0.5 <= std <= 1.2 * big_d ** -0.5:
            fail(f"{big_name}: `{key}` is not initialised at the tokens' scale.",
                 details=expected_got(f"standard deviation {big_d ** -0.5:.3f} (d_model ** -0.5)", f"{std:.3f}"),
                 mistake="gpt.position_init" if key.startswith("position") else None)
    ref = reference_gpt(8, z)
    prepare(module, ref, device, "GPT")
    ids = randint(0, VOCAB, (B, T), seed=80, device=device)
    for length in (T, 1, MAX_LEN):
        x = ids[:, :length] if length <= T else randint(0, VOCAB, (B, length), seed=81, device=device)
        tested = f"{name} on ids {shape_of(x)}"
        with torch.no_grad():
            expected = ref(x)
            got = call("GPT.forward", module, x.clone(), tested=tested, _no_grad=True)
        expect_tensor(got, expected, "GPT logits", device, tested=tested, mistakes=lambda x=x: [
            ("gpt.no_causal_mask", lambda: M.gpt_variant(ref, x, causal=False)),
            ("gpt.mask_inverted", lambda: M.gpt_variant(ref, x, future_only=True)),
            ("gpt.embedding_scaled", lambda: M.gpt_variant(ref, x, scale=True)),
            ("gpt.post_norm", lambda: M.gpt_variant(ref, x, norm_first=False)),
            ("gpt.no_final_norm", lambda: M.gpt_variant(ref, x, final_norm=False)),
        ])
    too_long = MAX_LEN + pick("gpt.too_long", [1, 2, 3, 5])
    expect_raises(ValueError, f"{name} on ids of length {too_long}", module,
                  randint(0, VOCAB, (1, too_long), seed=82, device=device),
                  why=f"when the sequence is longer than max_len={MAX_LEN}", criterion="GPT.too_long")
    # dropout reaches the model: dropout=0.5 in training mode changes the logits, in eval mode it does not
    with argument("GPT.dropout"):
        dropped = construct(GPT, "GPT", VOCAB, D_MODEL, H, D_FF, LAYERS, max_len=MAX_LEN, dropout=0.5)
        prepare(dropped, reference_gpt(8, z, dropout=0.5), device, "GPT")
        with torch.no_grad():
            expected = ref(ids)  # (B, T, vocab), eval mode
        expect_dropout_acts(dropped, "GPT", (ids,), expected, device, what="logits",
                            tested=f"GPT(..., dropout=0.5) on ids {shape_of(ids)}",
                            hint="pass dropout to nn.Dropout (self.drop) and to every EncoderBlock")


# ---------------------------------------------------------------------------------------------------- get_batch
def _generator(channel, seed: int, device="cpu") -> RemoteObject:
    """A torch.Generator in the kernel, seeded with this submission's seed for `seed` (the student's code draws
    from it)."""
    def make():
        generator = _remote.new(channel, "torch.Generator", device=str(device))
        generator.attr("manual_seed")(seed_for(seed))
        return generator

    return grader_step("seeding a torch.Generator", make)


def _local_generator(seed: int, device="cpu") -> torch.Generator:
    return probe_generator(seed, device)


def _starts(n: int, block_size: int, batch_size: int, seed: int, high: int | None = None, source="generator"):
    """The contract's draw of the windows' starts (or with another upper bound `high`)."""
    high = n - block_size if high is None else high
    if source == "generator":
        return torch.randint(high, (batch_size,), generator=_local_generator(seed))
    with seeded(seed):
        return torch.randint(high, (batch_size,))


def _wrong_highs(n: int, block_size: int) -> tuple[int, ...]:
    return tuple(h for h in (n - block_size - 1, n - block_size + 1, n - 1, n) if h > 0 and h != n - block_size)


def _revealing_seed(seed: int, n: int, block_size: int, batch_size: int, source="generator") -> int:
    """`seed`, or the first of seed + 1000, seed + 2000, ... whose draw differs from the draw with every wrong upper
    bound (get_batch.start_range), so that the mistake cannot pass by luck (bounded)."""
    for k in range(50):
        candidate = seed + 1000 * k
        right = _starts(n, block_size, batch_size, candidate, source=source)
        if all(not torch.equal(right, _starts(n, block_size, batch_size, candidate, high, source))
               for high in _wrong_highs(n, block_size)):
            return candidate
    return seed


@probed
def check_get_batch(get_batch) -> None:
    """get_batch(data, block_size, batch_size, generator=None): windows at torch.randint(N - block_size, ...)."""
    device = start_check()
    n, offset = pick("gpt.get_batch.n", [50, 45, 56, 61, 53]), pick("gpt.get_batch.offset", [1000, 700, 3000, 1500])
    data = (torch.arange(n) + offset).to(device)               # value - offset = position: windows are readable
    plan = [(pick("gpt.get_batch.block_a", [7, 6, 8, 5, 10]), pick("gpt.get_batch.batch_a", [5, 6, 4, 7]), 90),
            (pick("gpt.get_batch.block_b", [3, 2, 4]), pick("gpt.get_batch.batch_b", [9, 8, 10, 11]), 91),
            (n - 1, pick("gpt.get_batch.batch_c", [4, 3, 5]), 92)]   # one window fits: every start is 0
    # the core: generator=None, the global generator (the grader seeds it for each call)
    plan.append((pick("gpt.get_batch.block_g", [7, 9, 5, 6]), pick("gpt.get_batch.batch_g", [6, 7, 5]), 93))
    for block_size, batch_size, seed in plan:
        if block_size < n - 1:
            seed = _revealing_seed(seed, n, block_size, batch_size, "global")
        tested = (f"get_batch(data {shape_of(data)}, block_size={block_size}, batch_size={batch_size}) "
                  "without a generator")
        got = call("get_batch", get_batch, data.clone(), block_size, batch_size, tested=tested, _seed=seed)
        x, y = _batch_pair(got, tested, (batch_size, block_size))
        _judge_batch(x, y, _starts(n, block_size, batch_size, seed, source="global"), n, offset, block_size,
                     batch_size, seed, tested, "global")
    # generator: the starts are drawn from it
    with argument("get_batch.generator"):
        for block_size, batch_size, seed in plan[:3]:
            if block_size < n - 1:
                seed = _revealing_seed(seed, n, block_size, batch_size)
            tested = f"get_batch(data {shape_of(data)}, block_size={block_size}, batch_size={batch_size}, generator)"
            generator = _generator(get_batch.channel, seed)
            got = call("get_batch", get_batch, data.clone(), block_size, batch_size, generator, tested=tested)
            x, y = _batch_pair(got, tested, (batch_size, block_size))
            starts = _starts(n, block_size, batch_size, seed)
            _judge_batch(x, y, starts, n, offset, block_size, batch_size, seed, tested, "generator")


def _batch_pair(got, tested, shape):
    if not isinstance(got, (tuple, list)) or len(got) != 2:
        fail("get_batch must return a pair (x, y).", tested=tested, details=[f"got a {type(got).__name__}"])
    x, y = (as_tensor(t, "get_batch's " + n, tested) for t, n in zip(got, ("x", "y")))
    for t, label in ((x, "x"), (y, "y")):
        expect_shape(t, shape, f"get_batch's {label}", tested, hint="x and y are (batch_size, block_size)")
        if t.dtype != torch.long:
            fail(f"get_batch's {label} has dtype {t.dtype}, expected torch.int64 (token ids).", tested=tested)
    return x.cpu(), y.cpu()


def _judge_batch(x, y, starts, n, offset, block_size, batch_size, seed, tested, source):
    position = x - offset
    windows = position[:, :1] + torch.arange(block_size)
    if torch.equal(x, y):
        fail("get_batch: y equals x.", tested=tested, mistake="get_batch.no_shift")
    if torch.equal(position, windows) and torch.equal(x, y + 1):
        fail("get_batch: x and y are swapped.", tested=tested, mistake="get_batch.swapped")
    if not torch.equal(position, windows) or not torch.equal(y, x + 1):
        fail("get_batch: each row of x must be a window of consecutive tokens of data and y the same window "
             "shifted by one token.", tested=tested, mistake="get_batch.shift" if torch.equal(position, windows)
             else None)
    got_starts = position[:, 0]
    if torch.equal(got_starts, starts):
        return
    mistake = None
    for high in _wrong_highs(n, block_size):
        if torch.equal(_starts(n, block_size, batch_size, seed, high, source), got_starts):
            mistake = "get_batch.start_range"
    fail("get_batch: the windows start at other positions than the contract's draw.", tested=tested,
         details=[f"expected starts drawn by torch.randint(len(data) - block_size, (batch_size,), "
                  f"generator=generator)" + (" from the global generator" if source == "global" else "")],
         mistake=mistake,
         hint=None if mistake else "draw the starts with exactly that one call, passing the generator on")


# ------------------------------------------------------------------------------------------------------ lm_loss
@probed
def check_lm_loss(lm_loss) -> None:
    """lm_loss(logits (B, T, V), targets (B, T)) -> mean cross-entropy over all B * T positions."""
    device = start_check()
    plan = ((pick("gpt.lm_loss.b", [2, 3, 4]), pick("gpt.lm_loss.t", [5, 4, 6, 7]),
             pick("gpt.lm_loss.v", [11, 9, 13]), 100),
            (pick("gpt.lm_loss.b1", [3, 2, 5]), 1, pick("gpt.lm_loss.v1", [7, 6, 8]), 101),            # T = 1
            (1, pick("gpt.lm_loss.t2", [6, 5, 8]), pick("gpt.lm_loss.v2", [4, 3, 5]), 102))            # B = 1
    for b, t, v, seed in plan:
        logits = randn(b, t, v, seed=seed, device=device) * 2
        targets = randint(0, v, (b, t), seed=seed + 50, device=device)
        tested = f"lm_loss(logits {shape_of(logits)}, targets {shape_of(targets)})"
        got = call("lm_loss", lm_loss, logits.clone(), targets.clone(), tested=tested, _no_grad=True)
        if isinstance(got, numbers.Real) and not isinstance(got, bool):
            fail("lm_loss must return a scalar tensor, not a Python number: the training loop calls .backward() "
                 "on it.", tested=tested, details=[f"got a {type(got).__name__}"], mistake="lm_loss.python_float")
        got = as_tensor(got, "lm_loss's result", tested)
        if got.numel() != 1 or got.dim() != 0:
            fail("lm_loss must return a scalar tensor (the mean over all positions).", tested=tested,
                 details=[f"got shape {tuple(got.shape)}"])
        expected = F.cross_entropy(logits.reshape(-1, v), targets.reshape(-1))
        flat = (logits.reshape(-1, v), targets.reshape(-1))
        expect_tensor(got.to(device), expected, "lm_loss", device, tested=tested, mistakes=lambda: [
            ("lm_loss.sum", lambda: F.cross_entropy(*flat, reduction="sum")),
            ("lm_loss.softmax_first", lambda: F.cross_entropy(flat[0].softmax(-1), flat[1])),
            ("lm_loss.shifted_again", lambda: F.cross_entropy(logits[:, :-1].reshape(-1, v),
                                                              targets[:, 1:].reshape(-1))),
        ])


# ------------------------------------------------------------------------------------------------ estimate_loss
PROBE_LM = "coursekit.probe.models.LanguageModelProbe"
PROBE_LM_CONFIG = {"vocab_size": 13, "d_model": 8, "max_len": 16, "dropout": 0.5}


def _probe_state(seed: int) -> dict:
    from coursekit.probe.models import LanguageModelProbe

    with seeded(seed):
        return {k: v.detach().clone() for k, v in LanguageModelProbe(**PROBE_LM_CONFIG).state_dict().items()}


def _local_lm(state: dict, device, training: bool):
    from coursekit.probe.models import LanguageModelProbe

    model = LanguageModelProbe(**PROBE_LM_CONFIG)
    model.load_state_dict(state)
    return model.to(device).train(training)


def _remote_lm(channel, state: dict, device, training: bool) -> RemoteObject:
    return lend_model(channel, PROBE_LM, PROBE_LM_CONFIG, state, device, training,
                      "a small language model lent to your function")


def _training_flag(model: RemoteObject, label: str):
    return describe(model, label).get("training")


def _estimate_data(state: dict, n: int, block_size: int, device) -> torch.Tensor:
    """`n` tokens (seed 111 + n, else + 1000, + 2000, ...) on which every known mistake that reads other windows
    than the right ones gives a loss at least 1e-3 (relative) away from the right loss: none passes by luck."""
    right = list(range(0, n - block_size, block_size))
    others = [list(range(0, n - block_size - 1, block_size)), list(range(n - block_size))]
    others = [starts for starts in others if starts != right]
    data = None
    for k in range(30):
        data = randint(0, PROBE_LM_CONFIG["vocab_size"], (n,), seed=111 + n + 1000 * k, device="cpu")
        local = _local_lm(state, device, False)
        expected = M.loss_over_windows(local, data, block_size, right, device)
        if all(abs(M.loss_over_windows(local, data, block_size, starts, device) - expected) > 1e-3 * abs(expected)
               for starts in others):
            break
    return data


@probed
def check_estimate_loss(estimate_loss) -> None:
    """estimate_loss(model, data, block_size, device): non-overlapping windows, eval mode, mode restored."""
    device = start_check()
    state = _probe_state(110)
    # n = k * block_size + 3, + 1 (the last window ends at the last token: estimate_loss.last_window), + 0; then
    # another block size
    block_size, k = pick("gpt.estimate_loss.block", [8, 6, 7, 9]), pick("gpt.estimate_loss.windows", [9, 8, 10, 7])
    other, n_other = pick("gpt.estimate_loss.block2", [13, 11, 12]), pick("gpt.estimate_loss.n2", [40, 37, 43, 47])
    plan = ((k * block_size + 3, block_size, True), (k * block_size + 1, block_size, False),
            (k * block_size, block_size, True), (n_other, other, True))
    for n, block_size, training in plan:
        data = _estimate_data(state, n, block_size, device)
        model = _remote_lm(estimate_loss.channel, state, device, training)
        tested = (f"estimate_loss(a small language model in {'training' if training else 'eval'} mode, "
                  f"data {shape_of(data)}, block_size={block_size}, device)")
        got = call("estimate_loss", estimate_loss, model, data.clone(), block_size, device, tested=tested)
        if isinstance(got, torch.Tensor) and got.numel() == 1:
            got = float(got)
        if not isinstance(got, numbers.Real) or isinstance(got, bool):
            fail("estimate_loss must return a float (the mean loss).", tested=tested,
                 details=[f"got a {type(got).__name__}"])
        local = _local_lm(state, device, False)
        right = list(range(0, n - block_size, block_size))
        expected = M.loss_over_windows(local, data, block_size, right, device)
        if not math.isclose(float(got), expected, rel_tol=1e-4, abs_tol=1e-5):
            variants = [
                ("estimate_loss.train_mode", lambda: M.loss_over_windows(local, data, block_size, right, device, True)),
                ("estimate_loss.last_window",
                 lambda: M.loss_over_windows(local, data, block_size, range(0, n - block_size - 1, block_size), device)),
                ("estimate_loss.overlapping",
                 lambda: M.loss_over_windows(local, data, block_size, range(n - block_size), device)),
            ]
            mistake = next((m for m, produce in variants
                            if math.isclose(float(got), produce(), rel_tol=1e-4, abs_tol=1e-5)), None)
            fail("estimate_loss: the loss differs from the reference solution.", tested=tested,
                 details=expected_got(f"{expected:.5f}", f"{float(got):.5f}"), mistake=mistake)
        if _training_flag(model, "the lent model") != training:
            fail("estimate_loss does not restore the model's training mode.", tested=tested,
                 mistake="estimate_loss.mode_not_restored")
    model = _remote_lm(estimate_loss.channel, state, device, True)
    block_size = plan[0][1]
    short = randint(0, 13, (block_size,), seed=119, device="cpu")
    expect_raises(ValueError, f"estimate_loss(model, data of {block_size} tokens, block_size={block_size}, device)",
                  estimate_loss, model, short, block_size, device,
                  why="when no window of block_size + 1 tokens fits in data",
                  criterion="estimate_loss.too_short")


# ------------------------------------------------------------------------------------------------------- lr_at


@probed
def check_lr_at(lr_at) -> None:
    """lr_at(step, max_lr, warmup_steps, max_steps, min_lr=0.0): linear warm-up, cosine decay, then min_lr."""
    start_check()
    reference = _reference()
    # a warm-up with a floor; no warm-up; warm-up as long as the run; the default floor
    configs = [(pick("gpt.lr_at.lr_a", [3e-3, 2.5e-3, 4e-3]), pick("gpt.lr_at.warmup_a", [10, 8, 12, 15]),
                pick("gpt.lr_at.steps_a", [100, 90, 120]), pick("gpt.lr_at.min_a", [2e-4, 1e-4, 3e-4])),
               (pick("gpt.lr_at.lr_b", [1e-3, 6e-4, 2e-3]), 0, pick("gpt.lr_at.steps_b", [40, 30, 50]),
                pick("gpt.lr_at.min_b", [5e-5, 1e-5, 8e-5])),
               (pick("gpt.lr_at.lr_c", [5e-4, 7e-4, 9e-4]), *[pick("gpt.lr_at.both_c", [7, 5, 9, 11])] * 2,
                pick("gpt.lr_at.min_c", [1e-5, 2e-5, 4e-5])),
               (pick("gpt.lr_at.lr_d", [2e-3, 1.5e-3, 3e-3]), pick("gpt.lr_at.warmup_d", [25, 20, 30]),
                pick("gpt.lr_at.steps_d", [60, 55, 70]), None)]
    # the core: every schedule with the default floor min_lr=0.0; then min_lr: the same schedules with their floor
    for max_lr, warmup, max_steps, _min_lr in configs:
        _try_lr_at(lr_at, reference, max_lr, warmup, max_steps, None)
    with argument("lr_at.min_lr"):
        for max_lr, warmup, max_steps, min_lr in configs:
            if min_lr is not None:
                _try_lr_at(lr_at, reference, max_lr, warmup, max_steps, min_lr)
    max_steps = pick("gpt.lr_at.bad_steps", [10, 12, 20, 8])
    for warmup in (max_steps + pick("gpt.lr_at.bad_over", [1, 2, 5]), -pick("gpt.lr_at.bad_under", [1, 2, 3])):
        expect_raises(ValueError, f"lr_at(0, 1e-3, warmup_steps={warmup}, max_steps={max_steps})", lr_at,
                      0, 1e-3, warmup, max_steps, why="unless 0 <= warmup_steps <= max_steps",
                      criterion="lr_at.bad_warmup")


def _try_lr_at(lr_at, reference, max_lr: float, warmup: int, max_steps: int, min_lr: float | None) -> None:
    """lr_at at the steps around the warm-up's end and the run's end (min_lr None: the default floor)."""
    extra = () if min_lr is None else (min_lr,)
    for step in sorted({0, 1, warmup // 2, max(warmup - 1, 0), warmup, warmup + 1, (warmup + max_steps) // 2,
                        max_steps - 1, max_steps, max_steps + 5}):
        tested = (f"lr_at({step}, max_lr={max_lr:g}, warmup_steps={warmup}, max_steps={max_steps}"
                  + (f", min_lr={min_lr:g})" if extra else ")"))
        got = call("lr_at", lr_at, step, max_lr, warmup, max_steps, *extra, tested=tested)
        if isinstance(got, torch.Tensor) and got.numel() == 1:
            got = float(got)
        if not isinstance(got, numbers.Real) or isinstance(got, bool):
            fail("lr_at must return a float.", tested=tested, details=[f"got a {type(got).__name__}"])
        expected = reference.lr_at(step, max_lr, warmup, max_steps, *extra)
        if not math.isclose(float(got), expected, rel_tol=1e-9, abs_tol=1e-12):
            kwargs = {"min_lr": min_lr or 0.0}
            variants = [("lr_at.warmup_off_by_one", {"warmup_plus_one": False}),
                        ("lr_at.cosine_from_zero", {"cosine_from_zero": True}),
                        ("lr_at.min_lr_ignored", {"use_min": False})]
            mistake = next((m for m, flags in variants if math.isclose(
                float(got), M.lr_variant(step, max_lr, warmup, max_steps, **kwargs, **flags), rel_tol=1e-9,
                abs_tol=1e-12)), None)
            fail("lr_at: the learning rate differs from the reference solution.", tested=tested,
                 details=expected_got(f"{expected:.6g}", f"{float(got):.6g}"), mistake=mistake)


# -------------------------------------------------------------------------------------------------- train_step
# The steps of the run: (learning rate, grad_clip), the optimizer starting at another rate (STEP_START_LR). The
# gradient norms of the lent model (its weights scaled by 3) on these batches are above 1 and below 50 (drawn until
# they are): clipping at 0.5 and 0.05 is active, at 50 it is not; the step without grad_clip uses the default, 1.0,
# which is active too. The last step clips, so that the gradients left after it tell clipping after the step from no
# clipping. The rates are drawn per submission (today's first), the clipping thresholds are what the plan tests.
STEP_CLIPS = (0.5, None, 50.0, "default", 0.05)
STEP_RATES = [(0.3, 0.2, 0.4, 0.25, 0.35), (0.25, 0.35, 0.3, 0.2, 0.4), (0.4, 0.3, 0.2, 0.35, 0.25),
              (0.2, 0.4, 0.35, 0.3, 0.45), (0.35, 0.25, 0.45, 0.4, 0.3)]
STEP_PLAN = tuple(zip(STEP_RATES[0], STEP_CLIPS))
STEP_START_LR, STEP_MOMENTUM = 0.9, 0.5
STEP_B, STEP_T = [3, 2, 4], [10, 8, 12, 9]      # batch and length of the batches (today's first), drawn


def _step_batches(device, seed: int = 140) -> list[tuple[torch.Tensor, torch.Tensor]]:
    vocab = PROBE_LM_CONFIG["vocab_size"]
    shape = (pick("gpt.train_step.batch", STEP_B), pick("gpt.train_step.length", STEP_T))
    return [(randint(0, vocab, shape, seed=seed + k, device=device),
             randint(0, vocab, shape, seed=seed + 10 + k, device=device)) for k in range(len(STEP_CLIPS))]


def _clip_norms(setup: dict, device) -> list[float]:
    """The total gradient norm before clipping at each step of the reference's run."""
    model = _local_lm(setup["state"], device, True)
    optimizer = torch.optim.SGD(_groups(dict(model.named_parameters())), lr=STEP_START_LR, momentum=STEP_MOMENTUM)
    norms = []
    for (lr, clip), (x, y) in zip(setup["plan"], setup["batches"]):
        for group in optimizer.param_groups:
            group["lr"] = lr
        optimizer.zero_grad(set_to_none=True)
        logits = model(x)
        F.cross_entropy(logits.reshape(-1, logits.size(-1)), y.reshape(-1)).backward()
        norms.append(float(torch.nn.utils.clip_grad_norm_(model.parameters(), math.inf)))
        if clip is not None:
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0 if clip == "default" else clip)
        optimizer.step()
    return norms


def step_setup(device) -> dict:
    """This submission's train_step run: the plan (rates drawn), the lent model's weights and the batches, from the
    first seed 140, 1140, 2140, ... whose gradient norms keep every clipping threshold active or not as planned, and
    the default threshold (1.0) active at every step of the core's run (the same rates, no grad_clip given)."""
    plan = tuple(zip(pick("gpt.train_step.rates", STEP_RATES), STEP_CLIPS))
    setup = None
    for k in range(20):
        seed = 140 + 1000 * k
        setup = {"plan": plan, "state": {key: v * 3 for key, v in _probe_state(seed).items()},
                 "batches": _step_batches(device, seed)}
        norms = _clip_norms(setup, device)
        core = _clip_norms({**setup, "plan": tuple((lr, "default") for lr, _clip in plan)}, device)
        if all(clip is None or (norm < 0.9 * clip if clip == 50.0 else norm > 1.1 * (1.0 if clip == "default"
                                                                                    else clip))
               for norm, (_lr, clip) in zip(norms, plan)) and all(norm > 1.1 for norm in core):
            break
    return setup


def _groups(parameters: dict) -> list[dict]:
    """The optimizer's two parameter groups, as the course's loop makes them: matrices and embeddings, then biases."""
    names = sorted(parameters)
    return [{"params": [parameters[n] for n in names if n.endswith("weight")]},
            {"params": [parameters[n] for n in names if n.endswith("bias")]}]


def _local_step_run(setup: dict, device, step, training: bool = True) -> dict:
    """The plan run here with `step` (the reference or a known mistake): returns, weights, final gradients."""
    model = _local_lm(setup["state"], device, training)
    optimizer = torch.optim.SGD(_groups(dict(model.named_parameters())), lr=STEP_START_LR, momentum=STEP_MOMENTUM)
    returns = []
    for (lr, clip), (x, y) in zip(setup["plan"], setup["batches"]):
        extra = () if clip == "default" else (clip,)
        value = step(model, optimizer, x, y, lr, *extra)
        returns.append(float(value.detach()) if isinstance(value, torch.Tensor) else float(value))
    return {"returns": returns, "weights": {k: v.detach().clone() for k, v in model.state_dict().items()},
            "grads": {n: None if p.grad is None else p.grad.detach().clone() for n, p in model.named_parameters()},
            "lrs": [group["lr"] for group in optimizer.param_groups]}


def _same_run(got: dict, expected: dict, device, what=("returns", "weights")) -> bool:
    for key in what:
        if key == "returns":
            if not all(math.isclose(a, b, rel_tol=1e-4, abs_tol=1e-5) for a, b in zip(got["returns"],
                                                                                     expected["returns"])):
                return False
            continue
        for name, value in expected[key].items():
            mine = got[key].get(name)
            if value is None or mine is None:
                if not (value is None and (mine is None or not bool(mine.abs().max() > 0))):
                    return False
            elif not isinstance(mine, torch.Tensor) or not values_close(mine, value, device, looser=10.0):
                return False
    return True


@probed
@given_working_parts("train_step")
def check_train_step(train_step) -> None:
    """train_step(model, optimizer, x, y, lr, grad_clip=1.0) -> the loss before the step, after one step."""
    device = start_check()
    reference = _reference()
    channel = train_step.channel
    setup = step_setup(device)                                   # larger weights: gradient norms above 1
    state, plan = setup["state"], setup["plan"]
    description = ("train_step(a small language model in training mode, an SGD optimizer with two parameter groups, "
                   f"x {shape_of(setup['batches'][0][0])}, y {shape_of(setup['batches'][0][1])}, lr, grad_clip)")

    def make():
        model = _remote_lm(channel, state, device, True)
        parameters = {n: model.attr(*n.split(".")) for n, _shape, _dtype in describe(model, "the lent model")
                      .get("parameters", [])}
        optimizer = _remote.new(channel, "torch.optim.SGD", _groups(parameters), lr=STEP_START_LR,
                                momentum=STEP_MOMENTUM)
        return model, optimizer

    # the core: every step with the default grad_clip (1.0); then grad_clip: the plan's thresholds (0.5, None, 50,
    # the default, 0.05), on the same batches from the same weights
    _judge_step_run(train_step, {**setup, "plan": tuple((lr, "default") for lr, _clip in plan)},
                    description.removesuffix(", grad_clip)") + ")", make, device, reference)
    with argument("train_step.grad_clip"):
        _judge_step_run(train_step, setup, description, make, device, reference)
    # a model in eval mode stays there, and its loss is the eval-mode loss
    model = _remote_lm(channel, state, device, False)
    optimizer = grader_step(description, lambda: _remote.new(channel, "torch.optim.SGD", model.attr("parameters")(),
                                                             lr=STEP_START_LR))
    x, y = setup["batches"][0]
    lr = plan[0][0]
    tested = f"train_step(a small language model in eval mode, an SGD optimizer, x, y, lr={lr})"
    got = call("train_step", train_step, model, optimizer, x.clone(), y.clone(), lr, tested=tested)
    local = _local_lm(state, device, False)
    expected_loss = reference.train_step(local, torch.optim.SGD(local.parameters(), lr=STEP_START_LR), x, y, lr)
    changed = _training_flag(model, "the lent model") is not False
    if changed or not isinstance(got, numbers.Real) or not math.isclose(float(got), expected_loss, rel_tol=1e-4,
                                                                         abs_tol=1e-5):
        fail("train_step must leave the model's mode as it was and run it in that mode (the caller sets it).",
             tested=tested, details=["the model was left in training mode" if changed else
                                     f"expected the eval-mode loss {expected_loss:.4f}, got {got}"],
             mistake="train_step.mode_changed")


def _judge_step_run(train_step, setup: dict, description: str, make, device, reference) -> None:
    """The plan of `setup` run with the student's train_step on a fresh lent model and optimizer (`make`), judged
    against the reference's run: the returned losses, the weights, the rates left in the groups, the mode."""
    plan = setup["plan"]
    model, optimizer = grader_step(description, make)
    returns = []
    for k, ((lr, clip), (x, y)) in enumerate(zip(plan, setup["batches"])):
        extra = () if clip == "default" else (clip,)
        shown = "" if clip == "default" else f", grad_clip={clip}"
        tested = f"step {k + 1} of {len(plan)}: train_step(model, optimizer, x, y, lr={lr}{shown})"
        got = call("train_step", train_step, model, optimizer, x.clone(), y.clone(), lr, *extra, tested=tested)
        if isinstance(got, RemoteObject) or isinstance(got, bool) or not isinstance(got, (numbers.Real,
                                                                                           torch.Tensor)):
            fail("train_step must return the loss as a Python float.", tested=tested,
                 details=[f"got a {type_name(got)}"])
        if isinstance(got, torch.Tensor):
            fail("train_step must return the loss as a Python float, not a tensor.", tested=tested,
                 details=[f"got a tensor of shape {tuple(got.shape)}"], mistake="train_step.returns_tensor")
        returns.append(float(got))
    weights = grader_step(description, model.state)
    grads = {}
    for name in weights:
        grads[name] = grader_step(description, lambda name=name: model.attr(*name.split("."), "grad").fetch())
    lrs = [group.get("lr") if isinstance(group, dict) else None
           for group in grader_step(description, optimizer.attr("param_groups").fetch)]
    got_run = {"returns": returns, "weights": weights, "grads": grads, "lrs": lrs}
    expected = _local_step_run(setup, device, reference.train_step)

    returns_ok = _same_run(got_run, expected, device, ("returns",))
    weights_ok = _same_run(got_run, expected, device, ("weights",))
    if not (returns_ok and weights_ok):
        mistake = None
        for mistake_id, flags in M.TRAIN_STEP_MISTAKES.items():
            variant = _local_step_run(setup, device, lambda *a, flags=flags: M.train_step_variant(*a, **flags))
            what = (("returns",) if weights_ok else ("weights",) if returns_ok else ("returns", "weights"))
            if {"clip", "zero_grad", "step"} & set(flags):
                what += ("grads",)  # the same weights: clipping after the step or never; no step or nothing to step
            try:
                if _same_run(got_run, variant, device, what):
                    mistake = mistake_id
                    break
            except Exception:  # noqa: BLE001 -- a variant that cannot be compared does not match
                continue
        if not weights_ok:
            fail(f"{description}: after {len(plan)} steps the weights differ from the reference's (same "
                 "initial weights, same optimizer, same batches, rates and clipping).",
                 details=expected_got("the same weights as the reference", "different weights"), mistake=mistake)
        fail(f"{description}: the returned losses differ from the reference's.",
             details=expected_got(", ".join(f"{v:.4f}" for v in expected["returns"]),
                                  ", ".join(f"{v:.4f}" for v in returns)), mistake=mistake,
             hint=None if mistake else "return loss.item(): the loss of the batch before the step")
    if any(not isinstance(lr, numbers.Real) or not math.isclose(lr, plan[-1][0]) for lr in lrs):
        fail(f"{description}: after the last step the optimizer's parameter groups do not all hold its rate.",
             details=expected_got(f"lr={plan[-1][0]} in every group", ", ".join(str(v) for v in lrs)),
             mistake="train_step.lr_first_group_only" if lrs and lrs[0] == plan[-1][0] else
             "train_step.lr_not_set")
    if _training_flag(model, "the lent model") is not True:
        fail(f"{description}: the model is no longer in training mode after train_step.",
             mistake="train_step.mode_changed")


# --------------------------------------------------------------------------------------------- sample_next_token
# Draws for the frequency test; a chi-square above CHI2_LIMIT (for at most 5 degrees of freedom its p-value is
# below 1e-6) or any draw of a blocked token fails.
DRAWS, CHI2_LIMIT = 6000, 40.0
STAT_LOGITS = torch.tensor([2.0, 1.0, 1.0, 0.3, -0.5, -1.0])      # a tie at the 2nd/3rd largest


def chi_square(counts: torch.Tensor, probs: torch.Tensor) -> float:
    counts, expected = counts.double(), probs.double() * counts.sum()
    if bool(((expected == 0) & (counts > 0)).any()):
        return math.inf
    kept = expected > 0
    return float((((counts - expected) ** 2)[kept] / expected[kept]).sum())


ARGMAX_LOGITS = [[1.0, 3.0, 3.0, 0.0], [5.0, 5.0, 1.0, 1.0], [0.0, -1.0, 2.0, 2.0]]    # ties at the largest
MISTAKE_HOWS = (("sample.temperature_after_softmax", "after_softmax"), ("sample.temperature_multiplied", "multiplied"),
                ("sample.top_k_minus_one", "k_minus_one"), ("sample.top_k_drops_ties", "no_ties"))
SEPARATION = 200.0   # the chi-square's non-centrality between two distributions a frequency test must tell apart


def _argmax_logits() -> torch.Tensor:
    """Rows of small integers whose largest value occurs twice (the first index wins): today's, or drawn."""
    draw = rng("gpt.sample.argmax")
    options = [ARGMAX_LOGITS]
    for _ in range(12):
        width, rows = draw.randint(4, 7), []
        for r in range(draw.randint(3, 5)):
            row = [float(draw.randint(-3, 5)) for _ in range(width)]
            first, second = sorted(draw.sample(range(1 if r == 0 else 0, width), 2))  # not all argmaxes at 0
            row[first] = row[second] = max(row) + float(draw.randint(0, 2))
            rows.append(row)
        options.append(rows)
    return torch.tensor(pick("gpt.sample.argmax_rows", options))


def _stat_logits() -> torch.Tensor:
    """STAT_LOGITS with its entries in this submission's order (the tie at the 2nd/3rd largest stays)."""
    draw = rng("gpt.sample.stat_order")
    orders = [list(range(STAT_LOGITS.numel()))] + [draw.sample(range(STAT_LOGITS.numel()), STAT_LOGITS.numel())
                                                   for _ in range(24)]
    return STAT_LOGITS[pick("gpt.sample.stat_order", orders)]


def _non_centrality(a: torch.Tensor, b: torch.Tensor) -> float:
    """DRAWS * sum (a - b)^2 / b: how far counts drawn from `a` land from `b` in chi-square (inf: a draws what b
    blocks)."""
    a, b = a.double(), b.double()
    if bool(((b == 0) & (a > 0)).any()):
        return math.inf
    kept = b > 0
    return float(DRAWS * (((a - b) ** 2)[kept] / b[kept]).sum())


def _distinguishable(logits: torch.Tensor, temperature: float, top_k) -> bool:
    """Every two different distributions among the right one and the known mistakes' are far apart: each mistake
    fails the frequency test and is not taken for another."""
    dists = [M.tempered(logits, temperature, top_k)] + [M.tempered(logits, temperature, top_k, how)
                                                        for _m, how in MISTAKE_HOWS]
    for i, a in enumerate(dists):
        for b in dists[i + 1:]:
            if torch.allclose(a, b, atol=1e-9):
                continue
            if min(_non_centrality(a, b), _non_centrality(b, a)) < SEPARATION:
                return False
    return True


def _frequency_plan(logits: torch.Tensor) -> list[tuple[float, int | None]]:
    """(temperature, top_k) of the frequency tests: plain; a temperature; top_k 2 cutting the tie; top_k 3 or 4.
    Drawn among values whose distributions stay distinguishable (else today's)."""
    spaces = [("gpt.sample.plain", [(1.0, None)]),
              ("gpt.sample.temperature", [(0.5, None), (0.4, None), (0.6, None), (2.0, None), (2.5, None)]),
              ("gpt.sample.tie_cut", [(2.0, 2), (1.5, 2), (0.7, 2), (2.5, 2), (1.0, 2)]),
              ("gpt.sample.top_k", [(1.0, 3), (0.8, 3), (1.2, 4), (0.6, 4), (1.0, 4)])]
    plan = []
    for label, options in spaces:
        chosen = pick(label, options)
        plan.append(chosen if _distinguishable(logits, *chosen) else options[0])
    return plan


@probed
def check_sample_next_token(sample_next_token) -> None:
    """sample_next_token(logits (B, V), temperature=1.0, top_k=None, generator=None) -> (B,) token ids."""
    start_check()
    reference = _reference()
    channel = sample_next_token.channel
    stat = _stat_logits()
    plain, tempered, tie_cut, top_k_plan = _frequency_plan(stat)
    # the core: frequencies over many plain draws (temperature 1.0, no top_k) from the global generator
    _frequencies(sample_next_token, stat, *plain)
    passed = set()  # the arguments whose own tries passed (a try of several arguments counts only on top of them)
    with argument("sample_next_token.temperature"):
        # temperature 0: the argmax, first index on ties
        logits = _argmax_logits()
        tested = f"sample_next_token(logits {shape_of(logits)}, temperature=0)"
        got = call("sample_next_token", sample_next_token, logits.clone(), 0.0, tested=tested)
        expect_tensor(got, logits.argmax(-1), "the tokens at temperature 0", "cpu", tested=tested, exact=True,
                      note="temperature 0 means the argmax of each row (torch.argmax keeps the first index on ties)")
        _frequencies(sample_next_token, stat, *tempered)
        passed.add("temperature")
    with argument("sample_next_token.top_k"):  # at the plan's temperatures on top of a passing temperature, else 1
        for temperature, top_k in (tie_cut, top_k_plan):
            _frequencies(sample_next_token, stat, temperature if "temperature" in passed else 1.0, top_k)
        passed.add("top_k")
    # with a generator, the draws are exactly torch.multinomial(probs, 1, generator=generator)
    rows, vocab = pick("gpt.sample.rows", [5, 4, 6, 7]), pick("gpt.sample.vocab", [9, 8, 10, 11, 12])
    logits = randn(rows, vocab, seed=121, device="cpu") * 2
    note = ("with a generator the draw is fixed: one call torch.multinomial(probs, 1, generator=generator)"
            ".squeeze(-1) for the whole batch, after temperature and top-k")

    def drawn_like_reference(temperature, top_k, seed):
        tested = f"sample_next_token(logits {shape_of(logits)}, {temperature}, top_k={top_k}, generator)"
        generator = _generator(channel, seed)
        got = call("sample_next_token", sample_next_token, logits.clone(), temperature, top_k, generator,
                   tested=tested)
        expected = reference.sample_next_token(logits, temperature, top_k, _local_generator(seed))
        if _generator_ignored(got, expected, lambda: call("sample_next_token", sample_next_token, logits.clone(),
                                                             temperature, top_k, _generator(channel, seed),
                                                             tested=tested, _seed=128)):
            fail("sample_next_token: the same seeded generator gives other tokens at every call.", tested=tested,
                 mistake="sample.generator_ignored", hint=note)
        expect_tensor(got, expected, "the drawn tokens", "cpu", tested=tested, exact=True, note=note)

    with argument("sample_next_token.generator"):
        drawn_like_reference(1.0, None, 122)
        if {"temperature", "top_k"} <= passed:  # the one draw comes after temperature and top-k
            drawn_like_reference(pick("gpt.sample.gen_temperature", [0.7, 0.6, 0.9, 1.4]),
                                 pick("gpt.sample.gen_top_k", [3, 2, 4, 5]), 123)
            drawn_like_reference(pick("gpt.sample.gen_temperature_b", [1.1, 0.8, 1.3, 0.5]), vocab - 1, 126)
        passed.add("generator")
    # the stated edge case: a top_k equal to or larger than the vocabulary keeps every token (exact draws where the
    # arguments passed on their own, else frequencies at temperature 1, which need neither the generator nor it)
    past = pick("gpt.sample.edge_past", [11, 1, 5, 30])
    with edge_case("sample_next_token.top_k_past_vocabulary"):
        if {"temperature", "top_k", "generator"} <= passed:
            drawn_like_reference(pick("gpt.sample.edge_temperature", [1.3, 1.1, 0.8, 1.6]), vocab, 124)
            drawn_like_reference(pick("gpt.sample.edge_temperature_b", [0.9, 1.2, 0.7]), vocab + past, 125)
        else:
            _frequencies(sample_next_token, stat, 1.0, stat.numel())
            _frequencies(sample_next_token, stat, 1.0, stat.numel() + past)


def _frequencies(sample_next_token, stat: torch.Tensor, temperature: float, top_k) -> None:
    """DRAWS draws from the same logits `stat` (the global generator, seeded by the grader) are drawn from the right
    distribution (a chi-square test); a failure names the known mistake whose distribution they fit."""
    batch = stat.expand(DRAWS, -1).clone()
    tested = (f"sample_next_token(the same logits in {DRAWS} rows, temperature={temperature}, top_k={top_k})"
              " (how often each token is drawn)")
    got = call("sample_next_token", sample_next_token, batch, temperature, top_k, tested=tested, _seed=120)
    got = as_tensor(got, "sample_next_token's result", tested)
    expect_shape(got, (DRAWS,), "sample_next_token's result", tested, hint="one token id per row: (B,)")
    if got.is_floating_point() or int(got.min()) < 0 or int(got.max()) >= stat.numel():
        fail("sample_next_token must return token ids (int64) between 0 and V - 1.", tested=tested)
    counts = torch.bincount(got.long().cpu(), minlength=stat.numel())
    right = chi_square(counts, M.tempered(stat, temperature, top_k))
    if right > CHI2_LIMIT:
        mistake = None
        support = M.tempered(stat, temperature, top_k) > 0
        if top_k is not None and int(support.sum()) > top_k and int((counts > 0).sum()) == top_k \
                and not bool((counts[~support] > 0).any()):
            mistake = "sample.top_k_drops_ties"       # exactly k kept: some logit equal to the k-th was dropped
        for mistake_id, how in MISTAKE_HOWS:
            if mistake is None and chi_square(counts, M.tempered(stat, temperature, top_k, how)) <= CHI2_LIMIT:
                mistake = mistake_id
                break
        fail("sample_next_token: the tokens are not drawn from the right distribution.", tested=tested,
             details=[f"drawn counts {counts.tolist()}, expected about "
                      f"{[round(p * DRAWS) for p in M.tempered(stat, temperature, top_k).tolist()]}"],
             mistake=mistake)


def _generator_ignored(got, expected, again) -> bool:
    """The draw differs from the reference's, and a second call with a generator seeded the same way (and torch's
    global generator seeded otherwise) draws other tokens still: the answer draws from something else."""
    if not isinstance(got, torch.Tensor) or got.shape != expected.shape or torch.equal(got.cpu(), expected):
        return False
    second = again()
    return isinstance(second, torch.Tensor) and second.shape == got.shape and not torch.equal(second, got)


# ------------------------------------------------------------------------------------------------------ generate


DRAW_SEED, LONG_DRAW_SEED = 138, 139  # torch's global generator, seeded the same in the kernel and here


def _sampled(draw_seed: int, produce):
    """What `produce()` generates with the defaults (temperature 1, no top-k, no generator): torch's global
    generator seeded as the kernel's is for the student's call."""
    with seeded(draw_seed):
        return produce()


def _revealing_prompt(local, shape, seed: int, steps: int, variants, draw_seed: int, tries: int = 5):
    """A prompt (seed, else seed + 1000, + 2000, ...) on which each known mistake's output with the defaults
    (`variants`: the switches of M.generate_variant, drawn from the generator seeded with `draw_seed`) differs from
    the right one (None if none of `tries` does)."""
    found = None
    for k in range(tries):
        prompt = randint(0, PROBE_LM_CONFIG["vocab_size"], shape, seed=seed + 1000 * k, device="cpu")
        right = _sampled(draw_seed, lambda: _reference().generate(local, prompt, steps))
        if all(not torch.equal(_sampled(draw_seed, lambda flags=flags: M.generate_variant(
                local, prompt, steps, sample=True, **flags)), right) for flags in variants):
            found = prompt
            break
    local.eval()
    return found


def generate_setup(shape, steps: int, long_shape, more: int):
    """The lent model's weights (seed 130, else 1130, 2130, ...: some weights settle on one token whatever the
    context, then a wrong crop cannot show) and the two prompts, each revealing its known mistakes."""
    fallback = None
    for k in range(12):
        state = _probe_state(130 + 1000 * k)
        local = _local_lm(state, "cpu", False)
        prompt = _revealing_prompt(local, shape, 131, steps, ({"position": 0}, {"crop": "first"}, {"training": True}),
                                   DRAW_SEED)
        long_prompt = _revealing_prompt(local, long_shape, 137, more, ({"crop": "first"},), LONG_DRAW_SEED)
        if prompt is not None and long_prompt is not None:
            return state, local, prompt, long_prompt
        if fallback is None:
            fallback = (state, local, randint(0, PROBE_LM_CONFIG["vocab_size"], shape, seed=131, device="cpu"),
                        randint(0, PROBE_LM_CONFIG["vocab_size"], long_shape, seed=137, device="cpu"))
    return fallback


@probed
@given_working_parts("generate")
def check_generate(generate) -> None:
    """generate(model, ids, max_new_tokens, temperature=1.0, top_k=None, generator=None) -> prompt + new tokens."""
    start_check()
    reference = _reference()
    channel = generate.channel
    max_len = PROBE_LM_CONFIG["max_len"]
    steps, more = pick("gpt.generate.steps", [20, 18, 22, 25]), pick("gpt.generate.long_steps", [6, 5, 7])
    state, local, prompt, long_prompt = generate_setup(
        (pick("gpt.generate.b", [2, 3, 4]), pick("gpt.generate.t", [3, 2, 4, 5])), steps,
        (2, max_len + pick("gpt.generate.long", [8, 4, 11, 6])), more)
    # the core: the defaults (temperature 1, no top-k, no generator: torch's global generator, seeded for the call
    # as it is here), past max_len (the context must be cropped), starting in training mode
    model = _remote_lm(channel, state, "cpu", True)
    tested = f"generate(a small model with max_len={max_len}, ids {shape_of(prompt)}, {steps}) (torch seeded)"
    got = call("generate", generate, model, prompt.clone(), steps, tested=tested, _seed=DRAW_SEED)
    expected = _sampled(DRAW_SEED, lambda: reference.generate(local, prompt, steps))

    def variant(seed, ids, new_tokens, **flags):  # a known mistake, drawn as the student's call draws
        return lambda: _sampled(seed, lambda: M.generate_variant(local, ids, new_tokens, sample=True, **flags))

    expect_tensor(got, expected, "generate's output", "cpu", tested=tested, exact=True, mistakes=lambda: [
        ("generate.first_position", variant(DRAW_SEED, prompt, steps, position=0)),
        ("generate.keeps_first_tokens", variant(DRAW_SEED, prompt, steps, crop="first")),
        ("generate.train_mode", variant(DRAW_SEED, prompt, steps, training=True)),
    ], note="each step feeds ids[:, -model.max_len:], takes the LAST position's logits and draws one token with "
            "sample_next_token(logits, temperature, top_k, generator)")
    local.eval()
    if _training_flag(model, "the lent model") is not True:
        fail("generate does not restore the model's training mode.", tested=tested,
             mistake="generate.mode_not_restored")
    # a prompt longer than max_len: the context is its LAST max_len tokens from the first step on
    tested = f"generate(a small model with max_len={max_len}, ids {shape_of(long_prompt)}, {more}) (torch seeded)"
    got = call("generate", generate, _remote_lm(channel, state, "cpu", False), long_prompt.clone(), more,
               tested=tested, _seed=LONG_DRAW_SEED)
    expect_tensor(got, _sampled(LONG_DRAW_SEED, lambda: reference.generate(local, long_prompt, more)),
                  "generate's output", "cpu", tested=tested, exact=True, mistakes=lambda: [
                      ("generate.keeps_first_tokens", variant(LONG_DRAW_SEED, long_prompt, more, crop="first")),
                  ], note="each step feeds ids[:, -model.max_len:], the last max_len tokens")
    local.eval()
    # every argument reaches sample_next_token: each argument's own tries follow, and a try of several arguments at
    # once runs only on top of their own tries' passing (one mistake crosses one criterion)
    model = _remote_lm(channel, state, "cpu", False)

    def sampled(args, seed, **kwargs):
        shown = ", ".join([*(str(a) for a in args), *(f"{k}={v}" for k, v in kwargs.items())])
        tested = f"generate(a small model, ids {shape_of(prompt)}, {shown}, generator=...)"
        got = call("generate", generate, model, prompt.clone(), *args, **kwargs,
                   generator=_generator(channel, seed), tested=tested)
        expected = reference.generate(local, prompt, *args, **kwargs, generator=_local_generator(seed))
        expect_tensor(got, expected, "generate's output", "cpu", tested=tested, exact=True,
                      note="pass temperature, top_k and the generator on to sample_next_token")

    passed = set()
    with argument("generate.generator"):  # the defaults otherwise
        sampled((pick("gpt.generate.n_b", [5, 4, 7]),), 133)
        passed.add("generator")
    with argument("generate.top_k"):  # top_k=1 keeps the largest logit only: the same tokens whatever the draw
        sampled((pick("gpt.generate.n_c", [4, 3, 6]),), 134, top_k=1)
        passed.add("top_k")
    with argument("generate.temperature"):  # temperature 0 decodes greedily: the same tokens whatever the draw
        tested = f"generate(a small model, ids {shape_of(prompt)}, {steps}, temperature=0)"
        got = call("generate", generate, model, prompt.clone(), steps, 0.0, tested=tested)
        expect_tensor(got, reference.generate(local, prompt, steps, 0.0), "generate's output", "cpu", tested=tested,
                      exact=True, note="temperature 0 goes on to sample_next_token, which then takes the argmax")
        local.eval()
    if "generator" in passed:  # another temperature, drawn with the generator (without it: not judged here)
        with argument("generate.temperature"):
            sampled((pick("gpt.generate.n_d", [7, 6, 9]), pick("gpt.generate.temp_d", [1.7, 1.5, 2.0, 0.6])), 135)
            passed.add("temperature")
    if {"generator", "top_k", "temperature"} <= passed:
        with argument("generate.top_k"):  # temperature and top_k together
            sampled((pick("gpt.generate.n_a", [6, 5, 8]), pick("gpt.generate.temp_a", [0.8, 0.7, 1.2]),
                     pick("gpt.generate.k_a", [4, 3, 5, 6])), 132)
    got = call("generate", generate, model, prompt.clone(), 0, tested="generate(..., max_new_tokens=0)")
    expect_tensor(got, prompt, "generate's output with max_new_tokens=0", "cpu", exact=True,
                  tested="generate(..., max_new_tokens=0)")
