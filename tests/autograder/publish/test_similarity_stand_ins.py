"""The similarity check treats the grader's stand-ins (autograder/checks/stand_ins.py) like a classmate's work: a
submission that contains the stand-ins a check lent (issue #31, door 1: captured by an audit hook, handed in
later) is reported; the reference solution of every notebook is not mistaken for them."""
from __future__ import annotations

from pathlib import Path

import nbformat
import pytest

from autograder.checks.stand_ins import STAND_INS as NAMES, source_for
from autograder.checks.stand_ins import code_for as stand_in_code
from autograder.publish.similarity import STAND_INS, compare_documents, similarity, solution_code
from coursekit.api import ASSIGNMENTS, by_name

ROOT = Path(__file__).resolve().parents[3]


def _names(assignment: str) -> list[str]:
    return sorted(name for name in NAMES if by_name(name).notebook == assignment)


@pytest.mark.parametrize("assignment", ASSIGNMENTS)
def test_the_stand_ins_of_each_notebook_are_compared_and_the_reference_is_not_taken_for_them(assignment):
    code = stand_in_code(assignment)
    assert code == (source_for(_names(assignment)) if _names(assignment) else "")
    if not code:
        return
    reference = solution_code(nbformat.read(ROOT / "course" / "source" / assignment / f"{assignment}.ipynb",
                                            as_version=4))
    result = compare_documents({"reference": reference, STAND_INS: code})
    assert result.reported == []


def test_a_resubmitted_stand_in_is_reported(tmp_path):
    assignment = "05_encoder"
    released = nbformat.read(ROOT / "exercises" / assignment / f"{assignment}.ipynb", as_version=4)
    source = nbformat.read(ROOT / "course" / "source" / assignment / f"{assignment}.ipynb", as_version=4)
    (tmp_path / "release" / assignment).mkdir(parents=True)
    nbformat.write(released, tmp_path / "release" / assignment / f"{assignment}.ipynb")
    harvested = nbformat.from_dict(released)
    first = next(c for c in harvested.cells if c.metadata.get("nbgrader", {}).get("solution"))
    first.source += "\n\n" + source_for(["EncoderBlock"]).split("\n\n\n", 1)[1]   # the kept text, its header cut
    for student, nb in {"honest": source, "harvester": harvested, "blank": released}.items():
        folder = tmp_path / "submitted" / student / assignment
        folder.mkdir(parents=True)
        nbformat.write(nb, folder / f"{assignment}.ipynb")
    result = similarity(tmp_path, assignment, lent_code=stand_in_code(assignment))
    assert STAND_INS in result.students
    assert [sorted((p.a, p.b)) for p in result.reported] == [sorted(("harvester", STAND_INS))]
