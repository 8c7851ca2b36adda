"""`autograder grade` (nbgrader's autograde steps, the jail, the judge) in a temporary copy of the course: the
reference gets the 100 automatic points and its written answers wait for a grader; the release grades to 0, its
written answers included (left as released, nothing to grade). Both are "students" of one grading run per
assignment (see conftest.py). A plain `nbgrader autograde` cannot judge the hand_in cells and must never give
their points. A score given by hand to a written answer of a real notebook reaches the export and the report.
"""
from __future__ import annotations

import csv
import re
import shutil
from pathlib import Path

import nbformat
import pytest

from autograder.publish.release import find_assignments
from autograder.course.written import written_cells

REPO = Path(__file__).resolve().parents[2]
ASSIGNMENTS = find_assignments(REPO / "course")

pytestmark = pytest.mark.slow


def _graded(autograded, assignment, student):
    outcome = autograded(assignment)
    scores = outcome["scores"]
    assert student in scores, (f"nbgrader recorded no grade for {student}/{assignment}:\n"
                               f"{outcome['result'].get('error', '')}\n{outcome['result'].get('log', '')[-3000:]}")
    return scores[student], outcome


def _written_ids(assignment) -> set[str]:
    """grade_ids of the written answers of the source notebook (hand-graded, on top of the 100 points)."""
    notebook = nbformat.read(REPO / "course" / "source" / assignment / f"{assignment}.ipynb", as_version=4)
    return {c.metadata["nbgrader"]["grade_id"] for c in written_cells(notebook)}


def _written_points(graded, written) -> float:
    return sum(graded["grades"][name][1] for name in written)


@pytest.mark.parametrize("assignment", ASSIGNMENTS)
def test_reference_notebook_gets_full_marks(assignment, autograded):
    graded, outcome = _graded(autograded, assignment, "reference")
    written = _written_ids(assignment)
    assert written <= set(graded["grades"]), "every written answer is a grade cell of the gradebook"
    assert graded["max_score"] == 100 + _written_points(graded, written), \
        f"the notebook is worth {graded['max_score']}: 100 automatic points plus its written answers"
    automatic = {name: score for name, score in graded["grades"].items() if name not in written}
    assert sum(maximum for _, maximum in automatic.values()) == 100
    lost = {name: score for name, score in automatic.items() if score[0] != score[1]}
    assert not lost and graded["score"] == 100, (f"the reference lost points on {lost}\n"
                                                 f"{outcome['result'].get('log', '')[-3000:]}")
    for name in written:  # the model answer is an answer: nobody scores it but a grader
        assert graded["auto"][name] is None and graded["needs_manual_grade"][name], name
    assert not [n for n in automatic if graded["needs_manual_grade"][n]], "automatic cells need no grader"


@pytest.mark.parametrize("assignment", ASSIGNMENTS)
def test_unmodified_release_grades_to_zero_without_crashing(assignment, autograded, course_copy):
    graded, outcome = _graded(autograded, assignment, "unmodified")
    assert outcome["result"].get("success"), outcome["result"].get("error", "")
    written = _written_ids(assignment)
    assert graded["max_score"] == 100 + _written_points(graded, written)
    assert graded["score"] == 0, f"an unanswered notebook scored {graded['score']}: {graded['grades']}"
    for name in written:  # "YOUR ANSWER HERE" left as it is: 0, and nothing waits for a grader
        assert graded["auto"][name] == 0 and not graded["needs_manual_grade"][name], name
    autograded_notebook = course_copy / "autograded" / "unmodified" / assignment / f"{assignment}.ipynb"
    assert autograded_notebook.is_file(), "nbgrader wrote no autograded notebook"


WRITTEN_EXAMPLE = next((a for a in ASSIGNMENTS if _written_ids(a)), None)


@pytest.mark.skipif(WRITTEN_EXAMPLE is None, reason="no notebook has a written answer yet")
def test_manual_score_on_a_real_notebook_reaches_export_and_report(autograded, course_copy, tmp_path):
    """On a copy of the graded course (no regrading): a grader scores the reference's first written answer as
    formgrader saves it; `autograder export` adds it to the score, the report no longer lists it as waiting and
    shows the rubric of the answers that still wait."""
    from nbgrader.api import Gradebook

    from autograder.cli import main
    from autograder.gradebook.queries import waiting_for_grader

    assignment = WRITTEN_EXAMPLE
    graded, _ = _graded(autograded, assignment, "reference")
    course = tmp_path / "course"
    (course / "source").mkdir(parents=True)
    for name in ("nbgrader_config.py", "gradebook.db"):
        shutil.copy2(course_copy / name, course / name)
    shutil.copytree(course_copy / "source" / assignment, course / "source" / assignment)
    written = sorted(_written_ids(assignment))
    mine = lambda: [w["cell"] for w in waiting_for_grader(course, assignments=[assignment])  # noqa: E731
                    if w["student"] == "reference"]
    assert sorted(mine()) == written
    with Gradebook(f"sqlite:///{course / 'gradebook.db'}") as gb:
        answer = gb.find_grade(written[0], assignment, assignment, "reference")
        answer.manual_score = 3.0
        answer.needs_manual_grade = False  # as formgrader's grade API does once a score is given
        gb.db.commit()
    assert sorted(mine()) == written[1:]
    assert main(["export", "--course-dir", str(course), "--to", str(tmp_path / "grades.csv")]) == 0
    row = next(r for r in csv.DictReader((tmp_path / "grades.csv").open())
               if r["assignment"] == assignment and r["student_id"] == "reference")
    assert float(row["score"]) == graded["score"] + 3.0 and float(row["manual_score"]) == 3.0
    assert row["waiting_for_grader"] == "; ".join(written[1:])
    assert main(["report", assignment, "--course-dir", str(course)]) == 0
    page = (course / "reports" / assignment / "index.html").read_text()
    section = page[page.index("Waiting for manual grading"):]
    rows = re.findall(r"<tr><td>reference</td>.*?</tr>", section)
    assert [name for name in written if any(name in r for r in rows)] == written[1:]
    if written[1:]:
        assert f"{assignment}/{written[1]}" in section and "Model answer." in section and "Rubric." in section


def test_plain_nbgrader_autograde_gives_no_points_without_the_judge(tmp_path):
    """An instructor who runs nbgrader's own autograde (e.g. the formgrader's button) gets 0, never a free 100:
    the hidden cells only hand objects in, and nothing in that run could judge them."""
    import shutil

    from nbgrader.api import Gradebook

    from autograder.publish.release import nbgrader_api, release

    assignment = "03_attention"
    shutil.copy2(REPO / "course" / "nbgrader_config.py", tmp_path / "nbgrader_config.py")
    shutil.copytree(REPO / "course" / "source" / assignment, tmp_path / "source" / assignment)
    release([assignment], course_root=tmp_path, exercises_dir=tmp_path / "exercises")
    shutil.copytree(tmp_path / "source" / assignment, tmp_path / "submitted" / "reference" / assignment)
    nbgrader_api(tmp_path).autograde(assignment, "reference", force=True, create=True)
    with Gradebook(f"sqlite:///{tmp_path / 'gradebook.db'}") as gradebook:
        submission = gradebook.find_submission(assignment, "reference")
        written = sum(nbgrader_cell.max_score for nbgrader_cell in gradebook.find_notebook(assignment, assignment)
                      .grade_cells if nbgrader_cell.name in _written_ids(assignment))
        assert written > 0, "03 has written answers: they count in the maximum, never in the score"
        assert submission.max_score == 100 + written and submission.score == 0
