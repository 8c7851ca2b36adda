"""Hidden checks of notebook 09 (RMSNorm, rotary positions, SwiGLU, grouped-query attention, LlamaBlock, ModernGPT).

Every argument has teeth: a non-default `eps` and `base`/`rope_base` (arguments with teeth of the catalogue
coursekit/criteria.py, each tried in its `argument` block after a core that leaves it at its default: partial
credit), `num_kv_heads` in {1, 2, num_heads} (and 6 heads over 3 key/value heads, where the two wrong groupings
differ from each other and from the right one), `max_len` probed by a sequence one longer, T > 1 with masks that
block something.

Probe inputs are this submission's (`probe_inputs`): every size, length, base, eps and error case below is drawn with
`pick(label, options)` from the space written next to it (the first option is the input of salt 0), every tensor and
every reference module's weights from `seed_for`. The spaces keep what each case was chosen for: d_model divisible
by 6 and by 4 with an even d_head (6 heads over 3 and 4 heads over 1, 2, 4), d_ff, max_len and the model's sizes
all different from each other and from the contract's defaults (so a swapped or dropped argument shows), T >= 5 so
that the masks block something, an odd d_head for the error, values of the size where eps matters.
"""
from __future__ import annotations

import torch

from autograder.checks.modern import mistakes as M
from autograder.checks.kit.criteria import argument, edge_case
from autograder.checks.kit.draws import pick
from autograder.checks.kit.toolkit import (
    call, construct, expect_callable, expect_raises, fail, fetch, randint, randn, seeded, shape_of, start_check,
)
from autograder.checks.kit.compare import as_tensor, describe, expect_tensor, prepare
from autograder.checks.kit.parts import given_working_parts
from autograder.checks.kit.remote import probed

ROTARY_LOOSER = 10.0                  # atol 1e-4: the contract's tolerance for rotary outputs

# the spaces the checks draw from (first option: the input of salt 0)
BATCHES = [2, 3]
LENGTHS = [7, 6, 8, 9, 10]            # T: below every max_len of the core cases, T - 1 >= 5 for the error case
D_MODELS = [24, 48, 72]               # divisible by 6 and by 4, even d_head both ways
D_FFS = [20, 36, 44, 52]              # never a d_model, a max_len or a default
MAX_LENS = [16, 12, 14, 18]           # > every T of the core cases (ModernGPT also runs T = max_len)
PADDED = [2, 1, 3]                    # padded key positions at the end of the second sequence


def _reference():
    import solutions.modern as reference

    return reference


def reference_module(factory, seed: int, *args, **kwargs):
    """A reference module built under this submission's seed, its RMSNorm weights randomised so that they matter."""
    with seeded(seed):
        module = factory(*args, **kwargs)
        for parameter in module.parameters():
            if parameter.dim() == 1:          # the only vectors of these modules are RMSNorm weights
                torch.nn.init.normal_(parameter, 1.0, 0.3)
    return module


def only_contract_parameters(module, reference, name: str, hint: str, bias_mistake: str | None = None) -> None:
    """The student's module has no parameter beyond the contract's (a bias, a stray table...); extra biases alone
    are named `bias_mistake`."""
    theirs = {n for n, _shape, _dtype in describe(module, name).get("parameters", [])}
    extra = sorted(theirs - set(dict(reference.named_parameters())))
    if extra:
        biases = all(n.split(".")[-1] == "bias" for n in extra)
        fail(f"{name} has parameters the exercise does not ask for: {', '.join(extra)[:200]}.", hint=hint,
             mistake=bias_mistake if biases else None)


def causal_padding_mask(B_: int, T_: int, padded: int, device) -> torch.Tensor:
    """(B, 1, T, T): causal, and the second row's last `padded` positions are padding (blocked as keys)."""
    keep = torch.ones(B_, T_, dtype=torch.bool)
    keep[1, T_ - padded:] = False
    causal = torch.tril(torch.ones(T_, T_, dtype=torch.bool))
    return (keep[:, None, None, :] & causal).to(device)


# --------------------------------------------------------------------------------------------------------- RMSNorm
@probed
def check_rmsnorm(RMSNorm) -> None:
    """RMSNorm(d_model, eps=1e-6): weight (d_model,) of ones; x * rsqrt(mean(x**2, -1) + eps) * weight."""
    device = start_check()
    reference = _reference()
    d_model = pick("rmsnorm.d_model", [24, 20, 28, 32])
    B_, T_ = pick("rmsnorm.batch", BATCHES), pick("rmsnorm.length", LENGTHS)
    # values of the size where eps matters: mean(x**2) is about 1.5 * scale**2
    small = pick("rmsnorm.small_scale", [1e-3, 8e-4, 1.5e-3])            # with the default eps=1e-6
    eps = pick("rmsnorm.eps", [0.05, 0.03, 0.08, 0.1])                   # with values of size 0.3
    module = construct(RMSNorm, "RMSNorm", d_model)
    ref = reference.RMSNorm(d_model)
    only_contract_parameters(module, ref, "RMSNorm", "RMSNorm has one parameter, `weight`, and no bias",
                             "rms_norm.bias")
    prepare(module, ref, device, "RMSNorm", copy=False)
    weight = fetch(module.attr("weight"), "RMSNorm.weight")
    weight = as_tensor(weight, "RMSNorm.weight")
    if tuple(weight.shape) != (d_model,) or not bool(torch.all(weight.detach().cpu() == 1)):
        fail("RMSNorm.weight must start as ones of shape (d_model,).", details=[f"d_model={d_model}"],
             mistake="rms_norm.weight_not_ones" if tuple(weight.shape) == (d_model,) else None,
             hint="self.weight = nn.Parameter(torch.ones(d_model))")

    def compare(eps, scale, seed):
        label = f"RMSNorm({d_model})" if eps is None else f"RMSNorm({d_model}, eps={eps})"
        module = construct(RMSNorm, "RMSNorm", d_model) if eps is None else \
            construct(RMSNorm, "RMSNorm", d_model, eps=eps)
        ref = reference_module(reference.RMSNorm, seed, d_model, **({} if eps is None else {"eps": eps}))
        prepare(module, ref, device, "RMSNorm")
        # values with a mean that LayerNorm would remove
        x = (randn(B_, T_, d_model, seed=10 + seed, device=device) + 0.7) * scale
        tested = f"{label} on x {shape_of(x)} of size about {scale:g}"
        with torch.no_grad():
            expected = ref(x)
            got = call("RMSNorm.forward", module, x.clone(), tested=tested)
        w, e = ref.weight.detach(), ref.eps
        expect_tensor(got, expected, "RMSNorm output", device, tested=tested, mistakes=lambda x=x, w=w, e=e: [
            ("rms_norm.mean_wrong_axis", lambda: M.rms_norm(w, x, e, axis=-2)),
            ("rms_norm.mean_wrong_axis", lambda: M.rms_norm(w, x, e, axis=None)),
            ("rms_norm.eps_outside_root", lambda: M.rms_norm(w, x, e, eps_outside=True)),
            ("rms_norm.subtracts_mean", lambda: M.rms_norm(w, x, e, center=True)),
            ("rms_norm.no_weight", lambda: M.rms_norm(w, x, e, use_weight=False)),
        ])

    compare(None, small, 1)                          # the core: the default eps, on values where it matters
    with argument("RMSNorm.eps"):                    # another eps, on values of size 0.3
        compare(eps, 0.3, 2)


# -------------------------------------------------------------------------------------------------- rotary angles
def _pair(got, label: str, tested: str):
    if not isinstance(got, (tuple, list)) or len(got) != 2:
        fail(f"{label} must return a pair (cos, sin), got {type(got).__name__}.", tested=tested)
    return got


@probed
def check_rotary_cos_sin(rotary_cos_sin) -> None:
    """rotary_cos_sin(max_len, d_head, base=10000.0) -> (cos, sin), each (max_len, d_head // 2) float32."""
    start_check()
    expect_callable(rotary_cos_sin, "rotary_cos_sin")
    reference = _reference()
    # max_len != d_head everywhere (a swap shows); the last case has one pair only (d_head 2)
    cases = ((pick("rotary.max_len.1", [13, 11, 12, 15]), pick("rotary.d_head.1", [10, 8, 14, 16]), None),
             (pick("rotary.max_len.2", [9, 7, 11, 5]), pick("rotary.d_head.2", [6, 4, 12]),
              pick("rotary.base", [500.0, 300.0, 700.0, 2000.0])),
             (pick("rotary.max_len.3", [5, 3, 4, 6]), 2, None))
    def compare(max_len, d_head, base):
        kwargs = {} if base is None else {"base": base}
        tested = f"max_len={max_len}, d_head={d_head}" + (f", base={base}" if base is not None else "")
        expected = reference.rotary_cos_sin(max_len, d_head, **kwargs)
        got = _pair(call("rotary_cos_sin", rotary_cos_sin, max_len, d_head, tested=tested, **kwargs),
                    "rotary_cos_sin", tested)
        real_base = 10000.0 if base is None else base
        for index, (what, table) in enumerate(zip(("cos", "sin"), expected)):
            got_table = as_tensor(got[index], f"the {what} table", tested)
            if got_table.is_floating_point() and got_table.dtype != torch.float32:
                fail(f"the {what} table must be float32, got {got_table.dtype}.", tested=tested,
                     hint="convert with .float() at the end")
            expect_tensor(got_table.cpu(), table, f"the {what} table", "cpu", tested=tested, dtype=torch.float32,
                          looser=ROTARY_LOOSER,
                          shape_hint="(max_len, d_head // 2): one angle per position and pair of features",
                          mistakes=lambda i=index, m=max_len, d=d_head, b=real_base: [
                              ("rotary.exponent_no_two", lambda: M.rotary_tables(m, d, b, exponent="no_two")[i]),
                              ("rotary.exponent_no_two", lambda: M.rotary_tables(m, d, b, exponent="four")[i]),
                              ("rotary.cos_sin_swapped", lambda: M.rotary_tables(m, d, b, swap=True)[i]),
                              ("positional.frequency_base", lambda: M.rotary_tables(m, d, b / 10)[i]),
                              *([("rotary.base_ignored", lambda: M.rotary_tables(m, d, 10000.0)[i])]
                                if b != 10000.0 else []),
                          ])

    for max_len, d_head, base in cases:
        if base is None:                             # the core: base left out (10000)
            compare(max_len, d_head, base)
        else:
            with argument("rotary_cos_sin.base"):    # another base
                compare(max_len, d_head, base)
    odd = (pick("rotary.odd.max_len", [8, 6, 9, 10]), pick("rotary.odd.d_head", [7, 5, 9, 11]))
    expect_raises(ValueError, f"rotary_cos_sin{odd}", rotary_cos_sin, *odd, why="for an odd d_head",
                  criterion="rotary_cos_sin.odd_d_head")


@probed
def check_apply_rotary(apply_rotary) -> None:
    """apply_rotary(x (..., T, d_head), cos, sin (T, d_head // 2)) -> x with each pair (2i, 2i+1) rotated."""
    device = start_check()
    expect_callable(apply_rotary, "apply_rotary")
    reference = _reference()
    # T (odd) never equals d_head (even): a transposed output shows by its shape
    cases = [((pick("apply_rotary.batch", BATCHES), pick("apply_rotary.heads", [3, 2, 4]),
               pick("apply_rotary.T.1", [5, 7, 9]), pick("apply_rotary.d.1", [8, 6, 10])),
              pick("apply_rotary.base.1", [10000.0, 5000.0, 20000.0]), 30),
             ((pick("apply_rotary.rows", [4, 3, 5]), pick("apply_rotary.T.2", [7, 5, 9]),
               pick("apply_rotary.d.2", [6, 8, 4])), pick("apply_rotary.base.2", [300.0, 200.0, 500.0]), 31),
             ((pick("apply_rotary.T.3", [7, 5, 9]), pick("apply_rotary.d.3", [4, 6])),
              pick("apply_rotary.base.3", [10.0, 20.0, 50.0]), 32)]
    for shape, base, seed in cases:
        x = randn(*shape, seed=seed, device=device)
        cos, sin = (t.to(device) for t in reference.rotary_cos_sin(shape[-2], shape[-1], base))
        tested = f"x {shape_of(x)}, cos/sin {shape_of(cos)} (base {base:g})"
        expected = reference.apply_rotary(x, cos, sin)
        got = call("apply_rotary", apply_rotary, x.clone(), cos.clone(), sin.clone(), tested=tested)
        expect_tensor(got, expected, "apply_rotary output", device, tested=tested, looser=ROTARY_LOOSER,
                      shape_hint="the output has the shape of x",
                      mistakes=lambda x=x, cos=cos, sin=sin: [
                          ("rotary.halves", lambda: M.rotate(x, cos, sin, halves=True)),
                          ("rotary.wrong_direction", lambda: M.rotate(x, cos, sin, negative=True)),
                          ("rotary.cos_sin_swapped", lambda: M.rotate(x, sin, cos)),
                          *([("rotary.own_tables", lambda: M.rotate(x, *M.rotary_tables(x.shape[-2], x.shape[-1])))]
                            if base != 10000.0 else []),
                      ])


# ---------------------------------------------------------------------------------------------------------- SwiGLU
@probed
def check_swi_glu(SwiGLU) -> None:
    """SwiGLU(d_model, d_ff): w_gate, w_up, w_down without bias; w_down(silu(w_gate(x)) * w_up(x))."""
    device = start_check()
    reference = _reference()
    d_model, d_ff = pick("swiglu.d_model", [24, 16, 28, 32]), pick("swiglu.d_ff", D_FFS)
    B_, T_ = pick("swiglu.batch", BATCHES), pick("swiglu.length", LENGTHS)
    module = construct(SwiGLU, "SwiGLU", d_model, d_ff)
    ref = reference_module(reference.SwiGLU, 3, d_model, d_ff)
    only_contract_parameters(module, ref, "SwiGLU", "the three nn.Linear layers take bias=False", "swiglu.bias")
    prepare(module, ref, device, "SwiGLU")
    x = randn(B_, T_, d_model, seed=40, device=device)
    tested = f"SwiGLU({d_model}, {d_ff}) on x {shape_of(x)}"
    with torch.no_grad():
        expected = ref(x)
        got = call("SwiGLU.forward", module, x.clone(), tested=tested)
    expect_tensor(got, expected, "SwiGLU output", device, tested=tested, mistakes=lambda: [
        ("swiglu.gate_up_swapped", lambda: M.swiglu(ref, x, swap=True)),
        *[("swiglu.relu", lambda a=a: M.swiglu(ref, x, activation=a)) for a in ("relu", "gelu", "sigmoid")],
    ])


# ----------------------------------------------------------------------------------------- grouped-query attention
def gqa_mistakes(attn, x, mask):
    d_model = attn.w_q.in_features
    d_head = d_model // attn.num_heads

    def variants():
        out = [("gqa.kv_heads_tiled", lambda: M.gqa(attn, x, mask, kv_map="tile")),
               ("gqa.head_mod_groups", lambda: M.gqa(attn, x, mask, kv_map="mod_groups")),
               ("gqa.rotates_values", lambda: M.gqa(attn, x, mask, rotary="qkv")),
               ("gqa.no_rotary", lambda: M.gqa(attn, x, mask, rotary="none")),
               ("gqa.rotary_queries_only", lambda: M.gqa(attn, x, mask, rotary="q")),
               ("rotary.halves", lambda: M.gqa(attn, x, mask, halves=True)),
               ("rotary.exponent_no_two", lambda: M.gqa(attn, x, mask, exponent="no_two")),
               ("multi_head.scale_d_model", lambda: M.gqa(attn, x, mask, d_scale=d_model)),
               ("positional.frequency_base", lambda: M.gqa(attn, x, mask, base=M.base_of(attn, d_head) / 10))]
        for name in ("attention.missing_scale", "attention.scale_by_d", "attention.softmax_dim",
                     "attention.mask_inverted", "attention.mask_ignored"):
            flags = M.ATTENTION_MISTAKES[name]
            if mask is not None or "mask" not in next(iter(flags)):
                out.append((name, lambda flags=flags: M.gqa(attn, x, mask, **flags)))
        return out

    return variants


def _gqa_structure(module, ref, name: str) -> None:
    only_contract_parameters(module, ref, name, "the four projections take bias=False; the rotary tables are no "
                                                "parameters (recompute them, or register_buffer(..., persistent=False))")
    state = call(f"{name}.state_dict()", module.state)
    extra = sorted(set(state) - set(ref.state_dict()))
    if extra:
        fail(f"{name}'s state_dict holds more than the projections: {', '.join(extra)[:200]}.",
             mistake="gqa.tables_in_state_dict",
             hint="the rotary tables can be recomputed from the arguments: keep them out of the state_dict with "
                  "self.register_buffer(name, table, persistent=False)")


@probed
@given_working_parts("grouped_query_attention")
def check_grouped_query_attention(GroupedQueryAttention) -> None:
    """GroupedQueryAttention(d_model, num_heads, num_kv_heads, max_len=512, rope_base=10000.0): forward(x, mask)."""
    device = start_check()
    reference = _reference()
    name = "GroupedQueryAttention"
    expect_callable(GroupedQueryAttention, name, "module")
    d_model, max_len = pick("gqa.d_model", D_MODELS), pick("gqa.max_len", MAX_LENS)
    B_, T_, padded = pick("gqa.batch", BATCHES), pick("gqa.length", LENGTHS), pick("gqa.padded", PADDED)
    # (num_heads, num_kv_heads, extra constructor arguments, mask)
    # 6 heads over 3 first: there query head h // 2 (right), h % 3 (tiled) and h % 2 (h % groups) all differ
    # the core leaves rope_base out (10000); the last two cases pass other bases (the argument rope_base)
    rope_bases = (pick("gqa.rope_base.1", [1000.0, 500.0, 2000.0, 3000.0]),
                  pick("gqa.rope_base.2", [100.0, 50.0, 200.0, 300.0]))
    cases = [(6, 3, {}, "causal"), (4, 2, {"max_len": max_len}, "causal+padding"),
             (4, 1, {}, "causal"), (4, 4, {}, "none"), (4, 2, {}, "causal+padding"),
             (6, 3, {"rope_base": rope_bases[0]}, "causal"),
             (4, 2, {"max_len": max_len, "rope_base": rope_bases[1]}, "causal+padding")]

    def compare(seed, heads, kv_heads, extra, mask_name):
        module = construct(GroupedQueryAttention, name, d_model, heads, kv_heads, **extra)
        ref = reference_module(reference.GroupedQueryAttention, 50 + seed, d_model, heads, kv_heads, **extra)
        _gqa_structure(module, ref, name)
        prepare(module, ref, device, name)
        x = randn(B_, T_, d_model, seed=60 + seed, device=device)
        mask = {"none": None, "causal": torch.tril(torch.ones(T_, T_, dtype=torch.bool, device=device)),
                "causal+padding": causal_padding_mask(B_, T_, padded, device)}[mask_name]
        shown = ", ".join([f"{d_model}, {heads}, {kv_heads}", *(f"{k}={v}" for k, v in extra.items())])
        tested = f"{name}({shown}) on x {shape_of(x)}, mask: {mask_name}"
        with torch.no_grad():
            expected = ref(x, mask)
            got = call(f"{name}.forward", module, x.clone(), None if mask is None else mask.clone(), tested=tested)
        expect_tensor(got, expected, f"{name} output", device, tested=tested, looser=ROTARY_LOOSER,
                      shape_hint="(B, T, d_model): heads merged and projected by w_o",
                      mistakes=gqa_mistakes(ref, x, mask))

    for seed, (heads, kv_heads, extra, mask_name) in enumerate(cases):
        if "rope_base" not in extra:
            compare(seed, heads, kv_heads, extra, mask_name)
        else:
            with argument("GroupedQueryAttention.rope_base"):
                compare(seed, heads, kv_heads, extra, mask_name)
    # the stated edge cases: each impossible split of the sizes (and only that one), a sequence one too long
    for args, why in ((pick("gqa.indivisible", [(25, 4, 1), (26, 4, 2), (30, 4, 1), (21, 6, 3)]),
                       "when d_model is not divisible by num_heads"),
                      (pick("gqa.ungrouped", [(24, 4, 3), (24, 6, 4), (32, 4, 3), (36, 6, 4)]),
                       "when num_heads is not divisible by num_kv_heads"),
                      (pick("gqa.odd_head", [(20, 4, 2), (12, 4, 2), (28, 4, 1), (18, 6, 3)]),
                       "when d_head = d_model // num_heads is odd")):
        expect_raises(ValueError, f"{name}{args}", GroupedQueryAttention, *args, why=why,
                      criterion="GroupedQueryAttention.bad_sizes")
    with edge_case("GroupedQueryAttention.too_long"):
        short = construct(GroupedQueryAttention, name, d_model, 4, 2, max_len=T_ - 1)
        expect_raises(ValueError, f"{name}({d_model}, 4, 2, max_len={T_ - 1}) on x {(B_, T_, d_model)}",
                      short, randn(B_, T_, d_model, seed=49, device="cpu"), why="for a sequence longer than max_len",
                      criterion="GroupedQueryAttention.too_long")


# ------------------------------------------------------------------------------------------------ block and model
def block_mistakes(block, x, mask):
    def variants():
        out = [("llama.post_norm", lambda: M.llama_block(block, x, mask, post_norm=True)),
               ("llama.missing_residual", lambda: M.llama_block(block, x, mask, attn_residual=False)),
               ("llama.missing_residual", lambda: M.llama_block(block, x, mask, ffn_residual=False))]
        for mistake, flags in _ATTN_FLAGS:
            out.append((mistake, lambda flags=flags: M.llama_block(block, x, mask, attn_flags=flags)))
        return out

    return variants


_ATTN_FLAGS = [("gqa.kv_heads_tiled", {"kv_map": "tile"}), ("gqa.head_mod_groups", {"kv_map": "mod_groups"}),
               ("gqa.rotates_values", {"rotary": "qkv"}), ("gqa.no_rotary", {"rotary": "none"}),
               ("rotary.halves", {"halves": True}), ("attention.missing_scale", {"scale": "none"}),
               ("positional.frequency_base", {"base": 1000.0}),
               ("attention.mask_inverted", {"invert_mask": True}), ("attention.mask_ignored", {"ignore_mask": True})]


@probed
@given_working_parts("llama_block")
def check_llama_block(LlamaBlock) -> None:
    """LlamaBlock(d_model, num_heads, num_kv_heads, d_ff, max_len=512): norm1, attn, norm2, ffn; pre-norm."""
    device = start_check()
    reference = _reference()
    name = "LlamaBlock"
    d_model, d_ff = pick("llama.d_model", D_MODELS), pick("llama.d_ff", D_FFS)
    max_len = pick("llama.max_len", MAX_LENS)
    B_, T_, padded = pick("llama.batch", BATCHES), pick("llama.length", LENGTHS), pick("llama.padded", PADDED)
    H = 4
    for seed, (kv_heads, extra) in enumerate(((2, {"max_len": max_len}), (1, {}), (H, {}))):
        module = construct(LlamaBlock, name, d_model, H, kv_heads, d_ff, **extra)
        ref = reference_module(reference.LlamaBlock, 70 + seed, d_model, H, kv_heads, d_ff, **extra)
        only_contract_parameters(module, ref, name, "norm1 and norm2 are RMSNorm (weight only); the linear layers "
                                                    "of attn and ffn have no bias")
        prepare(module, ref, device, name)
        x = randn(B_, T_, d_model, seed=75 + seed, device=device)
        mask = causal_padding_mask(B_, T_, padded, device)
        shown = ", ".join([f"{d_model}, {H}, {kv_heads}, {d_ff}", *(f"{k}={v}" for k, v in extra.items())])
        tested = f"{name}({shown}) on x {shape_of(x)} with a causal and padding mask {shape_of(mask)}"
        with torch.no_grad():
            expected = ref(x, mask)
            got = call(f"{name}.forward", module, x.clone(), mask.clone(), tested=tested)
        expect_tensor(got, expected, f"{name} output", device, tested=tested, looser=ROTARY_LOOSER,
                      mistakes=block_mistakes(ref, x, mask))
    # the stated edge case: max_len reaches the attention, so a sequence one too long raises ValueError
    with edge_case("LlamaBlock.too_long"):
        short = construct(LlamaBlock, name, d_model, H, 2, d_ff, max_len=T_ - 1)
        expect_raises(ValueError, f"{name}({d_model}, {H}, 2, {d_ff}, max_len={T_ - 1}) on x {(B_, T_, d_model)}",
                      short, randn(B_, T_, d_model, seed=69, device="cpu"), why="for a sequence longer than max_len",
                      criterion="LlamaBlock.too_long")


@probed
@given_working_parts("modern_gpt")
def check_modern_gpt(ModernGPT) -> None:
    """ModernGPT(vocab_size, d_model=128, num_heads=4, num_kv_heads=2, d_ff=344, num_layers=4, max_len=256)."""
    device = start_check()
    reference = _reference()
    name = "ModernGPT"
    vocab, B_ = pick("modern_gpt.vocab", [19, 17, 23, 29]), pick("modern_gpt.batch", BATCHES)
    # 6 heads over 3 key/value heads: none of the sizes is the default, and all differ from each other, so each
    # argument must be passed on (and to its own place)
    sizes = {"d_model": pick("modern_gpt.d_model", D_MODELS), "num_heads": 6, "num_kv_heads": 3,
             "d_ff": pick("modern_gpt.d_ff", D_FFS), "num_layers": pick("modern_gpt.num_layers", [2, 5]),
             "max_len": pick("modern_gpt.max_len", MAX_LENS)}
    max_len = sizes["max_len"]
    module = construct(ModernGPT, name, vocab, **sizes)
    ref = reference_module(reference.ModernGPT, 80, vocab, **sizes)
    parameters = {n for n, _shape, _dtype in describe(module, name).get("parameters", [])}
    if "lm_head.weight" in parameters:
        fail(f"{name}.lm_head is not tied to the token embedding (it has a weight of its own).",
             mistake="modern_gpt.untied_head",
             hint="after creating both: self.lm_head.weight = self.token_embedding.weight")
    if any("position" in p for p in parameters):
        fail(f"{name} has a position table ({', '.join(p for p in parameters if 'position' in p)[:120]}).",
             mistake="modern_gpt.position_table",
             hint="ModernGPT has no position embedding: positions enter through the rotary angles")
    only_contract_parameters(module, ref, name, "token_embedding, blocks of LlamaBlock and norm; lm_head is tied")
    got_max_len = fetch(module.attr("max_len"), f"{name}.max_len")
    if got_max_len != max_len:
        fail(f"{name}.max_len should be the constructor's max_len ({max_len}), got {got_max_len!r}.")
    prepare(module, ref, device, name)
    for T_, seed in ((pick("modern_gpt.length", [9, 5, 7, 10, 11]), 81), (max_len, 82)):
        ids = randint(0, vocab, (B_, T_), seed=seed, device=device)
        shown = ", ".join(f"{k}={v}" for k, v in sizes.items())
        tested = f"{name}({vocab}, {shown}) on ids {shape_of(ids)}"
        with torch.no_grad():
            expected = ref(ids)
            got = call(f"{name}.forward", module, ids.clone(), tested=tested)
        expect_tensor(got, expected, f"{name} logits", device, tested=tested, looser=ROTARY_LOOSER,
                      shape_hint="(B, T, vocab_size)",
                      mistakes=lambda ids=ids: [
                          ("modern_gpt.no_causal_mask", lambda: M.modern_gpt(ref, ids, causal=False)),
                          ("modern_gpt.no_final_norm", lambda: M.modern_gpt(ref, ids, final_norm=False)),
                          ("modern_gpt.embedding_scaled", lambda: M.modern_gpt(ref, ids, scale_embeddings=True)),
                          ("llama.post_norm", lambda: M.modern_gpt(ref, ids, post_norm=True)),
                          *[(m, lambda f=f: M.modern_gpt(ref, ids, attn_flags=f)) for m, f in _ATTN_FLAGS],
                      ])
    # the defaults of the contract: the same parameters (names and shapes) as the reference's ModernGPT(vocab_size)
    default = construct(ModernGPT, name, vocab)
    theirs = {n: tuple(s) for n, s, _dtype in describe(default, name).get("parameters", [])}
    ours = {n: tuple(p.shape) for n, p in reference.ModernGPT(vocab).named_parameters()}
    if theirs != ours:
        differing = sorted(n for n in set(theirs) | set(ours) if theirs.get(n) != ours.get(n))
        fail(f"{name}({vocab}) with the default sizes has different parameters from the exercise's.",
             details=[f"first difference: {differing[0]}: expected {ours.get(differing[0])}, "
                      f"got {theirs.get(differing[0])}"],
             hint="keep the defaults d_model=128, num_heads=4, num_kv_heads=2, d_ff=344, num_layers=4, max_len=256")
    reference_default = reference_module(reference.ModernGPT, 84, vocab)
    prepare(default, reference_default, device, name)
    ids = randint(0, vocab, (1, pick("modern_gpt.default_length", [5, 4, 6, 7])), seed=85, device=device)
    tested = f"{name}({vocab}) with the default sizes on ids {shape_of(ids)}"
    with torch.no_grad():
        expected = reference_default(ids)
        got = call(f"{name}.forward", default, ids.clone(), tested=tested)
    expect_tensor(got, expected, f"{name} logits", device, tested=tested, looser=ROTARY_LOOSER,
                  note="keep the defaults d_model=128, num_heads=4, num_kv_heads=2, d_ff=344, num_layers=4")
    # the stated edge case: a sequence one longer than max_len
    too_long = randint(0, vocab, (1, max_len + 1), seed=83, device=device)
    expect_raises(ValueError, f"{name}(..., max_len={max_len}) on ids {shape_of(too_long)}", module, too_long,
                  why="for a sequence longer than max_len", criterion="ModernGPT.too_long")
