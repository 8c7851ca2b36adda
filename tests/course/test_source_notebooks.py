"""Every source notebook follows the course conventions (fast, structural checks only)."""
from __future__ import annotations

import re

import nbformat
import pytest

from pathlib import Path

from autograder.provided import API_NAMES, topic_of
from autograder.release import find_assignments
from coursekit.checks._hints import snake_case

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
    assert total == 100


@pytest.mark.parametrize("assignment", ASSIGNMENTS)
def test_each_exercise_has_solution_selfcheck_and_grade_cells(assignment):
    """Solution cell `<name>`, then `selfcheck_<name>`, then `test_<name>`; <name> is the API name or its
    snake case (`TokenEmbedding` or `token_embedding`); the checks called are always snake case."""
    cells = _notebook(assignment).cells
    ids = [_nbgrader(c).get("grade_id") for c in cells]
    exercises = [_nbgrader(c)["grade_id"] for c in cells if _nbgrader(c).get("solution")]
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
