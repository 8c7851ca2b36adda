"""Public self-checks of notebook 11's key/value cache: `cached_forward` and `cached_generate` (the mirror of
autograder/checks/pretrained/cache.py).

The model is a small ModernGPT of the class your notebook uses (the `ModernGPT` your function's code sees, from
provided.py, or the one you pass), with weights set here. The expected logits, cached keys and tokens are worked out
in float64 NumPy from those weights (`_numpy_call`, `_numpy_greedy`), so they share no code with a torch answer.
`KeyValueRecorder` wraps each block's `attn.w_k` and `attn.w_v` and records how many positions every call projects:
the self-check of `cached_generate` reads it, and the grader builds it in your kernel (with offsets that make a
position projected twice change the tokens). Shapes: B batch, T new tokens, T_past cached positions.
"""
from __future__ import annotations

import math

import numpy as np
import torch

from coursekit.checks.toolkit import (expect_close, expect_shape, expect_type, expect_value_error, fail,
                                     first_matching_hint, mistake_hint, passed, run, uses_parts)
from coursekit.criteria import argument, edge_case
from coursekit.probe.hooks import StatefulProjection
from coursekit.tolerance import ROTARY_ATOL

# the small models: 4 query heads share 2 key/value heads (groups of 2), d_head 6, a rotary base and eps that are
# not the defaults
_SIZE = dict(d_model=24, num_heads=4, num_kv_heads=2, d_ff=20, num_layers=2, max_len=10, rope_base=100.0, eps=1e-5)
_VOCAB = 11
_IDS = [[3, 7, 1, 9, 4, 10, 2], [5, 5, 0, 8, 6, 1, 3]]                  # (B=2, T=7): split after 3 tokens
_SPLIT = 3
# cached_generate: a model (seed, matrices' scale) on which greedy decoding of the prompt varies, with every step's
# top two logits more than 0.4 apart (so float32 and float64 agree); token 7 first appears as the 7th new token
_GENERATE = dict(seed=17, std=0.8, prompt=[4, 9, 2, 6, 1], steps=10, eos=7)
_GENERATE_SIZE = dict(_SIZE, max_len=16)
# the mistakes of cached_forward, computed by the loops below (`_numpy_call`'s `mistake`)
_FORWARD_MISTAKES = ("kv.no_causal_mask", "kv.no_rotary_offset", "kv.rotated_twice", "kv.keys_stored_unrotated",
                     "kv.cache_not_extended")


# ------------------------------------------------------------------------------------------ the recorder
class _Projection(StatefulProjection):
    """A StatefulProjection that still shows its linear's weight and sizes."""

    weight = property(lambda self: self.linear.weight)
    in_features = property(lambda self: self.linear.in_features)
    out_features = property(lambda self: self.linear.out_features)


class KeyValueRecorder:
    """Replaces `attn.w_k` and `attn.w_v` of every block of a ModernGPT by a `coursekit.probe.hooks.StatefulProjection`
    around the same linear (offsets of size `scale`: 0 adds nothing) and records the positions each call projects:
    `counts()` -> {"blocks.<i>.attn.w_k": [positions of call 1, call 2, ...], ...}, and `states()` -> [[training
    mode, gradients on], ...] of each call of block 0's w_k. Nothing here is an answer: it only wraps the model's own
    modules."""

    def __init__(self, model: torch.nn.Module, scale: float = 1.0, mode: str = "count", seed: int = 0):
        self.calls: dict[str, list[int]] = {}
        self.modes: list[list[bool]] = []
        for index, block in enumerate(model.blocks):
            for number, name in enumerate(("w_k", "w_v")):
                wrapped = _Projection(getattr(block.attn, name), scale, seed=seed + 97 * index + 13 * number,
                                      mode=mode)
                setattr(block.attn, name, wrapped)
                key = f"blocks.{index}.attn.{name}"
                self.calls[key] = []
                wrapped.register_forward_hook(self._hook(key))

    def _hook(self, key: str):
        def record(module, inputs, output):
            x = inputs[0]
            self.calls[key].append(int(x.shape[-2]) if x.dim() >= 2 else 1)
            if key == "blocks.0.attn.w_k":
                self.modes.append([bool(module.training), torch.is_grad_enabled()])
        return record

    def counts(self) -> dict[str, list[int]]:
        return {key: list(calls) for key, calls in self.calls.items()}

    def states(self) -> list[list[bool]]:
        return [list(state) for state in self.modes]


# ------------------------------------------------------------------------------------------ the NumPy loops
def _rms(x, weight, eps):
    return x / np.sqrt((x ** 2).mean(axis=-1, keepdims=True) + eps) * weight


def _turn(x, angle):
    """x (..., T, d): the pair (x[2i], x[2i+1]) of row p turned by angle[p, i]."""
    out, even, odd = np.empty_like(x), x[..., 0::2], x[..., 1::2]
    out[..., 0::2] = even * np.cos(angle) - odd * np.sin(angle)
    out[..., 1::2] = even * np.sin(angle) + odd * np.cos(angle)
    return out


def _heads(y, n):
    return y.reshape(y.shape[0], y.shape[1], n, -1).transpose(0, 2, 1, 3)     # (B, n, T, d_head)


def _attention(p, b, h, past, T_past, size, mistake):
    """Block b's attention of the new rows h (B, T, d) over the cached positions and themselves: (output, stored)."""
    H, H_kv = size["num_heads"], size["num_kv_heads"]
    B, T, d_model = h.shape
    d_head, groups = d_model // H, H // H_kv
    q, k, v = (_heads(h @ p[f"{b}attn.{w}.weight"].T, n) for w, n in (("w_q", H), ("w_k", H_kv), ("w_v", H_kv)))
    table = np.arange(T_past + T)[:, None] * size["rope_base"] ** (-np.arange(0, d_head, 2) / d_head)
    rows = table[:T] if mistake == "kv.no_rotary_offset" else table[T_past:]
    read_rotates = mistake in ("kv.rotated_twice", "kv.keys_stored_unrotated")     # all keys rotated when read
    q, k = _turn(q, rows), (k if read_rotates else _turn(k, rows))
    if past is not None:
        k, v = np.concatenate([past[0], k], axis=2), np.concatenate([past[1], v], axis=2)
    keys = _turn(k, table) if read_rotates else k
    stored = (k if mistake == "kv.keys_stored_unrotated" else keys, v)
    if mistake == "kv.cache_not_extended":
        stored = (stored[0][:, :, T_past:], v[:, :, T_past:])
    keys, v = np.repeat(keys, groups, axis=1), np.repeat(v, groups, axis=1)
    keep = np.arange(T_past + T)[None, :] <= T_past + np.arange(T)[:, None]
    scores = np.where(keep | (mistake == "kv.no_causal_mask"), q @ keys.transpose(0, 1, 3, 2) / math.sqrt(d_head),
                      -np.inf)
    weights = np.exp(scores - scores.max(axis=-1, keepdims=True))
    heads = weights / weights.sum(axis=-1, keepdims=True) @ v                    # (B, H, T, d_head)
    return heads.transpose(0, 2, 1, 3).reshape(B, T, d_model) @ p[f"{b}attn.w_o.weight"].T, stored


def _numpy_call(p, size, ids, cache=None, mistake=None):
    """One call of cached_forward on the new ids (B, T), in float64 (or with one catalogue `mistake`): (logits,
    cache), the cache a list of (keys, values) per block, each (B, num_kv_heads, T_past + T, d_head)."""
    T_past, eps = (0 if cache is None else cache[0][0].shape[2]), size["eps"]
    x, new_cache = p["token_embedding.weight"][np.asarray(ids)], []
    for i in range(size["num_layers"]):
        b = f"blocks.{i}."
        attended, stored = _attention(p, b, _rms(x, p[b + "norm1.weight"], eps), None if cache is None else cache[i],
                                      T_past, size, mistake)
        x = x + attended
        h = _rms(x, p[b + "norm2.weight"], eps)
        gate = h @ p[b + "ffn.w_gate.weight"].T
        x = x + (gate / (1.0 + np.exp(-gate)) * (h @ p[b + "ffn.w_up.weight"].T)) @ p[b + "ffn.w_down.weight"].T
        new_cache.append(stored)
    return _rms(x, p["norm.weight"], eps) @ p["token_embedding.weight"].T, new_cache


def _numpy_calls(p, size, ids, bounds, mistake=None):
    """[(logits, cache)] of the calls on ids[:, a:b] for consecutive bounds, each given the cache before it."""
    out, cache = [], None
    for a, b in zip(bounds, bounds[1:]):
        out.append(_numpy_call(p, size, np.asarray(ids)[:, a:b], cache, mistake))
        cache = out[-1][1]
    return out


def _numpy_greedy(p, size, prompt, steps):
    """Greedy decoding that recomputes the whole sequence at every step."""
    ids, new = list(prompt), []
    for _ in range(steps):
        new.append(int(np.argmax(_numpy_call(p, size, [ids])[0][0, -1])))
        ids.append(new[-1])
    return new


def count_problem(counts: dict, prompt_length: int, new_tokens: int):
    """What the positions each key/value projection saw per call (`KeyValueRecorder.counts()`) say about greedy
    decoding with the cache: (catalogue id or None, what was seen), or None when they show the prompt in one call,
    then one new position per call (one call per new token, the last one's call optional)."""
    for key, calls in counts.items():
        shown = str(calls[:8])[:-1] + (", ...]" if len(calls) > 8 else "]")
        if not calls:
            return None, f"{key} never ran: call each block's own attn.w_k and attn.w_v modules"
        if any(c > 1 for c in calls[1:]):
            return "kv_generate.no_cache", f"{key} projected {shown} positions per call (after the prompt: one)"
        if calls[0] != prompt_length:
            return ("kv_generate.prompt_token_by_token",
                    f"{key} projected {shown} positions per call (first: the prompt's {prompt_length})")
        if not new_tokens - 1 <= len(calls) - 1 <= new_tokens:
            return None, (f"{key} ran {len(calls)} times for {new_tokens} new tokens: expected one call for the "
                          "prompt, then one per new token")
    return None


# ------------------------------------------------------------------------------------------ shared
def _model_class(fn, ModernGPT, name: str):
    """The ModernGPT class to test with: the one given, else the one `fn`'s code sees (the notebook's)."""
    if ModernGPT is None:
        from coursekit.probe import globals_of

        ModernGPT = (globals_of(fn) or {}).get("ModernGPT")
    if not isinstance(ModernGPT, type):
        fail(f"check_{name} builds a small ModernGPT, but no ModernGPT class is defined where your {name} is.",
             f"run the notebook's first cell (it imports ModernGPT from provided.py), or pass the class: "
             f"check_{name}({name}, ModernGPT).")
    return ModernGPT


def _small_model(ModernGPT, size: dict, seed: int, std: float = 0.5):
    """ModernGPT(_VOCAB, **size) with fixed weights (norm weights around 1, matrices N(0, std**2)) in eval mode, and
    those weights as float64 arrays by name (the tied head included)."""
    model = run("ModernGPT", ModernGPT, _VOCAB, **size)
    expect_type(model, torch.nn.Module, "ModernGPT(...)")
    generator = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for _, parameter in sorted(model.named_parameters()):
            values = torch.randn(parameter.shape, generator=generator)
            parameter.copy_(1.0 + 0.3 * values if parameter.dim() == 1 else std * values)
    params = {n: q.detach().cpu().double().numpy() for n, q in model.named_parameters(remove_duplicate=False)}
    return model.eval(), params


# ------------------------------------------------------------------------------------------ cached_forward
def _pair(result, label: str):
    if not isinstance(result, (tuple, list)) or len(result) != 2:
        fail(f"{label} should return a pair (logits, cache), got {type(result).__name__}.", "return logits, cache")
    return result


def _expect_cache(cache, expected, label: str, key_hints) -> None:
    """The returned cache against the loops': one (keys, values) pair per block, (B, num_kv_heads, T_past + T,
    d_head) each, the keys rotated at their own positions. `key_hints(i)`: [(a wrong answer for block i, hint)]."""
    if cache is None or isinstance(cache, (list, tuple)) and not cache:
        fail(f"{label} returned no cache.", mistake_hint("kv.cache_not_extended"))
    if not isinstance(cache, (list, tuple)) or len(cache) != len(expected):
        fail(f"{label} should return a cache with one (keys, values) pair per block ({len(expected)}), got "
             f"{type(cache).__name__}" + (f" of {len(cache)}" if isinstance(cache, (list, tuple)) else "") + ".")
    for i, (pair, (keys, values)) in enumerate(zip(cache, expected)):
        if not isinstance(pair, (list, tuple)) or len(pair) != 2:
            fail(f"block {i}'s entry of the cache {label} returned should be a pair (keys, values).")
        for what, got, want, wrong in (("keys", pair[0], keys, key_hints(i)), ("values", pair[1], values, [])):
            name = f"the cached {what} of block {i} after {label}"
            expect_type(got, torch.Tensor, name)
            shape = tuple(got.shape)
            if len(shape) == 4 and shape[1] == _SIZE["num_heads"] and shape[2:] == want.shape[2:]:
                fail(f"{name} have shape {shape}, one row per query head.", mistake_hint("kv.query_heads_cached"))
            if len(shape) == 4 and shape[2] < want.shape[2] and shape[1] == want.shape[1]:
                fail(f"{name} hold {shape[2]} positions, expected {want.shape[2]} (T_past + T).",
                     mistake_hint("kv.cache_not_extended"))
            expect_shape(got, want.shape, name, "(B, num_kv_heads, T_past + T, d_head)")
            hint = first_matching_hint(got.detach(), wrong, atol=ROTARY_ATOL)
            expect_close(got, want, name, hint, atol=ROTARY_ATOL)


def _expect_calls(cached_forward, model, p, ids: torch.Tensor, bounds) -> None:
    """cached_forward on ids[:, a:b] for consecutive bounds, each call given the cache the one before returned:
    every call's logits and cache against the loops'."""
    expected = _numpy_calls(p, _SIZE, ids, bounds)
    wrong = {mistake: _numpy_calls(p, _SIZE, ids, bounds, mistake) for mistake in _FORWARD_MISTAKES}
    hints = {"kv.no_causal_mask": mistake_hint("kv.no_causal_mask"),
             "kv.no_rotary_offset": mistake_hint("kv.no_rotary_offset"),
             "kv.rotated_twice": mistake_hint("kv.rotated_twice"),
             "kv.keys_stored_unrotated": mistake_hint("kv.keys_stored_unrotated"),
             "kv.cache_not_extended": mistake_hint("kv.cache_not_extended")}
    cache = None
    for index, (a, b) in enumerate(zip(bounds, bounds[1:])):
        label = f"cached_forward(model, ids[:, {a}:{b}]" + (")" if cache is None else ", cache)")
        with torch.no_grad():
            given = () if cache is None else (cache,)
            logits, cache = _pair(run("cached_forward", cached_forward, model, ids[:, a:b].clone(), *given), label)
        expect_type(logits, torch.Tensor, f"the logits of {label}")
        hint = first_matching_hint(logits.detach(), [(w[index][0], hints[m]) for m, w in wrong.items()],
                                   atol=ROTARY_ATOL)
        expect_close(logits, expected[index][0], f"the logits of {label}", hint, atol=ROTARY_ATOL)
        _expect_cache(cache, expected[index][1], label, lambda i, index=index: [
            (w[index][1][i][0], hints[m]) for m, w in wrong.items() if "kv.no_causal_mask" != m])


def check_cached_forward(cached_forward, ModernGPT=None) -> None:
    """Against float64 loops on a small ModernGPT of your notebook's class: a prompt of 3 tokens and then 4 new
    tokens with the cache, and 7 calls of one token each; the cached keys rotated at their own positions; the mode
    and gradients left to the caller; T_past + T > max_len raises ValueError."""
    ModernGPT = _model_class(cached_forward, ModernGPT, "cached_forward")
    model, p = _small_model(ModernGPT, _SIZE, seed=110)
    ids = torch.tensor(_IDS)
    _expect_calls(cached_forward, model, p, ids, [0, _SPLIT, ids.size(1)])
    _expect_calls(cached_forward, model, p, ids, list(range(ids.size(1) + 1)))
    model.train()
    logits, _ = _pair(run("cached_forward", cached_forward, model, ids[:, :2].clone()), "cached_forward")
    if not model.training or not all(q.requires_grad for q in model.parameters()):
        fail("cached_forward(model, ids) switched a model in training mode to eval mode, or its parameters' "
             "requires_grad.", mistake_hint("kv.sets_mode"))
    if not logits.requires_grad:
        fail("cached_forward(model, ids) cut the gradients off (its logits do not require grad).",
             "gradients are the caller's: no torch.no_grad() inside cached_forward.")
    model.eval()
    with edge_case("cached_forward.too_long"):
        max_len, hint = _SIZE["max_len"], "compare T_past + T with model.max_len first, and raise ValueError."
        tokens = torch.arange(max_len + 1)[None, :] % _VOCAB                      # (1, max_len + 1)
        with torch.no_grad():
            _, cache = _pair(run("cached_forward", cached_forward, model, tokens[:, :max_len - 2]), "cached_forward")
            expect_value_error(f"cached_forward(model, 3 tokens, a cache of {max_len - 2}) with max_len={max_len}",
                                lambda: cached_forward(model, tokens[:, :3], cache), hint)

            def at_max_len():
                try:
                    return cached_forward(model, tokens[:, :2], cache)
                except ValueError:
                    fail(f"cached_forward(model, 2 tokens, a cache of {max_len - 2}) raised ValueError, but T_past + "
                         f"T = max_len = {max_len} positions fit.", "raise only when T_past + T > model.max_len.")

            logits, _ = _pair(run("cached_forward", at_max_len), "cached_forward")
            expect_shape(logits, (1, 2, _VOCAB), f"the logits of 2 tokens after a cache of {max_len - 2}")
            expect_value_error(f"cached_forward(model, {max_len + 1} tokens) with max_len={max_len}",
                                lambda: cached_forward(model, tokens), hint)
    passed("cached_forward", "(3 tokens then 4 with the cache, one token at a time; 2 key/value heads)")


# ------------------------------------------------------------------------------------------ cached_generate
def _tokens(result, label: str) -> list[int]:
    if not isinstance(result, (list, tuple)) or not all(isinstance(t, (int, np.integer)) and not isinstance(t, bool)
                                                        for t in result):
        fail(f"{label} should return a list of ints (the new token ids), got {type(result).__name__}.",
             "append int(logits[0, -1].argmax()) for each new token.")
    return [int(t) for t in result]


def _expect_one_call_per_token(cached_generate, ModernGPT, model, prompt, steps) -> None:
    """On a copy in training mode: the model runs in eval mode without gradients, the prompt goes through the cache
    in one call, then one new token per call (counted)."""
    counted = run("ModernGPT", ModernGPT, _VOCAB, **_GENERATE_SIZE)
    counted.load_state_dict(model.state_dict())
    recorder = KeyValueRecorder(counted.train(), scale=0.0)
    run("cached_generate", cached_generate, counted, list(prompt), steps)
    if any(training or grad for training, grad in recorder.states()):
        fail("cached_generate ran the model in training mode or with gradients on.",
             mistake_hint("kv_generate.train_mode_or_grad"))
    problem = count_problem(recorder.counts(), len(prompt), steps)
    if problem is not None:
        hints = {"kv_generate.no_cache": mistake_hint("kv_generate.no_cache"),
                 "kv_generate.prompt_token_by_token": mistake_hint("kv_generate.prompt_token_by_token")}
        fail(f"cached_generate does not use the cache as the exercise asks: {problem[1]}.",
             hints.get(problem[0], "call cached_forward once on the whole prompt, then once per new token with "
                                   "the cache, and keep calling each block's own attn modules."))


@uses_parts("cached_generate")
def check_cached_generate(cached_generate, ModernGPT=None) -> None:
    """Against greedy decoding that recomputes the whole sequence (float64 loops), on a small ModernGPT of your
    notebook's class in training mode (restored afterwards); the prompt in one call, then one token per call
    (counted); eos_id included and last."""
    ModernGPT = _model_class(cached_generate, ModernGPT, "cached_generate")
    model, p = _small_model(ModernGPT, _GENERATE_SIZE, _GENERATE["seed"], _GENERATE["std"])
    prompt, steps, eos = _GENERATE["prompt"], _GENERATE["steps"], _GENERATE["eos"]
    expected = _numpy_greedy(p, _GENERATE_SIZE, prompt, steps)
    label = f"cached_generate(model, a prompt of {len(prompt)} tokens, {steps})"
    model.train()
    got = _tokens(run("cached_generate", cached_generate, model, list(prompt), steps), label)
    if got != expected:
        hint = {tuple(prompt + expected): mistake_hint("kv_generate.returns_prompt"),
                tuple(_numpy_greedy(p, _GENERATE_SIZE, prompt + prompt[-1:], steps)):
                    mistake_hint("kv_generate.prompt_token_by_token")}.get(tuple(got))
        fail(f"{label} gave {got}; greedy decoding that recomputes the whole sequence gives {expected}.",
             hint or "take each new token from the last position's logits, argmax, and feed it back alone.")
    if not model.training:
        fail(f"{label} left a model that was in training mode in eval mode.",
             mistake_hint("kv_generate.mode_not_restored"))
    _expect_one_call_per_token(cached_generate, ModernGPT, model, prompt, steps)
    with argument("cached_generate.eos_id"):
        stop = expected.index(eos)
        label = f"cached_generate(model, a prompt of {len(prompt)} tokens, {steps}, eos_id={eos})"
        got = _tokens(run("cached_generate", cached_generate, model.eval(), list(prompt), steps, eos_id=eos), label)
        if got != expected[:stop + 1]:
            fail(f"{label} gave {got}, expected {expected[:stop + 1]} (eos_id {eos} is new token {stop + 1}).",
                 mistake_hint("kv_generate.eos_not_included") if got == expected[:stop] else
                 "stop right after appending eos_id: it is the last token returned.")
    passed("cached_generate", "(the prompt in one call, then one token per call; eos_id included)")
