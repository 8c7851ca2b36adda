"""Hidden checks of notebook 11's key/value cache (cached_forward, cached_generate): the reference and differently
written answers pass; each known mistake fails with its catalogue id named (a recomputing loop that forges the
projection counts too); answers that break what the contract states without a catalogue id fail readably; the
variants with every switch off are the reference; every submission's generation case has teeth."""
from __future__ import annotations

import pytest
import torch

import solutions
import variants as V
import variants_pretrained_cache as K
from autograder.checks.kit.draws import salted
from autograder.checks.pretrained import cache as C
from autograder.checks.pretrained import mistakes_cache as M
from coursekit.checks.pretrained.cache import KeyValueRecorder
from part_suite import hidden_suite

APIS = ("cached_forward", "cached_generate")

CORRECT = [("cached_forward", solutions.cached_forward), ("cached_forward", K.cached_forward_sdpa),
           ("cached_forward", K.cached_forward_loop), ("cached_generate", solutions.cached_generate),
           ("cached_generate", K.cached_generate_student)]
WRONG = [  # (api name, answer, the catalogue id it must be named by)
    ("cached_forward", K.forward_with("no_offset"), "kv.no_rotary_offset"),
    ("cached_forward", K.forward_with("rotate_all"), "kv.rotated_twice"),
    ("cached_forward", K.forward_with("unrotated_cache"), "kv.keys_stored_unrotated"),
    ("cached_forward", K.forward_with("query_heads"), "kv.query_heads_cached"),
    ("cached_forward", K.forward_with("no_causal"), "kv.no_causal_mask"),
    ("cached_forward", K.forward_with("new_only"), "kv.cache_not_extended"),
    ("cached_forward", K.forward_with("returns_old"), "kv.cache_not_extended"),
    ("cached_generate", K.generate_with("refeed_last"), "kv_generate.prompt_token_by_token"),
    ("cached_generate", K.generate_with("token_by_token"), "kv_generate.prompt_token_by_token"),
    ("cached_generate", K.generate_with("eos_excluded"), "kv_generate.eos_not_included"),
    ("cached_generate", K.generate_with("returns_prompt"), "kv_generate.returns_prompt"),
    ("cached_generate", K.generate_with("no_cache_model"), "kv_generate.no_cache"),
    ("cached_generate", K.generate_with("no_cache_forward"), "kv_generate.no_cache"),
    ("cached_generate", K.generate_with("forged"), "kv_generate.no_cache"),
    ("cached_forward", K.forward_with("eval_inside"), "kv.sets_mode"),
    ("cached_generate", K.generate_with("mode_not_restored"), "kv_generate.mode_not_restored"),
    ("cached_generate", K.generate_with("no_eval"), "kv_generate.train_mode_or_grad"),
    ("cached_generate", K.generate_with("with_grad"), "kv_generate.train_mode_or_grad"),
]
UNNAMED = [  # (api name, answer, words of its failure)
    ("cached_forward", lambda model, ids, cache=None: solutions.cached_forward(model, ids, cache)[0],
     "must return a pair (logits, cache)"),
    ("cached_generate", lambda model, prompt_ids, max_new_tokens, eos_id=None: torch.tensor(
        solutions.cached_generate(model, prompt_ids, max_new_tokens, eos_id)), "must return a list of int"),
]
EDGE_ONLY = [("cached_forward", K.forward_with("no_length_check"), "cached_forward.too_long"),
             ("cached_forward", K.forward_with("off_by_one"), "cached_forward.too_long")]
ARGUMENT_ONLY = [("cached_generate", K.generate_with("ignores_eos"), "cached_generate.eos_id")]
# right with eos_id left out (the core), wrong with an eos that comes mid-way: its only argument
PARTIAL_MISTAKES = {"kv_generate.eos_not_included": (("cached_generate.eos_id",), 1 - 0.25)}

globals().update(hidden_suite(C, APIS, correct=CORRECT, wrong=WRONG, unnamed=UNNAMED,
                              mistake_prefixes=("kv.", "kv_generate."), partial_mistakes=PARTIAL_MISTAKES,
                              edge_only=EDGE_ONLY, argument_only=ARGUMENT_ONLY))


def test_every_drawn_model_and_split_is_non_degenerate():
    """Groups of >= 2 query heads over >= 2 key/value heads (so caching query heads shows in the shape), an even
    d_head, a rotary base far from 10000; a first call of >= 2 tokens and a second of >= 3 (the causal mask shows
    in both)."""
    for d_model, heads, kv_heads in C.SIZES:
        assert kv_heads >= 2 and heads % kv_heads == 0 and heads // kv_heads >= 2 and (d_model // heads) % 2 == 0
    assert 10000.0 not in C.ROPE_BASES
    for salt in range(12):
        with salted(salt):
            sizes, B, T, split = C.forward_draws()
            assert B >= 2 and split >= 2 and T - split >= 3 and T + 1 < sizes["max_len"]


# ------------------------------------------------------------------------------------------ the variants themselves
def test_the_variants_with_every_switch_off_are_the_reference():
    sizes = C.model_sizes("test")
    ref = C.cache_model(5, sizes, "cpu")
    ids = torch.randint(0, sizes["vocab_size"], (2, 9), generator=torch.Generator().manual_seed(0))
    with torch.no_grad():
        expected, cache = [], None
        for a, b in ((0, 4), (4, 5), (5, 9)):
            logits, cache = solutions.cached_forward(ref, ids[:, a:b], cache)
            expected.append((logits, cache))
    for (logits, cache), (want, want_cache) in zip(M.cached_calls(ref, ids, [0, 4, 5, 9]), expected):
        torch.testing.assert_close(logits, want)
        for pair, want_pair in zip(cache, want_cache):
            torch.testing.assert_close(pair, want_pair)
    prompt = [3, 1, 4, 1, 5]
    assert M.cached_generate_variant(ref, prompt, 9) == solutions.cached_generate(ref, prompt, 9)
    assert M.cached_generate_variant(ref, prompt, 9, 7) == solutions.cached_generate(ref, prompt, 9, 7)
    once = C._recorded(ref)
    assert M.cached_generate_variant(C._recorded(ref), prompt, 9) == solutions.cached_generate(once, prompt, 9)


def test_each_forward_mistake_changes_what_the_check_compares():
    """On a split with >= 2 tokens first and >= 3 after: the causal mask shows in both calls, the rotary offset and
    a second rotation in the second call's logits, the cache's form in its shape, the stored keys in their values
    (the last block's)."""
    sizes = C.model_sizes("test")
    ref = C.cache_model(5, sizes, "cpu")
    ids = torch.randint(0, sizes["vocab_size"], (2, 7), generator=torch.Generator().manual_seed(1))
    (l1, c1), (l2, c2) = M.cached_calls(ref, ids, [0, 2, 7])
    changed = {}
    for mistake in C.KV_IDS:
        (m1, d1), (m2, d2) = M.cached_calls(ref, ids, [0, 2, 7], **M.TABLE[mistake][1])
        changed[mistake] = (not torch.allclose(m1, l1, atol=1e-3), not torch.allclose(m2, l2, atol=1e-3),
                            d2[-1][0].shape != c2[-1][0].shape or not torch.allclose(d2[-1][0], c2[-1][0], atol=1e-3))
    assert changed == {"kv.no_rotary_offset": (False, True, True), "kv.rotated_twice": (False, True, True),
                       "kv.keys_stored_unrotated": (False, False, True), "kv.query_heads_cached": (False, False, True),
                       "kv.no_causal_mask": (True, True, True), "kv.cache_not_extended": (False, False, True)}


# ------------------------------------------------------------------------------------------ the generation cases
@pytest.mark.parametrize("salt", [0, 1, 2, 3, 0x5eed2026])
def test_every_submissions_generation_case_has_teeth(salt):
    """The search finds a case: no near tie, an eos mid-way, recomputing visible under the offsets."""
    with salted(salt):
        case = C.generate_case(torch.device("cpu"))
        seed = C._FOUND[(salt, "cpu")]
        assert C.candidate(seed, case.sizes, len(case.prompt), case.steps, "cpu")[1]
    assert 2 <= case.stop <= case.steps - 2 and case.plain.index(case.eos_id) == case.stop
    assert case.once != case.recomputed and len(case.prompt) + case.steps < case.sizes["max_len"]
    sizes = case.sizes
    assert sizes["num_kv_heads"] >= 2 and sizes["num_heads"] // sizes["num_kv_heads"] >= 2
    assert sizes["rope_base"] != 10000.0


def test_the_recorder_counts_the_reference_as_one_call_for_the_prompt_then_one_per_token():
    ref = C.cache_model(5, C.model_sizes("test"), "cpu")
    recorder = KeyValueRecorder(ref, scale=0.0)
    new = solutions.cached_generate(ref, [3, 1, 4, 1, 5], 6)
    assert set(map(tuple, recorder.counts().values())) == {(5, 1, 1, 1, 1, 1)} and len(new) == 6


def test_a_decoder_that_bypasses_the_modules_fails_readably():
    """Keys and values computed from the weights directly: the recorder sees nothing, the tokens carry no
    offsets."""
    def by_weights(model, ids, cache=None):
        for block in model.blocks:
            for name in ("w_k", "w_v"):
                projection = getattr(block.attn, name)
                if hasattr(projection, "linear"):
                    setattr(block.attn, name, projection.linear)
        return solutions.cached_forward(model, ids, cache)

    def generate(model, prompt_ids, max_new_tokens, eos_id=None):
        with torch.no_grad():
            logits, cache = by_weights(model, torch.tensor([prompt_ids]))
            new = [int(logits[0, -1].argmax())]
            while len(new) < max_new_tokens:
                logits, cache = by_weights(model, torch.tensor([[new[-1]]]), cache)
                new.append(int(logits[0, -1].argmax()))
        return new

    V.fails_with(C.check_cached_generate, generate, "does not use the key/value cache", "never ran")


@pytest.mark.parametrize("kind, words", [("no_length_check", "should raise ValueError"),
                                         ("off_by_one", "(exactly max_len)")])
def test_the_edge_case_says_which_side_of_max_len_went_wrong(kind, words):
    V.fails_partially(C.check_cached_forward, K.forward_with(kind), "cached_forward.too_long", words)


def test_a_generator_built_on_a_failing_cached_forward_is_judged_with_a_working_one(monkeypatch):
    """cached_forward failed its own check: the grader lends a working one into the namespace cached_generate reads
    (parts.lending; here the reference stands in for the course's stand-in), and the cache is judged on its own."""
    import marshal
    import types

    from autograder.checks.kit import parts

    student = types.FunctionType(K.cached_generate_student.__code__,
                                 {**vars(K), "cached_forward": K.forward_with("no_offset")},
                                 argdefs=K.cached_generate_student.__defaults__)
    with pytest.raises(AssertionError):
        C.check_cached_generate(student)
    lent = compile("from solutions.pretrained import cached_forward\nLENT = True\n", "<lent>", "exec")
    monkeypatch.setattr(parts, "compiled_for", lambda names: marshal.dumps(lent))
    with parts.assume_verdicts({"cached_forward": False}):
        C.check_cached_generate(student)
