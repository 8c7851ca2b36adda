"""Shared set-up of the course tests: one temporary copy of the course per session, released and graded once.

The tests are parametrized over every assignment folder in course/source, so new notebooks are covered as soon as
they exist. The expensive steps (grading, full notebook runs) are cached for the whole session, and one
`autograder grade` run grades both "students" (the reference and the unmodified release) of every assignment the
selected tests need, so the grading workers share all the notebooks.
"""
from __future__ import annotations

import os
import shutil
import time
from pathlib import Path

import nbformat
import pytest

from autograder.publish.release import find_assignments, nbgrader_api, release

REPO = Path(__file__).resolve().parents[2]
COURSE = REPO / "course"
EXERCISES = REPO / "exercises"
ASSIGNMENTS = find_assignments(COURSE)

# The two submissions graded for every assignment.
REFERENCE_STUDENT = "reference"      # the source notebook itself: full automatic marks, written answers to a grader
UNMODIFIED_STUDENT = "unmodified"    # the release as handed out: must grade to 0 without crashing

_NOTEBOOK_TIMES: dict[str, float] = {}
_AUTOGRADE_TIMES: dict[str, float] = {}


def summary_lines() -> list[str]:
    """What the terminal summary says of this process's runs (tests/conftest.py prints it, from each xdist worker)."""
    lines = []
    if _NOTEBOOK_TIMES:
        line = ", ".join(f"{a}: {t:.1f}s" for a, t in sorted(_NOTEBOOK_TIMES.items()))
        lines.append(f"course notebooks, top to bottom (full mode, {FULL_RUNS_AT_ONCE} at a time): {line}")
    if _AUTOGRADE_TIMES:
        line = ", ".join(f"{a}: {t:.1f}s" for a, t in sorted(_AUTOGRADE_TIMES.items()))
        lines.append(f"autograder grade (2 submissions each, one run per line): {line}")
    return lines


def _ignore(directory, names):
    return [n for n in names if n in {"__pycache__", ".ipynb_checkpoints"} or n.endswith(".pyc")]


@pytest.fixture(scope="session")
def course_copy(tmp_path_factory) -> Path:
    """A throwaway copy of the course root with every assignment released into <copy>/exercises."""
    root = tmp_path_factory.mktemp("course")
    shutil.copy2(COURSE / "nbgrader_config.py", root / "nbgrader_config.py")
    shutil.copytree(COURSE / "source", root / "source", ignore=_ignore)
    release(course_root=root, exercises_dir=root / "exercises")
    return root


def _autograde(root: Path, assignments: list[str]) -> dict[str, dict]:
    """Submit the reference and the unmodified release of each assignment as two students; grade them all with ONE
    `autograder grade` run (one Dask cluster; the workers stay busy: longest notebooks first), as an instructor
    would (jailed kernels, hidden checks judged outside them). {assignment: outcome}."""
    from nbgrader.api import Gradebook

    from autograder.submissions.collect import collect
    from autograder.grade.engine import grade_many

    inbox = root / "inbox"
    if inbox.exists():
        shutil.rmtree(inbox)
    for assignment in assignments:
        for student, folder in ((REFERENCE_STUDENT, root / "source" / assignment),
                                (UNMODIFIED_STUDENT, root / "release" / assignment)):
            target = inbox / student / assignment
            target.mkdir(parents=True)
            shutil.copy2(folder / f"{assignment}.ipynb", target / f"{assignment}.ipynb")
    collect(root, inbox)
    start = time.perf_counter()
    summaries = grade_many(root, assignments, workers=2, force=True, progress=False)
    _AUTOGRADE_TIMES[", ".join(assignments)] = time.perf_counter() - start
    outcomes = {}
    with Gradebook(f"sqlite:///{root / 'gradebook.db'}") as gradebook:
        for assignment, summary in zip(assignments, summaries):
            scores = {}
            for student in (REFERENCE_STUDENT, UNMODIFIED_STUDENT):
                try:
                    submission = gradebook.find_submission(assignment, student)
                except Exception:  # MissingEntry: the run never recorded this student
                    continue
                scores[student] = {
                    "score": submission.score,
                    "max_score": submission.max_score,
                    "grades": {g.name: (g.score, g.max_score) for nb in submission.notebooks for g in nb.grades},
                    "auto": {g.name: g.auto_score for nb in submission.notebooks for g in nb.grades},
                    "needs_manual_grade": {g.name: g.needs_manual_grade
                                           for nb in submission.notebooks for g in nb.grades},
                }
            failed = "; ".join(f"{r['student']}: {r.get('message', '')}" for r in summary.failed)
            result = {"success": not summary.failed, "error": failed, "log": failed}
            outcomes[assignment] = {"result": result, "scores": scores, "summary": summary}
    return outcomes


def _wanted_assignments(session, fixtures: set[str]) -> list[str]:
    """The assignments of the selected tests that use any of `fixtures` (their `assignment` parameter)."""
    wanted = set()
    for item in session.items:
        if fixtures & set(getattr(item, "fixturenames", ())):
            param = getattr(getattr(item, "callspec", None), "params", {}).get("assignment")
            if param in ASSIGNMENTS:
                wanted.add(param)
    return sorted(wanted)


@pytest.fixture(scope="session")
def autograded(course_copy, request):
    """autograded(assignment) -> {"result": nbgrader's result dict, "scores": {student: {...}}, "summary": ...}.

    The first call grades, in one run, every assignment that the selected tests need (plus the one asked for), so
    the two workers share all the notebooks instead of one cluster per assignment with one busy worker; later
    calls read the cache (an assignment not graded yet gets a run of its own)."""
    cache: dict[str, dict] = {}

    def get(assignment: str) -> dict:
        if assignment not in cache:
            wanted = [] if cache else _wanted_assignments(request.session, {"autograded"})
            batch = sorted({assignment, *wanted} - set(cache))
            cache.update(_autograde(course_copy, batch))
        return cache[assignment]

    return get


_EXECUTED: dict[str, tuple[nbformat.NotebookNode, list[dict]]] = {}
FULL_RUNS_AT_ONCE = 2  # one torch thread each (coursekit's default on 2 CPUs): two runs keep both CI cores busy


@pytest.fixture(scope="session")
def notebook_runner(course_copy, tmp_path_factory, request):
    """run(assignment) -> seconds to execute the source notebook top to bottom, outside grading mode.

    Each notebook runs once per session: a first cell (tests/fixtures/figure_layout.py) checks every figure a cell
    displays as JupyterLab would show it; `executed_notebook(assignment)` gives the run's notebook (outputs
    included, the probe cell removed) and the figure reports. The first call starts the runs of every notebook the
    selected tests read, FULL_RUNS_AT_ONCE at a time (each notebook trains on one thread), and waits for its own."""
    from concurrent.futures import ThreadPoolExecutor

    from figure_layout import name_cells, probe_source, read_report
    from nbclient import NotebookClient

    reports = tmp_path_factory.mktemp("figure-reports")
    kernel_env = {k: v for k, v in os.environ.items() if k != "NBGRADER_EXECUTION"}  # a student's run
    runs = {}

    def execute(assignment: str) -> None:
        folder = course_copy / "source" / assignment
        notebook = nbformat.read(folder / f"{assignment}.ipynb", as_version=4)
        report = reports / f"{assignment}.jsonl"
        notebook.cells.insert(0, nbformat.v4.new_code_cell(probe_source(report)))
        client = NotebookClient(notebook, timeout=600, kernel_name="python3",  # per cell: a hang, not a slow CI
                                resources={"metadata": {"path": str(folder)}})
        start = time.perf_counter()
        client.execute(env=kernel_env)
        elapsed = time.perf_counter() - start
        del notebook.cells[0]
        _EXECUTED[assignment] = (notebook, name_cells(notebook, read_report(report)))
        _NOTEBOOK_TIMES[assignment] = elapsed

    pool = ThreadPoolExecutor(FULL_RUNS_AT_ONCE, thread_name_prefix="full-run")
    request.addfinalizer(lambda: pool.shutdown(wait=True, cancel_futures=True))

    def run(assignment: str) -> float:
        if not runs:
            # the longest notebooks first (by size, a rough proxy), so that the parallel runs end together
            wanted = _wanted_assignments(request.session, {"notebook_runner", "executed_notebook"})
            for name in sorted(wanted, key=lambda a: -(COURSE / "source" / a / f"{a}.ipynb").stat().st_size):
                runs[name] = pool.submit(execute, name)
        if assignment not in runs:
            runs[assignment] = pool.submit(execute, assignment)
        runs[assignment].result()  # raises CellExecutionError / CellTimeoutError of that notebook
        return _NOTEBOOK_TIMES[assignment]

    return run


@pytest.fixture(scope="session")
def executed_notebook(notebook_runner):
    """executed(assignment) -> (the source notebook run top to bottom in full mode, its figure reports)."""
    def executed(assignment: str):
        notebook_runner(assignment)
        return _EXECUTED[assignment]

    return executed
