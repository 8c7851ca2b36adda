"""The CLI end to end on the synthetic course: collect -> grade -> feedback -> export -> report."""
from __future__ import annotations

import csv
import html
import re
import subprocess
import sys

import pytest

from autograder.cli import main
from synthetic_course import synthetic_course, synthetic_submission


@pytest.fixture(scope="module")
def graded(tmp_path_factory):
    root = tmp_path_factory.mktemp("cli")
    course = synthetic_course(root / "course")
    inbox = root / "inbox"
    for student, kind in (("ann", "solution"), ("ben", "mistake"), ("cat", "monkeypatch")):
        (inbox / student / "ps1").mkdir(parents=True)
        (inbox / student / "ps1" / "ps1.ipynb").write_text(synthetic_submission(course, kind))
    args = ["--course-dir", str(course)]
    codes = {
        "collect": main(["collect", str(inbox), *args]),
        "grade": main(["grade", "ps1", "--workers", "2", "--cell-timeout", "30", *args]),
        "feedback": main(["feedback", "ps1", *args]),
        "export": main(["export", "--to", str(root / "grades.csv"), *args]),
        "report": main(["report", "ps1", *args]),
        "regrade": main(["grade", "ps1", "--workers", "1", "--cell-timeout", "30", *args]),  # unchanged: skipped
    }
    return {"course": course, "root": root, "codes": codes}


def test_exit_codes(graded):
    # grading holds cat's monkeypatched notebook: the instructor must act -> 1; the rest completes with 0
    assert graded["codes"] == {"collect": 0, "grade": 1, "feedback": 0, "export": 0, "report": 0, "regrade": 0}


def test_export_keeps_nbgrader_columns_and_adds_ours(graded):
    with open(graded["root"] / "grades.csv", newline="") as fh:
        rows = {r["student_id"]: r for r in csv.DictReader(fh)}
    first = next(iter(rows.values()))
    assert list(first)[:11] == ["assignment", "duedate", "timestamp", "student_id", "last_name", "first_name",
                                "email", "raw_score", "late_submission_penalty", "score", "max_score"]
    assert {k: float(v["score"]) for k, v in rows.items()} == {"ann": 7.0, "ben": 1.0, "cat": 0.0}
    assert rows["cat"]["held_for_review"] == "True" and "monkeypatch" in rows["cat"]["flags"]
    assert rows["ben"]["mistakes"] == ""  # the synthetic course's plain asserts diagnose no catalogue mistake
    assert float(rows["ann"]["grading_seconds"]) > 0


def test_feedback_shows_messages_not_reference(graded):
    raw = (graded["course"] / "feedback" / "ben" / "ps1" / "ps1.html").read_text()
    page = html.unescape(re.sub(r"<[^>]+>", "", raw))  # the text a student reads (code is split into spans)
    assert "Likely mistake: divided by the maximum instead of the sum" in page
    assert "return x / x.max()" in page  # ben's own code is there ...
    # ... but the reference bodies of the source notebook never reach a student who did not write them
    assert "x / x.sum()" not in page and "BEGIN SOLUTION" not in page


def test_report_is_offline_and_complete(graded):
    page = (graded["course"] / "reports" / "ps1" / "index.html").read_text()
    assert not re.search(r"(src|href)=['\"]https?://", page)
    for text in ("Score distribution", "Pass rate per grade cell",
                 "Flagged submissions (1)", "held for review", "Grading time"):
        assert text in page
    assert (graded["course"] / "reports" / "ps1" / "scores.png").stat().st_size > 1000


def test_usage_errors():
    with pytest.raises(SystemExit):
        main(["grade"])  # ASSIGNMENT is required
    assert main(["release", "--course-dir", "/nonexistent"]) == 2


def test_unknown_assignment_needs_release(graded, capsys):
    assert main(["grade", "ps9", "--course-dir", str(graded["course"])]) == 2
    assert _refusal(capsys) == ("autograder grade: assignment 'ps9' is not in the gradebook: release it first "
                                "(autograder release ps9)")


def _refusal(capsys) -> str:
    """The one line a refused command printed on stderr."""
    lines = capsys.readouterr().err.splitlines()
    assert len(lines) == 1, lines
    return lines[0]


def test_a_machine_that_cannot_jail_refuses_grading_in_one_line(graded, capsys, monkeypatch, tmp_path):
    from autograder.sandbox import jail

    monkeypatch.delenv(jail.UNSAFE_ENV, raising=False)
    monkeypatch.setenv("PATH", str(tmp_path))  # no bwrap on this PATH
    assert main(["grade", "ps1", "--course-dir", str(graded["course"])]) == 2
    line = _refusal(capsys)
    assert line.startswith("autograder grade: bubblewrap (bwrap) is not installed") and jail.INSTALL_HINT in line


def test_a_release_nbgrader_cannot_generate_is_refused_in_one_line(tmp_path, capsys):
    """nbgrader's own failure (a solution region never closed), its log folded into the one line."""
    import nbformat

    course = synthetic_course(tmp_path / "course", release=False)
    broken = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(
        "def f():\n    ### BEGIN SOLUTION\n    return 1\n",
        metadata={"nbgrader": {"solution": True, "grade": False, "locked": False, "grade_id": "f",
                               "schema_version": 3}})])
    (course / "source" / "01_broken").mkdir()
    nbformat.write(broken, course / "source" / "01_broken" / "01_broken.ipynb")
    assert main(["release", "01_broken", "--course-dir", str(course)]) == 2
    line = _refusal(capsys)
    assert line.startswith("autograder release: nbgrader generate_assignment failed for 01_broken: ")
    assert "no end solution statement found" in line  # nbgrader's reason is kept


def test_the_built_in_errors_it_caught_before_still_end_in_one_line(tmp_path, capsys):
    assert main(["collect", str(tmp_path / "nowhere"), "--course-dir", str(tmp_path)]) == 1
    assert _refusal(capsys) == f"autograder collect: nothing to collect at {tmp_path / 'nowhere'}"


def test_module_entry_point():
    out = subprocess.run([sys.executable, "-m", "autograder", "--help"], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0 and "collect" in out.stdout and "demo" in out.stdout


def test_course_dir_defaults_to_the_current_course_root(graded, monkeypatch, tmp_path):
    """Run inside a course root (it holds nbgrader_config.py), commands work on it, as nbgrader's own do."""
    from autograder.course.coursedir import REPO_ROOT, command_course_dir

    monkeypatch.delenv("AUTOGRADER_COURSE_DIR", raising=False)
    monkeypatch.chdir(graded["course"])
    assert command_course_dir() == graded["course"].resolve()
    assert main(["export", "--to", str(tmp_path / "here.csv")]) == 0
    assert {row["student_id"] for row in csv.DictReader((tmp_path / "here.csv").open())} == {"ann", "ben", "cat"}
    monkeypatch.chdir(tmp_path)  # not a course root: the repository's course
    assert command_course_dir() == (REPO_ROOT / "course").resolve()
    monkeypatch.setenv("AUTOGRADER_COURSE_DIR", str(tmp_path))  # the variable wins everywhere
    monkeypatch.chdir(graded["course"])
    assert command_course_dir() == tmp_path.resolve()
