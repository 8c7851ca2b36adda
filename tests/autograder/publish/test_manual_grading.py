"""Written answers graded by hand (issue #13): `autograder grade` leaves them to a grader, formgrader can grade
them, and a score given there reaches `autograder export` and the report.

A tiny course built by code: the synthetic course (7 automatic points) plus one written answer in the course's
format (a question cell, then a markdown answer cell `written_why_sum`, 5 points, model answer and rubric in the
source). Graded for real (jailed kernels, the judge) with four students: ann and eve answer the question (eve's
code has mistakes), bob leaves the answer as released, cat answers but monkeypatches numpy (held for review).
A score is then given to ann's answer through nbgrader's gradebook exactly as formgrader's grade API saves it.
"""
from __future__ import annotations

import csv
import re

import nbformat
import pytest
from nbformat.v4 import new_markdown_cell
from nbgrader.api import Gradebook

from autograder.cli import main
from autograder.course.coursedir import course_id, default_db_url, nbgrader_api
from autograder.publish.export import waiting_line
from autograder.gradebook.queries import waiting_for_grader
from autograder.grade.engine import grade
from autograder.course.units import GiB
from autograder.sandbox.limits import Limits
from synthetic_course import SYNTHETIC_ASSIGNMENT, release_assignment, synthetic_course, synthetic_submission
from autograder.course.written import TEXT_STUB, answer_keys, automatic_points, written_points

pytestmark = pytest.mark.pipeline  # grades a (tiny) class end to end

PS1 = SYNTHETIC_ASSIGNMENT
ANSWER_ID = "written_why_sum"
QUESTION = "**Written answer (5 points, graded by hand).** Why does `normalize` divide by the sum?"
MODEL = "Dividing by the sum makes the weights add up to one, so they can be read as shares of the whole."
RUBRIC = ("3 points: the weights add up to one after the division. "
          "2 points: reads them as proportions or probabilities.")
ANSWERS = {"ann": "So that the weights add up to one.", "eve": "To make the values smaller."}
LIMITS = Limits(cell_timeout=20, notebook_timeout=90, memory_bytes=3 * GiB, startup_timeout=90)
GIVEN = 4.0  # the score a grader gives ann's answer


def written_course(root):
    """The synthetic course with one written answer in the course's format, released."""
    course = synthetic_course(root, release=False)
    config = course / "nbgrader_config.py"
    config.write_text(config.read_text() + f"c.ClearSolutions.text_stub = {TEXT_STUB!r}\n")
    path = course / "source" / PS1 / f"{PS1}.ipynb"
    nb = nbformat.read(path, as_version=4)
    nb.cells[-1:-1] = [
        new_markdown_cell(QUESTION),
        new_markdown_cell(f"**Model answer.** {MODEL}\n\n**Rubric (5 points).** {RUBRIC}",
                          metadata={"nbgrader": {"grade": True, "solution": True, "locked": False, "points": 5,
                                                 "grade_id": ANSWER_ID, "schema_version": 3, "task": False}}),
    ]
    nbformat.write(nb, path)
    release_assignment(course, PS1)
    return course


def _answered(text: str, answer: str) -> str:
    nb = nbformat.reads(text, as_version=4)
    for cell in nb.cells:
        if cell.metadata.get("nbgrader", {}).get("grade_id") == ANSWER_ID:
            assert cell.source == TEXT_STUB  # what the student got
            cell.source = answer
    return nbformat.writes(nb)


def _export(course, to) -> dict[str, dict]:
    assert main(["export", "--course-dir", str(course), "--to", str(to)]) == 0
    with open(to, newline="") as fh:
        return {row["student_id"]: row for row in csv.DictReader(fh)}


def _report(course) -> str:
    assert main(["report", "--course-dir", str(course)]) == 0
    return (course / "reports" / "course" / "index.html").read_text()


def _manual_table(page: str) -> str:
    start = page.index("Waiting for manual grading")
    return page[start:page.index("</div>", start)]


@pytest.fixture(scope="module")
def graded(tmp_path_factory):
    root = tmp_path_factory.mktemp("manual")
    course = written_course(root / "course")
    solution = synthetic_submission(course, "solution")
    texts = {"ann": _answered(solution, ANSWERS["ann"]),
             "eve": _answered(synthetic_submission(course, "mistake"), ANSWERS["eve"]),
             "bob": solution,
             "cat": _answered(synthetic_submission(course, "monkeypatch"), "Because of the sum.")}
    for student, text in texts.items():
        folder = course / "submitted" / student / PS1
        folder.mkdir(parents=True)
        (folder / f"{PS1}.ipynb").write_text(text)
    summary = grade(course, PS1, workers=2, limits=LIMITS, progress=False)
    assert not summary.failed, summary.failed
    before = {"waiting": waiting_for_grader(course), "csv": _export(course, root / "before.csv"),
              "page": _report(course)}
    return {"course": course, "root": root, "before": before}


def _grade(course, student):
    with Gradebook(default_db_url(course), course_id(course)) as gb:
        g = gb.find_grade(ANSWER_ID, PS1, PS1, student)
        return {"auto": g.auto_score, "manual": g.manual_score, "needs": g.needs_manual_grade, "score": g.score}


def test_the_source_follows_the_written_answer_format(graded):
    nb = nbformat.read(graded["course"] / "source" / PS1 / f"{PS1}.ipynb", as_version=4)
    key = answer_keys(nb)[ANSWER_ID]
    assert (key.model_answer, key.rubric, key.points) == (MODEL, RUBRIC, 5.0)
    assert sum(key.criteria_points) == key.points and key.question == QUESTION
    assert automatic_points(nb) == 7 and written_points(nb) == 5
    released = nbformat.read(graded["course"] / "release" / PS1 / f"{PS1}.ipynb", as_version=4)
    assert [c.source for c in released.cells if c.metadata.get("nbgrader", {}).get("grade_id") == ANSWER_ID] \
        == [TEXT_STUB]
    text = "\n".join(c.source for c in released.cells)
    assert MODEL not in text and "Rubric" not in text


def test_grading_leaves_answers_to_a_grader(graded):
    course = graded["course"]
    for student in ("ann", "eve"):  # an answer: no automatic score, waits for a grader
        assert _grade(course, student) == {"auto": None, "manual": None, "needs": True, "score": 0}
    # left as released: 0 on its own (nbgrader's checksum rule), nothing to grade
    assert _grade(course, "bob") == {"auto": 0, "manual": None, "needs": False, "score": 0}
    # held for review: every cell waits for the reviewer with a manual 0, the written answer included
    assert _grade(course, "cat")["manual"] == 0 and _grade(course, "cat")["needs"]
    waiting = graded["before"]["waiting"]
    assert sorted((w["student"], w["cell"]) for w in waiting) == [("ann", ANSWER_ID), ("eve", ANSWER_ID)]
    assert waiting_line(waiting).startswith("manual grading: 2 answer(s) in 2 notebook(s) wait for a grader")


def test_export_before_grading_by_hand(graded):
    rows = graded["before"]["csv"]
    assert {s: float(r["max_score"]) for s, r in rows.items()} == {s: 12.0 for s in ("ann", "bob", "cat", "eve")}
    assert float(rows["ann"]["score"]) == float(rows["bob"]["score"]) == 7  # the automatic points only
    assert 0 < float(rows["eve"]["score"]) < 7 and float(rows["cat"]["score"]) == 0
    assert {s: r["waiting_for_grader"] for s, r in rows.items()} == {
        "ann": ANSWER_ID, "eve": ANSWER_ID, "bob": "", "cat": f"{PS1}: held for review"}
    assert {r["manual_score"] for r in rows.values()} == {""}


def test_report_lists_the_waiting_answers_with_the_rubric(graded):
    table = _manual_table(graded["before"]["page"])
    assert "Waiting for manual grading (2)" in table
    assert "<td>ann</td>" in table and "<td>eve</td>" in table
    assert "<td>bob</td>" not in table and "<td>cat</td>" not in table  # bob: nothing to grade; cat: held
    assert f"href='#rubric-{PS1}-{PS1}-{ANSWER_ID}'" in table  # each waiting cell links to its rubric
    rubric = table[table.index(f"id='rubric-{PS1}-{PS1}-{ANSWER_ID}'"):]
    # the source's markdown is rendered for the grader (code spans, bold), never its raw HTML
    for text in (MODEL, RUBRIC, "Why does <code>normalize</code> divide by the sum?", "2 waiting"):
        assert text in rubric, text


def test_formgrader_shows_the_answer_for_grading(graded):
    """formgrader's Manual Grading view: nbgrader's API lists ann's notebook as needing a manual grade, and the
    formgrade page of her autograded notebook holds her answer with a score box for the written cell."""
    from nbconvert.exporters import HTMLExporter
    from nbgrader.server_extensions.formgrader import handlers

    course = graded["course"]
    listed = {s["student"]: s for s in nbgrader_api(course).get_notebook_submissions(PS1, PS1)}
    assert listed["ann"]["needs_manual_grade"] and listed["eve"]["needs_manual_grade"]
    assert not listed["bob"]["needs_manual_grade"]
    exporter = HTMLExporter(template_name="formgrade", extra_template_basedirs=[handlers.template_path])
    html, _ = exporter.from_filename(str(course / "autograded" / "ann" / PS1 / f"{PS1}.ipynb"),
                                     resources={"base_url": "", "index": 0, "total": 4, "student": "ann",
                                                "assignment_id": PS1, "notebook_id": PS1, "submission_id": "x",
                                                "notebook_path": "", "last_name": None, "first_name": None})
    assert ANSWERS["ann"] in html
    assert re.search(rf'<input class="score tabbable" id="{ANSWER_ID}"', html)
    assert MODEL not in html  # graders see the student's notebook; the key is in the report


def test_a_manual_score_reaches_export_and_report(graded, tmp_path):
    """As formgrader's grade API saves a score (manual_score set, needs_manual_grade cleared), then export and
    report: ann's score grows by it, her answer no longer waits, the waiting count drops by one."""
    course = graded["course"]
    with Gradebook(default_db_url(course), course_id(course)) as gb:
        answer = gb.find_grade(ANSWER_ID, PS1, PS1, "ann")
        answer.manual_score = GIVEN
        answer.needs_manual_grade = answer.manual_score is None and answer.auto_score is None
        gb.db.commit()
    before = graded["before"]
    assert len(waiting_for_grader(course)) == len(before["waiting"]) - 1
    rows = _export(course, tmp_path / "after.csv")
    assert float(rows["ann"]["score"]) == float(before["csv"]["ann"]["score"]) + GIVEN
    assert float(rows["ann"]["manual_score"]) == GIVEN and rows["ann"]["waiting_for_grader"] == ""
    assert rows["eve"]["waiting_for_grader"] == ANSWER_ID and rows["eve"]["score"] == before["csv"]["eve"]["score"]
    table = _manual_table(_report(course))
    assert "Waiting for manual grading (1)" in table and "<td>ann</td>" not in table and "1 waiting" in table
    assert main(["export", "--course-dir", str(course), "--format", "canvas", "--to", str(tmp_path / "c.csv")]) == 0
    canvas = list(csv.reader((tmp_path / "c.csv").open()))
    assert [r[5] for r in canvas if r[2] == "ann"] == [f"{7 + GIVEN:g}"]


def test_export_prints_what_waits_for_a_grader(graded, tmp_path, capsys):
    from autograder.gradebook.queries import waiting_for_grader

    waiting = waiting_for_grader(graded["course"])
    assert waiting, "the fixture's class has answers that wait"
    main(["export", "--course-dir", str(graded["course"]), "--to", str(tmp_path / "g.csv")])
    out = capsys.readouterr().out
    notebooks = len({(w["assignment"], w["notebook"], w["student"]) for w in waiting})
    assert f"manual grading: {len(waiting)} answer(s) in {notebooks} notebook(s) wait for a grader" in out


def test_a_regrade_keeps_the_score_given_by_hand(graded):
    """Runs last (it regrades eve): a score given to eve's answer survives `autograder grade --force`."""
    course = graded["course"]
    with Gradebook(default_db_url(course), course_id(course)) as gb:
        answer = gb.find_grade(ANSWER_ID, PS1, PS1, "eve")
        answer.manual_score, answer.needs_manual_grade = 2.0, False
        gb.db.commit()
    grade(course, PS1, students=["eve"], workers=1, limits=LIMITS, force=True, progress=False)
    after = _grade(course, "eve")
    assert after["manual"] == 2.0
    assert after["needs"], "as nbgrader does, a kept hand score is flagged for another look"


def test_rubric_markdown_is_rendered_but_its_html_is_escaped():
    from autograder.publish.report import _markdown

    page = _markdown("Rubric.", "2 points: **names** `d_k` and `<unk>`. <script>alert(1)</script>")
    assert "<strong>Rubric.</strong>" in page and "<strong>names</strong>" in page and "<code>d_k</code>" in page
    assert "<code>&lt;unk&gt;</code>" in page, "a code span is escaped once, not twice"
    assert "<script>" not in page and "&lt;script&gt;" in page
