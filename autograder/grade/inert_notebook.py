"""Make a graded notebook inert before nbgrader stores it (issue #32, doors 1 and 7).

The autograded notebook is what nbgrader's formgrader shows an instructor (Manual Grading), rendered by nbconvert's
`formgrade` template with nothing sanitised, in the instructor's logged-in session. So everything in it that a
student controls is made harmless here, once, in the worker, after scoring:

- outputs (every code cell's, locked cells included: the student's code produced them): JavaScript, SVG, widget
  and unknown types are removed; HTML goes through the course's allow-list (`autograder.sandbox.inert`);
  markdown and LaTeX outputs stay only when they render to nothing active, else they become their plain text;
  a `<style>` block of an HTML output (pandas puts one in every DataFrame) is dropped without a flag;
  each output's metadata is cut down to a numeric `width`/`height` per image type (nbconvert writes those two
  unquoted into the `<img>` tag, so any other text there is an attribute of the student's choosing);
- markdown and raw cells a student wrote (every one whose text is not exactly a locked cell of the gradebook):
  kept as written when their rendering (nbconvert's own markdown renderer, as the formgrader uses it) holds
  nothing active; otherwise a markdown cell's raw HTML goes through the allow-list (shown as text) and its
  links to other schemes are removed, keeping its formatting and math, and where even that renders active (or
  for a raw cell) the cell becomes its own text, escaped, in a `<pre>` block: the instructor reads what was
  there and nothing runs;
- cell metadata: an nbgrader `grade_id` is written by the formgrade template into HTML attributes, so one that is
  not a plain identifier is dropped with the cell's nbgrader metadata (scores are already saved);
- notebook metadata: widget state (a script block of the page) is dropped.

"Active" means: an element that runs, loads, embeds or takes input (script, iframe, svg, style, object,
form...), an `on*=` handler, a `srcset`, a `style` beyond the allow-list's CSS properties (`position` above all:
a fake score laid over the page), a class of the page's own fixed layout (bootstrap's `navbar-fixed-top`,
`modal`...), a URL whose scheme is not http(s)/mailto/attachment (or, for images, data:image/png|jpeg|gif), or a
MathJax command that makes links or styles (`\\href`, `\\url`, `\\style`, `\\class`, `\\cssId`, `\\unicode`).
Removing active content returns a review flag per cell, so the instructor sees that something was there.
"""
from __future__ import annotations

import re

from autograder.course import cells
from autograder.grade.tamper_scan import Flag
from autograder.sandbox.inert import active_parts, as_text_block, inert_output, inert_markdown, render_markdown

FLAG_CODE = "active-content"
SAFE_GRADE_ID = re.compile(r"^[A-Za-z0-9_.\-]{1,200}$")


def make_inert(nb, trusted_sources=()) -> list[Flag]:
    """Make `nb` (a graded notebook) inert in place, as the module doc says. `trusted_sources`: the texts of the
    gradebook's locked cells (the instructor's own text, shown as written). Returns one review flag per cell
    where active content was removed."""
    trusted = {str(s).strip() for s in trusted_sources}
    flags = []
    nb.metadata.pop("widgets", None)
    for index, cell in enumerate(nb.cells):
        meta = cell.setdefault("metadata", {})
        found = []
        nbgrader = cells.nbgrader_metadata(cell)
        if "grade_id" in nbgrader and not SAFE_GRADE_ID.match(str(nbgrader["grade_id"])):
            found.append("nbgrader grade_id that is not an identifier")
            del meta["nbgrader"]
        where = cells.grade_id(cell) or f"cell {index}"
        if cell.cell_type == "code":
            for output in cell.get("outputs", []):
                found += inert_output(output)
        elif cell.cell_type in ("markdown", "raw") and cell.source.strip() not in trusted:
            rendered = render_markdown(cell.source, cell.get("attachments")) if cell.cell_type == "markdown" \
                else cell.source
            reasons = active_parts(rendered)
            if reasons:
                found += [f"{cell.cell_type} cell: {r}" for r in reasons]
                cell.source = inert_markdown(cell.source) if cell.cell_type == "markdown" \
                    else as_text_block(cell.source)
                cell.pop("attachments", None)
            if cell.cell_type == "raw":
                meta.pop("format", None)
                meta.pop("raw_mimetype", None)
        if found:
            shown = "; ".join(dict.fromkeys(found))
            flags.append(Flag(FLAG_CODE, "review", where,
                              f"active content removed before the formgrader shows it (script, handler or "
                              f"style of the page): {shown[:300]}"))
    return flags


def _preprocessor_class():
    from nbconvert.preprocessors import Preprocessor
    from traitlets import Bool

    class MakeInert(Preprocessor):
        """`make_inert` as an nbconvert preprocessor, for an exporter that renders notebooks nobody made inert
        before (the formgrader's, through deploy/jupyter/instructor/jupyter_server_config.py). No text is trusted
        there: an instructor's cell is only rewritten when it renders active."""

        enabled = Bool(True, help="make the notebook inert before rendering it").tag(config=True)

        def preprocess(self, nb, resources):
            make_inert(nb)
            return nb, resources

    return MakeInert


def __getattr__(name):  # `autograder.grade.inert_notebook.MakeInert` without importing nbconvert at import time
    if name == "MakeInert":
        return _preprocessor_class()
    raise AttributeError(name)
