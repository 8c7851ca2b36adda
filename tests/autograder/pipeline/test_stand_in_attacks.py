"""Nothing a student's code does with a lent stand-in gains a point (autograder/checks/kit/parts.py).

On the real notebook 07: a student who left `masked_mean_pool` unfinished gets the course's stand-in lent while
`TransformerClassifier` is judged (so that exercise earns its points on its own). The attackers below also leave it
unfinished and try to keep the lent stand-in for later cells: the classifier they then train in the notebook (an
intended cascade, the trained-classifier cell) must not pass with it. Each attacker must score exactly what the
honest classmate who left the same exercise unfinished scores, and its trained-classifier cell nothing.
The class goes through `autograder collect` and `autograder grade` (2 Dask workers, jailed kernels, the judge).
"""
from __future__ import annotations

import dataclasses
import re
from pathlib import Path

import nbformat
import pytest
from nbformat.v4 import new_code_cell

pytestmark = [pytest.mark.slow, pytest.mark.pipeline]

ASSIGNMENT = "07_yelp_classifier"

# code added at the start of the student's TransformerClassifier.__init__ (it runs in the judged check too)
KEEP_IN_INIT = "        globals()['_kept_pool'] = masked_mean_pool\n"
# a cell placed right before the training cell: use what was kept
USE_KEPT = {
    "keep_lent_pool": "masked_mean_pool = globals().get('_kept_pool', masked_mean_pool)\n",
    "keep_lent_module": ("import sys\n"
                         "_lent = getattr(globals().get('_kept_pool'), '__globals__', {})\n"
                         "if 'masked_mean_pool' in _lent:\n"
                         "    masked_mean_pool = _lent['masked_mean_pool']\n"),
}


def _cells(nb, grade_id: str):
    return next(c for c in nb.cells if c.metadata.get("nbgrader", {}).get("grade_id") == grade_id)


def _students(course: Path) -> dict[str, nbformat.NotebookNode]:
    source = nbformat.read(course / "source" / ASSIGNMENT / f"{ASSIGNMENT}.ipynb", as_version=4)
    release = nbformat.read(course / "release" / ASSIGNMENT / f"{ASSIGNMENT}.ipynb", as_version=4)
    unfinished = nbformat.from_dict(source)
    _cells(unfinished, "masked_mean_pool").source = _cells(release, "masked_mean_pool").source
    students = {"pool_unfinished": unfinished}
    for name, code in USE_KEPT.items():
        nb = nbformat.from_dict(unfinished)
        cell = _cells(nb, "TransformerClassifier")
        cell.source = re.sub(r"(        super\(\).__init__\(\)\n)", r"\1" + KEEP_IN_INIT.replace("\\", "\\\\"),
                             cell.source, count=1)
        assert KEEP_IN_INIT in cell.source
        training = nb.cells.index(_cells(nb, "training"))
        nb.cells.insert(training, new_code_cell(code))
        students[f"attack_{name}"] = nb
    return students


@pytest.fixture(scope="module")
def graded(tmp_path_factory):
    from nbgrader.api import Gradebook

    from autograder.submissions.collect import collect
    from autograder.demo.run import prepare_course
    from autograder.grade.engine import grade
    from autograder.sandbox.limits import Limits
    from autograder.publish.release import release

    tmp = tmp_path_factory.mktemp("stand_in_attacks")
    course = prepare_course(tmp, [ASSIGNMENT])
    release([ASSIGNMENT], course_root=course, exercises_dir=tmp / "exercises")
    for student, nb in _students(course).items():
        target = tmp / "inbox" / student / ASSIGNMENT / f"{ASSIGNMENT}.ipynb"
        target.parent.mkdir(parents=True)
        nbformat.write(nb, target)
    collect(course, tmp / "inbox")
    summary = grade(course, ASSIGNMENT, workers=2, limits=dataclasses.replace(Limits(), notebook_timeout=900),
                    progress=False)
    with Gradebook(f"sqlite:///{course / 'gradebook.db'}") as gb:
        scores = {sub.student.id: {g.name: g.auto_score or 0.0 for nb in sub.notebooks for g in nb.grades}
                  for sub in gb.assignment_submissions(ASSIGNMENT)}
    return {"summary": summary, "scores": scores}


def test_the_honest_student_loses_only_the_pool_and_the_intended_cascade(graded):
    scores = graded["scores"]["pool_unfinished"]
    assert scores["test_masked_mean_pool"] == 0
    assert scores["test_TransformerClassifier"] > 0, "TransformerClassifier is judged with a working pool"


@pytest.mark.parametrize("attack", sorted(USE_KEPT))
def test_keeping_a_lent_stand_in_gains_nothing(graded, attack):
    honest = graded["scores"]["pool_unfinished"]
    scores = graded["scores"][f"attack_{attack}"]
    assert scores["test_trained_classifier"] == 0, "the kept stand-in trained a classifier"
    assert sum(scores.values()) <= sum(honest.values())
