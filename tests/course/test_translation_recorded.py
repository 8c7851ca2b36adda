"""Notebook 10 quotes the recorded runs of bench/translate.py (data/translation_runs.json): the numbers its prose
quotes from them must be numbers its cells print from them, and what it concludes from them must hold for them.

The cells that read the recorded runs train nothing, so they run here in seconds with the notebook's own code
(taken from the .ipynb, so an edit of the notebook is tested) on the recorded file. The slow prose test of
test_notebook_readability.py checks the rest of the notebook's prose after a full run; this one keeps the recorded
numbers honest on every run of the fast suite, and checks the conclusions the prose draws from them.
"""
from __future__ import annotations

import contextlib
import io

import nbformat
import numpy as np
import pytest
from notebook_cells import SOURCE, notebook_cell, plt, run_showing
from prose_numbers import unprinted

from coursekit.translation_training import BUDGETS, load_translation_runs

NOTEBOOK = "10_translation"
RECORDED_CELLS = ["locked_24", "locked_22", "locked_25"]   # the warm-up runs, label smoothing, calibration
# the prose that quotes them: section 3's reading, section 8's answer and calibration, written answer 1, the summary
QUOTING_CELLS = ["md-14", "md-35", "md-calibration-reading", "written_smoothing_perplexity", "md-40"]


@pytest.fixture(scope="module")
def printed():
    """{cell id: what it printed}, the recorded cells run in order as the notebook runs them (student budget)."""
    from solutions.translation import noam_lr

    namespace = {"np": np, "plt": plt, "noam_lr": noam_lr, "BUDGET": BUDGETS["student"]}
    out = {}
    try:
        for cell_id in RECORDED_CELLS:
            buffer = io.StringIO()
            with contextlib.redirect_stdout(buffer):
                run_showing([(cell_id, notebook_cell(NOTEBOOK, cell_id))], namespace)
            out[cell_id] = buffer.getvalue()
    finally:
        plt.close("all")
    return out


def _markdown(cell_id: str) -> str:
    return notebook_cell(NOTEBOOK, cell_id)


def test_the_prose_quotes_only_numbers_the_recorded_cells_print(printed):
    notebook = nbformat.v4.new_notebook()
    for cell_id, text in printed.items():
        cell = nbformat.v4.new_code_cell(notebook_cell(NOTEBOOK, cell_id))
        cell.outputs = [nbformat.v4.new_output("stream", name="stdout", text=text)]
        notebook.cells.append(cell)
    notebook.cells += [nbformat.v4.new_markdown_cell(_markdown(cell_id)) for cell_id in QUOTING_CELLS]
    missing = unprinted(notebook)
    assert not missing, "\n".join(missing)


def test_the_quoted_cells_exist_and_quote_something():
    cells = {c.get("id"): c for c in nbformat.read(SOURCE / NOTEBOOK / f"{NOTEBOOK}.ipynb", as_version=4).cells}
    for cell_id in RECORDED_CELLS + QUOTING_CELLS:
        assert cell_id in cells, f"{cell_id} is gone: update this test with the notebook"
    assert "28.05" in _markdown("md-35") and "9.33" in _markdown("md-35"), "section 8 quotes its numbers"


def _spread(values):
    return float(np.std(values, ddof=1))


def test_label_smoothing_does_not_pay_in_bleu_at_this_budget_and_costs_perplexity():
    """Section 8 answers "no": the BLEU difference lies inside the seeds' spread, the perplexity difference outside."""
    runs = [r for r in load_translation_runs()["runs"] if r["budget"] == "student"]
    by = {eps: [r for r in runs if r["label_smoothing"] == eps] for eps in (0.0, 0.1)}
    assert all(len(rows) >= 3 for rows in by.values())
    bleu = {eps: [r["bleu_beam"] for r in rows] for eps, rows in by.items()}
    ppl = {eps: [r["val_ppl"][-1] for r in rows] for eps, rows in by.items()}
    assert abs(np.mean(bleu[0.1]) - np.mean(bleu[0.0])) < max(_spread(bleu[0.1]), _spread(bleu[0.0]))
    assert np.mean(ppl[0.1]) - np.mean(ppl[0.0]) > _spread(ppl[0.1]) + _spread(ppl[0.0])
    assert "At this budget, no" in _markdown("md-35")


def test_the_warmup_runs_show_what_section_3_says():
    """Without the warm-up every seed writes the same distribution at every position from the first evaluation on
    and stays near the word frequencies' loss; with it, at least two seeds learn below that loss."""
    record = load_translation_runs()["warmup"]
    learned = 0
    for run in record["runs"]:
        without, with_ = run["schedules"]["without warm-up"], run["schedules"]["with warm-up"]
        assert without["lr"][run["config"]["warmup_steps"]:] == with_["lr"][run["config"]["warmup_steps"]:]
        assert max(without["spread"]) < 0.005
        assert abs(without["val_loss"][-1] - run["unigram_loss"]) < 0.1
        learned += with_["val_loss"][-1] < run["unigram_loss"] - 0.1 and with_["spread"][-1] > 0.1
    assert learned >= 2
    assert "two seeds of three" in _markdown("md-14")


def test_the_calibration_runs_show_what_section_8_says():
    """The retrained models are the recorded ones (same validation perplexity); without smoothing every seed is
    over-confident on average, with it every seed is under-confident, and the expected calibration errors of the
    two settings lie within each other's spread."""
    recorded = load_translation_runs()
    runs = {(r["label_smoothing"], r["seed"]): r for r in recorded["runs"] if r["budget"] == "student"}
    ece, gap = {0.0: [], 0.1: []}, {0.0: [], 0.1: []}
    for row in recorded["calibration"]["runs"]:
        assert abs(row["val_ppl"] - runs[(row["label_smoothing"], row["seed"])]["val_ppl"][-1]) < 1e-3
        bins = row["bins"]
        n = sum(bins["count"])
        ece[row["label_smoothing"]].append(sum(abs(k - f) for k, f in zip(bins["correct"], bins["confidence"])) / n)
        gap[row["label_smoothing"]].append((sum(bins["confidence"]) - sum(bins["correct"])) / n)
    assert len(gap[0.0]) >= 3 and len(gap[0.1]) >= 3
    assert min(gap[0.0]) > 0 > max(gap[0.1])
    assert abs(np.mean(ece[0.1]) - np.mean(ece[0.0])) < max(_spread(ece[0.1]), _spread(ece[0.0]))
    reading = _markdown("md-calibration-reading")
    assert "**over-confident**" in reading and "**under-confident**" in reading and "cannot tell" in reading
