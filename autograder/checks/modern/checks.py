"""Hidden checks of notebook 09's parts: RMSNorm, rotary positions, SwiGLU, grouped-query attention (LlamaBlock
and ModernGPT: `model.py`, which shares the inputs and helpers here).

Every argument has teeth: a non-default `eps` and `base`/`rope_base` (arguments with teeth of the catalogue
coursekit/criteria.py, each tried in its `argument` block after a core that leaves it at its default: partial
credit), `num_kv_heads` in {1, 2, num_heads} (and 6 heads over 3 key/value heads, where the two wrong groupings
differ from each other and from the right one), `max_len` probed by a sequence one longer, T > 1 with masks that
block something.

Probe inputs are this submission's (`kit/draws.py`): every size, length, base, eps and error case below is drawn with
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
from autograder.checks.kit.inputs import reference
from autograder.checks.kit.toolkit import (
    call, construct, expect_callable, expect_raises, fail, fetch, randn, seeded, shape_of, start_check,
)
from autograder.checks.kit.compare import as_tensor, describe, expect_tensor, prepare
from autograder.checks.kit.compare import candidates as table_candidates
from autograder.checks.kit.parts import given_working_parts
from autograder.checks.kit.remote import hidden_check
from coursekit.tolerance import ROTARY_LOOSER

# the spaces the checks draw from (first option: the input of salt 0)
BATCHES = [2, 3]
LENGTHS = [7, 6, 8, 9, 10]            # T: below every max_len of the core cases, T - 1 >= 5 for the error case
D_MODELS = [24, 48, 72]               # divisible by 6 and by 4, even d_head both ways
D_FFS = [20, 36, 44, 52]              # never a d_model, a max_len or a default
MAX_LENS = [16, 12, 14, 18]           # > every T of the core cases (ModernGPT also runs T = max_len)
PADDED = [2, 1, 3]                    # padded key positions at the end of the second sequence


def reference_module(factory, seed: int, *args, **kwargs):
    """A reference module built under this submission's seed, its RMSNorm weights randomised so that they matter."""
    with seeded(seed):
        module = factory(*args, **kwargs)
        for parameter in module.parameters():
            if parameter.dim() == 1:          # the only vectors of these modules are RMSNorm weights
                torch.nn.init.normal_(parameter, 1.0, 0.3)
    return module


def only_contract_parameters(module, ref, name: str, hint: str, bias_mistake: str | None = None) -> None:
    """The student's module has no parameter beyond the contract's (a bias, a stray table...); extra biases alone
    are named `bias_mistake` (whose fix then replaces `hint`)."""
    theirs = {n for n, _shape, _dtype in describe(module, name).get("parameters", [])}
    extra = sorted(theirs - set(dict(ref.named_parameters())))
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


def candidates(table, run, ids=None) -> list:
    """[(mistake id, thunk)] for `expect_tensor`: the rows of one of mistakes.py's tables (the rows `ids`, in that
    order), each row's other forms (`M.FORMS`, keyed by the row's variant and id) right after it; a thunk is
    `run(variant, switches)` on the check's own inputs."""
    forms = {mistake_id: switches for (variant, mistake_id), switches in M.FORMS.items()
             if mistake_id in table and table[mistake_id][0] is variant}
    return table_candidates(table, run, ids, forms)


# --------------------------------------------------------------------------------------------------------- RMSNorm
@hidden_check
def check_rmsnorm(RMSNorm) -> None:
    """RMSNorm(d_model, eps=1e-6): weight (d_model,) of ones; x * rsqrt(mean(x**2, -1) + eps) * weight."""
    device = start_check()
    solution = reference("modern")
    d_model = pick("rmsnorm.d_model", [24, 20, 28, 32])
    B_, T_ = pick("rmsnorm.batch", BATCHES), pick("rmsnorm.length", LENGTHS)
    # values of the size where eps matters: mean(x**2) is about 1.5 * scale**2
    small = pick("rmsnorm.small_scale", [1e-3, 8e-4, 1.5e-3])            # with the default eps=1e-6
    eps = pick("rmsnorm.eps", [0.05, 0.03, 0.08, 0.1])                   # with values of size 0.3
    module = construct(RMSNorm, "RMSNorm", d_model)
    ref = solution.RMSNorm(d_model)
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
        ref = reference_module(solution.RMSNorm, seed, d_model, **({} if eps is None else {"eps": eps}))
        prepare(module, ref, device, "RMSNorm")
        # values with a mean that LayerNorm would remove
        x = (randn(B_, T_, d_model, seed=10 + seed, device=device) + 0.7) * scale
        tested = f"{label} on x {shape_of(x)} of size about {scale:g}"
        with torch.no_grad():
            expected = ref(x)
            got = call("RMSNorm.forward", module, x.clone(), tested=tested)
        w, e = ref.weight.detach(), ref.eps
        expect_tensor(got, expected, "RMSNorm output", device, tested=tested, mistakes=lambda x=x, w=w, e=e: candidates(
            M.RMSNORM, lambda variant, switches: variant(w, x, e, **switches)))

    compare(None, small, 1)                          # the core: the default eps, on values where it matters
    with argument("RMSNorm.eps"):                    # another eps, on values of size 0.3
        compare(eps, 0.3, 2)


# -------------------------------------------------------------------------------------------------- rotary angles
def _pair(got, label: str, tested: str):
    if not isinstance(got, (tuple, list)) or len(got) != 2:
        fail(f"{label} must return a pair (cos, sin), got {type(got).__name__}.", tested=tested)
    return got


@hidden_check
def check_rotary_cos_sin(rotary_cos_sin) -> None:
    """rotary_cos_sin(max_len, d_head, base=10000.0) -> (cos, sin), each (max_len, d_head // 2) float32."""
    start_check()
    expect_callable(rotary_cos_sin, "rotary_cos_sin")
    solution = reference("modern")
    # max_len != d_head everywhere (a swap shows); the last case has one pair only (d_head 2)
    cases = ((pick("rotary.max_len.1", [13, 11, 12, 15]), pick("rotary.d_head.1", [10, 8, 14, 16]), None),
             (pick("rotary.max_len.2", [9, 7, 11, 5]), pick("rotary.d_head.2", [6, 4, 12]),
              pick("rotary.base", [500.0, 300.0, 700.0, 2000.0])),
             (pick("rotary.max_len.3", [5, 3, 4, 6]), 2, None))
    def compare(max_len, d_head, base):
        kwargs = {} if base is None else {"base": base}
        tested = f"max_len={max_len}, d_head={d_head}" + (f", base={base}" if base is not None else "")
        expected = solution.rotary_cos_sin(max_len, d_head, **kwargs)
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
                          mistakes=lambda i=index, m=max_len, d=d_head, b=real_base: candidates(
                              M.ROTARY_COS_SIN, lambda variant, switches: variant(m, d, b, **switches)[i],
                              [k for k in M.ROTARY_COS_SIN if b != 10000.0 or k != "rotary.base_ignored"]))

    for max_len, d_head, base in cases:
        if base is None:                             # the core: base left out (10000)
            compare(max_len, d_head, base)
        else:
            with argument("rotary_cos_sin.base"):    # another base
                compare(max_len, d_head, base)
    odd = (pick("rotary.odd.max_len", [8, 6, 9, 10]), pick("rotary.odd.d_head", [7, 5, 9, 11]))
    expect_raises(ValueError, f"rotary_cos_sin{odd}", rotary_cos_sin, *odd, why="for an odd d_head",
                  criterion="rotary_cos_sin.odd_d_head")


@hidden_check
def check_apply_rotary(apply_rotary) -> None:
    """apply_rotary(x (..., T, d_head), cos, sin (T, d_head // 2)) -> x with each pair (2i, 2i+1) rotated."""
    device = start_check()
    expect_callable(apply_rotary, "apply_rotary")
    solution = reference("modern")
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
        cos, sin = (t.to(device) for t in solution.rotary_cos_sin(shape[-2], shape[-1], base))
        tested = f"x {shape_of(x)}, cos/sin {shape_of(cos)} (base {base:g})"
        expected = solution.apply_rotary(x, cos, sin)
        got = call("apply_rotary", apply_rotary, x.clone(), cos.clone(), sin.clone(), tested=tested)
        expect_tensor(got, expected, "apply_rotary output", device, tested=tested, looser=ROTARY_LOOSER,
                      shape_hint="the output has the shape of x",
                      mistakes=lambda x=x, cos=cos, sin=sin, base=base: candidates(
                          M.APPLY_ROTARY, lambda variant, switches: variant(x, cos, sin, **switches),
                          [k for k in M.APPLY_ROTARY if base != 10000.0 or k != "rotary.own_tables"]))


# ---------------------------------------------------------------------------------------------------------- SwiGLU
@hidden_check
def check_swi_glu(SwiGLU) -> None:
    """SwiGLU(d_model, d_ff): w_gate, w_up, w_down without bias; w_down(silu(w_gate(x)) * w_up(x))."""
    device = start_check()
    solution = reference("modern")
    d_model, d_ff = pick("swiglu.d_model", [24, 16, 28, 32]), pick("swiglu.d_ff", D_FFS)
    B_, T_ = pick("swiglu.batch", BATCHES), pick("swiglu.length", LENGTHS)
    module = construct(SwiGLU, "SwiGLU", d_model, d_ff)
    ref = reference_module(solution.SwiGLU, 3, d_model, d_ff)
    only_contract_parameters(module, ref, "SwiGLU", "the three nn.Linear layers take bias=False", "swiglu.bias")
    prepare(module, ref, device, "SwiGLU")
    x = randn(B_, T_, d_model, seed=40, device=device)
    tested = f"SwiGLU({d_model}, {d_ff}) on x {shape_of(x)}"
    with torch.no_grad():
        expected = ref(x)
        got = call("SwiGLU.forward", module, x.clone(), tested=tested)
    expect_tensor(got, expected, "SwiGLU output", device, tested=tested, mistakes=lambda: candidates(
        M.SWIGLU, lambda variant, switches: variant(ref, x, **switches)))


# ----------------------------------------------------------------------------------------- grouped-query attention
def gqa_mistakes(attn, x, mask):
    """The known mistakes of GroupedQueryAttention (M.GQA) on the reference module `attn`, x and mask; those of the
    mask only when there is one."""
    def variants():
        ids = [mistake_id for mistake_id, (_variant, switches) in M.GQA.items()
               if mask is not None or not any("mask" in switch for switch in switches)]
        return candidates(M.GQA, lambda variant, switches: variant(attn, x, mask, **switches), ids)

    return variants


def _gqa_structure(module, ref, name: str) -> None:
    only_contract_parameters(module, ref, name, "the four projections take bias=False; the rotary tables are no "
                             "parameters (recompute them, or register_buffer(..., persistent=False))")
    state = call(f"{name}.state_dict()", module.state)
    extra = sorted(set(state) - set(ref.state_dict()))
    if extra:
        fail(f"{name}'s state_dict holds more than the projections: {', '.join(extra)[:200]}.",
             mistake="gqa.tables_in_state_dict")


@hidden_check
@given_working_parts("grouped_query_attention")
def check_grouped_query_attention(GroupedQueryAttention) -> None:
    """GroupedQueryAttention(d_model, num_heads, num_kv_heads, max_len=512, rope_base=10000.0): forward(x, mask)."""
    device = start_check()
    solution = reference("modern")
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
        ref = reference_module(solution.GroupedQueryAttention, 50 + seed, d_model, heads, kv_heads, **extra)
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
