"""Hidden checks of notebook 11's key/value cache: `cached_forward` and `cached_generate`.

The model: a small ModernGPT drawn per submission (`model_sizes`: 2 or more key/value heads, each shared by 2 or more
query heads, a rotary base far from 10000, eps 1e-5; its blocks' matrices scaled so that attention matters and
greedy decoding varies), the one notebook 11's checks lend to the student's functions (`features.kernel_models`: the
course's stand-ins of 09's block sent into the kernel with a ModernGPT, holding the grader's weights); the grader's
own copy is the reference's ModernGPT with the same weights. The grade cells hand in the functions alone.

cached_forward: a split of a drawn batch (a first call of at least 2 tokens, a second of at least 3 with the cache it
returned: the causal mask inside a call shows) and one call per token; each call's logits against the reference's
(the contract's atol 1e-4), its cache's structure (one (keys, values) pair per block, (B, num_kv_heads, T_past + T,
d_head)) and keys (rotated at their own positions) and values against the reference's cache; a model in training
mode with gradients stays so (the kernel reports its mode and requires_grad); `T_past + T > max_len` raises
ValueError (a stated edge case). A mismatch is named by the variants of `mistakes_cache.py`.

cached_generate: the tokens of greedy decoding (a drawn prompt and length, on a model in training mode, restored
afterwards), then with `eos_id` (an argument with teeth: an eos that first comes mid-way). That it really uses the
cache is judged as 06's cache is, without timing: a fresh model gets `KeyValueRecorder` (coursekit/checks/pretrained/
cache.py, public) in the kernel, whose key/value projections add an offset that depends on how many positions each
has projected so far. A decoder that projects every position once, in order, generates the tokens the grader
computes with the same instrument around the reference; one that runs the whole sequence again (`model(ids)`, or
`cached_forward` without its cache) shifts the offsets and generates others (the case search makes sure it does,
`generate_case`). The contract also fixes the calls ("one cached_forward of the whole prompt, then one call per new
token"): the positions each projection saw per call, reported by the kernel, must read [len(prompt), 1, 1, ...]. A
prompt fed token by token gives the right tokens, so only these counts show it; they never make a wrong answer pass.
"""
from __future__ import annotations

import copy
import numbers
from dataclasses import dataclass

import torch

from autograder.checks.kit.compare import as_tensor, candidates, describe, expect_shape, expect_tensor
from autograder.checks.kit.criteria import argument, edge_case
from autograder.checks.kit.draws import current_salt, pick
from autograder.checks.kit.inputs import reference
from autograder.checks.kit.parts import given_working_parts
from autograder.checks.kit.remote import ProbeBroken, RemoteObject, StudentError, hidden_check, new
from autograder.checks.kit.toolkit import call, expect_callable, expect_raises, fail, fetch, randint, start_check
from autograder.checks.pretrained import mistakes_cache as M
from autograder.checks.pretrained.features import kernel_models, reference_model, shown_config, state_of
from coursekit.checks.pretrained.cache import KeyValueRecorder, count_problem
from coursekit.tolerance import ROTARY_LOOSER

# (d_model, num_heads, num_kv_heads): groups of 2 to 3 query heads over 2 to 4 key/value heads, even d_head
SIZES = [(48, 6, 2), (64, 4, 2), (72, 6, 3), (48, 8, 4)]
ROPE_BASES = [500.0, 2000.0, 200.0, 100000.0]
SCALE = 3.0                # the blocks' matrices times this: the residual stream is not just the token's embedding
RECORDER = "coursekit.checks.pretrained.cache.KeyValueRecorder"
OFFSET_SCALE = 1.0         # the recorder's offsets: of the size of the keys and values
GREEDY_GAP = 1e-3          # every greedy step's top two logits at least this far apart (no near ties)
KV_IDS = [m for m, (variant, _) in M.TABLE.items() if variant is M.cached_forward_variant]
GENERATE_IDS = [m for m, (variant, _) in M.TABLE.items() if variant is M.cached_generate_variant]


# ------------------------------------------------------------------------------------------ the model
def model_sizes(label: str) -> dict:
    """This submission's model: the keyword arguments of ModernGPT."""
    d_model, heads, kv_heads = pick(f"{label}.sizes", SIZES)
    return dict(vocab_size=pick(f"{label}.vocab", [29, 23, 31, 37]), d_model=d_model, num_heads=heads,
                num_kv_heads=kv_heads, d_ff=pick(f"{label}.d_ff", [40, 52, 36, 44]),
                num_layers=pick(f"{label}.layers", [2, 3]), max_len=pick(f"{label}.max_len", [24, 20, 28, 32]),
                rope_base=pick(f"{label}.rope_base", ROPE_BASES), eps=1e-5)


def cache_model(seed: int, sizes: dict, device):
    """The reference ModernGPT under this submission's seed: norm weights around 1, blocks' matrices scaled."""
    return reference_model(seed, sizes, block_scale=SCALE).to(device)


def shown(sizes: dict) -> str:
    return f"a small {shown_config(sizes)} lent to your function"


# ------------------------------------------------------------------------------------------ cached_forward
def _pair(got, label: str, tested: str):
    if not isinstance(got, (tuple, list)) or len(got) != 2:
        fail(f"{label} must return a pair (logits, cache).", tested=tested, hint="return logits, cache")
    return got


def _stage(ref, ids, bounds, index, pick_out):
    """[(mistake id, thunk)]: what each cached_forward mistake gives at call `index` (`pick_out(logits, cache)`)."""
    return lambda: candidates(M.TABLE, lambda variant, switches: pick_out(
        *M.cached_calls(ref, ids, bounds, **switches)[index]), KV_IDS,
        {m: s for (v, m), s in M.FORMS.items() if v is M.cached_forward_variant})


def _expect_cache(cache, expected, sizes, label, tested, device, mistakes_at) -> None:
    """The returned cache: one (keys, values) pair per block, each (B, num_kv_heads, T_past + T, d_head), equal to
    the reference's (keys rotated at their own positions). `mistakes_at(i, part)`: the diagnosis of block i's."""
    if cache is None or isinstance(cache, (list, tuple)) and not cache:
        fail(f"{label} returned no cache.", tested=tested, mistake="kv.cache_not_extended")
    if not isinstance(cache, (list, tuple)) or len(cache) != len(expected):
        fail(f"{label} must return a cache with one (keys, values) pair per block ({len(expected)}).", tested=tested)
    for i, (pair, want) in enumerate(zip(cache, expected)):
        if not isinstance(pair, (list, tuple)) or len(pair) != 2:
            fail(f"block {i}'s entry of the cache {label} returned must be a pair (keys, values).", tested=tested)
        for part, what in enumerate(("keys", "values")):
            name = f"the cached {what} of block {i} after {label}"
            got, target = as_tensor(pair[part], name, tested), want[part]
            shape, wanted = tuple(got.shape), tuple(target.shape)
            if len(shape) == 4 and shape[1] == sizes["num_heads"] and shape[2:] == wanted[2:]:
                fail(f"{name} have one row per query head.", tested=tested, mistake="kv.query_heads_cached",
                     details=[f"expected shape {wanted}, got {shape}"])
            if len(shape) == 4 and shape[2] < wanted[2] and shape[:2] == wanted[:2]:
                fail(f"{name} hold {shape[2]} positions instead of T_past + T = {wanted[2]}.", tested=tested,
                     mistake="kv.cache_not_extended")
            expect_shape(got, wanted, name, tested, hint="(B, num_kv_heads, T_past + T, d_head)")
            expect_tensor(got, target, name, device, tested=tested, looser=ROTARY_LOOSER,
                          mistakes=mistakes_at(i, part))


def _expect_calls(fn, model, ref, ids, bounds, sizes, device) -> None:
    """cached_forward on ids[:, a:b] for consecutive bounds, each call given the cache the one before returned:
    each call's logits and cache against the reference's."""
    forward = reference("pretrained").cached_forward
    cache, expected_cache = None, None
    for index, (a, b) in enumerate(zip(bounds, bounds[1:])):
        label = f"cached_forward(model, ids[:, {a}:{b}]" + (")" if cache is None else ", cache)")
        tested = f"{shown(sizes)}, ids {tuple(ids.shape)} split at {bounds} (each call given the cache before it)"
        with torch.no_grad():
            expected, expected_cache = forward(ref, ids[:, a:b], expected_cache)
        given = () if cache is None else (cache,)
        logits, cache = _pair(call("cached_forward", fn, model, ids[:, a:b].clone(), *given, _no_grad=True,
                                   tested=tested), "cached_forward", tested)
        expect_tensor(logits, expected, f"the logits of {label}", device, tested=tested, looser=ROTARY_LOOSER,
                      shape_hint="(B, T, vocab_size): the new tokens only",
                      mistakes=_stage(ref, ids, bounds, index, lambda out, _cache: out))
        _expect_cache(cache, expected_cache, sizes, label, tested, device, lambda i, part, index=index: _stage(
            ref, ids, bounds, index, lambda _out, kv: kv[i][part]))


def _expect_mode_untouched(fn, model, ids, sizes) -> None:
    """A model in training mode, called with gradients on: still in training mode, its weights still trainable."""
    call("ModernGPT.train()", model.attr("train"))
    tested = f"{shown(sizes)} in training mode, gradients on"
    _pair(call("cached_forward", fn, model, ids.clone(), tested=tested), "cached_forward", tested)
    trainable = [fetch(model.attr(*path.split("."), "requires_grad"), path)
                 for path in ("token_embedding.weight", "blocks.0.attn.w_k.weight", "norm.weight")]
    if describe(model, "ModernGPT").get("training") is not True or not all(t is True for t in trainable):
        fail("cached_forward changed the model's mode or its parameters' requires_grad.", tested=tested,
             mistake="kv.sets_mode")
    call("ModernGPT.eval()", model.attr("eval"))


def _expect_too_long(fn, model, sizes, device) -> None:
    """T_past + T > max_len raises ValueError, after a cache of max_len - 2 and from an empty one; exactly max_len
    positions still work."""
    max_len, vocab = sizes["max_len"], sizes["vocab_size"]
    tokens = randint(0, vocab, (1, max_len + 1), seed=148, device=device)
    why = f"when T_past + T is larger than max_len={max_len}"
    with edge_case("cached_forward.too_long"):
        tested = f"{shown(sizes)}, a first call of {max_len - 2} tokens"
        _, cache = _pair(call("cached_forward", fn, model, tokens[:, :max_len - 2].clone(), _no_grad=True,
                              tested=tested), "cached_forward", tested)
        expect_raises(ValueError, f"cached_forward(model, 3 tokens, a cache of {max_len - 2} positions)", fn, model,
                      tokens[:, :3].clone(), cache, why=why, criterion="cached_forward.too_long")
        tested = f"{shown(sizes)}, 2 tokens after a cache of {max_len - 2} positions (exactly max_len)"
        logits, _ = _pair(call("cached_forward", fn, model, tokens[:, :2].clone(), cache, _no_grad=True,
                               tested=tested), "cached_forward", tested)
        expect_shape(as_tensor(logits, "cached_forward's logits", tested), (1, 2, vocab), "cached_forward's logits",
                     tested, hint="T_past + T == max_len is allowed: only longer raises ValueError")
    expect_raises(ValueError, f"cached_forward(model, {max_len + 1} tokens)", fn, model, tokens.clone(), why=why,
                  criterion="cached_forward.too_long")


def forward_draws() -> tuple[dict, int, int, int]:
    """This submission's model sizes, batch B, length T and split: >= 2 tokens first, then >= 3 with the cache."""
    return (model_sizes("cache.forward"), pick("cache.batch", [2, 3]), pick("cache.length", [8, 7, 9, 10]),
            pick("cache.split", [3, 2, 4]))


@hidden_check
def check_cached_forward(cached_forward) -> None:
    """cached_forward(model, ids, cache=None) -> (logits (B, T, V), cache): a split, one token at a time, the cache's
    structure and keys, the mode and gradients untouched, T_past + T > max_len raises ValueError."""
    device = start_check()
    expect_callable(cached_forward, "cached_forward")
    sizes, B, T, split = forward_draws()
    ref = cache_model(140, sizes, device)
    ids = randint(0, sizes["vocab_size"], (B, T), seed=141, device=device)
    with kernel_models(cached_forward.channel) as kernel:
        model = kernel.modern_gpt(sizes, state_of(ref), device)
        _expect_calls(cached_forward, model, ref, ids, [0, split, T], sizes, device)
        _expect_calls(cached_forward, model, ref, ids, list(range(T + 1)), sizes, device)
        _expect_mode_untouched(cached_forward, model, ids[:, :split], sizes)
        _expect_too_long(cached_forward, model, sizes, device)


# ------------------------------------------------------------------------------------------ cached_generate
@dataclass
class GenerateCase:
    """This submission's greedy-decoding case: the reference model and prompt, and the grader's decodes of them."""
    sizes: dict
    ref: torch.nn.Module
    prompt: list[int]
    steps: int
    plain: list[int]         # greedy decoding (the reference)
    once: list[int]          # with the recorder's offsets, each position projected once, in order
    recomputed: list[int]    # with the recorder's offsets, the whole sequence run again at every step
    stop: int                # the index of the first appearance of eos_id in `plain`, mid-way
    eos_id: int


def _recorded(ref):
    clone = copy.deepcopy(ref)
    KeyValueRecorder(clone, scale=OFFSET_SCALE, mode="count")
    return clone


def candidate(seed: int, sizes: dict, length: int, steps: int, device) -> tuple[GenerateCase, bool]:
    """The case of one model seed, and whether it qualifies: no near tie at any step (with and without the offsets),
    at least 4 distinct tokens, a token that first comes mid-way (eos_id), recomputing changes the tokens under the
    offsets, and feeding the prompt's last token again changes them."""
    ref = cache_model(seed, sizes, device)
    prompt = randint(0, sizes["vocab_size"], (length,), seed=seed + 1, device="cpu").tolist()
    gaps = []
    plain = M.cached_generate_variant(ref, prompt, steps, gaps=gaps)
    once = M.cached_generate_variant(_recorded(ref), prompt, steps, gaps=gaps)
    recomputed = M.cached_generate_variant(_recorded(ref), prompt, steps, use_cache=False)
    firsts = [j for j in range(2, steps - 1) if plain[j] not in plain[:j]]
    stop = firsts[-1] if firsts else steps - 1
    good = (min(gaps) > GREEDY_GAP and len(set(plain)) >= 4 and bool(firsts) and once != recomputed
            and M.cached_generate_variant(ref, prompt, steps, feed="refeed_last") != plain)
    return GenerateCase(sizes, ref, prompt, steps, plain, once, recomputed, stop, plain[stop]), good


_FOUND: dict = {}   # (salt, device) -> the seed that qualified: one search per submission


def generate_case(device) -> GenerateCase:
    """This submission's case: the first model seed (150, 1150, 2150, ...) whose case qualifies (if none of 20 does,
    the last: the comparison stays valid, it only exercises less; the tests assert that the search succeeds). The
    model holds the prompt, the new tokens and one more (a prompt's last token fed again)."""
    sizes = dict(model_sizes("cache.generate"), max_len=pick("cache.generate.max_len", [24, 28, 32, 26]))
    length, steps = pick("cache.prompt", [6, 5, 7, 4]), pick("cache.steps", [12, 10, 14, 11])
    key = (current_salt(), str(device))
    for seed in [_FOUND[key]] if key in _FOUND else [150 + 1000 * k for k in range(20)]:
        case, good = candidate(seed, sizes, length, steps, device)
        if good:
            break
    if len(_FOUND) > 64:
        _FOUND.clear()
    _FOUND[key] = seed
    return case


def _tokens(got, tested: str) -> list[int]:
    if not isinstance(got, (list, tuple)) or not all(isinstance(t, numbers.Integral) and not isinstance(t, bool)
                                                     for t in got):
        fail("cached_generate must return a list of int token ids (the new tokens).", tested=tested,
             details=[f"got a {type(got).__name__}"])
    return [int(t) for t in got]


def _generated(case: GenerateCase, eos_id):
    """[(mistake id, thunk)]: what each cached_generate mistake generates on the case's plain model."""
    forms = {m: s for (variant, m), s in M.FORMS.items() if variant is M.cached_generate_variant}
    return lambda: candidates(M.TABLE, lambda variant, switches: variant(
        case.ref, case.prompt, case.steps, eos_id, **switches), GENERATE_IDS, forms)


def _expect_tokens(got: list[int], expected: list[int], tested: str, mistakes, hint: str) -> None:
    if got == expected:
        return
    mistake = None
    for mistake_id, produce in mistakes():
        try:
            if produce() == got:
                mistake = mistake_id
                break
        except Exception:  # noqa: BLE001 -- a variant that cannot run here matches nothing
            continue
    first = next((i for i, (a, b) in enumerate(zip(got, expected)) if a != b), min(len(got), len(expected)))
    fail("cached_generate's tokens differ from greedy decoding that recomputes model(ids) at every step.",
         tested=tested, details=[f"expected {len(expected)} new tokens, got {len(got)}; the first difference is "
                                 f"at new token {first + 1}"], mistake=mistake, hint=None if mistake else hint)


def _read(recorder: RemoteObject, what: str, tested: str):
    """What the recorder in the kernel says (`counts` or `states`): data from the student's process."""
    try:
        return recorder.attr(what)()
    except (StudentError, ProbeBroken):
        fail(f"cached_generate could not be checked: the recorder's {what} could not be read back.", tested=tested,
             hint="do not replace or remove the modules of the model's blocks")


def _read_counts(recorder: RemoteObject, num_layers: int, tested: str) -> dict[str, list[int]]:
    """The recorder's counts, validated (they are data from the student's process)."""
    raw = _read(recorder, "counts", tested)
    names = [f"blocks.{i}.attn.{p}" for i in range(num_layers) for p in ("w_k", "w_v")]
    if not isinstance(raw, dict) or any(
            not isinstance(raw.get(n), list) or len(raw[n]) > 10_000
            or not all(isinstance(c, int) and not isinstance(c, bool) for c in raw[n]) for n in names):
        fail("cached_generate could not be checked: the projection counts could not be read back.", tested=tested,
             hint="do not replace or remove the modules of the model's blocks")
    return {n: raw[n] for n in names}


def _expect_cache_used(fn, kernel, case: GenerateCase, device) -> None:
    """On a model in training mode: the model run in eval mode without gradients, each position projected once, in
    order (the tokens under the recorder's offsets), the prompt in one call, then one new position per call."""
    model = kernel.modern_gpt(case.sizes, state_of(case.ref), device, training=True)
    recorder = new(model.channel, RECORDER, model, scale=OFFSET_SCALE, mode="count")
    tested = (f"{shown(case.sizes)} in training mode, a prompt of {len(case.prompt)} tokens, max_new_tokens="
              f"{case.steps}, each block's attn.w_k and attn.w_v adding an offset that changes when a position is "
              "projected again")
    got = _tokens(call("cached_generate", fn, model, list(case.prompt), case.steps, tested=tested), tested)
    states = _read(recorder, "states", tested)
    if not isinstance(states, list) or any(state not in ([False, False], [True, False], [False, True], [True, True])
                                           for state in states[:10_000]):
        fail("cached_generate could not be checked: the model's modes could not be read back.", tested=tested)
    if any(training or grad for training, grad in states):
        fail("cached_generate ran the model in training mode or with gradients on.", tested=tested,
             mistake="kv_generate.train_mode_or_grad")
    problem = count_problem(_read_counts(recorder, case.sizes["num_layers"], tested), len(case.prompt), len(got))
    if got == case.once and problem is None:
        return
    if got == case.recomputed:
        problem = ("kv_generate.no_cache", "its tokens are those of a decoder that runs the whole sequence again")
    elif problem is None:
        problem = (None, "its tokens differ from those of a decoder that projects every position once, in order")
    mistake, seen = problem
    fail("cached_generate does not use the key/value cache as the exercise asks" + ("." if mistake else f": {seen}."),
         tested=tested, details=[seen] if mistake else [], mistake=mistake,
         hint=None if mistake else "run cached_forward once on the whole prompt, then once per new token with the "
                                   "cache; let it call each block's own attn modules")


@hidden_check
@given_working_parts("cached_generate")
def check_cached_generate(cached_generate) -> None:
    """cached_generate(model, prompt_ids, max_new_tokens, eos_id=None) -> the new tokens of greedy decoding through
    the cache: the tokens, the mode restored, the cache really used; then eos_id (an argument with teeth)."""
    device = start_check()
    expect_callable(cached_generate, "cached_generate")
    case = generate_case(device)
    prompt = f"a prompt of {len(case.prompt)} tokens, max_new_tokens={case.steps}"
    with kernel_models(cached_generate.channel) as kernel:
        model = kernel.modern_gpt(case.sizes, state_of(case.ref), device, training=True)
        tested = f"{shown(case.sizes)} in training mode, {prompt}"
        got = _tokens(call("cached_generate", cached_generate, model, list(case.prompt), case.steps,
                           tested=tested), tested)
        _expect_tokens(got, case.plain, tested, _generated(case, None),
                       "take each new token from the last position's logits (argmax) and feed it back alone")
        if describe(model, "the lent model").get("training") is not True:
            fail("cached_generate does not restore the model's training mode.", tested=tested,
                 mistake="kv_generate.mode_not_restored")
        _expect_cache_used(cached_generate, kernel, case, device)
        with argument("cached_generate.eos_id"):      # an eos that first comes mid-way: stop after it, included
            call("model.eval()", model.attr("eval"))
            tested = f"{shown(case.sizes)}, {prompt}, eos_id=..."
            got = _tokens(call("cached_generate", cached_generate, model, list(case.prompt), case.steps,
                               eos_id=case.eos_id, tested=tested), tested)
            _expect_tokens(got, case.plain[:case.stop + 1], tested, _generated(case, case.eos_id),
                           "stop right after appending eos_id: it is the last token returned")
