"""exercises/ is exactly what nbgrader generates from course/source today (regenerated into a temp copy).

The fresh release is gated (a new gradebook: no due dates), so it holds no provided.py, like the committed
exercises/; a local provided.py (a --provided force release) is gitignored and not compared.
"""
from __future__ import annotations

from pathlib import Path

import nbformat
import pytest

from autograder.course.provided import PROVIDED_FILENAME
from autograder.publish.release import find_assignments

REPO = Path(__file__).resolve().parents[2]
ASSIGNMENTS = find_assignments(REPO / "course")
EXERCISES = REPO / "exercises"
SKIP_NAMES = {"__pycache__", ".ipynb_checkpoints"}


def _files(folder: Path) -> set[str]:
    return {str(p.relative_to(folder)) for p in folder.rglob("*")
            if p.is_file() and not SKIP_NAMES & set(p.parts) and p.suffix != ".pyc" and p.name != PROVIDED_FILENAME}


def _comparable(path: Path) -> dict:
    """What a student receives, without ids, outputs or execution counts."""
    notebook = nbformat.read(path, as_version=4)
    return {
        "kernelspec": notebook.metadata.get("kernelspec"),
        "cells": [{"type": c.cell_type, "source": c.source, "metadata": dict(c.metadata)} for c in notebook.cells],
    }


def test_no_stale_assignment_in_exercises():
    released = {p.name for p in EXERCISES.iterdir() if p.is_dir()} if EXERCISES.is_dir() else set()
    stale = released - set(ASSIGNMENTS)
    assert not stale, f"exercises/ holds assignments that course/source no longer has: {sorted(stale)}"


@pytest.mark.parametrize("assignment", ASSIGNMENTS)
def test_exercises_match_a_fresh_release(assignment, course_copy):
    committed = EXERCISES / assignment
    fresh = course_copy / "exercises" / assignment
    assert committed.is_dir(), (f"exercises/{assignment} is missing: run autograder.publish.release.release("
                                f"['{assignment}']) (or `make release`)")
    assert _files(committed) == _files(fresh), "the released files differ from a fresh release"
    assert not (fresh / PROVIDED_FILENAME).exists(), "a gated release with no due dates must hold no provided.py"
    for name in sorted(_files(fresh)):
        if name.endswith(".ipynb"):
            assert _comparable(committed / name) == _comparable(fresh / name), (
                f"exercises/{assignment}/{name} is out of date with course/source: release it again")
        else:
            assert (committed / name).read_bytes() == (fresh / name).read_bytes(), (
                f"exercises/{assignment}/{name} is out of date: release it again")
