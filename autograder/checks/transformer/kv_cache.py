"""Hidden check of notebook 06's key/value-cache exercise: `cached_greedy_decode(model, src_ids, max_len, ...)`.

The grade cell hands in the student's function AND their own `Transformer` class (the kernel never receives the
reference). For every case the check builds the student's Transformer in the kernel with the grader's weights:

(a) same tokens: the expected tokens come from a greedy loop that the grader drives through the student's OWN model
    (remote `encode` once, `decode` at every step, argmax here), so a slip in their Transformer does not also cost
    the cache points. The cases make sequences stop at different steps (found by a deterministic search).
(b) it really caches: a second copy gets `coursekit.probe.hooks.ProjectionRecorder` (public): each layer's
    `self_attn.w_k/w_v` and `cross_attn.w_k/w_v` become a `StatefulProjection` whose output carries an offset that
    depends on how many positions that module has already projected, and a forward hook counts the positions per
    call. A decoder that projects every position exactly once produces the tokens that the grader computes on its
    side (the same public wrapper around a local copy of the reference-weight model, or, when the student's
    Transformer differs from the reference, the grader-driven loop through their model with position-indexed
    offsets); one that recomputes the prefix or the memory shifts its offsets and gets other tokens. The counts
    the kernel reports only sharpen the diagnosis: the tokens decide, and the kernel cannot compute them without
    projecting each position once.

The cases, their models and the grader's own decodes are in `kv_cases.py`.
"""
from __future__ import annotations

import torch

from autograder.checks.kit.compare import as_tensor, prepare
from autograder.checks.kit.criteria import argument
from autograder.checks.kit.parts import given_working_parts
from autograder.checks.kit.remote import ProbeBroken, RemoteObject, StudentError, new, hidden_check
from autograder.checks.kit.toolkit import call, construct, expect_callable, fail, shape_of, start_check
from autograder.checks.transformer.kv_cases import (
    D_MODEL, H, NUM_LAYERS, SCALE, SRC_VOCAB, TGT_VOCAB, argument_cases, cases, find_case, transformer_kwargs,
)
from coursekit.mistakes import MISTAKES
from coursekit.probe.hooks import PROJECTIONS

# Catalogue ids (coursekit/mistakes.py) of the two ways of not caching that the check can name.
RECOMPUTES_PREFIX = "cache.recomputes_prefix"
RECOMPUTES_MEMORY = "cache.recomputes_memory"
CACHE_HINT = ("keep each layer's self-attention keys/values from earlier steps, project only the newest token "
              "(one position per step) and append it; project the memory with each layer's cross_attn.w_k/w_v "
              "once, before the loop")


# ----------------------------------------------------------------------------------------- the student's side
def _student_model(Transformer, ref, device, norm_first, pad_id) -> RemoteObject:
    module = construct(Transformer, "Transformer", SRC_VOCAB, TGT_VOCAB, **transformer_kwargs(norm_first, pad_id))
    prepare(module, ref, device, "Transformer")
    return module


def _greedy_through(model: RemoteObject, src_ids, max_len, bos_id, eos_id, pad_id, device, tested) -> torch.Tensor:
    """Greedy decoding driven from here through the student's model: encode once, decode(prefix) each step."""
    encoded = call("Transformer.encode", model.attr("encode"), src_ids.clone(), _no_grad=True, tested=tested)
    if not isinstance(encoded, tuple) or len(encoded) != 2:
        fail("Transformer.encode must return a tuple (memory, src_mask).", tested=tested)
    memory, src_mask = encoded
    ys = torch.full((src_ids.size(0), 1), bos_id, dtype=torch.long, device=device)
    finished = torch.zeros(src_ids.size(0), dtype=torch.bool, device=device)
    for _ in range(max_len):
        logits = call("Transformer.decode", model.attr("decode"), ys.clone(), memory, src_mask, _no_grad=True,
                      tested=tested)
        logits = as_tensor(logits, "Transformer.decode's logits", tested)
        if logits.dim() != 3 or logits.size(0) != ys.size(0) or logits.size(1) != ys.size(1):
            fail("Transformer.decode must return logits (B, T, tgt_vocab_size).", tested=tested)
        token = logits[:, -1].to(device).argmax(-1).masked_fill(finished, pad_id)
        ys = torch.cat([ys, token[:, None]], dim=1)
        finished |= token == eos_id
        if finished.all():
            break
    return ys[:, 1:]


def _tokens(got, tested) -> torch.Tensor:
    got = as_tensor(got, "cached_greedy_decode's result", tested)
    if got.dtype != torch.long:
        fail(f"cached_greedy_decode must return int64 (torch.long) token ids, got {got.dtype}.", tested=tested)
    return got.cpu()


def _read_counts(raw, tested) -> dict[str, list[int]]:
    """The recorder's counts, validated (they are data from the student's process)."""
    names = [f"decoder.layers.{i}.{p}" for i in range(NUM_LAYERS) for p in PROJECTIONS]
    if not isinstance(raw, dict) or any(not isinstance(raw.get(n), list) for n in names):
        fail("cached_greedy_decode could not be checked: the projection counts could not be read back.",
             tested=tested, hint="do not replace or remove the modules of your model's decoder layers")
    counts = {}
    for name in names:
        calls = raw[name]
        if len(calls) > 10_000 or not all(isinstance(c, int) and not isinstance(c, bool) for c in calls):
            fail("cached_greedy_decode could not be checked: the projection counts could not be read back.",
                 tested=tested)
        counts[name] = calls
    return counts


def _shown(calls: list[int]) -> str:
    return str(calls[:8])[:-1] + (", ...]" if len(calls) > 8 else "]")


def _count_problem(counts, steps: int, S: int) -> tuple[str, list[str]] | None:
    """What the position counts say is wrong: (catalogue id or a diagnosis in words, details), or None when they
    look like a cache."""
    for i in range(NUM_LAYERS):
        for proj in ("w_k", "w_v"):
            name = f"decoder.layers.{i}.self_attn.{proj}"
            calls = counts[name]
            if any(c > 1 for c in calls):
                return RECOMPUTES_PREFIX, [f"decoder layer {i}'s self_attn.{proj} saw {_shown(calls)} positions "
                                           "per step; with a cache it sees 1 new position per step"]
            if not steps <= len(calls) <= steps + 1:
                return "does not project one new position per step with each layer's self_attn.w_k/w_v modules", \
                    [f"decoder layer {i}'s self_attn.{proj} ran {len(calls)} times for {steps} generated tokens; "
                     f"call the layer's own modules on the newest token (block.self_attn.{proj}(x_new))"]
    for i in range(NUM_LAYERS):
        for proj in ("w_k", "w_v"):
            name = f"decoder.layers.{i}.cross_attn.{proj}"
            calls = counts[name]
            if len(calls) > 1:
                return RECOMPUTES_MEMORY, [f"decoder layer {i}'s cross_attn.{proj} ran {len(calls)} times, on "
                                           f"{_shown(calls)} positions; the memory never changes, so project it "
                                           "once per call"]
            if calls != [S]:
                return "does not project the memory with each layer's cross_attn.w_k/w_v modules", \
                    [f"decoder layer {i}'s cross_attn.{proj} saw {_shown(calls)} positions, expected one call on "
                     f"the memory's {S}; call the layer's own modules (block.cross_attn.{proj}(memory))"]
    return None


@hidden_check
@given_working_parts("cached_greedy_decode")
def check_cached_greedy_decode(cached_greedy_decode, Transformer) -> None:
    """cached_greedy_decode(model, src_ids, max_len, bos_id=2, eos_id=3) -> LongTensor (B, <= max_len), checked on
    the student's own Transformer (handed in with it). The core calls it with the default ids; bos_id and eos_id
    are then each tried with another id in their own block (the tokens only: the core has judged the cache)."""
    device = start_check()
    expect_callable(cached_greedy_decode, "cached_greedy_decode")
    for case in cases():
        ref, src_ids, outcomes = find_case(device, *case)
        _try_core_case(cached_greedy_decode, Transformer, device, case, ref, src_ids, outcomes)
    norm_first, pad_id, _, _, max_len, _ = case   # the arguments: the model and sources of the last core case

    def try_ids(bos_id, eos_id):
        kwargs = {**({"bos_id": bos_id} if bos_id != 2 else {}), **({"eos_id": eos_id} if eos_id != 3 else {})}
        tested = _tested(pad_id, norm_first, src_ids, max_len, kwargs)
        model = _student_model(Transformer, ref, device, norm_first, pad_id)
        expected = _greedy_through(model, src_ids, max_len, bos_id, eos_id, pad_id, device, tested).cpu()
        got = _tokens(call("cached_greedy_decode", cached_greedy_decode, model, src_ids.clone(), max_len,
                           tested=tested, **kwargs), tested)
        _expect_same_tokens(got, expected, tested)

    (_, bos_id, _), (_, _, eos_id) = argument_cases()
    with argument("cached_greedy_decode.bos_id"):
        try_ids(bos_id, 3)
    with argument("cached_greedy_decode.eos_id"):
        try_ids(2, eos_id)


def _try_core_case(cached_greedy_decode, Transformer, device, case, ref, src_ids, outcomes) -> None:
    """One core case (the default ids): (a) the tokens of greedy decoding through the student's model, (b) each
    position projected exactly once (the StatefulProjection offsets and the hook counts)."""
    norm_first, pad_id, bos_id, eos_id, max_len, _want = case
    channel = cached_greedy_decode.channel
    tested = _tested(pad_id, norm_first, src_ids, max_len, {})

    # (a) the tokens of greedy decoding through the same model
    model = _student_model(Transformer, ref, device, norm_first, pad_id)
    expected = _greedy_through(model, src_ids, max_len, bos_id, eos_id, pad_id, device, tested).cpu()
    transformer_ok = torch.equal(expected, outcomes["plain"].cpu())
    got = _tokens(call("cached_greedy_decode", cached_greedy_decode, model, src_ids.clone(), max_len,
                       tested=tested), tested)
    _expect_same_tokens(got, expected, tested)

    # (b) each position projected exactly once
    model = _student_model(Transformer, ref, device, norm_first, pad_id)
    recorder = new(channel, "coursekit.probe.hooks.ProjectionRecorder", model, scale=SCALE, mode="count")
    got = _tokens(call("cached_greedy_decode", cached_greedy_decode, model, src_ids.clone(), max_len,
                       tested=tested), tested)
    try:
        counts = _read_counts(recorder.attr("counts")(), tested)
    except (StudentError, ProbeBroken):
        fail("cached_greedy_decode could not be checked: the projection counts could not be read back.",
             tested=tested)
    if transformer_ok:
        once = outcomes["once"].cpu()
    else:  # their Transformer differs from the reference: the same offsets, indexed by position, through it
        positional = _student_model(Transformer, ref, device, norm_first, pad_id)
        new(channel, "coursekit.probe.hooks.ProjectionRecorder", positional, scale=SCALE, mode="position")
        once = _greedy_through(positional, src_ids, max_len, bos_id, eos_id, pad_id, device, tested).cpu()
    problem = _count_problem(counts, int(got.size(1)), int(src_ids.size(1)))
    if not torch.equal(got, once) or problem is not None:
        _fail_not_cached(got, outcomes if transformer_ok else None, problem, tested)


def _fail_not_cached(got, outcomes, problem, tested) -> None:
    """The failure of a decoder that does not project each position exactly once: named by its tokens (those of a
    decoder that recomputes the prefix or the memory, when `outcomes` of the reference apply) or by its counts."""
    tested += ", with each key/value projection adding an offset that changes when a position is projected a " \
              "second time"
    if outcomes is not None and torch.equal(got, outcomes["prefix"].cpu()):
        problem = (RECOMPUTES_PREFIX, ["its tokens are those of a decoder that projects every earlier position "
                                       "again at each step", *(problem[1] if problem else [])])
    elif outcomes is not None and torch.equal(got, outcomes["memory"].cpu()):
        problem = (RECOMPUTES_MEMORY, ["its tokens are those of a decoder that projects the memory again at "
                                       "each step", *(problem[1] if problem else [])])
    elif problem is None:
        problem = ("does not project each position exactly once",
                   ["its tokens differ from those of a decoder that projects every position once, in order"])
    mistake = problem[0] if problem[0] in MISTAKES else None
    fail("cached_greedy_decode does not use a key/value cache as the exercise asks"
         + ("." if mistake else f": it {problem[0]}."),
         tested=tested, details=problem[1][:3], mistake=mistake, hint=CACHE_HINT)


def _tested(pad_id, norm_first, src_ids, max_len, kwargs) -> str:
    return (f"your Transformer(d_model={D_MODEL}, num_heads={H}, num_layers={NUM_LAYERS}, pad_id={pad_id}, "
            f"norm_first={norm_first}) with the grader's weights, src_ids {shape_of(src_ids)}, max_len={max_len}"
            + "".join(f", {k}={v}" for k, v in kwargs.items()))


def _expect_same_tokens(got, expected, tested) -> None:
    if not torch.equal(got, expected):
        details = [f"expected shape {tuple(expected.shape)}, got {tuple(got.shape)}"]
        if got.shape == expected.shape:
            details = [f"{int((got != expected).sum())} of {expected.numel()} tokens differ"]
        fail("cached_greedy_decode's tokens differ from greedy decoding with the same model (encode once, "
             "decode the whole prefix at every step, argmax of the last position).", tested=tested,
             details=details,
             hint="start from bos_id; at each step feed the newest token at its position (the positional "
                  "encoding of step t, not of position 0), attend over every cached position of the same "
                  "sequence, and after eos_id fill with model.pad_id, as in greedy_decode")
