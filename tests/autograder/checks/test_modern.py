"""Hidden checks of notebook 09: the reference and differently written answers pass; each mistake is named."""
from __future__ import annotations

import pytest
import torch

import solutions
import variants as V
import variants_modern as W
from autograder.checks import known_mistakes as M
from autograder.checks import modern as checks


# ------------------------------------------------------------------------------------------------------ RMSNorm
@pytest.mark.parametrize("cls", [solutions.RMSNorm, W.RMSNormFunctional, W.RMSNormSubclass, W.RMSNormStudent])
def test_rmsnorm_correct_answers_pass(cls):
    checks.check_rmsnorm(cls)


@pytest.mark.parametrize("kind, diagnosis", [
    ("axis", "rms_norm.mean_wrong_axis"), ("eps_outside", "rms_norm.eps_outside_root"),
    ("center", "rms_norm.subtracts_mean"), ("no_weight", "rms_norm.no_weight")])
def test_rmsnorm_mistakes_are_named(kind, diagnosis):
    V.fails_with(checks.check_rmsnorm, V.mistake(W.RMSNormStudent, kind), diagnosis)


def test_rmsnorm_structure_and_defaults():
    V.fails_with(checks.check_rmsnorm, V.mistake(W.RMSNormStudent, "random_init"), "must start as ones")
    V.fails_with(checks.check_rmsnorm, V.mistake(W.RMSNormStudent, "bias"), "bias")
    V.fails_with(checks.check_rmsnorm, V.mistake(W.RMSNormStudent, "eps_default"), "RMSNorm(24)", "values differ")


# -------------------------------------------------------------------------------------------------- rotary angles
@pytest.mark.parametrize("fn", [solutions.rotary_cos_sin, W.rotary_cos_sin_outer])
def test_rotary_cos_sin_correct_answers_pass(fn):
    checks.check_rotary_cos_sin(fn)


@pytest.mark.parametrize("kind, fragments", [
    ("no_two", ["rotary.exponent_no_two"]), ("swapped", ["rotary.cos_sin_swapped"]),
    ("ignores_base", ["base=500.0", "values differ"]), ("no_check", ["ValueError", "odd d_head"])])
def test_rotary_cos_sin_mistakes(kind, fragments):
    V.fails_with(checks.check_rotary_cos_sin, W.rotary_cos_sin_wrong(kind), *fragments)


@pytest.mark.parametrize("fn", [solutions.apply_rotary, W.apply_rotary_complex, W.apply_rotary_unbind])
def test_apply_rotary_correct_answers_pass(fn):
    checks.check_apply_rotary(fn)


@pytest.mark.parametrize("kind, fragments", [
    ("halves", ["rotary.halves"]), ("negative", ["rotary.wrong_direction"]),
    ("own_tables", ["base 300", "values differ"])])
def test_apply_rotary_mistakes(kind, fragments):
    V.fails_with(checks.check_apply_rotary, W.apply_rotary_wrong(kind), *fragments)


# --------------------------------------------------------------------------------------------------------- SwiGLU
@pytest.mark.parametrize("cls", [solutions.SwiGLU, W.SwiGLUSigmoid, W.SwiGLUStudent])
def test_swiglu_correct_answers_pass(cls):
    checks.check_swi_glu(cls)


@pytest.mark.parametrize("kind, fragments", [
    ("swapped", ["swiglu.gate_up_swapped"]), ("relu", ["swiglu.relu"]), ("bias", ["bias=False"])])
def test_swiglu_mistakes(kind, fragments):
    V.fails_with(checks.check_swi_glu, V.mistake(W.SwiGLUStudent, kind), *fragments)


# ------------------------------------------------------------------------------------------ grouped-query attention
@pytest.mark.parametrize("cls", [solutions.GroupedQueryAttention, W.GQATorchSDPA, W.GQAStudent])
def test_gqa_correct_answers_pass(cls):
    checks.check_grouped_query_attention(cls)


@pytest.mark.parametrize("kind, fragments", [
    ("tile", ["gqa.kv_heads_tiled"]), ("mod_groups", ["gqa.head_mod_groups"]),
    ("rotates_values", ["gqa.rotates_values"]), ("no_rotary", ["gqa.no_rotary"]),
    ("queries_only", ["gqa.rotary_queries_only"]),
    ("persistent", ["state_dict", "persistent=False"]), ("no_length_check", ["max_len=6", "should raise ValueError for a sequence longer than max_len"])])
def test_gqa_mistakes(kind, fragments):
    V.fails_with(checks.check_grouped_query_attention, V.mistake(W.GQAStudent, kind), *fragments)


def test_the_two_wrong_groupings_differ_from_each_other_and_from_the_right_one():
    """With 6 query heads over 3 kv heads, h // 2, h % 3 and h % 2 are three different maps (with 4 over 2 the
    last two coincide): the check's case (6, 3) tells them apart."""
    torch.manual_seed(0)
    attn = solutions.GroupedQueryAttention(24, 6, 3).eval()
    x = torch.randn(2, 7, 24)
    outs = [M.gqa(attn, x, None, kv_map=m) for m in ("interleave", "tile", "mod_groups")]
    assert torch.allclose(outs[0], attn(x), atol=1e-6)
    assert not torch.allclose(outs[0], outs[1]) and not torch.allclose(outs[0], outs[2])
    assert not torch.allclose(outs[1], outs[2])


# ------------------------------------------------------------------------------------------------ block and model
@pytest.mark.parametrize("cls", [solutions.LlamaBlock, W.LlamaBlockStudent])
def test_llama_block_correct_answers_pass(cls):
    checks.check_llama_block(cls)


@pytest.mark.parametrize("kind, diagnosis", [
    ("post_norm", "llama.post_norm"), ("no_attn_residual", "llama.missing_residual"),
    ("no_ffn_residual", "llama.missing_residual")])
def test_llama_block_mistakes(kind, diagnosis):
    V.fails_with(checks.check_llama_block, V.mistake(W.LlamaBlockStudent, kind), diagnosis)


def test_llama_block_with_a_wrong_attention_names_the_attention_mistake():
    block = type("LlamaBlock", (W.LlamaBlockStudent,), {"ATTENTION": V.mistake(W.GQAStudent, "tile")})
    V.fails_with(checks.check_llama_block, block, "gqa.kv_heads_tiled")


@pytest.mark.parametrize("cls", [solutions.ModernGPT, W.ModernGPTStudent])
def test_modern_gpt_correct_answers_pass(cls):
    checks.check_modern_gpt(cls)


@pytest.mark.parametrize("kind, fragments", [
    ("no_causal", ["modern_gpt.no_causal_mask"]), ("no_final_norm", ["modern_gpt.no_final_norm"]),
    ("scaled", ["modern_gpt.embedding_scaled"]), ("untied", ["not tied"]), ("positions", ["position table"])])
def test_modern_gpt_mistakes(kind, fragments):
    V.fails_with(checks.check_modern_gpt, V.mistake(W.ModernGPTStudent, kind), *fragments)


# ------------------------------------------------------------------------------------- the variants themselves
def test_the_variants_with_every_switch_off_are_the_reference():
    torch.manual_seed(0)
    x = torch.randn(2, 7, 24)
    norm = solutions.RMSNorm(24, eps=0.1)
    torch.nn.init.normal_(norm.weight, 1, 0.3)
    assert torch.allclose(M.rms_norm(norm.weight, x, 0.1), norm(x), atol=1e-6)
    tables = M.rotary_tables(9, 6, 500.0)
    assert all(torch.allclose(a, b) for a, b in zip(tables, solutions.rotary_cos_sin(9, 6, 500.0)))
    cos, sin = solutions.rotary_cos_sin(7, 8)
    y = torch.randn(3, 7, 8)
    assert torch.allclose(M.rotate(y, cos, sin), solutions.apply_rotary(y, cos, sin), atol=1e-6)
    ffn = solutions.SwiGLU(24, 20)
    assert torch.allclose(M.swiglu(ffn, x), ffn(x), atol=1e-6)
    mask = torch.tril(torch.ones(7, 7, dtype=torch.bool))
    for kv in (1, 2, 4):
        attn = solutions.GroupedQueryAttention(24, 4, kv, rope_base=100.0)
        assert torch.allclose(M.gqa(attn, x, mask), attn(x, mask), atol=1e-6)
        assert abs(M.base_of(attn, 6) - 100.0) < 1e-2
    block = solutions.LlamaBlock(24, 4, 2, 20)
    assert torch.allclose(M.llama_block(block, x, mask), block(x, mask), atol=1e-5)
    model = solutions.ModernGPT(19, 24, 4, 2, 20, 2, 16)
    ids = torch.randint(0, 19, (2, 9))
    assert torch.allclose(M.modern_gpt(model, ids), model(ids), atol=1e-5)
