"""Nothing of the reference or of the hidden tests reaches students through exercises/."""
from __future__ import annotations

import ast
import re
from pathlib import Path

import nbformat
import pytest

from autograder.provided import PROVIDED_FILENAME, _defined_names, withheld_names
from autograder.release import find_assignments

REPO = Path(__file__).resolve().parents[2]
ASSIGNMENTS = find_assignments(REPO / "course")
EXERCISES = REPO / "exercises"
SOURCE = REPO / "course" / "source"

FORBIDDEN_TEXT = ("### BEGIN SOLUTION", "### END SOLUTION", "### BEGIN HIDDEN TESTS", "### END HIDDEN TESTS",
                  "autograder.checks", "import autograder", "from autograder")
IMPORTS_SOLUTIONS = re.compile(r"^\s*(from\s+solutions(\.|\s)|import\s+solutions\b)", re.M)
SOLUTION_REGION = re.compile(r"### BEGIN SOLUTION\n(.*?)### END SOLUTION", re.S)


def _released_texts(assignment: str) -> dict[str, str]:
    """Every text a student gets for the assignment: code/markdown cells and plain files, by location."""
    folder = EXERCISES / assignment
    if not folder.is_dir():
        pytest.fail(f"exercises/{assignment} is missing: release it")
    texts = {}
    for path in sorted(folder.rglob("*")):
        if not path.is_file() or "__pycache__" in path.parts:
            continue
        if path.suffix == ".ipynb":
            notebook = nbformat.read(path, as_version=4)
            for index, cell in enumerate(notebook.cells):
                texts[f"{path.name} cell {index}"] = cell.source
        else:
            texts[path.name] = path.read_text(encoding="utf-8", errors="replace")
    return texts


def _source_cells(assignment: str) -> list[str]:
    notebook = nbformat.read(SOURCE / assignment / f"{assignment}.ipynb", as_version=4)
    return [cell.source for cell in notebook.cells]


def _significant_lines(code: str) -> set[str]:
    lines = {line.strip() for line in code.splitlines()}
    return {line for line in lines if len(line) >= 12 and not line.startswith("#")}


@pytest.mark.parametrize("assignment", ASSIGNMENTS)
def test_no_markers_or_hidden_test_text(assignment):
    for where, text in _released_texts(assignment).items():
        for marker in FORBIDDEN_TEXT:
            assert marker not in text, f"exercises/{assignment}: {where} contains {marker!r}"


@pytest.mark.parametrize("assignment", ASSIGNMENTS)
def test_no_import_of_solutions(assignment):
    for where, text in _released_texts(assignment).items():
        assert not IMPORTS_SOLUTIONS.search(text), f"exercises/{assignment}: {where} imports `solutions`"


@pytest.mark.parametrize("assignment", ASSIGNMENTS)
def test_no_solution_body_reaches_students(assignment):
    sources = _source_cells(assignment)
    solution_lines, elsewhere = set(), set()
    for source in sources:
        bodies = SOLUTION_REGION.findall(source)
        for body in bodies:
            solution_lines |= _significant_lines(body)
        elsewhere |= _significant_lines(SOLUTION_REGION.sub("", source))
    assert solution_lines, "the source notebook has no solution code"
    secret = solution_lines - elsewhere      # lines that only ever appear inside a solution
    released = "\n".join(text for where, text in _released_texts(assignment).items()
                         if where != PROVIDED_FILENAME)
    released_lines = {line.strip() for line in released.splitlines()}
    leaked = sorted(secret & released_lines)
    assert not leaked, f"exercises/{assignment} contains solution lines: {leaked[:5]}"


@pytest.mark.parametrize("assignment", ASSIGNMENTS)
def test_released_grade_cells_hold_no_test_code(assignment):
    path = EXERCISES / assignment / f"{assignment}.ipynb"
    if not path.is_file():
        pytest.fail(f"exercises/{assignment} is missing: release it")
    notebook = nbformat.read(path, as_version=4)
    grade_cells = [c for c in notebook.cells if c.metadata.get("nbgrader", {}).get("grade")]
    assert grade_cells, "the release has no grade cells"
    for cell in grade_cells:
        code = [line for line in cell.source.splitlines() if line.strip() and not line.strip().startswith("#")]
        assert not code, f"grade cell {cell.metadata['nbgrader']['grade_id']} still holds code: {code}"


@pytest.mark.parametrize("assignment", ASSIGNMENTS)
def test_provided_module_holds_only_earlier_components(assignment):
    provided = EXERCISES / assignment / PROVIDED_FILENAME
    if not provided.exists():
        pytest.skip(f"{assignment} has no provided module")
    text = provided.read_text(encoding="utf-8")
    ast.parse(text)
    defined = _defined_names(text)
    leaked = defined & withheld_names(assignment)
    assert not leaked, f"provided.py of {assignment} defines its own or later exercises: {sorted(leaked)}"
    for name in withheld_names(assignment):
        assert not re.search(rf"^\s*(def|class)\s+{name}\b", text, re.M), f"{name} is defined in provided.py"
