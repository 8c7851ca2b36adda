"""The public checks of notebook 09's LlamaBlock and ModernGPT pass correct answers (the reference and answers
written otherwise) and name the likely mistake otherwise."""
from __future__ import annotations

import sys
from pathlib import Path

import pytest

import solutions
from coursekit.checks import CheckFailed
from coursekit.checks.modern import model as model
from coursekit.mistakes import text_of

sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "autograder" / "checks"))
import variants_modern as W  # noqa: E402  (the hidden checks' student answers, reused)


def fails_with(check, obj, *fragments):
    with pytest.raises(CheckFailed) as info:
        check(obj)
    message = str(info.value)
    for fragment in fragments:
        assert fragment in message, message
    return message


def mistake(cls, name):
    return type(cls.__name__, (cls,), {"MISTAKE": name})


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
    fails_with(model.check_llama_block, mistake(W.LlamaBlockStudent, kind), fragment)


@pytest.mark.parametrize("kind, fragment", [
    ("no_causal", text_of("modern_gpt.no_causal_mask")), ("no_final_norm", text_of("modern_gpt.no_final_norm")),
    ("scaled", text_of("modern_gpt.embedding_scaled")), ("untied", "tied"), ("positions", "position table")])
def test_modern_gpt_hints(kind, fragment):
    fails_with(model.check_modern_gpt, mistake(W.ModernGPTStudent, kind), fragment)
