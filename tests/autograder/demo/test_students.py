"""The demo's students are made by code from the real notebooks: every solution cell they hand in still parses,
so a student who 'left an exercise unfinished' loses that exercise, as a real one would, and not the whole cell
(a stub at the wrong indentation inside a method would be a syntax error that hides the class)."""
from __future__ import annotations

import ast
from pathlib import Path

import nbformat
import pytest

from autograder.demo.students import STUDENT_MISTAKES, apply_mistake
from autograder.publish.release import find_assignments

COURSE = Path(__file__).resolve().parents[3] / "course"


@pytest.mark.parametrize("assignment", find_assignments(COURSE))
def test_every_demo_student_hands_in_code_that_parses(assignment):
    source = nbformat.read(COURSE / "source" / assignment / f"{assignment}.ipynb", as_version=4)
    for student in STUDENT_MISTAKES:
        nb, label = apply_mistake(source, student)
        for cell in nb.cells:
            if cell.cell_type == "code" and cell.metadata.get("nbgrader", {}).get("solution"):
                ast.parse(cell.source)  # raises SyntaxError with the cell's line
        if label.startswith("left `"):
            assert "raise NotImplementedError()" in "".join(c.source for c in nb.cells)


@pytest.mark.parametrize("assignment", find_assignments(COURSE))
def test_what_a_demo_student_did_names_exactly_the_exercises_they_changed(assignment):
    """The demo's table says, per notebook, which exercises each mistaken student changed (and how): every changed
    solution cell is named and no other one, so a phrase about attention scores cannot describe a notebook 01 edit."""
    source = nbformat.read(COURSE / "source" / assignment / f"{assignment}.ipynb", as_version=4)
    solutions = {c.metadata["nbgrader"]["grade_id"]: c.source for c in source.cells
                 if c.cell_type == "code" and c.metadata.get("nbgrader", {}).get("solution")}
    for student in STUDENT_MISTAKES:
        nb, label = apply_mistake(source, student)
        changed = {c.metadata["nbgrader"]["grade_id"] for c in nb.cells if c.cell_type == "code"
                   and c.metadata.get("nbgrader", {}).get("solution")
                   and c.source != solutions[c.metadata["nbgrader"]["grade_id"]]}
        assert changed, (assignment, student)
        named = {grade_id for grade_id in solutions if f"`{grade_id}`" in label}
        assert named == changed, (assignment, student, label)
