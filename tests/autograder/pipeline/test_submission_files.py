"""Nothing a student submits can break the batch or reach outside its folder (issue #11, part 4).

One batch of the synthetic course (7 points: squares 1 + 2 hidden, normalize 4): honest classmates (alice 7,
bob 1, carol 0) graded together with submissions planted straight into course/submitted/ (as somebody with write
access to the exchange could): notebooks and files that are symbolic links (to a classmate's notebook, to
/etc/passwd, to folders outside), a FIFO, an oversized notebook, garbage timestamps, a malformed notebook and a
missing one. The honest scores are unchanged, each bad submission costs only itself with a message naming the
file, and nothing outside the submissions is ever read into the course.
"""
from __future__ import annotations

import contextlib
import io
import json
import os
import socket

import nbformat
import pytest
from nbgrader.api import Gradebook

from autograder.submissions.collect import collect
from autograder.grade.engine import grade
from autograder.gradebook.store import RunsTable
from autograder.submissions.files import RefusedFile, read_regular, scan_tree

SECRET = "TOP SECRET answers of the instructor"
HONEST = {"alice": ("solution", 7), "bob": ("mistake", 1), "carol": ("blank", 0)}
REFUSED = ("mallory", "mel", "nina", "pete", "fifo", "big")


@pytest.fixture(scope="module")
def batch(released_course, tmp_path_factory, helpers):
    import shutil

    root = tmp_path_factory.mktemp("submission-files")
    course = root / "course"
    shutil.copytree(released_course, course)
    outside = root / "outside"  # somewhere outside the course a submission must never reach
    (outside / "ps1").mkdir(parents=True)
    (outside / "ps1" / "ps1.ipynb").write_text(helpers.write_submission(root / "tmp", course, "x", "solution")
                                               .read_text().replace("Two small exercises.", SECRET))
    (outside / "secret.txt").write_text(SECRET)
    inbox = root / "inbox"
    for student, (kind, _) in HONEST.items():
        helpers.write_submission(inbox, course, student, kind)
    report = collect(course, inbox)
    assert report.problems == []

    submitted = course / "submitted"

    def folder(student):
        (submitted / student / "ps1").mkdir(parents=True, exist_ok=True)
        return submitted / student / "ps1"

    solution = (submitted / "alice" / "ps1" / "ps1.ipynb").read_text()
    (folder("mallory") / "ps1.ipynb").symlink_to(submitted / "alice" / "ps1" / "ps1.ipynb")  # a classmate's
    (submitted / "mel").mkdir()
    (submitted / "mel" / "ps1").symlink_to(outside / "ps1", target_is_directory=True)
    (submitted / "nina").symlink_to(outside, target_is_directory=True)  # nina/ps1/ps1.ipynb is outside
    (folder("pete") / "ps1.ipynb").write_text(solution)
    (folder("pete") / "data.csv").symlink_to("/etc/passwd")
    (folder("pete") / "secret.txt").symlink_to(outside / "secret.txt")
    os.mkfifo(folder("fifo") / "ps1.ipynb")  # nbgrader or a plain read would block the batch forever
    big = nbformat.reads(solution, as_version=4)
    big.cells.append(nbformat.v4.new_markdown_cell("x" * 300_000))
    (folder("big") / "ps1.ipynb").write_text(nbformat.writes(big))
    (folder("tim") / "ps1.ipynb").write_text(solution)
    (folder("tim") / "timestamp.txt").write_text("garbage, not a date")
    (folder("tess") / "ps1.ipynb").write_text(solution)
    (folder("tess") / "timestamp.txt").write_text("99999999999999999999")
    (folder("malformed") / "ps1.ipynb").write_text('{"cells": [')
    (folder("missing") / "timestamp.txt").write_text("2026-01-01 10:00:00 UTC")

    with open(course / "nbgrader_config.py", "a") as config:  # grade reads the limit from the course config
        config.write("\nc.SubmissionLimits.notebook_bytes = 200_000\n")
    errors = io.StringIO()
    with contextlib.redirect_stderr(errors):
        summary = grade(course, "ps1", workers=2, limits=helpers.TEST_LIMITS, progress=False)
    return {"course": course, "outside": outside, "summary": summary, "stderr": errors.getvalue()}


def _row(batch, student):
    rows = [r for r in batch["summary"].graded if r["student"] == student]
    assert len(rows) == 1, f"{student}: {rows}"
    return rows[0]


def _score(batch, student):
    with Gradebook(f"sqlite:///{batch['course'] / 'gradebook.db'}", "synthetic") as gb:
        return gb.find_submission("ps1", student).score


@pytest.mark.parametrize("student", sorted(HONEST))
def test_honest_classmates_keep_their_grades(batch, student):
    row = _row(batch, student)
    assert row["status"] == "graded" and row["flags"] == []
    assert row["score"] == HONEST[student][1] == _score(batch, student)


@pytest.mark.parametrize("student", REFUSED)
def test_links_special_files_and_oversized_notebooks_fail_alone(batch, student):
    row = _row(batch, student)
    assert row["status"] == "error" and row["score"] == 0 and _score(batch, student) == 0
    note = " ".join(row["notes"])
    assert note.startswith("refused: "), note
    expected = {"mallory": "ps1/ps1.ipynb: symbolic link refused", "mel": "ps1: symbolic link refused",
                "nina": "nina/ is a symbolic link", "pete": "ps1/data.csv: symbolic link refused",
                "fifo": "ps1/ps1.ipynb: a FIFO (named pipe) refused", "big": "ps1.ipynb: notebook too large"}
    assert expected[student] in note, note
    assert f"ps1/{student}: refused: " in batch["stderr"], "the instructor is told on stderr"
    assert not (batch["course"] / "autograded" / student / "ps1" / "ps1.ipynb").exists()


def test_nothing_outside_the_submissions_reaches_the_course(batch):
    course = batch["course"]
    for folder in ("autograded", "feedback"):
        for path in (course / folder).rglob("*") if (course / folder).exists() else ():
            assert not path.is_symlink(), path
            if path.is_file():
                text = path.read_text(errors="replace")
                assert SECRET not in text and "root:x:0:0" not in text, path
    assert not (course / "autograded" / "pete" / "ps1" / "data.csv").exists()


@pytest.mark.parametrize("student", ["tim", "tess"])
def test_garbage_timestamp_is_graded_as_unknown_and_flagged(batch, student):
    row = _row(batch, student)
    assert row["status"] == "graded" and row["score"] == 7
    (flag,) = [f for f in row["flags"] if f["code"] == "timestamp-unreadable"]
    assert flag["severity"] == "review" and "not a date" in flag["message"]
    assert "submission time unknown" in flag["message"]
    with Gradebook(f"sqlite:///{batch['course'] / 'gradebook.db'}", "synthetic") as gb:
        submission = gb.find_submission("ps1", student)
        assert submission.timestamp is None and submission.late_submission_penalty in (None, 0)
    assert f"ps1/{student}: timestamp.txt holds" in batch["stderr"]


def test_malformed_and_missing_notebooks_cost_only_themselves(batch):
    assert _row(batch, "malformed")["score"] == 0 and _row(batch, "malformed")["status"] != "graded"
    assert _row(batch, "missing")["score"] == 0 and _row(batch, "missing")["status"] == "missing"
    runs = RunsTable(f"sqlite:///{batch['course'] / 'gradebook.db'}")
    try:
        students = {r["student"] for r in runs.all("ps1")}
    finally:
        runs.dispose()
    assert set(HONEST) | set(REFUSED) | {"tim", "tess", "malformed", "missing"} <= students
    assert batch["summary"].refused == []


# --- the file reader itself ------------------------------------------------------------------------------------

def test_read_regular_and_scan_tree(tmp_path, monkeypatch):
    (tmp_path / "ok.txt").write_text("fine")
    assert read_regular(tmp_path / "ok.txt", 100) == b"fine"
    with pytest.raises(RefusedFile, match="too large"):
        read_regular(tmp_path / "ok.txt", 3)
    (tmp_path / "link").symlink_to(tmp_path / "ok.txt")
    with pytest.raises(RefusedFile, match="symbolic link"):
        read_regular(tmp_path / "link", 100)
    os.mkfifo(tmp_path / "pipe")
    with pytest.raises(RefusedFile, match="FIFO"):
        read_regular(tmp_path / "pipe", 100)
    os.link(tmp_path / "ok.txt", tmp_path / "hard")
    with pytest.raises(RefusedFile, match="hard link"):
        read_regular(tmp_path / "hard", 100)
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "dirlink").symlink_to(tmp_path, target_is_directory=True)
    sock = socket.socket(socket.AF_UNIX)
    try:
        monkeypatch.chdir(tmp_path)  # short relative path: AF_UNIX paths are limited to ~100 bytes
        sock.bind("sock")
        found = dict(scan_tree(tmp_path))
    finally:
        sock.close()
    assert found["link"].startswith("symbolic link") and found["pipe"].startswith("a FIFO")
    assert found["hard"].startswith("hard link") and found["ok.txt"].startswith("hard link")
    assert found[os.path.join("sub", "dirlink")].startswith("symbolic link")
    assert found["sock"].startswith("a socket")
    assert json.dumps(found)  # plain strings, fit for a report
