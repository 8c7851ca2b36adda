"""Issue #33: formulas are typeset in nbgrader's formgrader on a machine that reaches nothing but itself.

nbgrader's formgrade template loads MathJax from a CDN. The course service and instructor servers serve it
themselves (the Jupyter Server extension jupyter_server_mathjax, pinned in constraints.txt) and the instructor
server config (deploy/jupyter/instructor/jupyter_server_config.py, loaded here as the deployment loads it) points the
template at that copy and allows scripts from the server only.

A one-student class of the synthetic course, whose source notebook has an inline and a display formula and whose
student wrote a formula into her written answer, is graded for real; a Jupyter server with nbgrader's extensions,
started with the instructor config and the instructor's jupyter_server_config.json, serves the course root. Every
request of the browser to anything but 127.0.0.1 is refused and recorded. On the Manual Grading page of her
notebook, MathJax typesets every formula (one math/tex script and one MathJax output element per formula, no
MathJax error), no TeX source is left in the page's text, no request left the machine or failed, the policy names
no other origin, and no script error happened. Screenshot: build/browser-screenshots/<session>/formgrader_mathjax.png.

The course's own feedback page (autograder.publish.feedback: math drawn as images, no script) is unaffected when
`autograder feedback` runs where the config's JUPYTER_PATH is set (the course service's terminal).
"""
from __future__ import annotations

import os
import re
import shutil
import sys
from pathlib import Path

import nbformat
import pytest
from nbformat.v4 import new_markdown_cell
from nbgrader.api import Gradebook
from traitlets.config import Config

from autograder.cli import main
from autograder.course.coursedir import REPO_ROOT, course_id, default_db_url
from autograder.course.units import GiB
from autograder.grade.engine import grade
from autograder.sandbox.limits import Limits
from synthetic_course import SYNTHETIC_ASSIGNMENT as PS1
from synthetic_course import release_assignment, synthetic_course, synthetic_submission

INSTRUCTOR = Path(REPO_ROOT) / "deploy" / "jupyter" / "instructor"
SERVER_CONFIG = INSTRUCTOR / "jupyter_server_config.py"
LIMITS = Limits(cell_timeout=30, notebook_timeout=120, memory_bytes=3 * GiB, startup_timeout=120)
ANSWER_ID = "written_answer"
PROSE = ("The weights are $\\mathrm{softmax}(x)_i = \\frac{e^{x_i}}{\\sum_j e^{x_j}}$, and attention is\n\n"
         "$$\\mathrm{Attention}(Q, K, V) = \\mathrm{softmax}\\left(\\frac{QK^\\top}{\\sqrt{d_k}}\\right)V$$")
ANSWER = "Dividing by $\\sqrt{d_k}$ keeps the variance of $q \\cdot k$ near $1$."
FORMULAS = 5  # two in the prose, three in the answer
# MathJax's HTML-CSS output declares a font "MathJax_Blank" at url('about:blank') to measure text without a font;
# the policy refuses it (font-src 'self' data:), which changes nothing: the one refusal allowed here
MATHJAX_BLANK_FONT = ("about:blank", "font")
TEX_LEFT = re.compile(r"\$|\\frac|\\sqrt|\\mathrm|\\cdot")


@pytest.fixture(scope="module")
def course(tmp_path_factory, chromium_path):
    root = tmp_path_factory.mktemp("formgrader-mathjax")
    course = synthetic_course(root / "course", release=False)
    path = course / "source" / PS1 / f"{PS1}.ipynb"
    nb = nbformat.read(path, as_version=4)
    nb.cells.insert(1, new_markdown_cell(PROSE, metadata={"nbgrader": {
        "grade_id": "formulas", "grade": False, "solution": False, "locked": True, "schema_version": 3,
        "task": False}}))
    nb.cells.insert(-1, new_markdown_cell("Why divide by $\\sqrt{d_k}$?", metadata={"nbgrader": {
        "grade_id": ANSWER_ID, "grade": True, "solution": True, "locked": False, "points": 2, "schema_version": 3,
        "task": False}}))
    nbformat.write(nb, path)
    release_assignment(course, PS1)
    submission = nbformat.reads(synthetic_submission(course, "solution"), as_version=4)
    for cell in submission.cells:
        if cell.metadata.get("nbgrader", {}).get("grade_id") == ANSWER_ID:
            cell.source = ANSWER
    (root / "inbox" / "ann" / PS1).mkdir(parents=True)
    nbformat.write(submission, root / "inbox" / "ann" / PS1 / f"{PS1}.ipynb")
    assert main(["collect", str(root / "inbox"), "--course-dir", str(course)]) == 0
    summary = grade(course, PS1, workers=1, limits=LIMITS, progress=False)
    assert not summary.failed, summary.failed
    return course


def test_formgrader_typesets_formulas_offline(course, start_lab, browser, screenshot_dir, tmp_path):
    with Gradebook(default_db_url(course), course_id(course)) as gb:
        submission_id = gb.find_submission_notebook(PS1, PS1, "ann").id
    home = tmp_path / "home"
    (home / ".jupyter").mkdir(parents=True)
    # the instructor config folder's server settings (extensions enabled) as the user's own: no JUPYTER_PATH here,
    # the config file must set it
    shutil.copy(INSTRUCTOR / "jupyter_server_config.json", home / ".jupyter" / "jupyter_server_config.json")
    env = {k: v for k, v in os.environ.items() if k != "JUPYTER_PATH"}
    env.update(HOME=str(home), JUPYTER_CONFIG_DIR=str(home / ".jupyter"))
    with start_lab(Path(sys.executable).parent, course, env=env, args=(f"--config={SERVER_CONFIG}",),
                   log=screenshot_dir / "formgrader_mathjax.log") as server:
        context = browser.new_context(viewport={"width": 1280, "height": 900},
                                      extra_http_headers={"Authorization": f"token {server.token}"})
        tab = context.new_page()
        outside, failed, errors, console = [], [], [], []
        tab.route(re.compile(r"^https?://(?!127\.0\.0\.1[:/])"),
                  lambda route: (outside.append(route.request.url), route.abort()))
        tab.on("pageerror", lambda e: errors.append(str(e)))
        tab.on("console", lambda m: console.append(m.text) if m.type == "error" and not (
            "about:blank" in m.text and "font" in m.text) else None)
        tab.on("requestfailed", lambda r: None if (r.url, r.resource_type) == MATHJAX_BLANK_FONT
               else failed.append((r.url, r.failure, r.resource_type)))
        tab.on("response", lambda r: failed.append((r.url, r.status)) if r.status >= 400 else None)
        response = tab.goto(server.page_url(f"formgrader/submissions/{submission_id}/"), wait_until="load")
        assert response.status == 200
        policy = response.headers.get("content-security-policy", "")
        assert "script-src 'self' 'unsafe-inline' 'unsafe-eval';" in policy and "http" not in policy, policy
        tab.locator(f"input.score#{ANSWER_ID}").wait_for(timeout=60_000)  # the formgrader's own scripts ran
        tab.wait_for_function(
            f"() => window.MathJax && MathJax.isReady && MathJax.Hub.queue.pending === 0 && "
            f"document.querySelectorAll('.MathJax, .MathJax_Display').length >= {FORMULAS}", timeout=60_000)
        tab.wait_for_timeout(500)
        tab.screenshot(path=str(screenshot_dir / "formgrader_mathjax.png"), full_page=True)
        typeset = tab.evaluate("""() => ({
            tex: document.querySelectorAll('script[type^="math/tex"]').length,
            inline: document.querySelectorAll('span.MathJax').length,
            display: document.querySelectorAll('div.MathJax_Display').length,
            errors: document.querySelectorAll('.MathJax_Error, merror, .merror').length,
            source: MathJax.Ajax.config.root,
        })""")
        text = tab.inner_text("#notebook-container") if tab.locator("#notebook-container").count() else \
            tab.inner_text("body")
        context.close()
    assert typeset["tex"] == FORMULAS and typeset["inline"] == FORMULAS and typeset["display"] == 1, typeset
    assert typeset["errors"] == 0, typeset
    assert typeset["source"].startswith(server.url) and typeset["source"].endswith("/static/jupyter_server_mathjax")
    assert "Dividing by" in text and "near" in text, text  # her answer is on the page...
    assert not TEX_LEFT.findall(text), TEX_LEFT.findall(text)  # ...with no TeX left as text
    assert outside == [], outside  # nothing asked of another machine (no CDN)
    assert failed == [], failed  # and nothing the page asked of its server was missing
    assert errors == [] and console == [], (errors, console)


def test_own_feedback_is_unchanged_where_the_config_sets_jupyter_path(course, monkeypatch, tmp_path):
    """`autograder feedback` in the course service's terminal (the config's JUPYTER_PATH inherited) writes the same
    page as without it: math drawn as images, nothing of the formgrade template's MathJax loader."""
    monkeypatch.setenv("JUPYTER_PATH", "")  # none (restored afterwards: the config below changes it)
    assert main(["feedback", PS1, "--course-dir", str(course)]) == 0
    page = course / "feedback" / "ann" / PS1 / f"{PS1}.html"
    before = page.read_text()
    exec(compile(SERVER_CONFIG.read_text(), str(SERVER_CONFIG), "exec"),
         {"get_config": Config, "__file__": str(SERVER_CONFIG)})
    assert os.environ["JUPYTER_PATH"].split(os.pathsep)[0] == str(INSTRUCTOR / "share")  # what the service gets
    assert main(["feedback", PS1, "--course-dir", str(course)]) == 0
    after = page.read_text()
    assert after.count('class="math"') >= FORMULAS  # formulas drawn as images
    assert "jupyter_server_mathjax" not in after and "/formgrader/" not in after
    assert after == before
