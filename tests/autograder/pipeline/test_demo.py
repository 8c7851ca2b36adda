"""`autograder demo` on one real assignment with the minimum class of six students.

Written answers: every student but `blank` writes one of their own (never the model answer or the rubric); they
wait for a grader and change no automatic score; the summary says how many wait.
"""
from __future__ import annotations

import csv
import html
import re

import nbformat
import pytest

from autograder.cli import main
from autograder.course.coursedir import assignments_in_source, default_course_dir
from autograder.course.written import MODEL_HEADING, TEXT_STUB, automatic_points, is_written, written_cells

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
    source = nbformat.read(output / "course" / "source" / ASSIGNMENT / f"{ASSIGNMENT}.ipynb", as_version=4)
    written = sorted(c.metadata["nbgrader"]["grade_id"] for c in written_cells(source))
    written_max = sum(c.metadata["nbgrader"]["points"] for c in written_cells(source))
    assert {float(r["max_score"]) for r in rows.values()} == {automatic_points(source) + written_max}
    assert score["reference"] == automatic_points(source) == 100  # full automatic marks; written answers wait
    assert score["blank"] == 0
    assert rows["hostile"]["held_for_review"] == "True" and score["hostile"] == 0
    waiting = {s: r["waiting_for_grader"] for s, r in rows.items()}
    answered = ("reference", "mistake_scale", "mistake_mask", "mistake_heads")
    assert waiting == {**{s: "; ".join(written) for s in answered}, "blank": "",
                       "hostile": f"{ASSIGNMENT}: held for review" if written else ""}
    if written:
        assert (f"manual grading: {len(written) * len(answered)} answer(s) in {len(answered)} notebook(s) wait "
                "for a grader") in printed
    for student in rows:  # each wrote their own answer (blank: the stub), never the source's answer key
        handed_in = nbformat.read(output / "course" / "submitted" / student / ASSIGNMENT / f"{ASSIGNMENT}.ipynb",
                                  as_version=4)
        answers = [c.source for c in handed_in.cells if is_written(c)]
        assert len(answers) == len(written)
        assert all((a == TEXT_STUB) == (student == "blank") for a in answers), student
        assert not [a for a in answers if MODEL_HEADING in a or "Rubric" in a], student
    for student in ("mistake_scale", "mistake_mask", "mistake_heads"):
        assert 0 <= score[student] < score["reference"], student
    assert "sqrt" in rows["mistake_scale"]["mistakes"]  # diagnosed by the hidden check's message
    assert (output / "course" / "reports" / "course" / "index.html").exists()
    assert (output / "course" / "reports" / ASSIGNMENT / "index.html").exists()
    assert "report:" in printed and "reference" in printed
    # feedback shows the checks' messages, never reference code (hidden cells only hand objects in)
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
