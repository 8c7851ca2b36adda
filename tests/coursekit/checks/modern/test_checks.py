"""The public checks of notebook 09 pass correct answers (the reference and answers written otherwise) and name the
likely mistake otherwise (LlamaBlock's and ModernGPT's answers and hints: `test_model.py`; their edge cases are tried
here with the other exercises')."""
from __future__ import annotations

import pytest

import solutions
import variants as V
import variants_modern as W  # the hidden checks' student answers, reused
from coursekit.checks.modern import checks as checks
from coursekit.checks.modern import model as model
from coursekit.mistakes import text_of


@pytest.mark.parametrize("check, answers", [
    (checks.check_rmsnorm, [solutions.RMSNorm, W.RMSNormFunctional, W.RMSNormSubclass]),
    (checks.check_rotary_cos_sin, [solutions.rotary_cos_sin, W.rotary_cos_sin_outer]),
    (checks.check_apply_rotary, [solutions.apply_rotary, W.apply_rotary_complex, W.apply_rotary_unbind]),
    (checks.check_swi_glu, [solutions.SwiGLU, W.SwiGLUSigmoid]),
    (checks.check_grouped_query_attention, [solutions.GroupedQueryAttention, W.GQATorchSDPA, W.GQAStudent]),
], ids=lambda v: getattr(v, "__name__", ""))
def test_correct_answers_pass(check, answers, capsys):
    for answer in answers:
        check(answer)
        assert "all public checks passed" in capsys.readouterr().out


@pytest.mark.parametrize("kind, mistake_id", [
    ("axis", "rms_norm.mean_wrong_axis"), ("eps_outside", "rms_norm.eps_outside_root"),
    ("center", "rms_norm.subtracts_mean"), ("no_weight", "rms_norm.no_weight")])
def test_rmsnorm_hints(kind, mistake_id):
    V.fails_publicly(checks.check_rmsnorm, V.mistake(W.RMSNormStudent, kind), "HINT: " + text_of(mistake_id))


def test_rmsnorm_structure_and_default_eps():
    V.fails_publicly(checks.check_rmsnorm, V.mistake(W.RMSNormStudent, "random_init"), "start as ones")
    V.fails_publicly(checks.check_rmsnorm, V.mistake(W.RMSNormStudent, "bias"), "does not ask for: bias")
    V.fails_publicly(checks.check_rmsnorm, V.mistake(W.RMSNormStudent, "eps_default"), "RMSNorm(5)(x)", "eps matters")


@pytest.mark.parametrize("kind, fragment", [
    ("no_two", text_of("rotary.exponent_no_two")), ("swapped", text_of("rotary.cos_sin_swapped")),
    ("ignores_base", "use the `base` argument"), ("no_check", "should raise ValueError")])
def test_rotary_cos_sin_hints(kind, fragment):
    V.fails_publicly(checks.check_rotary_cos_sin, W.rotary_cos_sin_wrong(kind), fragment)


@pytest.mark.parametrize("kind, fragment", [
    ("halves", text_of("rotary.halves")), ("negative", text_of("rotary.wrong_direction")),
    ("own_tables", "wrong values")])
def test_apply_rotary_hints(kind, fragment):
    V.fails_publicly(checks.check_apply_rotary, W.apply_rotary_wrong(kind), fragment)


@pytest.mark.parametrize("kind, fragment", [
    ("swapped", text_of("swiglu.gate_up_swapped")), ("relu", text_of("swiglu.relu")), ("bias", "bias=False")])
def test_swiglu_hints(kind, fragment):
    V.fails_publicly(checks.check_swi_glu, V.mistake(W.SwiGLUStudent, kind), fragment)


@pytest.mark.parametrize("kind, fragment", [
    ("tile", text_of("gqa.kv_heads_tiled")), ("mod_groups", text_of("gqa.head_mod_groups")),
    ("rotates_values", text_of("gqa.rotates_values")), ("no_rotary", text_of("gqa.no_rotary")),
    ("persistent", "persistent=False"), ("no_length_check", "expected ValueError")])
def test_gqa_hints(kind, fragment):
    V.fails_publicly(checks.check_grouped_query_attention, V.mistake(W.GQAStudent, kind), fragment)


def test_unimplemented_stubs_say_so():
    def stub(*args, **kwargs):
        raise NotImplementedError()

    V.fails_publicly(checks.check_rotary_cos_sin, stub, "not implemented yet")
    V.fails_publicly(checks.check_apply_rotary, stub, "not implemented yet")


@pytest.mark.parametrize("check, answer, criterion", [
    (checks.check_rotary_cos_sin, W.rotary_cos_sin_wrong("no_check"), "rotary_cos_sin.odd_d_head"),
    (checks.check_grouped_query_attention, V.mistake(W.GQAStudent, "no_size_check"), "GroupedQueryAttention.bad_sizes"),
    (checks.check_grouped_query_attention, V.mistake(W.GQATorchSDPA, "no_length_check"),
     "GroupedQueryAttention.too_long"),
    (model.check_llama_block, V.mistake(W.LlamaBlockStudent, "no_max_len"), "LlamaBlock.too_long"),
    (model.check_modern_gpt, V.mistake(W.ModernGPTStudent, "no_length_check"), "ModernGPT.too_long"),
], ids=lambda v: v if isinstance(v, str) else "")
def test_a_missing_stated_edge_case_is_named(check, answer, criterion):
    """An answer right but for one stated edge case fails the public check, which says which edge case it was."""
    from coursekit.criteria import CRITERIA

    V.fails_publicly(check, answer, "should raise ValueError",
               f"an edge case the exercise states: {CRITERIA[criterion].text}")


@pytest.mark.parametrize("check, answer, criterion, fragment", [
    (checks.check_rmsnorm, V.mistake(W.RMSNormStudent, "eps_ignored"), "RMSNorm.eps", "RMSNorm(5, eps=0.1)(x)"),
    (checks.check_rotary_cos_sin, W.rotary_cos_sin_wrong("ignores_base"), "rotary_cos_sin.base",
     "use the `base` argument"),
    (checks.check_grouped_query_attention, V.mistake(W.GQAStudent, "rope_base_ignored"),
     "GroupedQueryAttention.rope_base", "rope_base=100.0"),
    (checks.check_grouped_query_attention, V.mistake(W.GQATorchSDPA, "rope_base_ignored"),
     "GroupedQueryAttention.rope_base", "base rope_base"),
], ids=["eps", "base", "rope_base-student", "rope_base-sdpa"])
def test_an_ignored_argument_is_named_as_the_argument_the_exercise_states(check, answer, criterion, fragment):
    from coursekit.criteria import CRITERIA

    V.fails_publicly(check, answer, fragment, f"(an argument the exercise states: {CRITERIA[criterion].text})")
