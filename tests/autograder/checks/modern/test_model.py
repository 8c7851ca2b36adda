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
