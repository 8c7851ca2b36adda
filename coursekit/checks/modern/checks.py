"""Public self-checks for notebook 09's parts: RMSNorm, rotary positions, SwiGLU, grouped-query attention
(LlamaBlock and ModernGPT: `model.py`).

The expected answers are worked out in float64 NumPy with plain loops (`answers.py`), from your module's own weights
after the check has set them to fixed values, so they share no code (and no mistake) with a tensor implementation.
"""
from __future__ import annotations

import numpy as np
import torch
from torch import nn

from coursekit.criteria import argument, edge_case
from coursekit.checks.modern.answers import DEFAULT_EPS, angles, gqa, or_none, randomize, rms_norm, rotate, swiglu
from coursekit.checks.toolkit import (expect_close, expect_dtype, expect_shape, expect_type, expect_value_error, fail,
                                     first_matching_hint, mistake_hint, passed, run, uses_parts)
from coursekit.tolerance import CPU_FLOAT32, ROTARY_ATOL, ROTARY_OFFSET_ATOL


def _only_parameters(module: nn.Module, owner: str, expected: dict[str, tuple], hint: str) -> None:
    """`module` has exactly the parameters `expected` (name -> shape)."""
    theirs = {name: tuple(p.shape) for name, p in module.named_parameters()}
    for name, shape in expected.items():
        if name not in theirs:
            fail(f"{owner} needs a parameter `{name}` of shape {shape}; it has: {', '.join(theirs) or 'none'}.",
                 hint)
        if theirs[name] != shape:
            fail(f"{owner}'s `{name}` should have shape {shape}, got {theirs[name]}.", hint)
    extra = sorted(set(theirs) - set(expected))
    if extra:
        fail(f"{owner} has parameters the exercise does not ask for: {', '.join(extra)}.", hint)


# ------------------------------------------------------------------------------------------------------ RMSNorm
def check_rmsnorm(RMSNorm) -> None:
    d_model = 5
    module = run("RMSNorm", RMSNorm, d_model)
    expect_type(module, nn.Module, f"RMSNorm({d_model})", "subclass nn.Module and call super().__init__().")
    _only_parameters(module, "RMSNorm", {"weight": (d_model,)}, "one parameter: "
                     "self.weight = nn.Parameter(torch.ones(d_model)); RMSNorm has no bias.")
    if not torch.all(module.weight.detach().cpu() == 1):
        fail("RMSNorm.weight should start as ones.", "nn.Parameter(torch.ones(d_model)).")
    generator = torch.Generator().manual_seed(90)
    x = (torch.randn(2, 3, d_model, generator=generator) + 0.8) * 0.4               # (2, 3, 5), mean 0.3

    def compare(eps, scale):
        label = f"RMSNorm({d_model})" if eps is None else f"RMSNorm({d_model}, eps={eps})"
        module = run("RMSNorm", RMSNorm, d_model) if eps is None else run("RMSNorm", RMSNorm, d_model, eps=eps)
        params = randomize(module, seed=91)
        inputs = x * scale
        with torch.no_grad():
            out = run("RMSNorm.forward", module, inputs.clone())
        expect_shape(out, inputs.shape, f"{label}(x) for x of shape (2, 3, 5)", "normalising keeps the shape.")
        xs, w, e = inputs.double().numpy(), params["weight"], DEFAULT_EPS if eps is None else eps
        hint = first_matching_hint(out.detach(), [
            (rms_norm(xs, w, e, "axis"), mistake_hint("rms_norm.mean_wrong_axis")),
            (rms_norm(xs, w, e, "eps_outside"), mistake_hint("rms_norm.eps_outside_root")),
            (rms_norm(xs, w, e, "center"), mistake_hint("rms_norm.subtracts_mean")),
            (rms_norm(xs, w, e, "no_weight"), mistake_hint("rms_norm.no_weight")),
        ])
        if hint is None and eps is None:
            hint = "with values this small eps matters: the default is eps=1e-6, used inside the root."
        expect_close(out, rms_norm(xs, w, e), f"{label}(x)", hint)

    compare(None, 1e-3)                      # the default eps, on values where it matters
    with argument("RMSNorm.eps"):
        compare(0.1, 1.0)
    passed("RMSNorm", "(against a loop, with eps=0.1 and the default eps)")


# ------------------------------------------------------------------------------------------------ rotary angles
def check_rotary_cos_sin(rotary_cos_sin) -> None:
    def compare(max_len, d_head, base):
        label = f"rotary_cos_sin({max_len}, {d_head}" + (")" if base is None else f", base={base})")
        result = run("rotary_cos_sin", rotary_cos_sin, max_len, d_head) if base is None else \
            run("rotary_cos_sin", rotary_cos_sin, max_len, d_head, base=base)
        if not isinstance(result, (tuple, list)) or len(result) != 2:
            fail(f"{label} should return a pair (cos, sin), got {type(result).__name__}.", "return cos, sin")
        cos, sin = result
        angle = angles(max_len, d_head, 10000.0 if base is None else base)
        for name, table in (("cos", cos), ("sin", sin)):
            expect_type(table, torch.Tensor, f"the {name} table of {label}")
            expect_shape(table, angle.shape, f"the {name} table of {label}",
                         "one row per position, one column per pair of features: (max_len, d_head // 2).")
            expect_dtype(table, torch.float32, f"the {name} table", "convert with .float() at the end.")
        wrong = angles(max_len, d_head, 10000.0 if base is None else base, "no_two")
        hint = first_matching_hint(cos, [
            (np.cos(wrong), mistake_hint("rotary.exponent_no_two")),
            (np.sin(angle), mistake_hint("rotary.cos_sin_swapped")),
        ], atol=ROTARY_ATOL)
        if hint is None and base is not None:
            hint = "use the `base` argument instead of 10000."
        expect_close(cos, np.cos(angle), f"the cos table of {label}", hint, **CPU_FLOAT32)
        expect_close(sin, np.sin(angle), f"the sin table of {label}", hint, **CPU_FLOAT32)

    compare(6, 8, None)
    with argument("rotary_cos_sin.base"):
        compare(5, 4, 100.0)
    with edge_case("rotary_cos_sin.odd_d_head"):
        expect_value_error("rotary_cos_sin(4, 5)", lambda: rotary_cos_sin(4, 5),
                           "features are rotated in pairs: check `d_head % 2` and raise ValueError.")
    passed("rotary_cos_sin")


def check_apply_rotary(apply_rotary) -> None:
    T, d_head = 4, 6
    angle = angles(T, d_head, 100.0)                                                 # base 100: larger turns
    cos, sin = torch.tensor(np.cos(angle), dtype=torch.float32), torch.tensor(np.sin(angle), dtype=torch.float32)
    x = torch.randn(2, 3, T, d_head, generator=torch.Generator().manual_seed(92))     # (B=2, H=3, T=4, d_head=6)
    out = run("apply_rotary", apply_rotary, x.clone(), cos.clone(), sin.clone())
    expect_type(out, torch.Tensor, "apply_rotary(x, cos, sin)")
    expect_shape(out, x.shape, "apply_rotary(x of shape (2, 3, 4, 6), cos, sin)", "the result has x's shape.")
    xs = x.double().numpy()
    hint = first_matching_hint(out, [
        (rotate(xs, angle, "halves"), mistake_hint("rotary.halves")),
        (rotate(xs, angle, "negative"), mistake_hint("rotary.wrong_direction")),
    ], atol=ROTARY_ATOL)
    expect_close(out, rotate(xs, angle), "apply_rotary(x, cos, sin)", hint, atol=ROTARY_ATOL)
    # the property that makes rotary positions relative: rotated scores depend on the offset m - n only
    q = torch.randn(1, 1, d_head, generator=torch.Generator().manual_seed(93)).expand(1, 12, d_head)  # one vector
    long_angle = angles(12, d_head, 100.0)
    long_cos = torch.tensor(np.cos(long_angle), dtype=torch.float32)
    long_sin = torch.tensor(np.sin(long_angle), dtype=torch.float32)
    rotated = run("apply_rotary", apply_rotary, q.clone(), long_cos, long_sin)[0].double()
    scores = rotated @ rotated.T                                                      # (12, 12)
    if not torch.allclose(scores[3, 1], scores[10, 8], atol=ROTARY_OFFSET_ATOL):
        fail("the same vector at positions (3, 1) and (10, 8) should give the same score after rotation "
             "(the offset is 2 in both).", "rotate by angle[p, i] at position p; both q and k use the same table.")
    passed("apply_rotary", "(and the score depends on the offset only)")


# -------------------------------------------------------------------------------------------------------- SwiGLU
def check_swi_glu(SwiGLU) -> None:
    d_model, d_ff = 5, 7
    module = run("SwiGLU", SwiGLU, d_model, d_ff)
    expect_type(module, nn.Module, f"SwiGLU({d_model}, {d_ff})", "subclass nn.Module.")
    _only_parameters(module, "SwiGLU", {"w_gate.weight": (d_ff, d_model), "w_up.weight": (d_ff, d_model),
                                        "w_down.weight": (d_model, d_ff)},
                     "three nn.Linear layers, each with bias=False: w_gate and w_up (d_model -> d_ff), "
                     "w_down (d_ff -> d_model).")
    params = randomize(module, seed=94)
    x = torch.randn(2, 3, d_model, generator=torch.Generator().manual_seed(95))
    with torch.no_grad():
        out = run("SwiGLU.forward", module, x.clone())
    xs = x.double().numpy()
    hint = first_matching_hint(out, [
        (swiglu(params, "", xs, "swapped"), mistake_hint("swiglu.gate_up_swapped")),
        (swiglu(params, "", xs, "relu"), mistake_hint("swiglu.relu")),
    ])
    expect_close(out, swiglu(params, "", xs), "SwiGLU(x)", hint)
    passed("SwiGLU")


# ----------------------------------------------------------------------------------------- grouped-query attention
_GQA_HINTS = {
    "tile": mistake_hint("gqa.kv_heads_tiled"),
    "mod_groups": mistake_hint("gqa.head_mod_groups"),
    "rotates_values": mistake_hint("gqa.rotates_values"),
    "no_rotary": mistake_hint("gqa.no_rotary"),
}


@uses_parts("GroupedQueryAttention")
def check_grouped_query_attention(GroupedQueryAttention) -> None:
    d_model, T = 12, 4
    for args, why in (((10, 4, 2), "d_model 10 is not divisible by 4 heads"),
                      ((12, 6, 4), "6 query heads cannot be shared out evenly over 4 key/value heads"),
                      ((12, 4, 1), "d_head = 12 // 4 = 3 is odd, and rotary angles turn pairs of features")):
        with edge_case("GroupedQueryAttention.bad_sizes"):
            expect_value_error(f"GroupedQueryAttention{args}", lambda args=args: GroupedQueryAttention(*args),
                               f"{why}: check it in __init__ and raise ValueError.")
    causal = torch.tril(torch.ones(T, T, dtype=torch.bool))
    x = torch.randn(2, T, d_model, generator=torch.Generator().manual_seed(96))       # (2, 4, 12)
    for num_heads, num_kv_heads, keep in ((6, 3, causal), (6, 1, None), (6, 6, causal)):
        label = f"GroupedQueryAttention({d_model}, {num_heads}, {num_kv_heads})"
        module = run("GroupedQueryAttention", GroupedQueryAttention, d_model, num_heads, num_kv_heads, max_len=8)
        expect_type(module, nn.Module, label, "subclass nn.Module.")
        d_head = d_model // num_heads
        _only_parameters(module, label, {"w_q.weight": (d_model, d_model),
                                         "w_k.weight": (num_kv_heads * d_head, d_model),
                                         "w_v.weight": (num_kv_heads * d_head, d_model),
                                         "w_o.weight": (d_model, d_model)},
                         "w_q and w_o map d_model -> d_model, w_k and w_v map d_model -> num_kv_heads * d_head, "
                         "all with bias=False.")
        extra = sorted(set(module.state_dict()) - {"w_q.weight", "w_k.weight", "w_v.weight", "w_o.weight"})
        if extra:
            fail(f"{label}.state_dict() holds {', '.join(extra)}: the rotary tables do not belong there.",
                 mistake_hint("gqa.tables_in_state_dict"))
        module.eval()
        params = randomize(module, seed=97)
        with torch.no_grad():
            out = run(f"{label}.forward", module, x.clone(), keep)
        expect_shape(out, x.shape, f"{label}(x of shape (2, 4, 12))", "heads merged and projected: (B, T, d_model).")
        xs = x.double().numpy()
        keep_np = None if keep is None else keep.numpy()
        hint = first_matching_hint(out, [(or_none(gqa, params, "", xs, num_heads, num_kv_heads, keep_np,
                                                   mistake=m), h) for m, h in _GQA_HINTS.items()],
                                   atol=ROTARY_ATOL)
        expect_close(out, gqa(params, "", xs, num_heads, num_kv_heads, keep_np),
                     f"{label}(x" + (", causal mask)" if keep is not None else ")"), hint, atol=ROTARY_ATOL)
    with argument("GroupedQueryAttention.rope_base"):
        label = f"GroupedQueryAttention({d_model}, 2, 1, rope_base=100.0)"                   # d_head 6: 3 pairs
        module = run("GroupedQueryAttention", GroupedQueryAttention, d_model, 2, 1, max_len=8, rope_base=100.0)
        module.eval()
        params = randomize(module, seed=97)
        with torch.no_grad():
            out = run(f"{label}.forward", module, x.clone(), causal)
        expect_shape(out, x.shape, f"{label}(x of shape (2, 4, 12))", "heads merged and projected: (B, T, d_model).")
        expect_close(out, gqa(params, "", x.double().numpy(), 2, 1, causal.numpy(), base=100.0),
                     f"{label}(x, causal mask)", "compute the rotary tables with base rope_base, not 10000.",
                     atol=ROTARY_ATOL)
    with edge_case("GroupedQueryAttention.too_long"):
        short = run("GroupedQueryAttention", GroupedQueryAttention, d_model, 6, 3, max_len=3)
        expect_value_error("GroupedQueryAttention(12, 6, 3, max_len=3) on a sequence of 4",
                           lambda: short(x), "compare T = x.size(1) with max_len at the start of forward.")
    passed("GroupedQueryAttention", "(6 heads over 3, 1 and 6 key/value heads; causal mask; rope_base=100)")
