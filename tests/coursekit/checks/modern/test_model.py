"""The public checks of notebook 09's LlamaBlock and ModernGPT pass correct answers (the reference and answers
written otherwise) and name the likely mistake otherwise."""
from __future__ import annotations

import pytest

import solutions
import variants as V
import variants_modern as W  # the hidden checks' student answers, reused
from coursekit.checks.modern import model as model
from coursekit.mistakes import text_of


@pytest.mark.parametrize("check, answers", [
    (model.check_llama_block, [solutions.LlamaBlock, W.LlamaBlockStudent]),
    (model.check_modern_gpt, [solutions.ModernGPT, W.ModernGPTStudent]),
], ids=lambda v: getattr(v, "__name__", ""))
def test_correct_answers_pass(check, answers, capsys):
    for answer in answers:
        check(answer)
        assert "all public checks passed" in capsys.readouterr().out


@pytest.mark.parametrize("kind, fragment", [
    ("post_norm", text_of("llama.post_norm")), ("no_attn_residual", text_of("llama.missing_residual")),
    ("no_ffn_residual", "around the feed-forward")])
def test_llama_block_hints(kind, fragment):
    V.fails_publicly(model.check_llama_block, V.mistake(W.LlamaBlockStudent, kind), fragment)


@pytest.mark.parametrize("kind, fragment", [
    ("no_causal", text_of("modern_gpt.no_causal_mask")), ("no_final_norm", text_of("modern_gpt.no_final_norm")),
    ("scaled", text_of("modern_gpt.embedding_scaled")), ("untied", "tied"), ("positions", "position table")])
def test_modern_gpt_hints(kind, fragment):
    V.fails_publicly(model.check_modern_gpt, V.mistake(W.ModernGPTStudent, kind), fragment)


@pytest.mark.parametrize("check, kind, criterion, mistake_id", [
    (model.check_llama_block, "rope_base_ignored", "LlamaBlock.rope_base", "llama.rope_base_ignored"),
    (model.check_llama_block, "eps_ignored", "LlamaBlock.eps", "llama.eps_ignored"),
    (model.check_llama_block, "eps_norm1_only", "LlamaBlock.eps", None),
    (model.check_modern_gpt, "rope_base_ignored", "ModernGPT.rope_base", "modern_gpt.rope_base_ignored"),
    (model.check_modern_gpt, "rope_base_first_block", "ModernGPT.rope_base", None),
    (model.check_modern_gpt, "final_norm_eps", "ModernGPT.eps", "modern_gpt.eps_ignored"),
    (model.check_modern_gpt, "blocks_eps", "ModernGPT.eps", "modern_gpt.eps_ignored"),
], ids=lambda v: v if isinstance(v, str) else "")
def test_an_argument_not_passed_on_is_named_as_the_argument_the_exercise_states(check, kind, criterion, mistake_id):
    """rope_base and eps (fifth edition): right with the defaults, wrong with rope_base=100 or eps=0.1; the failure
    says which argument, and the hint names the mistake where the answer is one of the known ones."""
    from coursekit.criteria import CRITERIA

    cls = W.LlamaBlockStudent if check is model.check_llama_block else W.ModernGPTStudent
    fragments = [f"(an argument the exercise states: {CRITERIA[criterion].text})"]
    if mistake_id:
        fragments.append(text_of(mistake_id))
    V.fails_publicly(check, V.mistake(cls, kind), *fragments)
