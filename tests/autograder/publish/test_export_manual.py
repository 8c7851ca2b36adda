"""`autograder export`'s manual-grading columns on a gradebook built with nbgrader's API (no grading run).

One assignment `hw` of one notebook: a code test (`test_f`, 6 points) and two written answers (`written_a`,
`written_b`, 5 points each). Grades are set as `autograder grade` records them: an answer waits for a grader
(auto_score None, needs_manual_grade), an answer left as released is 0, a held notebook has manual 0 everywhere and
needs a review; a grader's score is set as formgrader's grade API does.
"""
from __future__ import annotations

import csv
import shutil

import pytest
from nbgrader.api import Gradebook

from autograder.publish.export import export_grades, waiting_line
from autograder.gradebook.queries import waiting_for_grader
from autograder.gradebook.store import RunsTable

HW = "hw"
# student -> {cell: (auto_score, manual_score, needs_manual_grade)}; held: cat
GRADES = {
    "ann": {"test_f": (6, None, False), "written_a": (None, 4.0, False), "written_b": (None, None, True)},
    "bob": {"test_f": (6, None, False), "written_a": (0, None, False), "written_b": (0, None, False)},
    "cat": {"test_f": (6, 0.0, True), "written_a": (None, 0.0, True), "written_b": (None, 0.0, True)},
    "dan": {"test_f": (3, None, False), "written_a": (None, None, True), "written_b": (None, 5.0, False)},
}
HELD = {"cat"}


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    """Built once (a new gradebook costs seconds); each test gets its own copy."""
    root = tmp_path_factory.mktemp("export_manual") / "course"
    root.mkdir()
    (root / "nbgrader_config.py").write_text("c = get_config()  # noqa: F821\nc.CourseDirectory.course_id = 'm'\n")
    db_url = f"sqlite:///{root / 'gradebook.db'}"
    with Gradebook(db_url, "m") as gb:
        gb.add_assignment(HW)
        gb.add_notebook(HW, HW)
        gb.add_grade_cell("test_f", HW, HW, max_score=6, cell_type="code")
        for name in ("written_a", "written_b"):
            gb.add_grade_cell(name, HW, HW, max_score=5, cell_type="markdown")
        for student, cells in GRADES.items():
            gb.add_student(student)
            gb.add_submission(HW, student)
            for name, (auto, manual, needs) in cells.items():
                grade = gb.find_grade(name, HW, HW, student)
                grade.auto_score, grade.manual_score, grade.needs_manual_grade = auto, manual, needs
            gb.db.commit()
        gb.add_student("eve")  # on the roster, nothing handed in
    with RunsTable(db_url) as runs:
        for student in GRADES:
            runs.put({"assignment": HW, "notebook": HW, "student": student, "status": "graded",
                      "held": student in HELD, "score": 0.0, "max_score": 16.0, "seconds": 1.0})
    return root


@pytest.fixture
def course(built, tmp_path):
    return shutil.copytree(built, tmp_path / "course")


def test_export_columns(course, tmp_path):
    with open(export_grades(course, tmp_path / "g.csv"), newline="") as fh:
        rows = {r["student_id"]: r for r in csv.DictReader(fh)}
    assert {s: r["waiting_for_grader"] for s, r in rows.items()} == {
        "ann": "written_b", "bob": "", "cat": "hw: held for review", "dan": "written_a", "eve": ""}
    assert {s: r["manual_score"] for s, r in rows.items()} == {"ann": "4.0", "bob": "", "cat": "", "dan": "5.0",
                                                               "eve": ""}
    # nbgrader's own score column already holds the scores given by hand; a waiting answer counts 0
    assert {s: float(r["score"]) for s, r in rows.items()} == {"ann": 10, "bob": 6, "cat": 0, "dan": 8, "eve": 0}
    assert {float(r["max_score"]) for r in rows.values()} == {16.0}
    assert rows["cat"]["held_for_review"] == "True"


def test_waiting_for_grader_leaves_held_notebooks_to_their_review(course):
    waiting = waiting_for_grader(course)
    assert sorted((w["student"], w["cell"]) for w in waiting) == [("ann", "written_b"), ("dan", "written_a")]
    assert waiting_line(waiting).startswith("manual grading: 2 answer(s) in 2 notebook(s) wait for a grader")
    with Gradebook(f"sqlite:///{course / 'gradebook.db'}", "m") as gb:  # a grader scores dan's answer
        grade = gb.find_grade("written_a", HW, HW, "dan")
        grade.manual_score, grade.needs_manual_grade = 2.0, False
        gb.db.commit()
    assert [(w["student"], w["cell"]) for w in waiting_for_grader(course)] == [("ann", "written_b")]


def test_a_reviewed_hold_counts_the_reviewers_scores(course, tmp_path):
    """Lifting a hold in formgrader = giving every cell its score: the notebook no longer waits and the scores
    given count as manual scores."""
    with Gradebook(f"sqlite:///{course / 'gradebook.db'}", "m") as gb:
        for name, score in (("test_f", 6.0), ("written_a", 3.0), ("written_b", 0.0)):
            grade = gb.find_grade(name, HW, HW, "cat")
            grade.manual_score, grade.needs_manual_grade = score, False
        gb.db.commit()
    with open(export_grades(course, tmp_path / "g.csv"), newline="") as fh:
        cat = next(r for r in csv.DictReader(fh) if r["student_id"] == "cat")
    assert (cat["waiting_for_grader"], cat["manual_score"], float(cat["score"])) == ("", "9.0", 9.0)


def test_nothing_waits_line():
    assert waiting_line([]) == "manual grading: nothing waits for a grader"
