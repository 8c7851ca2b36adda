"""bench/notebook_times.py times a notebook in full and grading mode and finds its slowest cell."""
from __future__ import annotations

import importlib.util
from pathlib import Path

import nbformat

BENCH = Path(__file__).resolve().parents[2] / "bench" / "notebook_times.py"


def load_bench():
    spec = importlib.util.spec_from_file_location("notebook_times", BENCH)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_a_notebook_is_timed_cell_by_cell_in_both_modes(tmp_path):
    bench = load_bench()
    folder = tmp_path / "00_tiny"
    folder.mkdir()
    nb = nbformat.v4.new_notebook(cells=[
        nbformat.v4.new_code_cell("import os, time"),
        nbformat.v4.new_code_cell("time.sleep(0.5 if os.environ.get('NBGRADER_EXECUTION') else 3.0)"),
        nbformat.v4.new_code_cell("### BEGIN HIDDEN TESTS\nassert not os.environ.get('NBGRADER_EXECUTION')\n"
                                  "### END HIDDEN TESTS"),  # left out in grading mode (no grader to hand in to)
    ])
    nbformat.write(nb, folder / "00_tiny.ipynb")
    for grading, pause in ((False, 3.0), (True, 0.5)):
        total, cells = bench.run_notebook("00_tiny", grading=grading, source=tmp_path)
        (slowest, line), = sorted(cells, reverse=True)[:1]
        assert line.startswith("time.sleep") and pause <= slowest < pause + 2.0, (grading, cells)  # grading: 0.5 s
        assert total >= slowest
