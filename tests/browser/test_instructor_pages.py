"""The instructor's pages in Chromium: the course report, an assignment report, a similarity page, a feedback page.

A small class of the synthetic course is graded for real (collect -> grade -> feedback -> report -> similarity):
ann (right), ben (two mistakes), cat (monkeypatches: held), fay (ann's code, renamed). Each page is
opened from disk (file://, as an instructor opens a mailed report) with every request off the machine refused:
it must show every image (complete, naturalWidth > 0) and log no console error. Screenshots go to
build/browser-screenshots/<session>/ (git-ignored test artefacts).

Then nbgrader's formgrader, served from a course root by a Jupyter server with nbgrader's extensions: a manual
score given to a written answer reaches `autograder export` and the course page.

The feedback page is nbgrader's, made safe (autograder.publish.feedback): math is drawn on the grading machine (no
MathJax), and a Content-Security-Policy refuses every script and every outside request; nbgrader's template
still names its CDN scripts (jQuery, require.js, mermaid, MathJax), and the browser refuses exactly those, which
is the only console error allowed there.

eve is hostile (issue #20, door 4): her written answer, her code and her outputs carry scripts, `onerror`
handlers, a `javascript:` link, JavaScript and HTML outputs, each of which would set `window.__canary`. On every
page the product writes (feedback, assignment and course reports, similarity) the canary stays unset, while her
page still shows her own figure, table, formatted text and rendered math.
"""
from __future__ import annotations

import csv
import os
import re
import sys
import time
from pathlib import Path

import nbformat
import pytest
from nbgrader.api import Gradebook

from autograder.cli import main
from autograder.course.coursedir import course_id, default_db_url
from autograder.grade.engine import grade
from autograder.course.units import GiB
from autograder.sandbox.limits import Limits
from formgrader_page import wait_until_scores_save
from synthetic_course import SYNTHETIC_ASSIGNMENT as PS1
from synthetic_course import release_assignment, synthetic_course, synthetic_submission

CANARY = "window.__canary"
HOSTILE_MARKDOWN = ("My answer: scaling by $\\sqrt{d_k}$ keeps **the logits** small.\n\n"
                    "<script>window.__canary = 'markdown script'</script>\n"
                    "<img src=x onerror=\"window.__canary = 'markdown onerror'\">\n"
                    "[a link](javascript:window.__canary='markdown link')\n\n"
                    "| kept | table |\n|---|---|\n| 1 | 2 |\n")
HOSTILE_CODE = """# </pre><script>window.__canary = 'code script'</script>
from IPython.display import HTML, Javascript, Markdown, display
display(HTML("<script>window.__canary = 'html output'</script><img src=x onerror=\\"window.__canary = 'html onerror'\\">"
             "<table><tr><td>her own table</td></tr></table>"))
display(Javascript("window.__canary = 'javascript output'"))
display(Markdown("<svg onload=\\"window.__canary = 'markdown output'\\"></svg>**her bold words**"))
import io
import matplotlib.pyplot as plt
from IPython.display import Image
figure = plt.figure(figsize=(4, 3))
plt.plot([1, 2, 3])
plt.title("her own figure")
png = io.BytesIO()
figure.savefig(png, format="png")
display(Image(data=png.getvalue()))
"""
LIMITS = Limits(cell_timeout=30, notebook_timeout=120, memory_bytes=3 * GiB, startup_timeout=120)
MATHJAX = re.compile(r"^https://cdnjs\.cloudflare\.com/ajax/libs/mathjax/")
NORMALIZE = '''total = 0.0
    for value in x:
        total = total + value
    if total == 0:
        raise ValueError("cannot normalize a vector that sums to zero")
    weights = np.array([value / total for value in x])
    return weights'''


def _edited(text: str, normalize: str) -> str:
    nb = nbformat.reads(text, as_version=4)
    for cell in nb.cells:
        if cell.metadata.get("nbgrader", {}).get("grade_id") == "normalize":
            cell.source = re.sub(r"return x / x\.sum\(\)", normalize, cell.source)
    return nbformat.writes(nb)


def _hostile(text: str) -> str:
    """A blank submission with eve's scripts in a written answer and in a code cell (see the module doc)."""
    nb = nbformat.reads(text, as_version=4)
    nb.cells.insert(1, nbformat.v4.new_markdown_cell(HOSTILE_MARKDOWN))
    nb.cells.insert(2, nbformat.v4.new_code_cell(HOSTILE_CODE))
    return nbformat.writes(nb)


@pytest.fixture(scope="module")
def pages(tmp_path_factory, chromium_path):
    root = tmp_path_factory.mktemp("instructor-pages")
    course = synthetic_course(root / "course")
    solution = synthetic_submission(course, "solution")
    texts = {"ann": _edited(solution, NORMALIZE), "ben": synthetic_submission(course, "mistake"),
             "cat": synthetic_submission(course, "monkeypatch"),
             "fay": _edited(solution, NORMALIZE.replace("total", "s").replace("value", "v")),
             "eve": _hostile(synthetic_submission(course, "blank"))}
    for student, text in texts.items():
        (root / "inbox" / student / PS1).mkdir(parents=True)
        (root / "inbox" / student / PS1 / f"{PS1}.ipynb").write_text(text)
    args = ["--course-dir", str(course)]
    assert main(["collect", str(root / "inbox"), *args]) == 0
    grade(course, PS1, workers=2, limits=LIMITS)
    assert main(["feedback", PS1, *args]) == 0
    assert main(["similarity", PS1, *args]) == 0  # the similarity page, which the reports link to
    assert main(["report", PS1, *args]) == 0
    assert main(["report", *args]) == 0  # the course page
    reports = course / "reports"
    return {"course": reports / "course" / "index.html", "assignment": reports / PS1 / "index.html",
            "similarity": reports / PS1 / "similarity.html",
            "feedback": course / "feedback" / "ben" / PS1 / f"{PS1}.html",
            "eve": course / "feedback" / "eve" / PS1 / f"{PS1}.html"}


@pytest.fixture
def page(browser):
    context = browser.new_context(viewport={"width": 1280, "height": 900})
    tab = context.new_page()
    tab.errors, tab.failed = [], []
    tab.on("console", lambda m: tab.errors.append((m.text, (m.location or {}).get("url", "")))
           if m.type == "error" else None)
    tab.on("pageerror", lambda e: tab.errors.append((str(e), "")))

    def offline(route):  # nothing leaves the machine: a page that needs the network shows it here
        tab.failed.append(route.request.url)
        route.abort()
    tab.route(re.compile(r"^https?://"), offline)
    yield tab
    context.close()


def _open(page, path, screenshot_dir, name):
    assert path.exists(), path
    page.goto(path.as_uri(), wait_until="load")
    page.wait_for_load_state("networkidle")
    page.screenshot(path=str(screenshot_dir / f"{name}.png"), full_page=True)
    # an <img> without a source is one whose source the allow-list removed (eve's `<img src=x onerror=...>`)
    images = page.evaluate("Array.from(document.images).filter(i => i.hasAttribute('src'))"
                           ".map(i => [i.alt, i.complete, i.naturalWidth])")
    broken = [alt for alt, complete, width in images if not complete or width == 0]
    assert not broken, f"{name}: images not shown: {broken}"
    return images


@pytest.mark.parametrize("name, min_images", [("course", 3), ("assignment", 4), ("similarity", 1)])
def test_report_pages_show_every_image_without_errors(pages, page, screenshot_dir, name, min_images):
    images = _open(page, pages[name], screenshot_dir, f"{name}_report")
    assert len(images) >= min_images
    assert page.errors == [] and page.failed == []


def test_course_page_content_and_sorting(pages, page, screenshot_dir):
    _open(page, pages["course"], screenshot_dir, "course_report_sorted")
    for heading in ("The class", "Late submissions", "Held for review (1)", "Waiting for manual grading",
                    "Copied work"):
        assert page.get_by_role("heading", name=re.compile(re.escape(heading))).count() >= 1, heading
    first_column = "Array.from(document.querySelectorAll('#matrix tbody tr')).map(r => r.cells[0].textContent)"
    assert page.evaluate(first_column) == ["ann", "ben", "cat", "eve", "fay"]
    total = page.locator("#matrix thead th").nth(2)  # the total column: click sorts ascending, then descending
    total.click()
    ascending = page.evaluate(first_column)
    total.click()
    descending = page.evaluate(first_column)
    assert ascending[0] in ("cat", "ben", "eve") and descending[-1] in ("cat", "ben", "eve")
    assert descending[0] in ("ann", "fay")
    page.screenshot(path=str(screenshot_dir / "course_report_sorted.png"), full_page=True)
    assert page.errors == []


def test_similarity_page_shows_the_pair_side_by_side(pages, page, screenshot_dir):
    _open(page, pages["similarity"], screenshot_dir, "similarity_page")
    # ann and fay (fay renamed ann's names) are reported; ben and cat, two edits of the one reference answer of this
    # tiny synthetic assignment, may be too, by their structure (publish/fingerprint.py)
    headings = page.locator("h3[id^=pair-]").all_inner_texts()
    pair = next(i for i, text in enumerate(headings, 1) if re.match(rf"{i}\. ann and fay: (9\d|100)%", text))
    assert page.locator(f"h3#pair-{pair} + .side pre").count() == 2
    assert page.locator(f"h3#pair-{pair} + .side mark").count() >= 2


TEMPLATE_CDN = re.compile(r"https://cdnjs\.cloudflare\.com/")  # nbgrader's template's scripts, refused by the CSP


def _csp_refusals_only(errors) -> list:
    """Console errors other than the CSP refusing the template's own CDN scripts."""
    return [(text, url) for text, url in errors
            if not ("Content Security Policy" in text and TEMPLATE_CDN.search(text + url))]


def test_feedback_page(pages, page, screenshot_dir):
    _open(page, pages["feedback"], screenshot_dir, "feedback_page")
    assert "Likely mistake: divided by the maximum instead of the sum" in page.inner_text("body")  # ben's mistake
    assert page.failed == []  # nothing even tried to leave the machine: the CSP refuses it first
    assert _csp_refusals_only(page.errors) == []


@pytest.mark.parametrize("name", ["eve", "assignment", "course", "similarity"])
def test_no_student_script_runs_on_any_page(pages, page, screenshot_dir, name):
    """Issue #20, door 4: the canary a student's script would set stays unset, links included."""
    _open(page, pages[name], screenshot_dir, f"canary_{name}")
    for link in page.locator("a[href^='javascript:' i]").all():
        link.click()
    page.wait_for_timeout(500)
    assert page.evaluate(CANARY) is None, page.evaluate(CANARY)
    assert "__canary" not in page.evaluate("Object.keys(window).join(' ')")


def test_her_own_figures_tables_formatting_and_math_still_show(pages, page, screenshot_dir):
    images = _open(page, pages["eve"], screenshot_dir, "feedback_eve")
    body = page.inner_text("body")
    assert "her own table" in body and "kept" in body and "her bold words" in body
    assert page.locator("strong", has_text="the logits").count() == 1
    math = page.locator("img.math")
    assert math.count() >= 1 and math.first.get_attribute("alt") == "\\sqrt{d_k}"
    assert page.evaluate("document.querySelector('img.math').naturalWidth") > 0
    assert any(width > 100 for _, _, width in images)  # her matplotlib figure (a PNG output)
    assert "<script>" in body  # her script is shown as text, not run
    assert "$\\sqrt{d_k}$" not in body


# ------------------------------------------------------------------------ formgrader: a manual score, end to end
ANSWER_ID = "written_answer"


@pytest.fixture(scope="module")
def manual_course(tmp_path_factory, chromium_path):
    """The synthetic course plus one manually graded written answer (3 points); ann answered it; graded."""
    root = tmp_path_factory.mktemp("formgrader")
    course = synthetic_course(root / "course", release=False)
    path = course / "source" / PS1 / f"{PS1}.ipynb"
    nb = nbformat.read(path, as_version=4)
    nb.cells.insert(-1, nbformat.v4.new_markdown_cell(
        "Why divide by the sum?", metadata={"nbgrader": {"grade_id": ANSWER_ID, "grade": True, "solution": True,
                                                         "locked": False, "points": 3, "schema_version": 3,
                                                         "task": False}}))
    nbformat.write(nb, path)
    release_assignment(course, PS1)
    answered = nbformat.reads(synthetic_submission(course, "solution"), as_version=4)
    for cell in answered.cells:
        if cell.metadata.get("nbgrader", {}).get("grade_id") == ANSWER_ID:
            cell.source = "So that the weights add up to one."
    (root / "inbox" / "ann" / PS1).mkdir(parents=True)
    nbformat.write(answered, root / "inbox" / "ann" / PS1 / f"{PS1}.ipynb")
    assert main(["collect", str(root / "inbox"), "--course-dir", str(course)]) == 0
    grade(course, PS1, workers=1, limits=LIMITS)
    return course


def _manual_score(course):
    with Gradebook(default_db_url(course), course_id(course)) as gb:
        answer = gb.find_grade(ANSWER_ID, PS1, PS1, "ann")
        return answer.manual_score, answer.needs_manual_grade


def test_formgrader_manual_score_reaches_export_and_report(manual_course, start_lab, browser, screenshot_dir,
                                                           tmp_path):
    """nbgrader's formgrader, served from the course root by a Jupyter server with nbgrader's extensions (as the
    hub's formgrader service runs): open ann's submission, score her written answer, see it in the exports and
    on the course page."""
    course = manual_course
    assert _manual_score(course) == (None, True)  # waits for a person
    assert main(["report", "--course-dir", str(course)]) == 0
    assert "Waiting for manual grading (1)" in (course / "reports" / "course" / "index.html").read_text()
    with Gradebook(default_db_url(course), course_id(course)) as gb:
        submission_id = gb.find_submission_notebook(PS1, PS1, "ann").id
    home = tmp_path / "home"
    home.mkdir()
    env = {**os.environ, "HOME": str(home), "JUPYTER_CONFIG_DIR": str(home / ".jupyter")}
    with start_lab(Path(sys.executable).parent, course, env=env, log=screenshot_dir / "formgrader.log") as server:
        # every request carries the token, as the hub's OAuth cookie would (formgrader's API calls come from JS)
        context = browser.new_context(viewport={"width": 1280, "height": 900},
                                      extra_http_headers={"Authorization": f"token {server.token}"})
        tab = context.new_page()
        tab.route(re.compile(r"^https?://(?!127\.0\.0\.1)"), lambda route: route.abort())
        tab.goto(server.page_url(f"formgrader/submissions/{submission_id}/"), wait_until="load")
        box = tab.locator(f"input.score#{ANSWER_ID}")
        box.wait_for(timeout=60_000)
        wait_until_scores_save(tab)
        box.fill("2.5")
        box.press("Tab")  # formgrader saves a score when the field changes
        deadline = time.monotonic() + 30
        while _manual_score(course)[0] != 2.5 and time.monotonic() < deadline:
            time.sleep(0.5)
        tab.screenshot(path=str(screenshot_dir / "formgrader_submission.png"), full_page=True)
        context.close()
    assert _manual_score(course) == (2.5, False)
    assert main(["export", "--course-dir", str(course), "--to", str(tmp_path / "g.csv")]) == 0
    assert main(["export", "--course-dir", str(course), "--format", "moodle", "--to", str(tmp_path / "m.csv")]) == 0
    assert [float(r["score"]) for r in csv.DictReader((tmp_path / "g.csv").open())] == [9.5]  # 7 + 2.5
    assert [r[PS1] for r in csv.DictReader((tmp_path / "m.csv").open())] == ["9.5"]
    assert main(["report", "--course-dir", str(course)]) == 0
    page = (course / "reports" / "course" / "index.html").read_text()
    assert "Waiting for manual grading (0)" in page
    assert re.search(r"<tr><td>ann</td><td class='num'>9\.5</td>", page)
