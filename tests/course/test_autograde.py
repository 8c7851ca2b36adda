"""`autograder grade` (nbgrader's autograde steps, the jail, the judge) in a temporary copy of the course: the
reference gets 100, the release grades to 0. Both are "students" of one grading run per assignment (see
conftest.py). A plain `nbgrader autograde` cannot judge the hand_in cells and must never give their points.
"""
from __future__ import annotations

from pathlib import Path

import pytest

from autograder.release import find_assignments

REPO = Path(__file__).resolve().parents[2]
ASSIGNMENTS = find_assignments(REPO / "course")

pytestmark = pytest.mark.slow


def _graded(autograded, assignment, student):
    outcome = autograded(assignment)
    scores = outcome["scores"]
    assert student in scores, (f"nbgrader recorded no grade for {student}/{assignment}:\n"
                               f"{outcome['result'].get('error', '')}\n{outcome['result'].get('log', '')[-3000:]}")
    return scores[student], outcome


@pytest.mark.parametrize("assignment", ASSIGNMENTS)
def test_reference_notebook_gets_full_marks(assignment, autograded):
    graded, outcome = _graded(autograded, assignment, "reference")
    assert graded["max_score"] == 100, f"the notebook is worth {graded['max_score']}, not 100"
    lost = {name: score for name, score in graded["grades"].items() if score[0] != score[1]}
    assert graded["score"] == 100, (f"the reference lost points on {lost}\n"
                                    f"{outcome['result'].get('log', '')[-3000:]}")


@pytest.mark.parametrize("assignment", ASSIGNMENTS)
def test_unmodified_release_grades_to_zero_without_crashing(assignment, autograded, course_copy):
    graded, outcome = _graded(autograded, assignment, "unmodified")
    assert outcome["result"].get("success"), outcome["result"].get("error", "")
    assert graded["max_score"] == 100
    assert graded["score"] == 0, f"an unanswered notebook scored {graded['score']}: {graded['grades']}"
    autograded_notebook = course_copy / "autograded" / "unmodified" / assignment / f"{assignment}.ipynb"
    assert autograded_notebook.is_file(), "nbgrader wrote no autograded notebook"


def test_plain_nbgrader_autograde_gives_no_points_without_the_judge(tmp_path):
    """An instructor who runs nbgrader's own autograde (e.g. the formgrader's button) gets 0, never a free 100:
    the hidden cells only hand objects in, and nothing in that run could judge them."""
    import shutil

    from nbgrader.api import Gradebook

    from autograder.release import nbgrader_api, release

    assignment = "03_attention"
    shutil.copy2(REPO / "course" / "nbgrader_config.py", tmp_path / "nbgrader_config.py")
    shutil.copytree(REPO / "course" / "source" / assignment, tmp_path / "source" / assignment)
    release([assignment], course_root=tmp_path, exercises_dir=tmp_path / "exercises")
    shutil.copytree(tmp_path / "source" / assignment, tmp_path / "submitted" / "reference" / assignment)
    nbgrader_api(tmp_path).autograde(assignment, "reference", force=True, create=True)
    with Gradebook(f"sqlite:///{tmp_path / 'gradebook.db'}") as gradebook:
        submission = gradebook.find_submission(assignment, "reference")
        assert submission.max_score == 100 and submission.score == 0
