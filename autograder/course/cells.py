"""Cell kinds: what nbgrader's metadata says a notebook cell is, read in one place.

nbgrader marks cells in `metadata["nbgrader"]`: `solution` (the student writes it), `grade` (it earns `points`),
`locked` (the student must not edit it), each with a `grade_id`. A code cell that is both solution and grade is
scored automatically with its tests elsewhere; a markdown cell that is both is a written answer, scored by a grader;
a code cell that is a grade cell only holds tests (public and hidden).

Every function takes a cell as nbformat gives it or as a plain dict, and never trusts its shape: a submission
controls its cells' metadata, so metadata that is missing or not a mapping reads as "no nbgrader metadata".
"""
from __future__ import annotations


def nbgrader_metadata(cell) -> dict:
    """The cell's nbgrader metadata; {} when it has none or it is not a mapping."""
    metadata = cell.get("metadata") if isinstance(cell, dict) else None
    meta = metadata.get("nbgrader") if isinstance(metadata, dict) else None
    return meta if isinstance(meta, dict) else {}


def grade_id(cell) -> str | None:
    """The cell's nbgrader id, None when it has none."""
    return nbgrader_metadata(cell).get("grade_id") or None


def is_grade(cell) -> bool:
    """A grade cell: it earns points."""
    return bool(nbgrader_metadata(cell).get("grade"))


def is_solution(cell) -> bool:
    """A solution cell: the student writes it."""
    return bool(nbgrader_metadata(cell).get("solution"))


def is_locked(cell) -> bool:
    return bool(nbgrader_metadata(cell).get("locked"))


def is_code(cell) -> bool:
    return cell.get("cell_type") == "code"


def is_solution_code(cell) -> bool:
    """A code cell the student writes."""
    return is_code(cell) and is_solution(cell)


def is_tests(cell) -> bool:
    """A code grade cell that the student does not write: it holds the tests (public and hidden)."""
    return is_code(cell) and is_grade(cell) and not is_solution(cell)


def is_written(cell) -> bool:
    """A written answer: a markdown cell that is both solution and grade, scored by a grader."""
    return cell.get("cell_type") == "markdown" and is_grade(cell) and is_solution(cell)


def points(cell) -> float:
    """The points of a grade cell (0 for any other cell)."""
    return float(nbgrader_metadata(cell).get("points") or 0) if is_grade(cell) else 0.0
