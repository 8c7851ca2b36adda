"""release(): nbgrader generate_assignment through its Python API, then a clean swap into exercises/."""
from __future__ import annotations

import shutil
from pathlib import Path

import nbformat
import pytest
from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook

from autograder.release import ReleaseError, find_assignments, release

REPO = Path(__file__).resolve().parents[2]


def _meta(grade_id, **flags):
    meta = {"grade": False, "solution": False, "locked": False, "task": False, "grade_id": grade_id,
            "schema_version": 3}
    meta.update(flags)
    return {"nbgrader": meta}


def _tiny_course(root: Path, assignment: str = "01_tiny") -> Path:
    """A one-exercise course built by code, with the real course's nbgrader_config.py."""
    root.mkdir(parents=True, exist_ok=True)
    shutil.copy2(REPO / "course" / "nbgrader_config.py", root / "nbgrader_config.py")
    folder = root / "source" / assignment
    folder.mkdir(parents=True)
    notebook = new_notebook(cells=[
        new_markdown_cell("# Tiny"),
        new_code_cell("def double(x):\n    ### BEGIN SOLUTION\n    return 2 * x\n    ### END SOLUTION",
                      metadata=_meta("double", solution=True)),
        new_code_cell("# tests\n### BEGIN HIDDEN TESTS\nassert double(2) == 4\n### END HIDDEN TESTS",
                      metadata=_meta("test_double", grade=True, locked=True, points=100)),
    ], metadata={"kernelspec": {"name": "python3", "display_name": "Python 3", "language": "python"}})
    nbformat.write(notebook, folder / f"{assignment}.ipynb")
    (folder / "data.txt").write_text("shipped with the notebook\n")
    return root


def test_release_writes_the_student_version(tmp_path):
    course = _tiny_course(tmp_path / "course")
    written = release(course_root=course, exercises_dir=tmp_path / "exercises")
    assert written == [tmp_path / "exercises" / "01_tiny"]
    notebook = nbformat.read(written[0] / "01_tiny.ipynb", as_version=4)
    solution, test = notebook.cells[1].source, notebook.cells[2].source
    assert "return 2 * x" not in solution and "raise NotImplementedError()" in solution
    assert "assert double" not in test and "BEGIN HIDDEN TESTS" not in test
    assert (written[0] / "data.txt").read_text() == "shipped with the notebook\n"


def test_release_replaces_stale_files(tmp_path):
    course = _tiny_course(tmp_path / "course")
    stale = tmp_path / "exercises" / "01_tiny"
    stale.mkdir(parents=True)
    (stale / "old_solution.py").write_text("leak")
    release("01_tiny", course_root=course, exercises_dir=tmp_path / "exercises")
    assert not (stale / "old_solution.py").exists()
    assert (stale / "01_tiny.ipynb").is_file()


def test_unknown_assignment_changes_nothing(tmp_path):
    course = _tiny_course(tmp_path / "course")
    exercises = tmp_path / "exercises"
    (exercises / "01_tiny").mkdir(parents=True)
    (exercises / "01_tiny" / "keep.txt").write_text("keep")
    with pytest.raises(ValueError, match="no such assignment"):
        release(["01_tiny", "09_missing"], course_root=course, exercises_dir=exercises)
    assert (exercises / "01_tiny" / "keep.txt").read_text() == "keep"


def test_course_without_config_is_a_clear_error(tmp_path):
    course = _tiny_course(tmp_path / "course")
    (course / "nbgrader_config.py").unlink()
    with pytest.raises(FileNotFoundError, match="nbgrader_config.py"):
        release(course_root=course, exercises_dir=tmp_path / "exercises")


def test_nbgrader_failure_keeps_the_previous_release(tmp_path):
    course = _tiny_course(tmp_path / "course")
    exercises = tmp_path / "exercises"
    release(course_root=course, exercises_dir=exercises)
    before = (exercises / "01_tiny" / "01_tiny.ipynb").read_bytes()
    path = course / "source" / "01_tiny" / "01_tiny.ipynb"
    notebook = nbformat.read(path, as_version=4)
    notebook.cells[1].source = "def double(x):\n    ### BEGIN SOLUTION\n    return 2 * x\n"   # no END marker
    nbformat.write(notebook, path)
    with pytest.raises(ReleaseError, match="01_tiny"):
        release(course_root=course, exercises_dir=exercises)
    assert (exercises / "01_tiny" / "01_tiny.ipynb").read_bytes() == before


def test_find_assignments_needs_the_notebook(tmp_path):
    course = _tiny_course(tmp_path / "course")
    (course / "source" / "02_empty").mkdir()
    assert find_assignments(course) == ["01_tiny"]
    assert find_assignments(tmp_path / "nowhere") == []
