"""Hidden checks of notebook 09's LlamaBlock and ModernGPT: the reference and differently written answers pass; each
mistake is named, the attention's own mistakes inside a block too. (Their stated edge cases and stubs:
`test_checks.py`.)
"""
from __future__ import annotations

import pytest

import solutions
import variants as V
import variants_modern as W
from autograder.checks.modern import model as model


# ------------------------------------------------------------------------------------------------ block and model
@pytest.mark.parametrize("cls", [solutions.LlamaBlock, W.LlamaBlockStudent])
def test_llama_block_correct_answers_pass(cls):
    model.check_llama_block(cls)


@pytest.mark.parametrize("kind, diagnosis", [
    ("post_norm", "llama.post_norm"), ("no_attn_residual", "llama.missing_residual"),
    ("no_ffn_residual", "llama.missing_residual")])
def test_llama_block_mistakes(kind, diagnosis):
    V.fails_with(model.check_llama_block, V.mistake(W.LlamaBlockStudent, kind), diagnosis)


def test_llama_block_with_a_wrong_attention_names_the_attention_mistake():
    block = type("LlamaBlock", (W.LlamaBlockStudent,), {"ATTENTION": V.mistake(W.GQAStudent, "tile")})
    V.fails_with(model.check_llama_block, block, "gqa.kv_heads_tiled")


@pytest.mark.parametrize("cls", [solutions.ModernGPT, W.ModernGPTStudent])
def test_modern_gpt_correct_answers_pass(cls):
    model.check_modern_gpt(cls)


@pytest.mark.parametrize("kind, fragments", [
    ("no_causal", ["modern_gpt.no_causal_mask"]), ("no_final_norm", ["modern_gpt.no_final_norm"]),
    ("scaled", ["modern_gpt.embedding_scaled"]), ("untied", ["not tied", "modern_gpt.untied_head"]),
    ("positions", ["position table", "modern_gpt.position_table"])])
def test_modern_gpt_mistakes(kind, fragments):
    V.fails_with(model.check_modern_gpt, V.mistake(W.ModernGPTStudent, kind), *fragments)


# ------------------------------------------------------------------ the arguments rope_base and eps (fifth edition)
@pytest.mark.parametrize("check, cls, kind, criterion, diagnosis", [
    (model.check_llama_block, W.LlamaBlockStudent, "rope_base_ignored", "LlamaBlock.rope_base",
     "llama.rope_base_ignored"),
    (model.check_llama_block, W.LlamaBlockStudent, "eps_ignored", "LlamaBlock.eps", "llama.eps_ignored"),
    (model.check_modern_gpt, W.ModernGPTStudent, "rope_base_ignored", "ModernGPT.rope_base",
     "modern_gpt.rope_base_ignored"),
    (model.check_modern_gpt, W.ModernGPTStudent, "final_norm_eps", "ModernGPT.eps", "modern_gpt.eps_ignored"),
    (model.check_modern_gpt, W.ModernGPTStudent, "blocks_eps", "ModernGPT.eps", "modern_gpt.eps_ignored"),
], ids=["llama-rope_base", "llama-eps", "gpt-rope_base", "gpt-final_norm_eps", "gpt-blocks_eps"])
def test_an_argument_not_passed_on_is_named_and_costs_its_share_only(check, cls, kind, criterion, diagnosis):
    """Right with the defaults (the core passes), wrong with the drawn rope_base or eps: the argument is crossed,
    and the mistake named."""
    answer = V.mistake(cls, kind)
    V.fails_partially(check, answer, criterion)
    V.fails_with(check, answer, diagnosis)


@pytest.mark.parametrize("salt", [0, 1, 2, 3, 4, 6, 12])
def test_the_arguments_have_teeth_for_every_drawn_value(salt):
    """Whatever rope_base and eps a submission draws, ignoring either fails (and the reference passes): these salts
    draw each option of ROPE_BASES and EPSILONS, for the block and for the model."""
    from autograder.checks.kit.draws import salted

    with salted(salt):
        model.check_llama_block(solutions.LlamaBlock)
        model.check_modern_gpt(solutions.ModernGPT)
        for check, cls, kind in ((model.check_llama_block, W.LlamaBlockStudent, "rope_base_ignored"),
                                 (model.check_llama_block, W.LlamaBlockStudent, "eps_norm1_only"),
                                 (model.check_modern_gpt, W.ModernGPTStudent, "rope_base_first_block"),
                                 (model.check_modern_gpt, W.ModernGPTStudent, "final_norm_eps")):
            with pytest.raises(AssertionError):
                check(V.mistake(cls, kind))
