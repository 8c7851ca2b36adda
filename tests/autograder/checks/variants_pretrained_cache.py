"""Student answers of notebook 11's key/value cache (cached_forward, cached_generate) for testing its checks (see
variants.py for the conventions).

CORRECT answers are written differently from the reference (F.scaled_dot_product_attention with a float mask and
the key/value heads indexed per query head, rotation through complex numbers, the cache as lists; a loop over query
heads; a decoding loop under inference_mode) and must pass. WRONG answers switch on one mistake (`forward_with`,
`generate_with`) and must fail with it named. Each answer reads the model's parts as the notebook's statement says
(`block.norm1`, `block.attn.w_q`, `attn.cos`, ...) and the generating ones call `cached_forward` by its global name,
as a notebook's do (the grader can lend a working one there).
"""
from __future__ import annotations

import math

import torch
import torch.nn.functional as F

from solutions.modern import ModernGPT  # noqa: F401 -- the class the public checks find where these answers are
from solutions.pretrained import cached_forward


# ------------------------------------------------------------------------------------------------ cached_forward
def _turn(x, cos, sin):
    """Each pair (x[2i], x[2i+1]) as a complex number times e^{i angle}."""
    pairs = torch.view_as_complex(x.float().unflatten(-1, (-1, 2)).contiguous())
    return torch.view_as_real(pairs * torch.complex(cos, sin)).flatten(-2).to(x.dtype)


def _heads(y, n):
    return y.view(y.size(0), y.size(1), n, -1).transpose(1, 2)


def cached_forward_sdpa(model, ids, cache=None):
    """PyTorch's attention, a float mask (0 or -inf), each query head's kv head picked by index, lists as pairs."""
    B, T = ids.shape
    T_past = cache[0][0].shape[-2] if cache else 0
    if T_past + T > model.max_len:
        raise ValueError("the cache would grow past max_len")
    rows = torch.arange(T_past, T_past + T, device=ids.device)
    blocked = torch.arange(T_past + T, device=ids.device)[None, :] > rows[:, None]
    mask = torch.zeros(T, T_past + T, device=ids.device).masked_fill(blocked, float("-inf"))
    x, out = model.token_embedding(ids), []
    for i, block in enumerate(model.blocks):
        attn, h = block.attn, block.norm1(x)
        cos, sin = attn.cos[rows], attn.sin[rows]
        q = _turn(_heads(attn.w_q(h), attn.num_heads), cos, sin)
        k = _turn(_heads(attn.w_k(h), attn.num_kv_heads), cos, sin)
        v = _heads(attn.w_v(h), attn.num_kv_heads)
        if cache:
            k, v = torch.cat((cache[i][0], k), dim=-2), torch.cat((cache[i][1], v), dim=-2)
        which = torch.arange(attn.num_heads, device=ids.device) // (attn.num_heads // attn.num_kv_heads)
        heads = F.scaled_dot_product_attention(q, k[:, which], v[:, which], attn_mask=mask)
        x = x + attn.w_o(heads.transpose(1, 2).reshape(B, T, -1))
        x = x + block.ffn(block.norm2(x))
        out.append([k, v])
    return model.lm_head(model.norm(x)), out


def cached_forward_loop(model, ids, cache=None):
    """A loop over query heads, rotation pair by pair, the scores masked where a key comes after the query."""
    B, T = ids.shape
    T_past = 0 if cache is None else cache[0][0].size(2)
    if T_past + T > model.max_len:
        raise ValueError(f"{T_past} + {T} positions do not fit in max_len {model.max_len}")
    x, new_cache = model.token_embedding(ids), []
    for i, block in enumerate(model.blocks):
        attn, h = block.attn, block.norm1(x)
        cos, sin = attn.cos[T_past:T_past + T], attn.sin[T_past:T_past + T]

        def rotated(t):
            even, odd = t[..., 0::2], t[..., 1::2]
            return torch.stack((even * cos - odd * sin, even * sin + odd * cos), dim=-1).flatten(-2)

        q = rotated(_heads(attn.w_q(h), attn.num_heads))
        k = rotated(_heads(attn.w_k(h), attn.num_kv_heads))
        v = _heads(attn.w_v(h), attn.num_kv_heads)
        if cache is not None:
            k, v = torch.cat([cache[i][0], k], 2), torch.cat([cache[i][1], v], 2)
        groups = attn.num_heads // attn.num_kv_heads
        later = torch.arange(T_past + T, device=ids.device)[None, :] > torch.arange(T_past, T_past + T,
                                                                                   device=ids.device)[:, None]
        heads = []
        for head in range(attn.num_heads):
            scores = q[:, head] @ k[:, head // groups].transpose(-1, -2) / math.sqrt(q.size(-1))
            heads.append(scores.masked_fill(later, float("-inf")).softmax(-1) @ v[:, head // groups])
        x = x + attn.w_o(torch.cat(heads, dim=-1))
        x = x + block.ffn(block.norm2(x))
        new_cache.append((k, v))
    return model.lm_head(model.norm(x)), new_cache


def forward_with(mistake: str):
    """cached_forward with one student's mistake."""
    def answer(model, ids, cache=None):
        B, T = ids.shape
        T_past = 0 if not cache else cache[0][0].size(2)
        limit = T_past + T >= model.max_len if mistake == "off_by_one" else T_past + T > model.max_len
        if limit and mistake != "no_length_check":
            raise ValueError("too long")
        if mistake == "eval_inside":
            model.eval()
        keep = torch.ones(T, T_past + T, dtype=torch.bool, device=ids.device)
        keep = keep if mistake == "no_causal" else keep.tril(T_past)
        x, new_cache = model.token_embedding(ids), []
        for i, block in enumerate(model.blocks):
            attn, h = block.attn, block.norm1(x)
            groups = attn.num_heads // attn.num_kv_heads
            start = 0 if mistake == "no_offset" else T_past
            cos, sin = attn.cos[start:start + T], attn.sin[start:start + T]
            q = _turn(_heads(attn.w_q(h), attn.num_heads), cos, sin)
            k, v = _heads(attn.w_k(h), attn.num_kv_heads), _heads(attn.w_v(h), attn.num_kv_heads)
            if mistake not in ("rotate_all", "unrotated_cache"):
                k = _turn(k, cos, sin)
            if mistake == "query_heads":
                k, v = k.repeat_interleave(groups, 1), v.repeat_interleave(groups, 1)
            new_k, new_v = k, v
            if cache:
                k, v = torch.cat([cache[i][0], k], 2), torch.cat([cache[i][1], v], 2)
            used = _turn(k, attn.cos[:T_past + T], attn.sin[:T_past + T]) if mistake in (
                "rotate_all", "unrotated_cache") else k
            stored = {"rotate_all": (used, v), "new_only": (new_k, new_v)}.get(mistake, (k, v))
            if mistake != "query_heads":
                used, v = used.repeat_interleave(groups, 1), v.repeat_interleave(groups, 1)
            scores = (q @ used.transpose(-1, -2) / math.sqrt(q.size(-1))).masked_fill(~keep, float("-inf"))
            x = x + attn.w_o((scores.softmax(-1) @ v).transpose(1, 2).reshape(B, T, -1))
            x = x + block.ffn(block.norm2(x))
            new_cache.append(stored)
        return model.lm_head(model.norm(x)), (cache if mistake == "returns_old" else new_cache)

    answer.__name__ = f"cached_forward_{mistake}"
    return answer


# ------------------------------------------------------------------------------------------------ cached_generate
def cached_generate_student(model, prompt_ids, max_new_tokens, eos_id=None):
    """inference_mode, the device from the parameters, a while loop that checks the count first."""
    mode = model.training
    model.eval()
    device = next(model.parameters()).device
    new = []
    try:
        with torch.inference_mode():
            logits, cache = cached_forward(model, torch.tensor([prompt_ids], device=device))
            while len(new) < max_new_tokens:
                new.append(logits[0, -1].argmax().item())
                if new[-1] == eos_id:
                    break
                if len(new) < max_new_tokens:
                    logits, cache = cached_forward(model, torch.tensor([[new[-1]]], device=device), cache)
    finally:
        model.train(mode)
    return new


def _without_hooks(model, run):
    """`run()` with the forward hooks of every block's w_k and w_v switched off; then each hook is called as if the
    prompt had gone in one call and every new token in one call of its own (a recomputing loop forging its counts)."""
    modules = [getattr(block.attn, name) for block in model.blocks for name in ("w_k", "w_v")]
    saved = [dict(m._forward_hooks) for m in modules]
    for m in modules:
        m._forward_hooks.clear()
    new, length = run()
    for m, hooks in zip(modules, saved):
        m._forward_hooks.update(hooks)
        for n in [length] + [1] * (len(new) - 1):
            for hook in hooks.values():
                hook(m, (torch.zeros(1, n, 1),), None)
    return new


def generate_with(mistake: str):
    """cached_generate with one student's mistake."""
    def answer(model, prompt_ids, max_new_tokens, eos_id=None):
        was_training = model.training
        if mistake != "no_eval":
            model.eval()
        ids = torch.tensor([list(prompt_ids)], device=model.token_embedding.weight.device)
        new = []

        def decode():
            nonlocal ids
            cache = None
            if mistake == "token_by_token":
                for p in range(ids.size(1)):
                    logits, cache = cached_forward(model, ids[:, p:p + 1], cache)
            elif mistake in ("no_cache_model", "forged"):
                logits = model(ids)
            else:
                logits, cache = cached_forward(model, ids)
            if mistake == "refeed_last":
                logits, cache = cached_forward(model, ids[:, -1:], cache)
            while len(new) < max_new_tokens:
                token = int(logits[0, -1].argmax())
                if token == eos_id and mistake in ("eos_excluded", "ignores_eos"):
                    if mistake == "eos_excluded":
                        break
                new.append(token)
                if (token == eos_id and mistake != "ignores_eos") or len(new) == max_new_tokens:
                    break
                ids = torch.cat([ids, torch.tensor([[token]], device=ids.device)], dim=1)
                if mistake in ("no_cache_model", "forged"):
                    logits = model(ids)
                elif mistake == "no_cache_forward":
                    logits, _ = cached_forward(model, ids)
                else:
                    logits, cache = cached_forward(model, ids[:, -1:], cache)
            return new, len(prompt_ids)

        with torch.set_grad_enabled(mistake == "with_grad"):
            if mistake == "forged":
                _without_hooks(model, decode)
            else:
                decode()
        if mistake != "mode_not_restored":
            model.train(was_training)
        return list(prompt_ids) + new if mistake == "returns_prompt" else new

    answer.__name__ = f"cached_generate_{mistake}"
    return answer
