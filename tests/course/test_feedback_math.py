"""Every formula of every notebook is drawn on the feedback pages, none is left as raw LaTeX.

Feedback pages are rendered offline: `autograder.publish.feedback` draws each `$...$` with matplotlib's mathtext and
leaves a formula it cannot draw as its TeX source (no MathJax runs on those pages). A student then reads
`\\tfrac{2}{3}` instead of a fraction. This renders each source notebook with the HTML exporter configured as the
grader configures it and looks for TeX outside the drawn images. The scan itself is tested on a notebook with a
formula mathtext cannot draw, so a scan that cannot fail is caught.
"""
from __future__ import annotations

import re
from pathlib import Path

import nbformat
import pytest

from autograder.publish.release import find_assignments

COURSE = Path(__file__).resolve().parents[2] / "course"
ASSIGNMENTS = find_assignments(COURSE)

_IMAGE = re.compile(r"<img\b[^>]*>", re.S)
_RAW_TEX = re.compile(r"\$\$?[^$<]*?\\[A-Za-z]+[^$<]*?\$\$?|\\(?:frac|tfrac|text|big|mathrm|sqrt|cdot)\b")


def raw_tex(notebook) -> list[str]:
    """The pieces of TeX that the feedback exporter leaves undrawn in `notebook`'s page."""
    from nbconvert import HTMLExporter
    from traitlets.config import Config

    from autograder.publish import feedback

    config = Config()
    feedback.configure(config)
    page, _ = HTMLExporter(config=config).from_notebook_node(notebook)
    body = page[page.find("<body"):]
    body = re.sub(r"<script\b.*?</script>|<style\b.*?</style>", " ", body, flags=re.S)
    return [m.group(0)[:120] for m in _RAW_TEX.finditer(_IMAGE.sub(" ", body))]


def test_the_scan_finds_a_formula_mathtext_cannot_draw():
    notebook = nbformat.v4.new_notebook(cells=[nbformat.v4.new_markdown_cell(
        "drawn: $\\frac{1}{d}$; not drawn: $\\tfrac{2}{3} \\cdot x$")])
    found = raw_tex(notebook)
    assert found and "tfrac" in found[0], found
    assert not raw_tex(nbformat.v4.new_notebook(cells=[nbformat.v4.new_markdown_cell("fine: $\\sqrt{d_k}$")]))


@pytest.mark.notebooks
@pytest.mark.parametrize("assignment", ASSIGNMENTS)
def test_every_formula_renders_on_the_feedback_page(assignment):
    notebook = nbformat.read(COURSE / "source" / assignment / f"{assignment}.ipynb", as_version=4)
    found = raw_tex(notebook)
    assert not found, f"{assignment}: TeX left undrawn on the feedback page:\n" + "\n".join(found)
