"""Benchmark: how long each course notebook takes top to bottom, one notebook at a time, as a student runs it.

Runs the source notebooks (course/source, the solutions filled in) with a fresh kernel, in full (student) mode and,
with --grading, in grading mode too (NBGRADER_EXECUTION=autograde: what the autograder's kernel runs, without the
jail and without the hidden tests' cells, which hand objects to the grader). Prints a markdown table with the date, the machine and the load average before and
after each run (a run beside other work says little), and each notebook's slowest cells.

    python bench/notebook_times.py 08_gpt_language_model 09_modern_block --grading
    python bench/notebook_times.py                     # every notebook, full mode

The notebooks use coursekit's default of torch threads (one on a 2-core machine). The test suite runs the same
notebooks two at a time (tests/course/conftest.py), so its printed times are not these.
"""
from __future__ import annotations

import argparse
import os
import platform
import shutil
import tempfile
import time
from datetime import datetime
from pathlib import Path

import nbformat
from nbclient import NotebookClient

from autograder.course.provided import write_provided_module

ROOT = Path(__file__).resolve().parents[1]
SOURCE = ROOT / "course" / "source"


def cell_seconds(cell) -> float:
    """The cell's execution time from the timestamps nbclient records in its metadata."""
    stamps = cell.metadata.get("execution", {})
    if "iopub.execute_input" not in stamps or "shell.execute_reply" not in stamps:
        return 0.0
    parse = lambda s: datetime.fromisoformat(s.replace("Z", "+00:00"))  # noqa: E731
    return (parse(stamps["shell.execute_reply"]) - parse(stamps["iopub.execute_input"])).total_seconds()


def run_notebook(assignment: str, grading: bool, source: Path = SOURCE) -> tuple[float, list[tuple[float, str]]]:
    """(seconds top to bottom, kernel start included; [(seconds, first line) of each code cell]).

    The notebook runs in a temporary copy of its folder holding its provided module (04-11 import the earlier
    notebooks' reference from provided.py, which the release writes and course/source does not keep)."""
    with tempfile.TemporaryDirectory(prefix=f"{assignment}-") as scratch:
        folder = Path(scratch) / assignment
        shutil.copytree(source / assignment, folder, ignore=shutil.ignore_patterns(".ipynb_checkpoints"))
        if source == SOURCE:  # a course notebook (a test's own folder brings what it needs)
            write_provided_module(assignment, folder)
        return _run(folder, assignment, grading)


def _run(folder: Path, assignment: str, grading: bool) -> tuple[float, list[tuple[float, str]]]:
    notebook = nbformat.read(folder / f"{assignment}.ipynb", as_version=4)
    env = {k: v for k, v in os.environ.items() if k != "NBGRADER_EXECUTION"}
    if grading:  # the hidden tests' cells hand objects to the grader, which is not there: they are left out
        env["NBGRADER_EXECUTION"] = "autograde"
        notebook.cells = [c for c in notebook.cells if "### BEGIN HIDDEN TESTS" not in c.source]
    start = time.perf_counter()
    NotebookClient(notebook, timeout=900, kernel_name="python3",
                   resources={"metadata": {"path": str(folder)}}).execute(env=env)
    total = time.perf_counter() - start
    cells = [(cell_seconds(c), c.source.strip().splitlines()[0][:70] if c.source.strip() else "")
             for c in notebook.cells if c.cell_type == "code"]
    return total, cells


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("assignments", nargs="*", help="default: every notebook of course/source")
    parser.add_argument("--grading", action="store_true", help="also time each notebook in grading mode")
    parser.add_argument("--slowest", type=int, default=3, help="how many of each notebook's slowest cells to list")
    args = parser.parse_args(argv)
    assignments = args.assignments or sorted(p.name for p in SOURCE.iterdir() if (p / f"{p.name}.ipynb").is_file())
    modes = ["full", "grading"] if args.grading else ["full"]
    print(f"# {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, {platform.node()}, {platform.machine()}, "
          f"{os.cpu_count()} CPUs, Python {platform.python_version()}")
    print("\n| notebook | mode | seconds | load before -> after | slowest cells |\n|---|---|---|---|---|")
    for assignment in assignments:
        for mode in modes:
            before = os.getloadavg()[0]
            total, cells = run_notebook(assignment, grading=mode == "grading")
            after = os.getloadavg()[0]
            slowest = "; ".join(f"{s:.1f} s `{line}`" for s, line in sorted(cells, reverse=True)[:args.slowest])
            print(f"| {assignment} | {mode} | {total:.1f} | {before:.1f} -> {after:.1f} | {slowest} |", flush=True)


if __name__ == "__main__":
    main()
