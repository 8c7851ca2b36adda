"""Per-student HTML feedback through nbgrader's generate_feedback, safe to open for instructors and students.

Feedback restores the hidden-test cells, which by the course's design hold only `check_x(obj)` calls, so it shows
each check's message but never test logic nor reference code.

Everything a student wrote reaches the page only made inert, through the course's allow-list
(`autograder.sandbox.inert.inert_html`: bleach, as nbconvert's `SanitizeHTML` uses it): written answers and other
markdown cells (after markdown is rendered: a `[link](javascript:...)` is markdown, not HTML) and every output
(HTML and markdown outputs through the allow-list; JavaScript, SVG, widget and unknown types dropped by
`SanitizeHTML`). What stays: text formatting, headings,
lists, tables, code, links to http(s)/mailto/#anchors, and images that are `data:image/png|jpeg|gif` (a student's
own figures are PNG outputs, kept as nbconvert renders them). An image output's metadata is cut down to a
numeric width/height (nbconvert writes them unquoted into the `<img>` tag). On top, each page starts with a
Content-Security-Policy that forbids every script (inline, `on*=` handlers, `javascript:` links) and every
request to another origin, so a page opened from the hub or from disk runs nothing.

A grade that still waits for a grader (a written answer not scored yet, or a notebook held for review) shows as
"not graded yet", never as 0, and the notebook's score as what it is so far and how many answers wait.

Math is rendered on the grading machine, without the network: each `$...$` / `$$...$$` of markdown becomes an
SVG drawn by matplotlib's mathtext (the LaTeX subset the course uses: fractions, roots, sub/superscripts, Greek,
`\\mathrm`, `\\top`...), embedded as a `data:image/svg+xml` image with the TeX as its alt text; a formula mathtext
cannot draw stays as its TeX source. (MathJax is not loaded: no script runs on these pages.)
"""
from __future__ import annotations

import base64
import functools
import html
import io
from pathlib import Path

from autograder.course import cells
from autograder.course.coursedir import nbgrader_api
from autograder.sandbox.inert import inert_html, image_metadata

CONTENT_SECURITY_POLICY = ("default-src 'none'; script-src 'none'; object-src 'none'; base-uri 'none'; "
                           "form-action 'none'; img-src data:; style-src 'unsafe-inline'; font-src 'self' data: file:")


def _inert_html_class():
    from nbconvert.preprocessors.sanitize import SanitizeHTML

    class InertStudentHTML(SanitizeHTML):
        """nbconvert's SanitizeHTML (markdown and raw cells, HTML/markdown outputs; JavaScript and other active
        output types removed) with the course's allow-list."""

        def sanitize_html_tags(self, html_str):
            return inert_html(html_str)

        def preprocess_cell(self, cell, resources, cell_index):
            # A markdown cell is cleaned AFTER it is rendered (markdown2html below ends with the same allow-list):
            # cleaning its source first escaped `<unk>` in a code span, and markdown then showed "&lt;unk&gt;".
            if cell.cell_type == "markdown":
                return cell, resources
            return super().preprocess_cell(cell, resources, cell_index)

        def sanitize_code_outputs(self, outputs):
            for output in outputs:  # nbconvert writes width/height unquoted into <img>: numbers only
                if output.get("output_type") in ("display_data", "execute_result"):
                    output["metadata"] = image_metadata(output.get("metadata") or {})
            return super().sanitize_code_outputs(outputs)

    return InertStudentHTML


# ------------------------------------------------------------------------------------ answers not graded yet
NOT_GRADED_YET = "not graded yet"


class Pending:
    """A score a grader has still to give, as the feedback template prints it (`score | float | round(2)`, with
    `float` below letting it through): "not graded yet", or for the notebook "7.0 so far; 1 answer not graded yet"."""

    def __init__(self, so_far: float | None = None, waiting: int = 1):
        self.so_far, self.waiting = so_far, waiting

    def __round__(self, ndigits=None):
        return self

    def __str__(self):
        if self.so_far is None:
            return NOT_GRADED_YET
        return f"{round(float(self.so_far), 2)} so far; {self.waiting} answer(s) {NOT_GRADED_YET}"


def waiting_warning(waiting: list[dict]) -> str:
    """The warning `autograder feedback` prints when answers still wait for a grader (`gradebook.queries.
    waiting_for_grader`), or "" when none does."""
    if not waiting:
        return ""
    notebooks = {(w["assignment"], w["notebook"], w["student"]) for w in waiting}
    return (f"warning: {len(waiting)} answer(s) in {len(notebooks)} notebook(s) wait for a grader: their feedback "
            f"says '{NOT_GRADED_YET}'; give their scores in formgrader (Manual Grading), then run "
            "`autograder feedback` again")


def _float_filter(value, default=0.0):
    """Jinja's `float`, except that a pending score stays pending."""
    if isinstance(value, Pending):
        return value
    try:
        return float(value)
    except (TypeError, ValueError):
        return default


def _grades_class():
    from nbgrader.preprocessors import GetGrades

    class GetGradesWithPending(GetGrades):
        """nbgrader's GetGrades; a grade that still needs a grader shows as "not graded yet", not as 0."""

        def preprocess(self, nb, resources):
            resources["nbgrader"]["waiting"] = 0
            nb, resources = super().preprocess(nb, resources)
            if resources["nbgrader"]["waiting"]:
                resources["nbgrader"]["score"] = Pending(resources["nbgrader"]["score"],
                                                         resources["nbgrader"]["waiting"])
            return nb, resources

        def _get_score(self, cell, resources):
            super()._get_score(cell, resources)
            grade = self.gradebook.find_grade(cells.grade_id(cell), self.notebook_id,
                                              self.assignment_id, self.student_id)
            if grade.needs_manual_grade:
                cell.metadata.nbgrader["score"] = Pending()
                resources["nbgrader"]["waiting"] += 1

    return GetGradesWithPending


# ---------------------------------------------------------------------------------------------------- math
@functools.lru_cache(maxsize=4096)
def math_image(tex: str, display: bool = False) -> str | None:
    """An <img> of `tex` drawn by matplotlib's mathtext (SVG, base64), or None when mathtext cannot draw it."""
    import matplotlib

    matplotlib.use("Agg", force=False)
    from matplotlib import mathtext
    from matplotlib.font_manager import FontProperties

    tex = tex.strip()
    if not tex or "\n\n" in tex or len(tex) > 2000:
        return None
    buffer = io.BytesIO()
    try:
        depth = mathtext.math_to_image(f"${' '.join(tex.split())}$", buffer, prop=FontProperties(size=12 if not
                                       display else 14), format="svg", dpi=72)
    except Exception:  # noqa: BLE001 - unsupported TeX (environments, unknown macros): keep the source
        return None
    data = base64.b64encode(buffer.getvalue()).decode("ascii")
    style = "display:block; margin:0.5em auto" if display else f"vertical-align:-{float(depth or 0):.1f}px"
    return (f'<img class="math" src="data:image/svg+xml;base64,{data}" alt="{html.escape(tex, quote=True)}" '
            f'style="{style}">')


def _renderer_class():
    from nbconvert.filters.markdown_mistune import IPythonRenderer

    class MathImageRenderer(IPythonRenderer):
        """nbconvert's markdown renderer, with math drawn as images instead of left for MathJax."""

        def inline_math(self, body: str) -> str:
            return math_image(body) or f"${self.escape_html(body)}$"

        def block_math(self, body: str) -> str:
            return math_image(body, display=True) or f"$${self.escape_html(body)}$$"

        def latex_environment(self, name: str, body: str) -> str:
            return f"\\begin{{{self.escape_html(name)}}}{self.escape_html(body)}\\end{{{self.escape_html(name)}}}"

    return MathImageRenderer


def _markdown2html():
    from jinja2 import pass_context
    from nbconvert.filters.markdown_mistune import MarkdownWithMath

    renderer_class = _renderer_class()

    @pass_context
    def markdown2html(context, source):
        """HTMLExporter.markdown2html with math as images, then the allow-list (markdown makes links too)."""
        cell = context.get("cell", {})
        renderer = renderer_class(escape=False, attachments=cell.get("attachments", {}), embed_images=False,
                                  path="", anchor_link_text="¶", exclude_anchor_links=False)
        return inert_html(MarkdownWithMath(renderer=renderer).render(source))

    return markdown2html


def configure(config) -> None:
    """Make nbgrader's GenerateFeedback (through the API's `config`) write safe pages."""
    from nbconvert.preprocessors import CSSHTMLHeaderPreprocessor

    config.GenerateFeedback.preprocessors = [_grades_class(), CSSHTMLHeaderPreprocessor, _inert_html_class()]
    config.SanitizeHTML.enabled = True  # nbconvert's preprocessors are off unless enabled (its subclass too)
    config.HTMLExporter.filters = {"markdown2html": _markdown2html(), "float": _float_filter}
    config.HTMLExporter.mathjax_url = ""


def add_content_security_policy(page: Path) -> None:
    """Put the page's Content-Security-Policy first in its <head> (before anything of the notebook)."""
    text = page.read_text(encoding="utf-8")
    meta = f'<meta http-equiv="Content-Security-Policy" content="{CONTENT_SECURITY_POLICY}">'
    if meta in text:
        return
    at = text.find("<head>")
    if at < 0:
        raise ValueError(f"{page}: no <head> in the feedback page")
    at += len("<head>")
    page.write_text(text[:at] + "\n" + meta + text[at:], encoding="utf-8")


def generate_feedback(course_dir, assignment: str, db_url: str | None = None, students=None) -> dict:
    """Feedback for every autograded student of `assignment`; returns {"written": [...], "failed": {student: log}}."""
    course_dir = Path(course_dir).resolve()
    api = nbgrader_api(course_dir, db_url)
    configure(api.config)
    autograded = course_dir / "autograded"
    done = sorted(p.parent.name for p in autograded.glob(f"*/{assignment}") if any(p.glob("*.ipynb"))) \
        if autograded.is_dir() else []
    written, failed = [], {}
    for student in done:
        if students and student not in students:
            continue
        result = api.generate_feedback(assignment, student_id=student, force=True)
        if result["success"]:
            pages = sorted((course_dir / "feedback" / student / assignment).glob("*.html"))
            for page in pages:
                add_content_security_policy(page)
            written.extend(str(p) for p in pages)
        else:
            failed[student] = (result.get("error") or "") + result.get("log", "")[-2000:]
    return {"written": written, "failed": failed}
