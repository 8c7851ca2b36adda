"""Notebook 09's comparison helpers: the parameter formulas count what the models hold, the matched width closes
the gap, and the recorded runs are complete and say how they were made."""
from __future__ import annotations

import json

import pytest

from coursekit import modern_comparison as mc
from solutions.gpt import GPT
from solutions.modern import ModernGPT


@pytest.mark.parametrize("vocab, d_model, heads, d_ff, layers, max_len", [(65, 128, 4, 512, 4, 64),
                                                                          (65, 64, 4, 256, 2, 64),
                                                                          (11, 24, 6, 20, 3, 9)])
def test_the_gpt_formula_counts_its_parameters(vocab, d_model, heads, d_ff, layers, max_len):
    model = GPT(vocab, d_model, heads, d_ff, layers, max_len)
    assert mc.parameter_count(model) == mc.gpt_parameters(vocab, d_model, d_ff, layers, max_len)


@pytest.mark.parametrize("vocab, d_model, heads, kv, d_ff, layers", [(65, 128, 4, 2, 344, 4), (65, 64, 4, 2, 206, 2),
                                                                     (11, 24, 6, 3, 20, 3), (11, 24, 6, 1, 7, 1)])
def test_the_modern_formula_counts_its_parameters(vocab, d_model, heads, kv, d_ff, layers):
    model = ModernGPT(vocab, d_model, heads, kv, d_ff, layers)
    assert mc.parameter_count(model) == mc.modern_parameters(vocab, d_model, heads, kv, d_ff, layers)


def test_the_matched_width_closes_the_gap_to_within_one_step():
    target = mc.parameter_count(GPT(65, max_len=64))                     # 08's GPT at the student budget
    d_ff = mc.matched_d_ff(target, 65, 128, 4, 2, 4)
    assert d_ff == 393
    step = 3 * 128 * 4                                                   # one more unit of d_ff, in every layer
    assert abs(mc.modern_parameters(65, 128, 4, 2, d_ff, 4) - target) <= step / 2


def test_the_recorded_runs_are_complete_and_matched():
    results = mc.load_results()
    assert results["meta"]["recorded"]
    by = {}
    for run in results["runs"]:
        by.setdefault((run["budget"], run["model"]), []).append(run)
        assert run["val_step"] and len(run["val_step"]) == len(run["val_loss"]) and run["sample"]
        assert run["bits_per_char"] == pytest.approx(run["final_val_loss"] / 0.6931471805599453)
    for budget in {b for b, _ in by}:
        gpt, modern = by[(budget, "GPT")], by[(budget, "ModernGPT")]
        assert sorted(r["seed"] for r in gpt) == sorted(r["seed"] for r in modern), budget
        assert abs(gpt[0]["parameters"] - modern[0]["parameters"]) / gpt[0]["parameters"] < 0.002  # one d_ff step
        assert all(r["longer_windows"] for r in modern)


def test_results_path_prefers_the_course_data_dir(tmp_path, monkeypatch):
    (tmp_path / mc.RESULTS_FILE).write_text(json.dumps({"meta": {"recorded": "x"}, "runs": []}))
    monkeypatch.setenv("COURSE_DATA_DIR", str(tmp_path))
    assert mc.results_path() == tmp_path / mc.RESULTS_FILE
    assert mc.load_results()["runs"] == []
