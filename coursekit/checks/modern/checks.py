"""Public self-checks for notebook 09 (the modern block).

The expected answers are worked out here in float64 NumPy with plain loops (angle by angle, head by head), from your
module's own weights after the check has set them to fixed values, so they share no code (and no mistake) with a
tensor implementation. Shapes: B batch, T length, H query heads, H_kv key/value heads, d_head = d_model // H.
"""
from __future__ import annotations

import math

import numpy as np
import torch
from torch import nn

from coursekit.criteria import argument, edge_case
from coursekit.checks.toolkit import (expect_close, expect_dtype, expect_shape, expect_type, fail,
                                     first_matching_hint, mistake_hint, passed, run, uses_parts)

_ROTARY_ATOL = 1e-4  # the contract's tolerance for rotary outputs (float32 and float64 tables differ slightly)


def _randomize(module: nn.Module, seed: int) -> dict[str, np.ndarray]:
    """Fixed values for every parameter (vectors, i.e. norm weights, around 1); returned as float64 arrays."""
    generator = torch.Generator().manual_seed(seed)
    params = {}
    with torch.no_grad():
        for name, parameter in sorted(module.named_parameters()):
            values = torch.randn(parameter.shape, generator=generator)
            parameter.copy_(1.0 + 0.3 * values if parameter.dim() == 1 else 0.5 * values)
        for name, parameter in module.named_parameters(remove_duplicate=False):
            params[name] = parameter.detach().cpu().double().numpy()
    return params


def _expect_raises(label: str, action, hint: str) -> None:
    try:
        action()
    except ValueError:
        return
    except NotImplementedError:
        fail(f"{label.split('(')[0]} is not implemented yet (it still raises NotImplementedError).")
    except Exception as error:  # noqa: BLE001
        fail(f"{label} raised {type(error).__name__}: {error}; expected ValueError.", hint)
    fail(f"{label} should raise ValueError.", hint)


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


# ------------------------------------------------------------------------------------------------ NumPy answers
def _or_none(answer, *args, **kwargs):
    """A known wrong answer, or None where that mistake cannot even run on these sizes (it then matches nothing)."""
    try:
        with np.errstate(all="ignore"):
            return answer(*args, **kwargs)
    except (ValueError, IndexError):
        return None

def _rms_norm(x, weight, eps, mistake=None):
    out = np.zeros_like(x)
    flat, flat_out = x.reshape(-1, x.shape[-1]), out.reshape(-1, x.shape[-1])
    for row in range(flat.shape[0]):
        v = flat[row] - flat[row].mean() if mistake == "center" else flat[row]
        mean_square = (v ** 2).mean()
        if mistake == "axis":  # the mean over the sequence axis instead (x is (B, T, d))
            b, t = divmod(row, x.shape[1])
            mean_square = (x[b, :, :] ** 2).mean(axis=0)
        root = math.sqrt(mean_square) + eps if mistake == "eps_outside" else np.sqrt(mean_square + eps)
        flat_out[row] = v / root * (1.0 if mistake == "no_weight" else weight)
    return out


def _angles(max_len, d_head, base, mistake=None):
    table = np.zeros((max_len, d_head // 2))
    for p in range(max_len):
        for i in range(d_head // 2):
            exponent = (i if mistake == "no_two" else 2 * i) / d_head
            table[p, i] = p * base ** (-exponent)
    return table


def _rotate(x, angle, mistake=None):
    """Rotate each pair (x[2i], x[2i+1]) of the last axis at position p (the second-to-last axis) by angle[p, i]."""
    out = np.zeros_like(x)
    T, d = x.shape[-2], x.shape[-1]
    for index in np.ndindex(*x.shape[:-2]):
        for p in range(T):
            for i in range(d // 2):
                a, b = (i, i + d // 2) if mistake == "halves" else (2 * i, 2 * i + 1)
                c, s = math.cos(angle[p, i]), math.sin(angle[p, i])
                if mistake == "negative":
                    s = -s
                u, v = x[index + (p, a)], x[index + (p, b)]
                out[index + (p, a)] = u * c - v * s
                out[index + (p, b)] = u * s + v * c
    return out


def _silu(z):
    return z / (1.0 + np.exp(-z))


def _swiglu(params, prefix, x, mistake=None):
    gate, up = x @ params[prefix + "w_gate.weight"].T, x @ params[prefix + "w_up.weight"].T
    if mistake == "swapped":
        gate, up = up, gate
    act = np.maximum(gate, 0.0) if mistake == "relu" else _silu(gate)
    return (act * up) @ params[prefix + "w_down.weight"].T


def _softmax(scores):
    shifted = scores - scores.max(axis=-1, keepdims=True)
    e = np.exp(shifted)
    return e / e.sum(axis=-1, keepdims=True)


def _gqa(params, prefix, x, num_heads, num_kv_heads, keep, base=10000.0, mistake=None):
    """Grouped-query attention head by head; `keep` (T, T) bool or None."""
    B, T, d_model = x.shape
    d_head = d_model // num_heads
    groups = num_heads // num_kv_heads
    q, k, v = (x @ params[prefix + name + ".weight"].T for name in ("w_q", "w_k", "w_v"))
    angle = _angles(T, d_head, base)
    out = np.zeros((B, T, d_model))
    for b in range(B):
        for h in range(num_heads):
            j = {"tile": h % num_kv_heads, "mod_groups": h % groups}.get(mistake, h // groups)
            qh = q[b, :, h * d_head:(h + 1) * d_head]
            kh = k[b, :, j * d_head:(j + 1) * d_head]
            vh = v[b, :, j * d_head:(j + 1) * d_head]
            if mistake != "no_rotary":
                qh, kh = _rotate(qh, angle), _rotate(kh, angle)
            if mistake == "rotates_values":
                vh = _rotate(vh, angle)
            scores = qh @ kh.T / math.sqrt(d_head)
            if keep is not None:
                scores = np.where(keep, scores, -1e30)
            out[b, :, h * d_head:(h + 1) * d_head] = _softmax(scores) @ vh
    return out @ params[prefix + "w_o.weight"].T


def _llama_block(params, prefix, x, num_heads, num_kv_heads, keep, mistake=None):
    attend = lambda h: _gqa(params, prefix + "attn.", h, num_heads, num_kv_heads, keep)  # noqa: E731
    norm = lambda name, h: _rms_norm(h, params[prefix + name + ".weight"], 1e-6)          # noqa: E731
    ffn = lambda h: _swiglu(params, prefix + "ffn.", h)                                  # noqa: E731
    if mistake == "post_norm":
        x = norm("norm1", x + attend(x))
        return norm("norm2", x + ffn(x))
    a = attend(norm("norm1", x))
    x = a if mistake == "no_attn_residual" else x + a
    f = ffn(norm("norm2", x))
    return f if mistake == "no_ffn_residual" else x + f


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
        params = _randomize(module, seed=91)
        inputs = x * scale
        with torch.no_grad():
            out = run("RMSNorm.forward", module, inputs.clone())
        expect_shape(out, inputs.shape, f"{label}(x) for x of shape (2, 3, 5)", "normalising keeps the shape.")
        xs, w, e = inputs.double().numpy(), params["weight"], 1e-6 if eps is None else eps
        hint = first_matching_hint(out.detach(), [
            (_rms_norm(xs, w, e, "axis"), mistake_hint("rms_norm.mean_wrong_axis", "use .mean(dim=-1, "
                                                                                 "keepdim=True).")),
            (_rms_norm(xs, w, e, "eps_outside"), mistake_hint("rms_norm.eps_outside_root",
                                                              "torch.rsqrt(mean_square + eps).")),
            (_rms_norm(xs, w, e, "center"), mistake_hint("rms_norm.subtracts_mean", "drop the `x - mean`.")),
            (_rms_norm(xs, w, e, "no_weight"), mistake_hint("rms_norm.no_weight", "end with `* self.weight`.")),
        ])
        if hint is None and eps is None:
            hint = "with values this small eps matters: the default is eps=1e-6, used inside the root."
        expect_close(out, _rms_norm(xs, w, e), f"{label}(x)", hint)

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
        angle = _angles(max_len, d_head, 10000.0 if base is None else base)
        for name, table in (("cos", cos), ("sin", sin)):
            expect_type(table, torch.Tensor, f"the {name} table of {label}")
            expect_shape(table, angle.shape, f"the {name} table of {label}",
                         "one row per position, one column per pair of features: (max_len, d_head // 2).")
            expect_dtype(table, torch.float32, f"the {name} table", "convert with .float() at the end.")
        wrong = _angles(max_len, d_head, 10000.0 if base is None else base, "no_two")
        hint = first_matching_hint(cos, [
            (np.cos(wrong), mistake_hint("rotary.exponent_no_two", "pair i turns at base ** (-2i / d_head).")),
            (np.sin(angle), mistake_hint("rotary.cos_sin_swapped")),
        ], atol=1e-4)
        if hint is None and base is not None:
            hint = "use the `base` argument instead of 10000."
        expect_close(cos, np.cos(angle), f"the cos table of {label}", hint, atol=1e-5)
        expect_close(sin, np.sin(angle), f"the sin table of {label}", hint, atol=1e-5)

    compare(6, 8, None)
    with argument("rotary_cos_sin.base"):
        compare(5, 4, 100.0)
    with edge_case("rotary_cos_sin.odd_d_head"):
        _expect_raises("rotary_cos_sin(4, 5)", lambda: rotary_cos_sin(4, 5),
                       "features are rotated in pairs: check `d_head % 2` and raise ValueError.")
    passed("rotary_cos_sin")


def check_apply_rotary(apply_rotary) -> None:
    T, d_head = 4, 6
    angle = _angles(T, d_head, 100.0)                                                 # base 100: larger turns
    cos, sin = torch.tensor(np.cos(angle), dtype=torch.float32), torch.tensor(np.sin(angle), dtype=torch.float32)
    x = torch.randn(2, 3, T, d_head, generator=torch.Generator().manual_seed(92))     # (B=2, H=3, T=4, d_head=6)
    out = run("apply_rotary", apply_rotary, x.clone(), cos.clone(), sin.clone())
    expect_type(out, torch.Tensor, "apply_rotary(x, cos, sin)")
    expect_shape(out, x.shape, "apply_rotary(x of shape (2, 3, 4, 6), cos, sin)", "the result has x's shape.")
    xs = x.double().numpy()
    hint = first_matching_hint(out, [
        (_rotate(xs, angle, "halves"), mistake_hint("rotary.halves", "the pairs are x[..., 0::2] and x[..., 1::2].")),
        (_rotate(xs, angle, "negative"), mistake_hint("rotary.wrong_direction")),
    ], atol=_ROTARY_ATOL)
    expect_close(out, _rotate(xs, angle), "apply_rotary(x, cos, sin)", hint, atol=_ROTARY_ATOL)
    # the property that makes rotary positions relative: rotated scores depend on the offset m - n only
    q = torch.randn(1, 1, d_head, generator=torch.Generator().manual_seed(93)).expand(1, 12, d_head)  # one vector
    long_angle = _angles(12, d_head, 100.0)
    long_cos = torch.tensor(np.cos(long_angle), dtype=torch.float32)
    long_sin = torch.tensor(np.sin(long_angle), dtype=torch.float32)
    rotated = run("apply_rotary", apply_rotary, q.clone(), long_cos, long_sin)[0].double()
    scores = rotated @ rotated.T                                                      # (12, 12)
    if not torch.allclose(scores[3, 1], scores[10, 8], atol=1e-3):
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
    params = _randomize(module, seed=94)
    x = torch.randn(2, 3, d_model, generator=torch.Generator().manual_seed(95))
    with torch.no_grad():
        out = run("SwiGLU.forward", module, x.clone())
    xs = x.double().numpy()
    hint = first_matching_hint(out, [
        (_swiglu(params, "", xs, "swapped"), mistake_hint("swiglu.gate_up_swapped")),
        (_swiglu(params, "", xs, "relu"), mistake_hint("swiglu.relu", "F.silu(z) = z * sigmoid(z).")),
    ])
    expect_close(out, _swiglu(params, "", xs), "SwiGLU(x)", hint)
    passed("SwiGLU")


# ----------------------------------------------------------------------------------------- grouped-query attention
_GQA_HINTS = {
    "tile": mistake_hint("gqa.kv_heads_tiled"),
    "mod_groups": mistake_hint("gqa.head_mod_groups"),
    "rotates_values": mistake_hint("gqa.rotates_values"),
    "no_rotary": mistake_hint("gqa.no_rotary", "apply_rotary(q, cos[:T], sin[:T]) and the same for k."),
}


@uses_parts("GroupedQueryAttention")
def check_grouped_query_attention(GroupedQueryAttention) -> None:
    d_model, T = 12, 4
    for args, why in (((10, 4, 2), "d_model 10 is not divisible by 4 heads"),
                      ((12, 6, 4), "6 query heads cannot be shared out evenly over 4 key/value heads"),
                      ((12, 4, 1), "d_head = 12 // 4 = 3 is odd, and rotary angles turn pairs of features")):
        with edge_case("GroupedQueryAttention.bad_sizes"):
            _expect_raises(f"GroupedQueryAttention{args}", lambda args=args: GroupedQueryAttention(*args),
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
                 "register them with self.register_buffer(name, table, persistent=False), or recompute them.")
        module.eval()
        params = _randomize(module, seed=97)
        with torch.no_grad():
            out = run(f"{label}.forward", module, x.clone(), keep)
        expect_shape(out, x.shape, f"{label}(x of shape (2, 4, 12))", "heads merged and projected: (B, T, d_model).")
        xs = x.double().numpy()
        keep_np = None if keep is None else keep.numpy()
        hint = first_matching_hint(out, [(_or_none(_gqa, params, "", xs, num_heads, num_kv_heads, keep_np,
                                                   mistake=m), h) for m, h in _GQA_HINTS.items()],
                                   atol=_ROTARY_ATOL)
        expect_close(out, _gqa(params, "", xs, num_heads, num_kv_heads, keep_np),
                     f"{label}(x" + (", causal mask)" if keep is not None else ")"), hint, atol=_ROTARY_ATOL)
    with argument("GroupedQueryAttention.rope_base"):
        label = f"GroupedQueryAttention({d_model}, 2, 1, rope_base=100.0)"                   # d_head 6: 3 pairs
        module = run("GroupedQueryAttention", GroupedQueryAttention, d_model, 2, 1, max_len=8, rope_base=100.0)
        module.eval()
        params = _randomize(module, seed=97)
        with torch.no_grad():
            out = run(f"{label}.forward", module, x.clone(), causal)
        expect_shape(out, x.shape, f"{label}(x of shape (2, 4, 12))", "heads merged and projected: (B, T, d_model).")
        expect_close(out, _gqa(params, "", x.double().numpy(), 2, 1, causal.numpy(), base=100.0),
                     f"{label}(x, causal mask)", "compute the rotary tables with base rope_base, not 10000.",
                     atol=_ROTARY_ATOL)
    with edge_case("GroupedQueryAttention.too_long"):
        short = run("GroupedQueryAttention", GroupedQueryAttention, d_model, 6, 3, max_len=3)
        _expect_raises("GroupedQueryAttention(12, 6, 3, max_len=3) on a sequence of 4",
                       lambda: short(x), "compare T = x.size(1) with max_len at the start of forward.")
    passed("GroupedQueryAttention", "(6 heads over 3, 1 and 6 key/value heads; causal mask; rope_base=100)")


# ------------------------------------------------------------------------------------------------ block and model
@uses_parts("LlamaBlock")
def check_llama_block(LlamaBlock) -> None:
    d_model, num_heads, num_kv_heads, d_ff, T = 12, 6, 3, 10, 4
    block = run("LlamaBlock", LlamaBlock, d_model, num_heads, num_kv_heads, d_ff, max_len=8)
    expect_type(block, nn.Module, "LlamaBlock(...)", "subclass nn.Module.")
    for name in ("norm1", "norm2", "attn", "ffn"):
        if not isinstance(getattr(block, name, None), nn.Module):
            fail(f"LlamaBlock needs a submodule `{name}`.", "norm1, norm2 (RMSNorm), attn (GroupedQueryAttention), "
                                                            "ffn (SwiGLU), with exactly these names.")
    block.eval()
    params = _randomize(block, seed=98)
    x = torch.randn(2, T, d_model, generator=torch.Generator().manual_seed(99))
    causal = torch.tril(torch.ones(T, T, dtype=torch.bool))
    with torch.no_grad():
        out = run("LlamaBlock.forward", block, x.clone(), causal)
    xs, keep = x.double().numpy(), causal.numpy()
    answer = lambda m=None: _llama_block(params, "", xs, num_heads, num_kv_heads, keep, m)  # noqa: E731
    hint = first_matching_hint(out, [
        (answer("post_norm"), mistake_hint("llama.post_norm")),
        (answer("no_attn_residual"), mistake_hint("llama.missing_residual", "around the attention.")),
        (answer("no_ffn_residual"), mistake_hint("llama.missing_residual", "around the feed-forward.")),
    ], atol=_ROTARY_ATOL)
    expect_close(out, answer(), "LlamaBlock(x, causal mask)", hint, atol=_ROTARY_ATOL)
    with edge_case("LlamaBlock.too_long"):
        short = run("LlamaBlock", LlamaBlock, d_model, num_heads, num_kv_heads, d_ff, max_len=T - 1)
        _expect_raises(f"LlamaBlock(..., max_len={T - 1}) on a sequence of {T}", lambda: short(x),
                       "pass max_len on to GroupedQueryAttention, whose forward raises ValueError when T > max_len.")
    passed("LlamaBlock")


@uses_parts("ModernGPT")
def check_modern_gpt(ModernGPT) -> None:
    vocab, d_model, num_heads, num_kv_heads, d_ff, num_layers, max_len = 11, 12, 6, 3, 10, 2, 8
    model = run("ModernGPT", ModernGPT, vocab, d_model=d_model, num_heads=num_heads, num_kv_heads=num_kv_heads,
                d_ff=d_ff, num_layers=num_layers, max_len=max_len)
    expect_type(model, nn.Module, "ModernGPT(...)", "subclass nn.Module.")
    if getattr(model, "max_len", None) != max_len:
        fail("ModernGPT should keep the attribute `max_len` (08's generate reads it).", "self.max_len = max_len")
    head, embedding = getattr(model, "lm_head", None), getattr(model, "token_embedding", None)
    if not isinstance(head, nn.Linear) or embedding is None or head.weight is not getattr(embedding, "weight", None):
        fail("ModernGPT.lm_head should be tied to the token embedding (one shared Parameter).",
             "self.lm_head.weight = self.token_embedding.weight")
    if any("position" in name for name, _ in model.named_parameters()):
        fail("ModernGPT has a position table; positions enter through the rotary angles only.")
    blocks = getattr(model, "blocks", None)
    if not isinstance(blocks, nn.ModuleList) or len(blocks) != num_layers:
        fail(f"ModernGPT needs `blocks`, an nn.ModuleList of {num_layers} LlamaBlocks.")
    model.eval()
    params = _randomize(model, seed=100)
    ids = torch.tensor([[1, 4, 2, 7, 3, 0], [5, 5, 9, 10, 2, 6]])                      # (B=2, T=6)
    with torch.no_grad():
        logits = run("ModernGPT.forward", model, ids.clone())
    expect_shape(logits, (2, 6, vocab), "ModernGPT(ids of shape (2, 6))", "logits are (B, T, vocab_size).")
    T = ids.size(1)

    def answer(causal=True, final_norm=True, scaled=False):
        x = params["token_embedding.weight"][ids.numpy()]                              # (B, T, d_model)
        if scaled:
            x = x * math.sqrt(d_model)
        keep = np.tril(np.ones((T, T), dtype=bool)) if causal else None
        for layer in range(num_layers):
            x = _llama_block(params, f"blocks.{layer}.", x, num_heads, num_kv_heads, keep)
        if final_norm:
            x = _rms_norm(x, params["norm.weight"], 1e-6)
        return x @ params["token_embedding.weight"].T

    hint = first_matching_hint(logits, [
        (answer(causal=False), mistake_hint("modern_gpt.no_causal_mask", "pass make_causal_mask(T, ids.device) to "
                                                                         "every block.")),
        (answer(final_norm=False), mistake_hint("modern_gpt.no_final_norm")),
        (answer(scaled=True), mistake_hint("modern_gpt.embedding_scaled")),
    ], atol=_ROTARY_ATOL)
    expect_close(logits, answer(), "ModernGPT(ids)", hint, atol=_ROTARY_ATOL)
    with edge_case("ModernGPT.too_long"):
        _expect_raises(f"ModernGPT(..., max_len={max_len}) on ids of length {max_len + 1}",
                       lambda: model(torch.zeros(1, max_len + 1, dtype=torch.long)),
                       "compare T = ids.size(1) with self.max_len at the start of forward.")
    passed("ModernGPT", "(tied, no position table, causal)")
