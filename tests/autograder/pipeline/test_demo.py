"""`autograder demo` on one real assignment with the minimum class of six students."""
from __future__ import annotations

import csv
import html
import re

import nbformat
import pytest

from autograder.cli import main
from autograder.coursedir import assignments_in_source, default_course_dir

ASSIGNMENT = "03_attention"


@pytest.mark.slow
@pytest.mark.skipif(ASSIGNMENT not in assignments_in_source(default_course_dir()),
                    reason=f"course/source/{ASSIGNMENT} is not written yet")
def test_demo_on_one_assignment(tmp_path, capsys):
    output = tmp_path / "demo"
    (output / "stale").mkdir(parents=True)
    (output / "stale" / "left-over.txt").write_text("from an earlier run")
    code = main(["demo", "--assignments", ASSIGNMENT, "--students", "6", "--output", str(output), "--workers", "2"])
    printed = capsys.readouterr().out
    assert code == 0, printed
    assert not (output / "stale").exists()  # each run starts afresh
    with open(output / "grades.csv", newline="") as fh:
        rows = {r["student_id"]: r for r in csv.DictReader(fh)}
    assert set(rows) == {"reference", "blank", "mistake_scale", "mistake_mask", "mistake_heads", "hostile"}
    score = {s: float(r["score"]) for s, r in rows.items()}
    assert score["reference"] == float(rows["reference"]["max_score"]) > 0
    assert score["blank"] == 0
    assert rows["hostile"]["held_for_review"] == "True" and score["hostile"] == 0
    for student in ("mistake_scale", "mistake_mask", "mistake_heads"):
        assert 0 <= score[student] < score["reference"], student
    assert "sqrt" in rows["mistake_scale"]["mistakes"]  # diagnosed by the hidden check's message
    assert (output / "course" / "reports" / "course" / "index.html").exists()
    assert (output / "course" / "reports" / ASSIGNMENT / "index.html").exists()
    assert "report:" in printed and "reference" in printed
    # feedback shows the checks' messages, never reference code (hidden cells only hand objects in)
    source = nbformat.read(output / "course" / "source" / ASSIGNMENT / f"{ASSIGNMENT}.ipynb", as_version=4)
    reference_lines = {line.strip() for cell in source.cells if cell.metadata.get("nbgrader", {}).get("solution")
                       for block in re.findall(r"### BEGIN SOLUTION(.*?)### END SOLUTION", cell.source, re.S)
                       for line in block.splitlines() if len(line.strip()) > 15}
    assert reference_lines
    raw = (output / "course" / "feedback" / "mistake_scale" / ASSIGNMENT / f"{ASSIGNMENT}.html").read_text()
    page = html.unescape(re.sub(r"<[^>]+>", "", raw))
    assert 'hand_in("scaled_dot_product_attention", scaled_dot_product_attention)' in page
    assert "likely mistake: the scores are not divided by sqrt(d_k)" in page
    blank = html.unescape(re.sub(r"<[^>]+>", "", (output / "course" / "feedback" / "blank" / ASSIGNMENT /
                                                  f"{ASSIGNMENT}.html").read_text()))
    assert not [line for line in reference_lines if line in blank]
    # the instructor's course is untouched: the demo works in its own copy
    assert not (default_course_dir() / "submitted" / "hostile").exists()
