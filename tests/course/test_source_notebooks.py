"""Every source notebook follows the course conventions (fast, structural checks only).

Grade cells are of two kinds: locked code tests judged by the hidden checks (their points add up to exactly 100 per
notebook) and written answers graded by hand on top (`autograder.course.written`: a question cell, then a markdown answer
cell `written_*` whose source holds a model answer and a rubric whose points match the cell's).
"""
from __future__ import annotations

import re

import nbformat
import pytest

from pathlib import Path

from autograder.course.provided import API_NAMES, topic_of
from autograder.publish.release import find_assignments
from autograder.course.written import PREFIX, answer_keys, automatic_points, is_written, written_cells
from coursekit.checks.toolkit import snake_case

COURSE = Path(__file__).resolve().parents[2] / "course"
ASSIGNMENTS = find_assignments(COURSE)

pytestmark = pytest.mark.skipif(not ASSIGNMENTS, reason="no assignment in course/source yet")


def _notebook(assignment):
    return nbformat.read(COURSE / "source" / assignment / f"{assignment}.ipynb", as_version=4)


def _nbgrader(cell):
    return cell.metadata.get("nbgrader", {})


def test_assignment_folders_are_named_after_topics():
    for assignment in ASSIGNMENTS:
        topic_of(assignment)  # raises for a folder outside the NN_name scheme


@pytest.mark.parametrize("assignment", ASSIGNMENTS)
def test_notebook_is_valid_and_uses_python3(assignment):
    notebook = _notebook(assignment)
    nbformat.validate(notebook)
    assert notebook.nbformat == 4
    assert notebook.metadata["kernelspec"]["name"] == "python3"


@pytest.mark.parametrize("assignment", ASSIGNMENTS)
def test_points_total_100_and_cells_are_well_formed(assignment):
    cells = _notebook(assignment).cells
    grade_ids = [_nbgrader(c)["grade_id"] for c in cells if _nbgrader(c)]
    assert len(grade_ids) == len(set(grade_ids)), "grade_id values must be unique"
    total = 0
    for cell in cells:
        meta = _nbgrader(cell)
        if not meta:
            continue
        assert meta["schema_version"] == 3
        if is_written(cell):
            continue  # test_written_answers_are_well_formed
        if meta["grade"]:
            assert meta["locked"] and not meta["solution"], f"{meta['grade_id']}: grade cells are locked tests"
            assert meta["grade_id"].startswith("test_")
            check = snake_case(meta["grade_id"][len("test_"):])
            hidden = re.search(r"### BEGIN HIDDEN TESTS\n(.*)\n### END HIDDEN TESTS", cell.source, re.S)
            assert hidden, f"{meta['grade_id']}: the check call must sit between the HIDDEN TESTS markers"
            call = re.fullmatch(rf'from coursekit\.probe import hand_in\nhand_in\("{check}", (.+)\)',
                                hidden.group(1).strip())
            assert call, f"{meta['grade_id']}: the hidden part is only the import and one hand_in(\"{check}\", ...)"
            import autograder.checks

            assert f"check_{check}" in autograder.checks.__all__, f"no hidden check named check_{check}"
            assert f"({meta['points']} points)" in cell.source
            total += meta["points"]
        if meta["solution"]:
            assert cell.cell_type == "code" and not meta["locked"]
            assert "### BEGIN SOLUTION" in cell.source and "### END SOLUTION" in cell.source
    assert total == 100 == automatic_points(_notebook(assignment)), "the automatic points of a notebook add up to 100"


@pytest.mark.parametrize("assignment", ASSIGNMENTS)
def test_written_answers_are_well_formed(assignment):
    """Each written answer: a prose question right before it, a markdown answer cell (grade + solution, unlocked,
    `written_*`, 5 points) holding a model answer and a rubric whose points are the cell's and whose criteria add
    up to them. At most 3 per notebook."""
    notebook = _notebook(assignment)
    cells = notebook.cells
    written = written_cells(notebook)
    assert 1 <= len(written) <= 3, "1-3 written answers per notebook"
    for cell in cells:  # a markdown grade cell that is not a written answer would be graded by nobody
        meta = _nbgrader(cell)
        if cell.cell_type == "markdown" and (meta.get("grade") or meta.get("solution")):
            assert is_written(cell), f"{meta.get('grade_id')}: a markdown grade cell is a written answer"
    keys = answer_keys(notebook)  # raises for an answer cell out of the format
    for cell in written:
        meta = _nbgrader(cell)
        grade_id = meta["grade_id"]
        assert grade_id.startswith(PREFIX) and not meta["locked"] and not meta.get("task"), grade_id
        assert meta["points"] == 5, f"{grade_id}: a written answer is worth 5 points"
        before = cells[cells.index(cell) - 1]
        assert before.cell_type == "markdown" and not _nbgrader(before), f"{grade_id}: the question cell comes first"
        key = keys[grade_id]
        assert key.question.strip() and len(key.model_answer.split()) >= 15, f"{grade_id}: a real model answer"
        heading_points = float(re.search(r"\*\*Rubric \((\d+(?:\.\d+)?) points?\)", cell.source).group(1))
        assert heading_points == meta["points"], f"{grade_id}: the rubric is out of {meta['points']} points"
        assert key.criteria_points and sum(key.criteria_points) == meta["points"], \
            f"{grade_id}: the rubric's criteria ({key.criteria_points}) add up to the cell's {meta['points']} points"
        assert "### BEGIN SOLUTION" not in cell.source, f"{grade_id}: the whole cell is replaced, no markers"


@pytest.mark.parametrize("assignment", ASSIGNMENTS)
def test_each_exercise_has_solution_selfcheck_and_grade_cells(assignment):
    """Solution cell `<name>`, then `selfcheck_<name>`, then `test_<name>`; <name> is the API name or its
    snake case (`TokenEmbedding` or `token_embedding`); the checks called are always snake case."""
    cells = _notebook(assignment).cells
    ids = [_nbgrader(c).get("grade_id") for c in cells]
    exercises = [_nbgrader(c)["grade_id"] for c in cells if _nbgrader(c).get("solution") and not is_written(c)]
    topic = topic_of(assignment)
    expected = {snake_case(name) for name in API_NAMES[topic]}
    assert expected <= {snake_case(e) for e in exercises}, "every API name of the topic is an exercise"
    for name in exercises:
        at = ids.index(name)
        assert ids[at + 1] == f"selfcheck_{name}", f"the public self-check of {name} follows its solution cell"
        assert ids[at + 2] == f"test_{name}", f"the grade cell of {name} follows its self-check"
        selfcheck = cells[at + 1]
        assert _nbgrader(selfcheck)["locked"] and not _nbgrader(selfcheck)["grade"]
        check = f"check_{snake_case(name)}"
        assert f"from coursekit.checks.{topic} import {check}" in selfcheck.source


@pytest.mark.parametrize("assignment", ASSIGNMENTS)
def test_public_checks_exist_for_every_exercise(assignment):
    import importlib

    topic = topic_of(assignment)
    module = importlib.import_module(f"coursekit.checks.{topic}")
    for name in API_NAMES[topic]:
        check = f"check_{snake_case(name)}"
        assert callable(getattr(module, check, None)), f"coursekit.checks.{topic}.{check} is missing"
