"""Public self-check for notebook 06's key/value cache (cached_greedy_decode), the mirror of
autograder/checks/transformer/kv_cache.py.

cached_greedy_decode is compared with your own greedy_decode on a small Transformer of yours, and
`coursekit.probe.hooks` counts the positions each key/value projection sees. Shapes: B batch, S source length.
"""
from __future__ import annotations

import torch
from torch import nn

from coursekit.checks.toolkit import expect_dtype, expect_type, fail, mistake_hint, passed, randomize, run
from coursekit.criteria import argument

_D_MODEL, _H, _D_FF = 6, 3, 10


# ------------------------------------------------------------------------------------------ cached_greedy_decode

def _projection_problem(counts: dict, steps: int, source_len: int) -> tuple[str, str] | None:
    """(problem, hint) from the positions each key/value projection saw per call, or None when they look cached."""
    for name, calls in counts.items():
        if ".self_attn." in name and any(c > 1 for c in calls):
            return (f"{name} saw {calls[:6]} positions per call: the keys/values of the whole prefix are recomputed "
                    "at every step.",
                    mistake_hint("cache.recomputes_prefix"))
        if ".self_attn." in name and not steps <= len(calls) <= steps + 1:
            return (f"{name} ran {len(calls)} times for {steps} generated tokens (expected one call per step).",
                    "call each layer's own self_attn.w_k / self_attn.w_v modules on the newest token at every step.")
    for name, calls in counts.items():
        if ".cross_attn." in name and len(calls) > 1:
            return (f"{name} ran {len(calls)} times: the memory's keys/values are projected again at every step.",
                    mistake_hint("cache.recomputes_memory"))
        if ".cross_attn." in name and calls != [source_len]:
            return (f"{name} saw {calls} positions, expected one call on the memory's {source_len} positions.",
                    "project the memory with each layer's own cross_attn.w_k / cross_attn.w_v modules.")
    return None


def check_cached_greedy_decode(cached_greedy_decode, Transformer, greedy_decode=None) -> None:
    """Same tokens as your greedy_decode on a small model of your Transformer class, and each position's keys and
    values projected once (counted by hooks; an offset that changes when a position is projected twice makes a
    recomputing decoder generate other tokens)."""
    import copy

    model = run("Transformer", Transformer, 9, 11, d_model=_D_MODEL, num_heads=_H, d_ff=_D_FF, num_layers=2,
                max_len=16)
    expect_type(model, nn.Module, "Transformer(...)", "subclass nn.Module.")
    randomize(model, seed=8)                                  # a model where one sequence ends early (eos_id=3)
    with torch.no_grad():
        model.generator.bias[[0, 2]] = -30.0                  # never <pad> or <bos> as an output
        model.generator.bias[3] += 1.0
    model.eval()
    src = torch.tensor([[4, 5, 6, 7, 8], [5, 6, 7, 0, 0], [8, 8, 4, 5, 0]])     # (B=3, S=5), 0 = <pad>
    max_len = 7
    got = run("cached_greedy_decode", cached_greedy_decode, copy.deepcopy(model), src, max_len)
    expect_type(got, torch.Tensor, "cached_greedy_decode(...)")
    expect_dtype(got, torch.long, "cached_greedy_decode(...)", "return token ids as int64 (torch.long).")
    if greedy_decode is not None:
        expected = run("greedy_decode", greedy_decode, copy.deepcopy(model), src, max_len)
        if not (isinstance(expected, torch.Tensor) and torch.equal(got.cpu(), expected.cpu())):
            fail(f"cached_greedy_decode gave {got.cpu().tolist()}, your greedy_decode gave "
                 f"{expected.cpu().tolist() if isinstance(expected, torch.Tensor) else expected} for the same model.",
                 "the cached step must compute what model.decode computes for the last position: embedding * "
                 "sqrt(d_model) plus the positional encoding of position t (not 0), each layer's sublayers in the "
                 "same post/pre-norm order, the final decoder norm and the generator.")
    _expect_projected_once(cached_greedy_decode, model, src, max_len, greedy_decode)
    with argument("cached_greedy_decode.bos_id"):
        _try_ids(cached_greedy_decode, model, src, max_len, bos_id=1)
    with argument("cached_greedy_decode.eos_id"):
        _try_ids(cached_greedy_decode, model, src, max_len, eos_id=_OTHER_EOS)
    passed("cached_greedy_decode")


def _expect_projected_once(cached_greedy_decode, model: nn.Module, src, max_len: int, greedy_decode=None) -> None:
    """Each position's keys and values projected once: the positions each projection sees per call (hooks on a
    copy of `model`), and, given greedy_decode, the same tokens as it under offsets indexed by position."""
    import copy

    from coursekit.probe.hooks import ProjectionRecorder

    counted = copy.deepcopy(model)
    recorder = ProjectionRecorder(counted, scale=1.0, mode="count")
    got = run("cached_greedy_decode", cached_greedy_decode, counted, src, max_len)
    problem = _projection_problem(recorder.counts(), int(got.size(1)), src.size(1))
    if problem is not None:
        fail(*problem)
    if greedy_decode is not None:
        positional = copy.deepcopy(model)
        ProjectionRecorder(positional, scale=1.0, mode="position")
        expected = run("greedy_decode", greedy_decode, positional, src, max_len)
        if isinstance(expected, torch.Tensor) and not torch.equal(got.cpu(), expected.cpu()):
            fail("with key/value projections that give a position other values when it is projected a second "
                 "time, cached_greedy_decode's tokens differ from greedy_decode's: some position's keys/values "
                 "were computed more than once (or out of order).",
                 "project each new token once per layer, append it to that layer's cache, and never recompute "
                 "the cached positions.")


def _try_ids(cached_greedy_decode, model: nn.Module, src, max_len: int, **ids) -> None:
    """cached_greedy_decode with another bos_id or eos_id gives the tokens of greedy decoding with that id."""
    import copy

    shown = ", ".join(f"{k}={v}" for k, v in ids.items())
    got = run(f"cached_greedy_decode(..., {shown})", cached_greedy_decode, copy.deepcopy(model), src, max_len, **ids)
    expected = _greedy_loop(model, src, max_len, **ids)
    if not (isinstance(got, torch.Tensor) and torch.equal(got.cpu(), expected)):
        shown_got = got.cpu().tolist() if isinstance(got, torch.Tensor) else got
        fail(f"cached_greedy_decode(..., {shown}) gave {shown_got}, greedy decoding with the same ids gives "
             f"{expected.tolist()}.",
             "start every sequence from bos_id, and end it at eos_id, as greedy_decode does: use the "
             "arguments, not the default ids.")


_OTHER_EOS = 7   # not produced by the model of check_cached_greedy_decode: the sequence that produces 3 goes on


@torch.no_grad()
def _greedy_loop(model, src_ids, max_len, bos_id=2, eos_id=3) -> torch.Tensor:
    """Greedy decoding through `model`'s encode/decode, the whole prefix at each step (what the cache must match)."""
    memory, src_mask = model.encode(src_ids)
    ys = torch.full((src_ids.size(0), 1), bos_id, dtype=torch.long)
    finished = torch.zeros(src_ids.size(0), dtype=torch.bool)
    for _ in range(max_len):
        token = model.decode(ys, memory, src_mask)[:, -1].argmax(-1).masked_fill(finished, model.pad_id)
        ys = torch.cat([ys, token[:, None]], dim=1)
        finished |= token == eos_id
        if finished.all():
            break
    return ys[:, 1:]
