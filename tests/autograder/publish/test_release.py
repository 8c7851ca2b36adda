"""release(): nbgrader generate_assignment through its Python API, then a clean swap into exercises/; provided.py
of 04-11 gated by the due dates of the assignments it covers."""
from __future__ import annotations

import datetime
import shutil
from pathlib import Path

import nbformat
import pytest
from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook
from nbgrader.api import Gradebook

from autograder.course.provided import PROVIDED_FILENAME, build_provided_source
from autograder.publish.release import ReleaseError, find_assignments, release

REPO = Path(__file__).resolve().parents[3]


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


# --- provided.py is gated by the due dates of the assignments it covers --------------------------------------

PAST = datetime.datetime(2020, 1, 1, 12, 0)
FUTURE = datetime.datetime(2999, 1, 1, 12, 0)


def _gated_course(root: Path) -> Path:
    """03_tiny and 04_tiny: 04's provided.py covers 01-03 (01 and 02 exist only in the gradebook, if at all)."""
    _tiny_course(root, "03_tiny")
    _tiny_course(root, "04_tiny")
    return root


def _set_due(course: Path, **dates) -> None:
    with Gradebook(f"sqlite:///{course / 'gradebook.db'}", "transformers101") as gb:
        for name, due in dates.items():
            gb.update_or_create_assignment(name, duedate=due)


def test_provided_is_withheld_until_every_covered_assignment_is_past_due(tmp_path):
    course = _gated_course(tmp_path / "course")
    exercises = tmp_path / "exercises"
    decisions = []
    release(course_root=course, exercises_dir=exercises, decisions=decisions)
    by_name = {d.assignment: d for d in decisions}
    assert not by_name["03_tiny"].needed
    gate = by_name["04_tiny"]
    assert gate.covers == ["01_tokens_and_embeddings", "02_positional_encoding", "03_tiny"] and not gate.released
    assert "withheld" in gate.message() and "03_tiny (no due date)" in gate.message()
    assert "set the missing due dates" in gate.message()
    for folder in (exercises / "04_tiny", course / "release" / "04_tiny"):
        assert (folder / "04_tiny.ipynb").is_file() and not (folder / PROVIDED_FILENAME).exists(), folder
    assert (course / "source" / "04_tiny" / PROVIDED_FILENAME).is_file(), "the instructor's side keeps it"

    _set_due(course, **{"01_tokens_and_embeddings": PAST, "02_positional_encoding": PAST, "03_tiny": FUTURE})
    decisions.clear()
    release("04_tiny", course_root=course, exercises_dir=exercises, decisions=decisions)
    (gate,) = decisions
    assert not gate.released and list(gate.still_open) == ["03_tiny"]
    assert gate.release_at == FUTURE and "after 2999-01-01 12:00 UTC" in gate.message()
    assert not (exercises / "04_tiny" / PROVIDED_FILENAME).exists()

    _set_due(course, **{"03_tiny": PAST})
    decisions.clear()
    release("04_tiny", course_root=course, exercises_dir=exercises, decisions=decisions)
    (gate,) = decisions
    assert gate.released and "released" in gate.message()
    expected = build_provided_source("04_tiny")
    for folder in (exercises / "04_tiny", course / "release" / "04_tiny"):
        assert (folder / PROVIDED_FILENAME).read_text() == expected


def test_force_releases_and_names_what_it_reveals(tmp_path):
    course = _gated_course(tmp_path / "course")
    release(course_root=course, exercises_dir=tmp_path / "exercises")  # fills the gradebook
    _set_due(course, **{"01_tokens_and_embeddings": PAST, "02_positional_encoding": PAST, "03_tiny": FUTURE})
    decisions = []
    release("04_tiny", course_root=course, exercises_dir=tmp_path / "exercises", provided="force",
            decisions=decisions)
    (gate,) = decisions
    assert gate.released and (tmp_path / "exercises" / "04_tiny" / PROVIDED_FILENAME).is_file()
    message = gate.message()
    assert "reveals the reference of 03_tiny (due 2999-01-01 12:00 UTC)" in message
    assert "01_tokens_and_embeddings" not in message  # past due: revealing it changes nothing


def test_none_never_releases(tmp_path):
    course = _gated_course(tmp_path / "course")
    release(course_root=course, exercises_dir=tmp_path / "exercises")
    _set_due(course, **{"01_tokens_and_embeddings": PAST, "02_positional_encoding": PAST, "03_tiny": PAST})
    decisions = []
    release("04_tiny", course_root=course, exercises_dir=tmp_path / "exercises", provided="none",
            decisions=decisions)
    assert not decisions[0].released and not (tmp_path / "exercises" / "04_tiny" / PROVIDED_FILENAME).exists()
    with pytest.raises(ValueError, match="provided"):
        release("04_tiny", course_root=course, exercises_dir=tmp_path / "exercises", provided="always")


def test_cli_release_provided_modes(tmp_path, capsys):
    from autograder.cli import main

    course = _gated_course(tmp_path / "course")
    assert main(["release", "03_tiny", "04_tiny", "--course-dir", str(course)]) == 0
    out = capsys.readouterr().out
    assert "04_tiny: provided.py withheld" in out and "released 2 assignment(s)" in out
    assert not (course / "exercises" / "04_tiny" / PROVIDED_FILENAME).exists()
    assert main(["release", "--all", "--provided", "force", "--course-dir", str(course)]) == 0
    out = capsys.readouterr().out
    assert "04_tiny: provided.py RELEASED (--provided force): it reveals the reference of" in out
    assert (course / "exercises" / "04_tiny" / PROVIDED_FILENAME).is_file()
