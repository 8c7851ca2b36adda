"""Issue #32, doors 1 and 7, in Chromium: nbgrader's formgrader (Manual Grading) shows a hostile student's graded
notebook to an instructor, and nothing of hers runs.

A small class of the synthetic course with one written answer is graded for real: ann answers plainly; mal's written
answer (markdown) and her code carry a `<script>`, `onerror`/`onload` handlers, a `javascript:` link, a MathJax
`\\href`, a full-page fake "Score: 110 / 110", HTML, JavaScript, markdown and SVG outputs and an image whose metadata
holds an `onload`, and a raw HTML cell; each would set `window.__pwned`, and one script would also fetch the hidden
tests and write a file into the course folder through the server's API (what the issue saw happen). A third
notebook, pat's, is made hostile after grading, straight in `autograded/` (as if graded by plain
`nbgrader autograde`, without the worker's step): the formgrader's own exporter (the course service's config,
deploy/jupyter/instructor/jupyter_server_config.py, which the server here loads) must make it inert as it renders it.

The server is a Jupyter server with nbgrader's extensions, serving the course root with the instructor config's
Content-Security-Policy. On each submission page the canary stays unset, no file appears, mal's review flag is in
the gradebook, and the formgrader still works under that policy: ann's written answer gets a score through the
page, which reaches the gradebook. Screenshots: build/browser-screenshots/<session>/formgrader_*.png.
"""
from __future__ import annotations

import base64
import os
import re
import sys
import time
from pathlib import Path

import nbformat
import pytest
from nbformat.v4 import new_code_cell, new_markdown_cell, new_output, new_raw_cell
from nbgrader.api import Gradebook

from autograder.cli import main
from autograder.course.coursedir import REPO_ROOT, course_id, default_db_url
from autograder.course.units import GiB
from autograder.gradebook.queries import run_rows
from autograder.grade.engine import grade
from autograder.sandbox.limits import Limits
from formgrader_page import wait_until_scores_save
from synthetic_course import SYNTHETIC_ASSIGNMENT as PS1
from synthetic_course import release_assignment, synthetic_course, synthetic_submission

ANSWER_ID = "written_answer"
LIMITS = Limits(cell_timeout=30, notebook_timeout=120, memory_bytes=3 * GiB, startup_timeout=120)
SERVER_CONFIG = Path(REPO_ROOT) / "deploy" / "jupyter" / "instructor" / "jupyter_server_config.py"
CANARY_FILE = "pwned.txt"
# what the script did: read the hidden tests, create a file in the course folder (then set the canary)
STEAL = ("fetch('/api/contents/source/" + PS1 + "').then(r => r.text()).then(t => fetch('/api/contents/"
         + CANARY_FILE + "', {method: 'PUT', headers: {'Content-Type': 'application/json'}, "
         "body: JSON.stringify({type: 'file', format: 'text', content: t})})); window.__pwned = ")
HOSTILE_ANSWER = ("Dividing by the sum makes the weights add up to one.\n\n"
                  f"<script>{STEAL}'markdown script'</script>\n"
                  "<img src=x onerror=\"window.__pwned = 'markdown onerror'\">\n"
                  "[a link](javascript:window.__pwned='markdown link')\n\n"
                  "$\\href{javascript:window.__pwned='mathjax'}{x}$\n\n"
                  "<div style=\"position: fixed; top: 0; left: 0; width: 100%; height: 100%; z-index: 9999; "
                  "background: white; font-size: 40px\">Score: 110 / 110</div>\n")
PNG = base64.b64encode(bytes.fromhex(
    "89504e470d0a1a0a0000000d4948445200000001000000010806000000"
    "1f15c4890000000d49444154789c63f8cfc0f01f0005000201a5f0d4f30000000049454e44ae426082")).decode()
HOSTILE_CODE = f'''from IPython.display import HTML, Javascript, Markdown, SVG, display
display(HTML("<script>{STEAL}'html script'</script><img src=x onerror=\\"window.__pwned = 'html onerror'\\">"
             "<table><tr><td>her own table</td></tr></table>"))
display(Javascript("{STEAL}'javascript output'"))
display(Markdown("<svg onload=\\"window.__pwned = 'markdown output'\\"></svg>**her bold words**"))
display(SVG("<svg xmlns='http://www.w3.org/2000/svg' onload=\\"window.__pwned = 'svg'\\"><rect width='9' height='9'/></svg>"))
display({{"image/png": "{PNG}", "text/plain": "a figure"}}, raw=True,
        metadata={{"image/png": {{"width": "8 onload=window.__pwned='image metadata' style=position:fixed"}}}})
'''
RAW_HTML = "<script>window.__pwned = 'raw cell'</script>"


def _with_answer(text: str, answer: str, hostile: bool) -> str:
    nb = nbformat.reads(text, as_version=4)
    for cell in nb.cells:
        if cell.metadata.get("nbgrader", {}).get("grade_id") == ANSWER_ID:
            cell.source = answer
    if hostile:
        nb.cells.insert(1, new_code_cell(HOSTILE_CODE))
        nb.cells.insert(2, new_raw_cell(RAW_HTML, metadata={"format": "text/html"}))
    return nbformat.writes(nb)


def _planted(path: Path) -> None:
    """pat's autograded notebook, made hostile behind the worker's back (outputs as a browser would run them)."""
    nb = nbformat.read(path, as_version=4)
    nb.cells.insert(1, new_markdown_cell(f"<img src=x onerror=\"window.__pwned = 'planted markdown'\">"))
    nb.cells.insert(2, new_code_cell("", outputs=[
        new_output("display_data", data={"text/html": f"<script>{STEAL}'planted html'</script>"}),
        new_output("display_data", data={"application/javascript": "window.__pwned = 'planted javascript'"}),
        new_output("display_data", data={"image/png": PNG},
                   metadata={"image/png": {"width": "8 onload=window.__pwned='planted image'"}})]))
    nbformat.write(nb, path)


@pytest.fixture(scope="module")
def course(tmp_path_factory, chromium_path):
    root = tmp_path_factory.mktemp("formgrader-inert")
    course = synthetic_course(root / "course", release=False)
    path = course / "source" / PS1 / f"{PS1}.ipynb"
    nb = nbformat.read(path, as_version=4)
    nb.cells.insert(-1, new_markdown_cell(
        "Why divide by the sum?", metadata={"nbgrader": {"grade_id": ANSWER_ID, "grade": True, "solution": True,
                                                         "locked": False, "points": 3, "schema_version": 3,
                                                         "task": False}}))
    nbformat.write(nb, path)
    release_assignment(course, PS1)
    solution = synthetic_submission(course, "solution")
    texts = {"ann": _with_answer(solution, "So that the weights add up to one.", hostile=False),
             "mal": _with_answer(solution, HOSTILE_ANSWER, hostile=True),
             "pat": _with_answer(solution, "Because.", hostile=False)}
    for student, text in texts.items():
        (root / "inbox" / student / PS1).mkdir(parents=True)
        (root / "inbox" / student / PS1 / f"{PS1}.ipynb").write_text(text)
    assert main(["collect", str(root / "inbox"), "--course-dir", str(course)]) == 0
    summary = grade(course, PS1, workers=2, limits=LIMITS, progress=False)
    assert not summary.failed, summary.failed
    _planted(course / "autograded" / "pat" / PS1 / f"{PS1}.ipynb")
    return course


def _submission_ids(course) -> dict[str, str]:
    with Gradebook(default_db_url(course), course_id(course)) as gb:
        return {s: gb.find_submission_notebook(PS1, PS1, s).id for s in ("ann", "mal", "pat")}


def _manual_score(course, student):
    with Gradebook(default_db_url(course), course_id(course)) as gb:
        return gb.find_grade(ANSWER_ID, PS1, PS1, student).manual_score


def test_the_worker_flags_what_it_removed(course):
    flags = {r["student"]: [f for f in r["flags"] if f["code"] == "active-content"]
             for r in run_rows(default_db_url(course), PS1)}
    assert flags["ann"] == [] and flags["pat"] == []
    assert {f["cell"] for f in flags["mal"]} == {ANSWER_ID, "cell 1", "cell 2"}  # answer, code cell, raw cell
    assert all(f["severity"] == "review" for f in flags["mal"])
    graded = nbformat.read(course / "autograded" / "mal" / PS1 / f"{PS1}.ipynb", as_version=4)
    answer = next(c for c in graded.cells if c.metadata.get("nbgrader", {}).get("grade_id") == ANSWER_ID)
    assert answer.source.startswith("<pre>Dividing by the sum") and "&lt;script&gt;" in answer.source


def test_formgrader_shows_hostile_notebooks_inert_and_still_grades(course, start_lab, browser, screenshot_dir,
                                                                  tmp_path):
    ids = _submission_ids(course)
    home = tmp_path / "home"
    home.mkdir()
    env = {**os.environ, "HOME": str(home), "JUPYTER_CONFIG_DIR": str(home / ".jupyter")}
    with start_lab(Path(sys.executable).parent, course, env=env, args=(f"--config={SERVER_CONFIG}",),
                   log=screenshot_dir / "formgrader_inert.log") as server:
        context = browser.new_context(viewport={"width": 1280, "height": 900},
                                      extra_http_headers={"Authorization": f"token {server.token}"})
        tab = context.new_page()
        requests, errors = [], []
        tab.on("request", lambda r: requests.append((r.method, r.url)))
        tab.on("pageerror", lambda e: errors.append(str(e)))
        tab.route(re.compile(r"^https?://(?!127\.0\.0\.1)"), lambda route: route.abort())
        for student in ("mal", "pat", "ann"):
            response = tab.goto(server.page_url(f"formgrader/submissions/{ids[student]}/"), wait_until="load")
            policy = response.headers.get("content-security-policy", "")
            assert "connect-src 'self'" in policy and "object-src 'none'" in policy, policy
            box = tab.locator(f"input.score#{ANSWER_ID}")
            box.wait_for(timeout=60_000)  # the formgrader's own scripts ran: they build the score boxes' state
            for link in tab.locator("a[href^='javascript:' i]").all():
                link.click()
            tab.wait_for_timeout(1500)
            tab.screenshot(path=str(screenshot_dir / f"formgrader_{student}.png"), full_page=True)
            assert tab.evaluate("window.__pwned") is None, (student, tab.evaluate("window.__pwned"))
            body = tab.inner_text("body")
            if student == "mal":
                assert "Dividing by the sum makes the weights add up to one." in body  # her answer, as text
                assert "her own table" in body and "<script>" in body
                fixed = tab.evaluate("Array.from(document.querySelectorAll('div')).filter(d => "
                                     "getComputedStyle(d).position === 'fixed' && d.textContent.includes('110'))"
                                     ".length")
                assert fixed == 0  # no fake score laid over the page
        assert not (course / CANARY_FILE).exists()
        assert not [url for method, url in requests if "/api/contents" in url], requests
        # the formgrader still works under the policy: a score typed into ann's written answer is saved
        box = tab.locator(f"input.score#{ANSWER_ID}")
        wait_until_scores_save(tab)
        box.fill("2.5")
        box.press("Tab")
        deadline = time.monotonic() + 30
        while _manual_score(course, "ann") != 2.5 and time.monotonic() < deadline:
            time.sleep(0.5)
        tab.screenshot(path=str(screenshot_dir / "formgrader_ann_scored.png"), full_page=True)
        context.close()
    assert _manual_score(course, "ann") == 2.5
    # MathJax comes from the server itself (jupyter_server_mathjax; tests/browser/test_formgrader_mathjax.py): no error
    assert errors == [], errors
