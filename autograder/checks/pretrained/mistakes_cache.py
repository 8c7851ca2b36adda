"""Known-mistake variants of notebook 11's key/value cache (cached_forward, cached_generate), and the table of the
mistakes they make.

`TABLE` = {mistake id: (variant, switches)}: the variant run with those switches on the check's own inputs gives that
mistake's answer (`kit.compare.from_table`); `FORMS` = {(variant, mistake id): [switches, ...]}: other switches of
the same variant that make the same mistake. With every switch off each variant is the reference
(solutions/pretrained.py; tests/autograder/checks/pretrained/test_cache.py). They run on the reference's ModernGPT,
or on a copy of it whose key/value projections carry the offsets of `KeyValueRecorder`
(coursekit/checks/pretrained/cache.py): `cached_generate_variant` calls each block's own modules, as the reference
does.
"""
from __future__ import annotations

import torch

from autograder.checks.attention.mistakes import sdpa
from autograder.checks.modern.mistakes import rotate
from autograder.checks.multi_head.mistakes import merge, split


def _attention(attn, x, past, T_past, mask, *, offset, rotated, store, extend):
    """One block's attention over the new rows x (B, T, d_model) and the cached positions: (output, stored pair)."""
    T, H, H_kv = x.size(1), attn.num_heads, attn.num_kv_heads
    groups = H // H_kv
    q, k, v = split(attn.w_q(x), H), split(attn.w_k(x), H_kv), split(attn.w_v(x), H_kv)   # (B, *, T, d_head)
    start = T_past if offset else 0                                   # offset=False: rotated as from position 0
    cos, sin = attn.cos[start:start + T], attn.sin[start:start + T]
    q = rotate(q, cos, sin)
    if rotated == "new":                                              # else every key rotated when read
        k = rotate(k, cos, sin)
    if store == "query_heads":                                        # the cache holds one row per query head
        k, v = k.repeat_interleave(groups, dim=1), v.repeat_interleave(groups, dim=1)
    keys = k if past is None else torch.cat([past[0], k], dim=2)      # (B, *, T_past + T, d_head)
    values = v if past is None else torch.cat([past[1], v], dim=2)
    read = keys if rotated == "new" else rotate(keys, attn.cos[:T_past + T], attn.sin[:T_past + T])
    stored = read if rotated == "after_concat" else keys              # "at_read": the keys stored unrotated
    kv = (stored, values) if extend == "all" else (stored[:, :, T_past:], values[:, :, T_past:])
    if store != "query_heads":
        read, values = read.repeat_interleave(groups, dim=1), values.repeat_interleave(groups, dim=1)
    heads, _ = sdpa(q, read, values, mask)                            # (B, H, T, d_head)
    return attn.w_o(merge(heads)), kv


def cached_forward_variant(model, ids, cache=None, *, offset=True, rotated="new", store="kv_heads", causal=True,
                           extend="all"):
    """cached_forward with switches. offset=False: the new tokens rotated from position 0. rotated: "new"
    (correct: the new keys rotated at their positions, then cached), "after_concat" (the cached and the new keys
    rotated together from position 0 when read, and stored so: the cached ones turned again), "at_read" (the
    keys stored unrotated, all rotated when read). store="query_heads": keys and values repeated for every query
    head before caching. causal=False: the new tokens see each other. extend: "all" (correct), "new" (only the new
    positions returned), "past" (the cache given returned unchanged)."""
    T = ids.size(1)
    T_past = 0 if not cache else cache[0][0].size(2)
    mask = torch.ones(T, T_past + T, dtype=torch.bool, device=ids.device)
    mask = mask.tril(diagonal=T_past) if causal else mask            # (T, T_past + T)
    x = model.token_embedding(ids)                                    # (B, T, d_model)
    new_cache = []
    for i, block in enumerate(model.blocks):
        attended, kv = _attention(block.attn, block.norm1(x), cache[i] if cache else None, T_past, mask,
                                  offset=offset, rotated=rotated, store=store, extend=extend)
        x = x + attended
        x = x + block.ffn(block.norm2(x))
        new_cache.append(kv)
    return model.lm_head(model.norm(x)), (cache if extend == "past" else new_cache)


def cached_calls(model, ids, bounds, **switches) -> list[tuple[torch.Tensor, list]]:
    """[(logits, cache)] of cached_forward on ids[:, a:b] for consecutive `bounds` (e.g. [0, t, T]), each call
    given the cache the one before returned."""
    out, cache = [], None
    with torch.no_grad():
        for a, b in zip(bounds, bounds[1:]):
            logits, cache = cached_forward_variant(model, ids[:, a:b], cache, **switches)
            out.append((logits, cache))
    return out


def cached_generate_variant(model, prompt, max_new_tokens, eos_id=None, *, feed="whole", include_eos=True,
                            with_prompt=False, use_cache=True, gaps=None) -> list[int]:
    """cached_generate with switches. feed: "whole" (correct: the prompt in one call), "token_by_token" (the
    prompt one token per call), "refeed_last" (the prompt's logits dropped, its last token fed again).
    include_eos=False: stops before eos_id. with_prompt: the prompt returned too. use_cache=False: model(ids) over
    the whole sequence at every step. `gaps`: a list that gets the top-two logit gap of every step."""
    was_training = model.training
    model.eval()
    ids = torch.tensor([list(prompt)], dtype=torch.long, device=model.token_embedding.weight.device)
    new, cache = [], None
    try:
        with torch.no_grad():
            if not use_cache:
                logits = model(ids)
            elif feed == "token_by_token":
                for p in range(ids.size(1)):
                    logits, cache = cached_forward_variant(model, ids[:, p:p + 1], cache)
            else:
                logits, cache = cached_forward_variant(model, ids)
                if feed == "refeed_last":
                    logits, cache = cached_forward_variant(model, ids[:, -1:], cache)
            while len(new) < max_new_tokens:
                last = logits[0, -1]
                if gaps is not None:
                    top = last.topk(2).values
                    gaps.append(float(top[0] - top[1]))
                token = int(last.argmax())
                if token == eos_id and not include_eos:
                    break
                new.append(token)
                if token == eos_id or len(new) == max_new_tokens:
                    break
                ids = torch.cat([ids, ids.new_tensor([[token]])], dim=1)
                if use_cache:
                    logits, cache = cached_forward_variant(model, ids[:, -1:], cache)
                else:
                    logits = model(ids)
    finally:
        model.train(was_training)
    return list(prompt) + new if with_prompt else new


TABLE = {
    # cached_forward: cached_calls(reference model, ids, bounds, **switches)
    "kv.no_rotary_offset": (cached_forward_variant, {"offset": False}),
    "kv.rotated_twice": (cached_forward_variant, {"rotated": "after_concat"}),
    "kv.keys_stored_unrotated": (cached_forward_variant, {"rotated": "at_read"}),
    "kv.query_heads_cached": (cached_forward_variant, {"store": "query_heads"}),
    "kv.no_causal_mask": (cached_forward_variant, {"causal": False}),
    "kv.cache_not_extended": (cached_forward_variant, {"extend": "new"}),
    # cached_generate: cached_generate_variant(reference model, prompt, max_new_tokens, eos_id, **switches)
    "kv_generate.prompt_token_by_token": (cached_generate_variant, {"feed": "refeed_last"}),
    "kv_generate.eos_not_included": (cached_generate_variant, {"include_eos": False}),
    "kv_generate.returns_prompt": (cached_generate_variant, {"with_prompt": True}),
    "kv_generate.no_cache": (cached_generate_variant, {"use_cache": False}),
}
FORMS = {
    (cached_forward_variant, "kv.cache_not_extended"): [{"extend": "past"}],
    # the same tokens as the right answer on a plain model: only the per-call counts tell it (the check's counts)
    (cached_generate_variant, "kv_generate.prompt_token_by_token"): [{"feed": "token_by_token"}],
}
