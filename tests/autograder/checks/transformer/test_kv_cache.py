"""Hidden check of 06's key/value cache (`check_cached_greedy_decode`): correct caches written differently pass; the
uncached loop, a cache that projects the memory every step, and a recomputing loop that forges the hook counts
fail with a diagnosis that says so."""
from __future__ import annotations

import functools
import math
import re

import pytest
import torch

import solutions
from autograder.checks.transformer import kv_cache as K
from autograder.checks.transformer import kv_cases as C
from autograder.checks.transformer.kv_cache import check_cached_greedy_decode
from coursekit.mistakes import text_of

import variants as V


def _heads(x, num_heads):                                        # (B, T, d) -> (B, H, T, d_head)
    B, T, d = x.shape
    return x.view(B, T, num_heads, d // num_heads).transpose(1, 2)


def _attend(attn, q_in, keys, values, keep=None):
    """attn's query projection of q_in (B, 1, d) against projected keys/values (B, H, t, d_head)."""
    q = _heads(attn.w_q(q_in), keys.size(1))
    scores = q @ keys.transpose(-2, -1) / math.sqrt(keys.size(-1))
    if keep is not None:
        scores = scores.masked_fill(~keep, torch.finfo(scores.dtype).min)
    out = torch.softmax(scores, dim=-1) @ values                 # (B, H, 1, d_head)
    B, H, T, dh = out.shape
    return attn.w_o(out.transpose(1, 2).reshape(B, T, H * dh))


@torch.no_grad()
def student_cache(model, src_ids, max_len, bos_id=2, eos_id=3, *, store="lists", cross_every_step=False,
                  position=None):
    """A cache written without the reference: per layer a list of keys/values (torch.cat at each step) or
    preallocated (B, H, max_len, d_head) tensors filled one position per step."""
    model.eval()
    memory, src_mask = model.encode(src_ids)
    B, layers = src_ids.size(0), model.decoder.layers
    H = layers[0].self_attn.num_heads
    d_model = memory.size(-1)
    d_head = d_model // H

    def project_memory():
        return [(_heads(layer.cross_attn.w_k(memory), H), _heads(layer.cross_attn.w_v(memory), H))
                for layer in layers]

    cross = project_memory()
    if store == "lists":
        keys, values = [[] for _ in layers], [[] for _ in layers]
    else:
        keys = [memory.new_zeros(B, H, max_len, d_head) for _ in layers]
        values = [memory.new_zeros(B, H, max_len, d_head) for _ in layers]
    tokens = torch.full((B, 1), bos_id, dtype=torch.long, device=src_ids.device)
    done = torch.zeros(B, dtype=torch.bool, device=src_ids.device)
    for t in range(max_len):
        if cross_every_step and t:
            cross = project_memory()
        where = t if position is None else position                     # position=0: a wrong variant
        x = model.decoder.embedding(tokens[:, -1:]) * math.sqrt(d_model) + model.decoder.pos_encoding.pe[where]
        for i, layer in enumerate(layers):
            def self_attend(h, i=i, layer=layer):
                k, v = _heads(layer.self_attn.w_k(h), H), _heads(layer.self_attn.w_v(h), H)
                if store == "lists":
                    keys[i].append(k)
                    values[i].append(v)
                    return _attend(layer.self_attn, h, torch.cat(keys[i], dim=2), torch.cat(values[i], dim=2))
                keys[i][:, :, t:t + 1] = k
                values[i][:, :, t:t + 1] = v
                return _attend(layer.self_attn, h, keys[i][:, :, :t + 1], values[i][:, :, :t + 1])

            def cross_attend(h, i=i, layer=layer):
                return _attend(layer.cross_attn, h, *cross[i], src_mask)

            if layer.norm_first:
                x = x + self_attend(layer.norm1(x))
                x = x + cross_attend(layer.norm2(x))
                x = x + layer.ffn(layer.norm3(x))
            else:
                x = layer.norm1(x + self_attend(x))
                x = layer.norm2(x + cross_attend(x))
                x = layer.norm3(x + layer.ffn(x))
        token = model.generator(model.decoder.norm(x))[:, -1].argmax(-1).masked_fill(done, model.pad_id)
        tokens = torch.cat([tokens, token[:, None]], dim=1)
        done |= token == eos_id
        if done.all():
            break
    return tokens[:, 1:]


def uncached(model, src_ids, max_len, bos_id=2, eos_id=3):
    return solutions.greedy_decode(model, src_ids, max_len, bos_id, eos_id, use_cache=False)


def forged_counts(model, src_ids, max_len, bos_id=2, eos_id=3):
    """Recomputes the whole prefix, but hides that from the forward hooks: they are switched off while decoding
    and then fed fake calls that look like a perfect cache (one position per step, the memory once)."""
    projections = [getattr(getattr(layer, a), p) for layer in model.decoder.layers
                   for a in ("self_attn", "cross_attn") for p in ("w_k", "w_v")]
    saved = [dict(m._forward_hooks) for m in projections]
    for m in projections:
        m._forward_hooks.clear()
    out = uncached(model, src_ids, max_len, bos_id, eos_id)
    for m, hooks in zip(projections, saved):
        m._forward_hooks.update(hooks)
        cross = m in [getattr(layer.cross_attn, p) for layer in model.decoder.layers for p in ("w_k", "w_v")]
        fakes = [src_ids.new_zeros(src_ids.size(0), src_ids.size(1), 1)] if cross else \
            [src_ids.new_zeros(src_ids.size(0), 1, 1)] * out.size(1)
        for fake in fakes:
            for hook in hooks.values():
                hook(m, (fake,), None)
    return out


@pytest.mark.parametrize("fn", [solutions.cached_greedy_decode, student_cache,
                                functools.partial(student_cache, store="preallocated")],
                         ids=["reference", "lists-cat", "preallocated"])
def test_correct_caches_pass(fn):
    check_cached_greedy_decode(fn, solutions.Transformer)


@pytest.mark.parametrize("fn, diagnosis", [
    (uncached, K.RECOMPUTES_PREFIX),
    (functools.partial(student_cache, cross_every_step=True), K.RECOMPUTES_MEMORY),
    (forged_counts, K.RECOMPUTES_PREFIX)], ids=["uncached-loop", "memory-every-step", "forged-hook-counts"])
def test_recomputing_decoders_fail_with_diagnosis(fn, diagnosis):
    with pytest.raises(AssertionError) as info:
        check_cached_greedy_decode(fn, solutions.Transformer)
    message = str(info.value)
    assert info.value.mistake_id == diagnosis, message  # the catalogue id travels as data (report counts it)
    assert text_of(diagnosis) in message, message
    assert "hint:" in message and len(message.splitlines()) < 15, message


def test_wrong_tokens_fail_on_same_tokens():
    """A cache that feeds every new token at position 0 caches correctly but generates other tokens."""
    with pytest.raises(AssertionError, match="differ from greedy decoding"):
        check_cached_greedy_decode(functools.partial(student_cache, position=0), solutions.Transformer)


def test_not_handed_in_transformer_is_a_clear_failure():
    with pytest.raises(AssertionError, match="Transformer"):
        check_cached_greedy_decode(solutions.cached_greedy_decode, solutions.greedy_decode)


def cache_default_bos(model, src_ids, max_len, bos_id=2, eos_id=3):
    """A correct cache that ignores bos_id (always starts from 2)."""
    return student_cache(model, src_ids, max_len, 2, eos_id)


def cache_default_eos(model, src_ids, max_len, bos_id=2, eos_id=3):
    """A correct cache that ignores eos_id (always ends at 3)."""
    return solutions.cached_greedy_decode(model, src_ids, max_len, bos_id=bos_id)


@pytest.mark.parametrize("fn, criterion", [(cache_default_bos, "cached_greedy_decode.bos_id"),
                                           (cache_default_eos, "cached_greedy_decode.eos_id")])
def test_cache_arguments_with_teeth(fn, criterion):
    """bos_id and eos_id are arguments with teeth: a cache that ignores one keeps most of its points."""
    V.fails_partially(lambda answer: check_cached_greedy_decode(answer, solutions.Transformer), fn, criterion,
                      "tokens differ")


def test_the_argument_cases_use_other_ids_that_change_the_tokens():
    """The core uses the default ids; each argument's other id changes the tokens of the last core case's model."""
    assert all((bos, eos) == (2, 3) for _, _, bos, eos, _, _ in C.cases())
    norm_first, pad_id, bos_id, eos_id, max_len, want = case = C.cases()[-1]
    ref, src, outcomes = C.find_case(torch.device("cpu"), *case)
    for criterion, bos, eos in C.argument_cases():
        assert (bos != 2) + (eos != 3) == 1 and pad_id not in (bos, eos)
        tried = solutions.greedy_decode(ref, src, max_len, bos_id=bos, eos_id=eos, use_cache=False)
        assert not torch.equal(tried, outcomes["plain"]), criterion


@pytest.mark.parametrize("index", range(3))
def test_cases_have_teeth(index):
    """Each case of this submission (its search) stops as it says, and projecting a position twice changes its
    tokens."""
    case = C.cases()[index]
    norm_first, pad_id, bos_id, eos_id, max_len, want = case
    _ref, _src, outcomes = C.find_case(torch.device("cpu"), *case)
    assert C.qualifies(outcomes, eos_id, max_len, want)


@pytest.mark.fixed_inputs
def test_with_no_salt_the_first_candidates_qualify():
    """FIRST_TRIED holds the (seed, bias) that qualify with no salt: the fixed inputs need no search."""
    for case, (seed, bias) in zip(C.cases(), C.FIRST_TRIED):
        norm_first, pad_id, bos_id, eos_id, max_len, want = case
        _ref, _src, outcomes = C.candidate(torch.device("cpu"), norm_first, pad_id, bos_id, eos_id, max_len,
                                            seed, bias)
        assert C.qualifies(outcomes, eos_id, max_len, want)
        if case == C.cases()[-1]:   # the model the arguments bos_id and eos_id are tried on
            assert C.ids_change_tokens(_ref, _src, max_len, outcomes["plain"])


class TransformerInvertedSourceMask(solutions.Transformer):
    """A Transformer with its own slip (the source mask inverted: True at padding): its logits differ from the
    reference, so the grader's expected tokens come from its own model, with the same offsets indexed by position."""

    def encode(self, src_ids):
        from solutions.attention import make_padding_mask

        src_mask = ~make_padding_mask(src_ids, self.pad_id)
        return self.encoder(src_ids, src_mask), src_mask


def test_a_slip_in_the_transformer_does_not_cost_the_cache_points():
    case = C.cases()[0]
    _ref, src, outcomes = C.find_case(torch.device("cpu"), *case)
    model = TransformerInvertedSourceMask(C.SRC_VOCAB, C.TGT_VOCAB, **C.transformer_kwargs(False, 0))
    model.load_state_dict(_ref.state_dict())
    assert not torch.equal(uncached(model.eval(), src, case[4]), outcomes["plain"])   # it does differ
    for fn in (solutions.cached_greedy_decode, student_cache):
        check_cached_greedy_decode(fn, TransformerInvertedSourceMask)
    with pytest.raises(AssertionError, match=re.escape(text_of(K.RECOMPUTES_PREFIX))):
        check_cached_greedy_decode(uncached, TransformerInvertedSourceMask)
