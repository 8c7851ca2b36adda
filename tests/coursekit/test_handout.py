"""Before the instructor hands out provided.py, the first cell of a notebook that imports it says what it is.

The first code cell of each released notebook with a provided.py (exercises/, as students get it) runs in a fresh
interpreter, in a folder without provided.py: it must stop with coursekit's ModuleNotFoundError that explains the
file (`coursekit.handout.MISSING`), never a bare "No module named 'provided'". With the provided.py that the
course generates for it beside the notebook, the same cell runs through.
"""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest

from autograder.course.provided import build_provided_source
from coursekit.api import ASSIGNMENTS
from coursekit.handout import MISSING, MODULE, require_provided

ROOT = Path(__file__).resolve().parents[2]
WITH_PROVIDED = [assignment for assignment in ASSIGNMENTS if build_provided_source(assignment) is not None]

# Runs each first cell in the current folder (sys.path[0]), first without provided.py, then with it.
RUN_CELLS = r"""
import importlib, json, os, sys
results = {}
for assignment, (cell, provided) in json.load(open(sys.argv[1])).items():
    outcome = []
    for with_provided in (False, True):
        if with_provided:
            with open("provided.py", "w") as fh:
                fh.write(provided)
            importlib.invalidate_caches()
        try:
            exec(compile(cell, assignment, "exec"), {"__name__": "__main__"})
            outcome.append(["ran"])
        except ModuleNotFoundError as error:
            outcome.append(["missing", error.name, str(error)])
        finally:
            sys.modules.pop("provided", None)
            if with_provided:
                os.remove("provided.py")
    results[assignment] = outcome
print(json.dumps(results))
"""


def _first_code_cell(assignment: str) -> str:
    nb = nbformat.read(ROOT / "exercises" / assignment / f"{assignment}.ipynb", as_version=4)
    return next(cell.source for cell in nb.cells if cell.cell_type == "code")


@pytest.fixture(scope="module")
def first_cells(tmp_path_factory) -> dict:
    """{assignment: [outcome without provided.py, outcome with it]} of each first cell."""
    folder = tmp_path_factory.mktemp("notebook_folder")
    cells = folder.parent / "cells.json"
    cells.write_text(json.dumps({a: (_first_code_cell(a), build_provided_source(a)) for a in WITH_PROVIDED}))
    result = subprocess.run([sys.executable, "-c", RUN_CELLS, str(cells)], cwd=folder, capture_output=True,
                            text=True, timeout=600)
    assert result.returncode == 0, result.stderr[-3000:]
    return json.loads(result.stdout.splitlines()[-1])


def test_every_notebook_after_03_imports_provided():
    assert WITH_PROVIDED and WITH_PROVIDED[0] == "04_multi_head_attention"
    assert all("from provided import" in _first_code_cell(assignment) for assignment in WITH_PROVIDED)


@pytest.mark.parametrize("assignment", WITH_PROVIDED)
def test_the_first_cell_says_what_provided_py_is_while_it_is_missing(first_cells, assignment):
    without, with_it = first_cells[assignment]
    assert without == ["missing", MODULE, MISSING], without        # not Python's bare "No module named 'provided'"
    assert with_it == ["ran"], with_it


def test_require_provided_finds_it_where_the_import_does(tmp_path, monkeypatch):
    monkeypatch.syspath_prepend(str(tmp_path))
    with pytest.raises(ModuleNotFoundError) as missing:
        require_provided()
    assert missing.value.name == MODULE and "instructor" in str(missing.value)
    (tmp_path / "provided.py").write_text("X = 1\n")
    import importlib

    importlib.invalidate_caches()
    require_provided()                                               # found: nothing to say
