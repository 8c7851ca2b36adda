"""`autograder export --format canvas|moodle` against the layouts documented by Canvas and Moodle.

The expected files below are written by hand from the LMS documentation (see autograder/publish/export.py's docstring),
not copied from an LMS: Canvas's gradebook import takes `Student, ID, SIS User ID, SIS Login ID, Section`, then
one column per assignment, and a second row `Points Possible`; Moodle's CSV grade import takes an identifier
column (mapped to the user's ID number or e-mail address in the import form) and one column per grade item.
The gradebook is built with nbgrader's API: two assignments, three students, one late submission with a
penalty, one missing submission, one score that the penalty would take below zero.
"""
from __future__ import annotations

import csv
import datetime

import pytest
from nbgrader.api import Gradebook

from autograder.cli import main
from autograder.publish.export import export_lms

DUE = datetime.datetime(2026, 10, 1, 12, 0)

# Canvas: "Student, ID, SIS User ID, SIS Login ID, Section, <assignment>..." + the "Points Possible" row
CANVAS_EXPECTED = """\
Student,ID,SIS User ID,SIS Login ID,Section,ps1,ps2
Points Possible,,,,,10,5
"Lovelace, Ada",4711,ada,ada@example.edu,,9.5,2
"Turing, Alan",,alan,alan@example.edu,,0,5
grace,,grace,,,6,0
"""

# Moodle: identifier columns (ID number, Email address), then one column per grade item
MOODLE_EXPECTED = """\
First name,Last name,ID number,Email address,ps1,ps2
Ada,Lovelace,ada,ada@example.edu,9.5,2
Alan,Turing,alan,alan@example.edu,0,5
,,grace,,6,0
"""


@pytest.fixture
def course(tmp_path):
    root = tmp_path / "course"
    root.mkdir()
    (root / "nbgrader_config.py").write_text("c = get_config()  # noqa: F821\nc.CourseDirectory.course_id = 'lms'\n")
    with Gradebook(f"sqlite:///{root / 'gradebook.db'}", "lms") as gb:
        for name, points in (("ps1", (6, 4)), ("ps2", (5,))):
            gb.add_assignment(name, duedate=DUE)
            gb.add_notebook(name, name)
            for i, p in enumerate(points):
                gb.add_grade_cell(f"q{i}", name, name, max_score=p, cell_type="code")
        gb.add_student("ada", first_name="Ada", last_name="Lovelace", email="ada@example.edu", lms_user_id="4711")
        gb.add_student("alan", first_name="Alan", last_name="Turing", email="alan@example.edu")
        gb.add_student("grace")

        def submit(assignment, student, scores, hours_late=0.0, penalty=0.0):
            gb.add_submission(assignment, student, timestamp=DUE + datetime.timedelta(hours=hours_late))
            nb = gb.find_submission_notebook(assignment, assignment, student)
            for grade, score in zip(sorted(nb.grades, key=lambda g: g.name), scores):
                grade.auto_score = score
            nb.late_submission_penalty = penalty
            gb.db.commit()

        submit("ps1", "ada", (6, 4), hours_late=5, penalty=0.5)  # 10 points, 0.5 off for being late
        submit("ps2", "ada", (2,))
        submit("ps1", "alan", (1, 0), hours_late=30, penalty=3.0)  # the penalty would go below zero: 0
        submit("ps2", "alan", (5,))
        submit("ps1", "grace", (6, 0))  # grace never hands in ps2: 0
    return root


def _read(path):
    return path.read_text()


def test_canvas_layout(course, tmp_path):
    path = export_lms(course, tmp_path / "canvas.csv", "canvas")
    assert _read(path) == CANVAS_EXPECTED
    rows = list(csv.reader(path.open()))
    assert rows[0][:5] == ["Student", "ID", "SIS User ID", "SIS Login ID", "Section"]
    assert rows[1][0] == "Points Possible" and rows[1][1:5] == [""] * 4


def test_canvas_assignment_ids_in_titles(course, tmp_path):
    path = export_lms(course, tmp_path / "canvas.csv", "canvas", assignment_ids={"ps1": 101})
    assert _read(path).splitlines()[0] == "Student,ID,SIS User ID,SIS Login ID,Section,ps1 (101),ps2"


def test_moodle_layout(course, tmp_path):
    path = export_lms(course, tmp_path / "moodle.csv", "moodle")
    assert _read(path) == MOODLE_EXPECTED


def test_late_penalty_applied_as_in_nbgrader_csv(course, tmp_path):
    """The LMS files carry the same final score as nbgrader's own CSV export (score after the penalty)."""
    assert main(["export", "--course-dir", str(course), "--to", str(tmp_path / "nb.csv")]) == 0
    nbgrader_rows = {(r["assignment"], r["student_id"]): float(r["score"])
                     for r in csv.DictReader((tmp_path / "nb.csv").open())}
    assert main(["export", "--course-dir", str(course), "--format", "moodle",
                 "--to", str(tmp_path / "m.csv")]) == 0
    for row in csv.DictReader((tmp_path / "m.csv").open()):
        for assignment in ("ps1", "ps2"):
            assert float(row[assignment]) == nbgrader_rows[(assignment, row["ID number"])]
    assert nbgrader_rows[("ps1", "ada")] == 9.5  # 10 points minus a 0.5-point late penalty


def test_cli_default_file_names(course, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert main(["export", "--course-dir", str(course), "--format", "canvas"]) == 0
    assert (tmp_path / "canvas_grades.csv").read_text() == CANVAS_EXPECTED
