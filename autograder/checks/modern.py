"""Hidden checks of notebook 09 (RMSNorm, rotary positions, SwiGLU, grouped-query attention, LlamaBlock, ModernGPT).

Every argument has teeth: a non-default `eps` and `base`/`rope_base`, `num_kv_heads` in {1, 2, num_heads} (and
6 heads over 3 key/value heads, where the two wrong groupings differ from each other and from the right one),
`max_len` probed by a sequence one longer, T > 1 with masks that block something.
"""
from __future__ import annotations

import torch

from autograder.checks import known_mistakes as M
from autograder.checks.toolkit import (
    as_tensor, call, construct, describe, expect_callable, expect_raises, expect_tensor, fail, fetch, prepare,
    randint, randn, shape_of, start_check,
)
from autograder.checks.parts import given_working_parts
from autograder.checks.remote import probed

B, T, H, D_HEAD, D_FF = 2, 7, 4, 6, 20
D_MODEL = H * D_HEAD                  # 24
VOCAB, NUM_LAYERS, MAX_LEN = 19, 2, 16
ROTARY_LOOSER = 10.0                  # atol 1e-4: the contract's tolerance for rotary outputs


def _reference():
    import solutions.modern as reference

    return reference


def reference_module(factory, seed: int, *args, **kwargs):
    """A reference module built under a fixed seed, its RMSNorm weights randomised so that they matter."""
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        module = factory(*args, **kwargs)
        for parameter in module.parameters():
            if parameter.dim() == 1:          # the only vectors of these modules are RMSNorm weights
                torch.nn.init.normal_(parameter, 1.0, 0.3)
    return module


def only_contract_parameters(module, reference, name: str, hint: str) -> None:
    """The student's module has no parameter beyond the contract's (a bias, a stray table...)."""
    theirs = {n for n, _shape, _dtype in describe(module, name).get("parameters", [])}
    extra = sorted(theirs - set(dict(reference.named_parameters())))
    if extra:
        fail(f"{name} has parameters the exercise does not ask for: {', '.join(extra)[:200]}.", hint=hint)


def causal_padding_mask(T_: int, device, seed: int) -> torch.Tensor:
    """(B, 1, T, T): causal, and the second row's last two positions are padding (blocked as keys)."""
    keep = torch.ones(B, T_, dtype=torch.bool)
    keep[1, T_ - 2:] = False
    causal = torch.tril(torch.ones(T_, T_, dtype=torch.bool))
    return (keep[:, None, None, :] & causal).to(device)


# --------------------------------------------------------------------------------------------------------- RMSNorm
@probed
def check_rmsnorm(RMSNorm) -> None:
    """RMSNorm(d_model, eps=1e-6): weight (d_model,) of ones; x * rsqrt(mean(x**2, -1) + eps) * weight."""
    device = start_check()
    reference = _reference()
    module = construct(RMSNorm, "RMSNorm", D_MODEL)
    ref = reference.RMSNorm(D_MODEL)
    only_contract_parameters(module, ref, "RMSNorm", "RMSNorm has one parameter, `weight`, and no bias")
    prepare(module, ref, device, "RMSNorm", copy=False)
    weight = fetch(module.attr("weight"), "RMSNorm.weight")
    weight = as_tensor(weight, "RMSNorm.weight")
    if tuple(weight.shape) != (D_MODEL,) or not bool(torch.all(weight.detach().cpu() == 1)):
        fail("RMSNorm.weight must start as ones of shape (d_model,).", details=[f"d_model={D_MODEL}"],
             hint="self.weight = nn.Parameter(torch.ones(d_model))")
    for eps, scale, seed in ((None, 1e-3, 1), (0.05, 0.3, 2)):
        label = f"RMSNorm({D_MODEL})" if eps is None else f"RMSNorm({D_MODEL}, eps={eps})"
        module = construct(RMSNorm, "RMSNorm", D_MODEL) if eps is None else \
            construct(RMSNorm, "RMSNorm", D_MODEL, eps=eps)
        ref = reference_module(reference.RMSNorm, seed, D_MODEL, **({} if eps is None else {"eps": eps}))
        prepare(module, ref, device, "RMSNorm")
        # values of the size where eps matters, with a mean LayerNorm would remove
        x = (randn(B, T, D_MODEL, seed=10 + seed, device=device) + 0.7) * scale
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
    for max_len, d_head, base in ((13, 10, None), (9, 6, 500.0), (5, 2, None)):
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
                          ])
    expect_raises(ValueError, "rotary_cos_sin(8, 7)", rotary_cos_sin, 8, 7, why="for an odd d_head",
                  criterion="rotary_cos_sin.odd_d_head")


@probed
def check_apply_rotary(apply_rotary) -> None:
    """apply_rotary(x (..., T, d_head), cos, sin (T, d_head // 2)) -> x with each pair (2i, 2i+1) rotated."""
    device = start_check()
    expect_callable(apply_rotary, "apply_rotary")
    reference = _reference()
    cases = [((B, 3, 5, 8), 10000.0, 30), ((4, T, D_HEAD), 300.0, 31), ((T, 4), 10.0, 32)]
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
                      ])


# ---------------------------------------------------------------------------------------------------------- SwiGLU
@probed
def check_swi_glu(SwiGLU) -> None:
    """SwiGLU(d_model, d_ff): w_gate, w_up, w_down without bias; w_down(silu(w_gate(x)) * w_up(x))."""
    device = start_check()
    reference = _reference()
    module = construct(SwiGLU, "SwiGLU", D_MODEL, D_FF)
    ref = reference_module(reference.SwiGLU, 3, D_MODEL, D_FF)
    only_contract_parameters(module, ref, "SwiGLU", "the three nn.Linear layers take bias=False")
    prepare(module, ref, device, "SwiGLU")
    x = randn(B, T, D_MODEL, seed=40, device=device)
    tested = f"SwiGLU({D_MODEL}, {D_FF}) on x {shape_of(x)}"
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
    for args, why in (((25, 4, 1), "when d_model is not divisible by num_heads"),
                      ((24, 4, 3), "when num_heads is not divisible by num_kv_heads"),
                      ((20, 4, 2), "when d_head = d_model // num_heads is odd")):
        expect_raises(ValueError, f"{name}{args}", GroupedQueryAttention, *args, why=why,
                      criterion="GroupedQueryAttention.bad_sizes")
    short = construct(GroupedQueryAttention, name, D_MODEL, H, 2, max_len=T - 1)
    expect_raises(ValueError, f"{name}({D_MODEL}, {H}, 2, max_len={T - 1}) on x {(B, T, D_MODEL)}",
                  short, randn(B, T, D_MODEL, seed=49, device="cpu"), why="for a sequence longer than max_len",
                  criterion="GroupedQueryAttention.too_long")
    # (num_heads, num_kv_heads, extra constructor arguments, mask)
    # 6 heads over 3 first: there query head h // 2 (right), h % 3 (tiled) and h % 2 (h % groups) all differ
    cases = [(6, 3, {"rope_base": 1000.0}, "causal"), (H, 2, {"max_len": MAX_LEN, "rope_base": 100.0},
                                                      "causal+padding"),
             (H, 1, {}, "causal"), (H, H, {}, "none"), (H, 2, {}, "causal+padding")]
    for seed, (heads, kv_heads, extra, mask_name) in enumerate(cases):
        module = construct(GroupedQueryAttention, name, D_MODEL, heads, kv_heads, **extra)
        ref = reference_module(reference.GroupedQueryAttention, 50 + seed, D_MODEL, heads, kv_heads, **extra)
        _gqa_structure(module, ref, name)
        prepare(module, ref, device, name)
        x = randn(B, T, D_MODEL, seed=60 + seed, device=device)
        mask = {"none": None, "causal": torch.tril(torch.ones(T, T, dtype=torch.bool, device=device)),
                "causal+padding": causal_padding_mask(T, device, seed)}[mask_name]
        shown = ", ".join([f"{D_MODEL}, {heads}, {kv_heads}", *(f"{k}={v}" for k, v in extra.items())])
        tested = f"{name}({shown}) on x {shape_of(x)}, mask: {mask_name}"
        with torch.no_grad():
            expected = ref(x, mask)
            got = call(f"{name}.forward", module, x.clone(), None if mask is None else mask.clone(), tested=tested)
        expect_tensor(got, expected, f"{name} output", device, tested=tested, looser=ROTARY_LOOSER,
                      shape_hint="(B, T, d_model): heads merged and projected by w_o",
                      mistakes=gqa_mistakes(ref, x, mask))


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
    short = construct(LlamaBlock, name, D_MODEL, H, 2, D_FF, max_len=T - 1)
    expect_raises(ValueError, f"{name}({D_MODEL}, {H}, 2, {D_FF}, max_len={T - 1}) on x {(B, T, D_MODEL)}",
                  short, randn(B, T, D_MODEL, seed=69, device="cpu"), why="for a sequence longer than max_len",
                  criterion="LlamaBlock.too_long")
    for seed, (kv_heads, extra) in enumerate(((2, {"max_len": MAX_LEN}), (1, {}), (H, {}))):
        module = construct(LlamaBlock, name, D_MODEL, H, kv_heads, D_FF, **extra)
        ref = reference_module(reference.LlamaBlock, 70 + seed, D_MODEL, H, kv_heads, D_FF, **extra)
        only_contract_parameters(module, ref, name, "norm1 and norm2 are RMSNorm (weight only); the linear layers "
                                                    "of attn and ffn have no bias")
        prepare(module, ref, device, name)
        x = randn(B, T, D_MODEL, seed=75 + seed, device=device)
        mask = causal_padding_mask(T, device, seed)
        shown = ", ".join([f"{D_MODEL}, {H}, {kv_heads}, {D_FF}", *(f"{k}={v}" for k, v in extra.items())])
        tested = f"{name}({shown}) on x {shape_of(x)} with a causal and padding mask {shape_of(mask)}"
        with torch.no_grad():
            expected = ref(x, mask)
            got = call(f"{name}.forward", module, x.clone(), mask.clone(), tested=tested)
        expect_tensor(got, expected, f"{name} output", device, tested=tested, looser=ROTARY_LOOSER,
                      mistakes=block_mistakes(ref, x, mask))


@probed
@given_working_parts("modern_gpt")
def check_modern_gpt(ModernGPT) -> None:
    """ModernGPT(vocab_size, d_model=128, num_heads=4, num_kv_heads=2, d_ff=344, num_layers=4, max_len=256)."""
    device = start_check()
    reference = _reference()
    name = "ModernGPT"
    # 6 heads over 3 key/value heads: none of the sizes is the default, so each argument must be passed on
    sizes = {"d_model": D_MODEL, "num_heads": 6, "num_kv_heads": 3, "d_ff": D_FF, "num_layers": NUM_LAYERS,
             "max_len": MAX_LEN}
    module = construct(ModernGPT, name, VOCAB, **sizes)
    ref = reference_module(reference.ModernGPT, 80, VOCAB, **sizes)
    parameters = {n for n, _shape, _dtype in describe(module, name).get("parameters", [])}
    if "lm_head.weight" in parameters:
        fail(f"{name}.lm_head is not tied to the token embedding (it has a weight of its own).",
             hint="after creating both: self.lm_head.weight = self.token_embedding.weight")
    if any("position" in p for p in parameters):
        fail(f"{name} has a position table ({', '.join(p for p in parameters if 'position' in p)[:120]}).",
             hint="ModernGPT has no position embedding: positions enter through the rotary angles")
    only_contract_parameters(module, ref, name, "token_embedding, blocks of LlamaBlock and norm; lm_head is tied")
    max_len = fetch(module.attr("max_len"), f"{name}.max_len")
    if max_len != MAX_LEN:
        fail(f"{name}.max_len should be the constructor's max_len ({MAX_LEN}), got {max_len!r}.")
    prepare(module, ref, device, name)
    for T_, seed in ((9, 81), (MAX_LEN, 82)):
        ids = randint(0, VOCAB, (B, T_), seed=seed, device=device)
        shown = ", ".join(f"{k}={v}" for k, v in sizes.items())
        tested = f"{name}({VOCAB}, {shown}) on ids {shape_of(ids)}"
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
    too_long = randint(0, VOCAB, (1, MAX_LEN + 1), seed=83, device=device)
    expect_raises(ValueError, f"{name}(..., max_len={MAX_LEN}) on ids {shape_of(too_long)}", module, too_long,
                  why="for a sequence longer than max_len", criterion="ModernGPT.too_long")
    # the defaults of the contract: the same parameters (names and shapes) as the reference's ModernGPT(vocab_size)
    default = construct(ModernGPT, name, VOCAB)
    theirs = {n: tuple(s) for n, s, _dtype in describe(default, name).get("parameters", [])}
    ours = {n: tuple(p.shape) for n, p in reference.ModernGPT(VOCAB).named_parameters()}
    if theirs != ours:
        differing = sorted(n for n in set(theirs) | set(ours) if theirs.get(n) != ours.get(n))
        fail(f"{name}({VOCAB}) with the default sizes has different parameters from the exercise's.",
             details=[f"first difference: {differing[0]}: expected {ours.get(differing[0])}, "
                      f"got {theirs.get(differing[0])}"],
             hint="keep the defaults d_model=128, num_heads=4, num_kv_heads=2, d_ff=344, num_layers=4, max_len=256")
    reference_default = reference_module(reference.ModernGPT, 84, VOCAB)
    prepare(default, reference_default, device, name)
    ids = randint(0, VOCAB, (1, 5), seed=85, device=device)
    tested = f"{name}({VOCAB}) with the default sizes on ids {shape_of(ids)}"
    with torch.no_grad():
        expected = reference_default(ids)
        got = call(f"{name}.forward", default, ids.clone(), tested=tested)
    expect_tensor(got, expected, f"{name} logits", device, tested=tested, looser=ROTARY_LOOSER,
                  note="keep the defaults d_model=128, num_heads=4, num_kv_heads=2, d_ff=344, num_layers=4")
