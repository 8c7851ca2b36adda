"""What a student sees when the notebooks run: figures readable at the notebook's width, prose that quotes the
numbers the cells print.

Both read one full-mode run of each source notebook (the `notebook_runner` of tests/course/conftest.py, shared with
test_runtime.py): its figures are checked as they are displayed (tests/fixtures/figure_layout.py) and its markdown
against its outputs (tests/fixtures/prose_numbers.py). The checkers themselves are tested on figures and notebooks
built here, so a checker that cannot fail is caught.
"""
from __future__ import annotations

import re
from pathlib import Path

import matplotlib
import nbformat
import pytest
from figure_layout import MIN_POINTS, NOTEBOOK_WIDTH_PX, problems
from prose_numbers import unprinted

from autograder.publish.release import find_assignments

matplotlib.use("Agg")
from matplotlib.figure import Figure  # noqa: E402

ASSIGNMENTS = find_assignments(Path(__file__).resolve().parents[2] / "course")

# Numbers in prose that are facts, not a run's result (nothing prints them, and nothing should).
FACTS = {
    "06_decoder_and_transformer": {"15": "BERT selects 15% of the tokens for its masked-token objective",
                                   "80": "... and shows 80% of those as [MASK]", "10": "... 10% random, 10% kept"},
    "07_yelp_classifier": {"1.85": "the synthetic generator's weight of the clause that wins a contrast (synth.py)",
                           "0.15": "... and of the clause it beats"},
    "08_gpt_language_model": {"4.17": "ln 65: the loss of a uniform guess over the 65 characters"},
    "09_modern_block": {"2.4": "the PyTorch version that added nn.RMSNorm"},
}


@pytest.mark.slow
@pytest.mark.parametrize("assignment", ASSIGNMENTS)
def test_every_figure_is_readable_at_notebook_width(assignment, executed_notebook):
    _, figures = executed_notebook(assignment)
    assert figures, f"{assignment}: no figure was checked (every notebook draws some): is the probe cell working?"
    found = [f"cell {figure['cell']}: {problem}" for figure in figures for problem in figure["problems"]]
    assert not found, f"{assignment}: figures unreadable at {NOTEBOOK_WIDTH_PX} px:\n" + "\n".join(found)


@pytest.mark.slow
@pytest.mark.parametrize("assignment", ASSIGNMENTS)
def test_prose_quotes_only_numbers_the_notebook_prints(assignment, executed_notebook):
    notebook, _ = executed_notebook(assignment)
    missing = unprinted(notebook, allowed=set(FACTS.get(assignment, {})))
    assert not missing, f"{assignment}:\n" + "\n".join(missing)


@pytest.mark.slow
def test_07s_transformer_beats_the_tfidf_baseline_as_its_prose_says(executed_notebook):
    """07 says the Transformer beats TF-IDF + logistic regression on the synthetic set (its word order decides the
    rating): the default run shows it by a clear margin (3 points of accuracy)."""
    notebook, _ = executed_notebook("07_yelp_classifier")
    assert "The Transformer beats TF-IDF on the synthetic set" in "".join(
        c.source for c in notebook.cells if c.cell_type == "markdown")
    printed = "".join(o.get("text", "") for c in notebook.cells if c.cell_type == "code" for o in c.outputs)
    (tfidf, transformer), = re.findall(r"TF-IDF \+ logistic regression: ([0-9.]+) .*our Transformer: ([0-9.]+)",
                                       printed)
    assert float(transformer) >= float(tfidf) + 0.03, (transformer, tfidf)


# --- the checkers fail where they should -------------------------------------------------------------------------

def _figure(width=6.0):
    figure = Figure(figsize=(width, 2.0))
    return figure, figure.add_subplot()


def test_layout_checker_passes_a_plain_readable_figure():
    figure, ax = _figure()
    ax.plot([1, 2, 3], [3, 1, 2])
    ax.set_xlim(1.5, 2.5)  # tick labels of ticks outside the view are not drawn, so they cannot overlap
    ax.set_xlabel("epoch")
    ax.set_ylabel("loss")
    assert problems(figure) == []


def test_layout_checker_finds_text_that_leaves_its_box():
    from matplotlib.patches import FancyBboxPatch

    figure, ax = _figure()
    ax.set_axis_off()
    ax.set_xlim(0, 4)
    ax.add_patch(FancyBboxPatch((1, 0.4), 0.5, 0.2, boxstyle="round,pad=0"))
    ax.text(1.25, 0.5, "masked mean over real tokens", ha="center", va="center", fontsize=10)
    assert any("leaves its box" in p for p in problems(figure))
    ax.text(0.9, 0.5, "arrow label", ha="left", va="center", fontsize=10)  # from outside, across the box's edge
    assert any("runs into a box" in p for p in problems(figure))


def test_layout_checker_finds_overlapping_labels_and_small_text():
    figure, ax = _figure()
    ax.text(0.5, 0.5, "first label", fontsize=10)
    ax.text(0.52, 0.5, "second label", fontsize=10)
    assert any("overlap" in p for p in problems(figure))
    wide, ax = _figure(width=NOTEBOOK_WIDTH_PX / 100 * 2)  # shown at half its size
    ax.set_title("a title", fontsize=12)
    assert any(f"< {MIN_POINTS}" in p or "pt as shown" in p for p in problems(wide))


def _notebook(prose: str, printed: str):
    notebook = nbformat.v4.new_notebook()
    cell = nbformat.v4.new_code_cell("print(score)")
    cell.outputs = [nbformat.v4.new_output("stream", name="stdout", text=printed)]
    notebook.cells = [cell, nbformat.v4.new_markdown_cell(prose)]
    return notebook


def test_prose_checker_fails_on_a_remembered_number_and_passes_a_rounded_one():
    assert unprinted(_notebook("in our run *sister* moved the score by up to about 0.7 stars", "max shift 0.287\n"))
    assert not unprinted(_notebook("in our run it moved the score by up to about 0.29 stars", "max shift 0.287\n"))
    assert not unprinted(_notebook("accuracy 48.1% after two epochs", "test accuracy 0.4812\n"))
    assert unprinted(_notebook("accuracy 0.505 after two epochs", "test accuracy 0.4812\n"))
    assert not unprinted(_notebook("code: `lr = 0.003` and $x^{0.5}$", "nothing\n"))
