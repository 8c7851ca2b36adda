"""Hidden checks of notebook 09: the reference and differently written answers pass; each mistake is named; an
answer failing only a stated edge case keeps most of its points. (LlamaBlock's and ModernGPT's answers and mistakes:
`test_model.py`; their edge cases and stubs are tried here with the other exercises'.)

The checks draw their inputs per submission (conftest's salt), so no test here pins a drawn size or base.
"""
from __future__ import annotations

import re

import pytest
import torch

import solutions
import variants as V
import variants_modern as W
from autograder.checks.modern import mistakes as M
from autograder.checks.modern import checks as checks
from autograder.checks.modern import model as model
from autograder.checks.kit.criteria import PartialCredit
from coursekit.criteria import CRITERIA


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
    V.fails_with(checks.check_rmsnorm, V.mistake(W.RMSNormStudent, "random_init"), "must start as ones",
                 "rms_norm.weight_not_ones")
    V.fails_with(checks.check_rmsnorm, V.mistake(W.RMSNormStudent, "bias"), "bias", "rms_norm.bias")


# -------------------------------------------------------------------------------------------------- rotary angles
@pytest.mark.parametrize("fn", [solutions.rotary_cos_sin, W.rotary_cos_sin_outer])
def test_rotary_cos_sin_correct_answers_pass(fn):
    checks.check_rotary_cos_sin(fn)


@pytest.mark.parametrize("kind, fragments", [
    ("no_two", ["rotary.exponent_no_two"]), ("swapped", ["rotary.cos_sin_swapped"]),
    ("no_check", ["ValueError", "odd d_head"])])
def test_rotary_cos_sin_mistakes(kind, fragments):
    V.fails_with(checks.check_rotary_cos_sin, W.rotary_cos_sin_wrong(kind), *fragments)


@pytest.mark.parametrize("fn", [solutions.apply_rotary, W.apply_rotary_complex, W.apply_rotary_unbind])
def test_apply_rotary_correct_answers_pass(fn):
    checks.check_apply_rotary(fn)


@pytest.mark.parametrize("kind, fragments", [
    ("halves", ["rotary.halves"]), ("negative", ["rotary.wrong_direction"]),
    ("own_tables", ["(base ", "values differ", "rotary.own_tables"])])
def test_apply_rotary_mistakes(kind, fragments):
    V.fails_with(checks.check_apply_rotary, W.apply_rotary_wrong(kind), *fragments)


# --------------------------------------------------------------------------------------------------------- SwiGLU
@pytest.mark.parametrize("cls", [solutions.SwiGLU, W.SwiGLUSigmoid, W.SwiGLUStudent])
def test_swiglu_correct_answers_pass(cls):
    checks.check_swi_glu(cls)


@pytest.mark.parametrize("kind, fragments", [
    ("swapped", ["swiglu.gate_up_swapped"]), ("relu", ["swiglu.relu"]), ("bias", ["bias=False", "swiglu.bias"])])
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
    ("persistent", ["state_dict", "persistent=False", "gqa.tables_in_state_dict"]),
    ("no_length_check", ["max_len=", "should raise ValueError for a sequence longer than max_len"])])
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


# ------------------------------------------------------------------------------- stated edge cases: partial credit
POINTS = {"rotary_cos_sin": 10, "GroupedQueryAttention": 25, "LlamaBlock": 10, "ModernGPT": 20}  # the notebook's


def keeps_most_points(check, answer, criterion: str) -> PartialCredit:
    """`answer` fails only the edge case `criterion`: PartialCredit of at least 80 % listing it with a cross."""
    with pytest.raises(PartialCredit) as info:
        check(answer)
    failure = info.value
    message = str(failure)
    assert failure.fraction >= 0.8, message
    assert f"✗ {CRITERIA[criterion].text}" in message, message
    assert "✓ the main behaviour" in message, message
    assert message.count("✗") == 1, message
    assert len(message.splitlines()) < 15, message
    return failure


ONLY_ONE_EDGE_CASE = [
    ("rotary_cos_sin.odd_d_head", checks.check_rotary_cos_sin, W.rotary_cos_sin_wrong("no_check")),
    ("GroupedQueryAttention.bad_sizes", checks.check_grouped_query_attention,
     V.mistake(W.GQAStudent, "no_size_check")),
    ("GroupedQueryAttention.too_long", checks.check_grouped_query_attention,
     V.mistake(W.GQATorchSDPA, "no_length_check")),
    ("GroupedQueryAttention.too_long", checks.check_grouped_query_attention,
     V.mistake(W.GQAStudent, "no_length_check")),      # its stored tables are too short: a RuntimeError instead
    ("LlamaBlock.too_long", model.check_llama_block, V.mistake(W.LlamaBlockStudent, "no_max_len")),
    ("ModernGPT.too_long", model.check_modern_gpt, V.mistake(W.ModernGPTStudent, "no_length_check")),
]


@pytest.mark.parametrize("criterion, check, answer", ONLY_ONE_EDGE_CASE,
                         ids=[f"{c}-{getattr(a, 'MISTAKE', None) or a.__name__}" for c, _k, a in ONLY_ONE_EDGE_CASE])
def test_an_answer_failing_only_one_stated_edge_case_keeps_most_of_its_points(criterion, check, answer):
    failure = keeps_most_points(check, answer, criterion)
    assert POINTS[CRITERIA[criterion].api] * (1 - failure.fraction) <= POINTS[CRITERIA[criterion].api] * 0.2


def test_a_correct_gqa_without_the_too_long_error_loses_at_most_5_of_its_25_points():
    """The issue's requirement, literally: F.scaled_dot_product_attention, right in everything but the ValueError."""
    failure = keeps_most_points(checks.check_grouped_query_attention, V.mistake(W.GQATorchSDPA, "no_length_check"),
                                "GroupedQueryAttention.too_long")
    assert 25 * (1 - failure.fraction) <= 5
    assert "should raise ValueError for a sequence longer than max_len" in str(failure)


@pytest.mark.parametrize("check, answer, criterion, points", [
    (model.check_llama_block, V.mistake(W.LlamaBlockStudent, "no_max_len"), "LlamaBlock.too_long", 10),
    (model.check_modern_gpt, V.mistake(W.ModernGPTStudent, "no_length_check"), "ModernGPT.too_long", 20)])
def test_a_block_and_a_model_without_their_max_len_error_lose_at_most_a_fifth(check, answer, criterion, points):
    failure = keeps_most_points(check, answer, criterion)
    assert points * (1 - failure.fraction) <= points / 5


def test_a_mistake_in_the_core_with_a_missing_edge_case_gets_nothing():
    """Edge cases count on top of a working core only: a wrong core fails plainly, whatever the edge cases do."""
    wrong_core = type("GroupedQueryAttention", (W.GQATorchSDPA,), {
        "MISTAKE": "no_length_check",
        "forward": lambda self, x, mask=None: W.GQATorchSDPA.forward(self, x, None)})   # ignores the mask
    with pytest.raises(AssertionError) as info:
        checks.check_grouped_query_attention(wrong_core)
    assert not isinstance(info.value, PartialCredit), str(info.value)


@pytest.mark.parametrize("check, stub", [
    (checks.check_rotary_cos_sin, W.rotary_cos_sin_stub),
    (checks.check_grouped_query_attention, W.module_stub("GroupedQueryAttention")),
    (checks.check_grouped_query_attention, W.module_stub("GroupedQueryAttention", "forward")),
    (model.check_llama_block, W.module_stub("LlamaBlock")),
    (model.check_llama_block, W.module_stub("LlamaBlock", "forward")),
    (model.check_modern_gpt, W.module_stub("ModernGPT")),
    (model.check_modern_gpt, W.module_stub("ModernGPT", "forward")),
], ids=["rotary_cos_sin", "gqa", "gqa-forward", "llama", "llama-forward", "modern_gpt", "modern_gpt-forward"])
def test_a_stub_gets_a_plain_failure(check, stub, request):
    with pytest.raises(AssertionError) as info:
        check(stub)
    assert not isinstance(info.value, PartialCredit), str(info.value)
    if "forward" not in request.node.callspec.id:   # as released; a forward-only stub fails earlier, on its parameters
        assert "not implemented yet" in str(info.value)


# --------------------------------------------------------------------------- arguments with teeth: partial credit
ONLY_ONE_ARGUMENT = [
    ("RMSNorm.eps", checks.check_rmsnorm, V.mistake(W.RMSNormStudent, "eps_ignored")),
    ("rotary_cos_sin.base", checks.check_rotary_cos_sin, W.rotary_cos_sin_wrong("ignores_base")),
    ("GroupedQueryAttention.rope_base", checks.check_grouped_query_attention,
     V.mistake(W.GQAStudent, "rope_base_ignored")),
    ("GroupedQueryAttention.rope_base", checks.check_grouped_query_attention,
     V.mistake(W.GQATorchSDPA, "rope_base_ignored")),
    # 09's fifth-edition arguments: a block or a model that does not pass rope_base or eps on
    ("LlamaBlock.rope_base", model.check_llama_block, V.mistake(W.LlamaBlockStudent, "rope_base_ignored")),
    ("LlamaBlock.eps", model.check_llama_block, V.mistake(W.LlamaBlockStudent, "eps_ignored")),
    ("LlamaBlock.eps", model.check_llama_block, V.mistake(W.LlamaBlockStudent, "eps_norm1_only")),
    ("ModernGPT.rope_base", model.check_modern_gpt, V.mistake(W.ModernGPTStudent, "rope_base_ignored")),
    ("ModernGPT.rope_base", model.check_modern_gpt, V.mistake(W.ModernGPTStudent, "rope_base_first_block")),
    ("ModernGPT.eps", model.check_modern_gpt, V.mistake(W.ModernGPTStudent, "final_norm_eps")),
    ("ModernGPT.eps", model.check_modern_gpt, V.mistake(W.ModernGPTStudent, "blocks_eps")),
]


@pytest.mark.parametrize("criterion, check, answer", ONLY_ONE_ARGUMENT,
                         ids=[f"{c}-{a.__name__}-{getattr(a, 'MISTAKE', None)}" for c, _k, a in ONLY_ONE_ARGUMENT])
def test_an_answer_that_ignores_one_argument_keeps_most_of_its_points(criterion, check, answer):
    """Right with the argument at its default, wrong with another value: 75 % of the points (the exercise's only
    argument with teeth fails), the argument listed with a cross."""
    message = V.fails_partially(check, answer, criterion)
    assert "✓ the main behaviour" in message, message


def test_a_rotary_table_that_ignores_base_is_named_and_keeps_three_quarters():
    """rotary.base_ignored: the tables always use 10000. The core (base left out) passes; the argument fails."""
    message = V.fails_partially(checks.check_rotary_cos_sin, W.rotary_cos_sin_wrong("ignores_base"),
                                "rotary_cos_sin.base", "base=", "values differ")
    with pytest.raises(PartialCredit) as info:
        checks.check_rotary_cos_sin(W.rotary_cos_sin_wrong("ignores_base"))
    assert info.value.mistake_id == "rotary.base_ignored", message
    assert info.value.fraction == pytest.approx(0.75), message


def test_a_wrong_default_eps_is_still_a_core_failure():
    """eps_default (1e-5 when eps is left out) is wrong at the default: a plain failure on the default eps."""
    message = V.fails_plainly(checks.check_rmsnorm, V.mistake(W.RMSNormStudent, "eps_default"), "values differ")
    assert re.search(r"RMSNorm\(\d+\) on x", message), message
