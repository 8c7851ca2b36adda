"""What a Dask worker runs for one submission: `grade_job(GradingJob) -> GradingResult` (jobs.py).

The worker needs no shared filesystem and never touches the course's gradebook. It rebuilds the one notebook's
cell records (sent by the coordinator) in a private SQLite gradebook, and runs nbgrader's own autograde steps
against it: sanitize (ClearOutput, DeduplicateIds, OverwriteKernelspec, OverwriteCells with missing cells
added back, CheckCellMetadata), then execute (our JudgedExecute: the sandbox runs the cells, the hidden checks judge
`hand_in` grade cells from this process, see judge.py), IgnorePattern, LimitOutput,
SaveAutoGrades (nbgrader's ClearMetadataPreprocessor is disabled by default, so it is left out). Every one of them
gets the course's nbgrader configuration (the sections the job carries), as under `nbgrader autograde`; the
grader's own invariants win over it: missing grade cells are added back, errors never stop the run, a timed-out
cell is interrupted, and the limits (per-cell time included) come from the job. The scores it reads back go to the
coordinator, the only writer.

Kernel death policy: when a cell kills the kernel (segfault, os._exit, the OOM killer), that cell is marked
"skipped" and the notebook is run again from the top without it, at most `Limits.kernel_restarts` times; cells
after the last allowed restart are not run. So a crash costs only the cells that depend on the crashing one.
"""
from __future__ import annotations

import dataclasses
import os
import warnings
import time
import traceback
from typing import Any

import nbformat
from nbclient.exceptions import DeadKernelError
from traitlets.config import Config
import nbgrader.preprocessors

from autograder.checks.kit.draws import salted
from autograder.course import cells
from autograder.course.coursedir import alembic_on_path
from autograder.grade import tamper_scan
from autograder.grade.stand_in_leaks import remove_leaks
from autograder.sandbox.execute import error_output
from autograder.grade.jobs import SANITIZE, SCORE, GradingJob, GradingResult
from autograder.gradebook.store import open_gradebook
from autograder.grade.judge import PARTIAL_METADATA, JudgedExecute, handed_in
from autograder.grade.inert_notebook import make_inert
from autograder.errors import AutograderError
from autograder.sandbox import enforcement, scratch
from autograder.sandbox.clock import SubmissionClock, notebook_budget
from autograder.sandbox.scrub import scrub_notebook
from autograder.sandbox.kernel import kernel_manager_class, kernel_spec
from autograder.sandbox.limits import Limits
from coursekit.mistakes import MISTAKES

warnings.filterwarnings("ignore", module="nbgrader.api")  # SQLAlchemy autoflush chatter on every grade


_TEMPLATE_DB: dict[tuple[str, str | None], bytes] = {}


def empty_gradebook(path: str, course: str, alembic_version: str | None = None) -> None:
    """Write a per-process empty gradebook to `path`.

    A new nbgrader gradebook runs the `alembic heads` command (seconds) to stamp its schema version; the
    coordinator sends the version of the course's gradebook instead, so a worker never needs that command. The
    template is made once per process in a scratch folder, kept as bytes, and the folder removed at once.
    """
    import nbgrader.api as nbgrader_api

    template = _TEMPLATE_DB.get((course, alembic_version))
    if template is None:
        with scratch.folder("template") as folder:
            made = os.path.join(folder, "empty.db")
            original = nbgrader_api.get_alembic_version
            if alembic_version:
                nbgrader_api.get_alembic_version = lambda: alembic_version
            else:
                alembic_on_path()  # nbgrader runs `alembic heads`
            try:
                with open_gradebook(db_url=f"sqlite:///{made}", course=course):
                    pass
            finally:
                nbgrader_api.get_alembic_version = original
            with open(made, "rb") as fh:
                template = fh.read()
        _TEMPLATE_DB[(course, alembic_version)] = template
    with open(path, "wb") as fh:
        fh.write(template)


def build_gradebook(db_url: str, job: GradingJob) -> None:
    """The notebook's cell records (as in the course gradebook) plus the student, in a private gradebook."""
    a, nb_name, student = job.assignment, job.notebook, job.student
    if db_url.startswith("sqlite:///"):
        empty_gradebook(db_url[len("sqlite:///"):], job.course_id, job.alembic_version)
    with open_gradebook(db_url=db_url, course=job.course_id) as gb:
        gb.update_or_create_assignment(a)
        gb.update_or_create_notebook(nb_name, a, kernelspec=job.kernelspec)
        for cell in job.cells["grade"]:
            gb.update_or_create_grade_cell(cell["name"], nb_name, a, max_score=cell["max_score"],
                                           cell_type=cell["cell_type"])
        for cell in job.cells["solution"]:
            gb.update_or_create_solution_cell(cell["name"], nb_name, a)
        for cell in job.cells["task"]:
            gb.update_or_create_task_cell(cell["name"], nb_name, a, max_score=cell["max_score"],
                                          cell_type=cell["cell_type"])
        for cell in job.cells["source"]:
            gb.update_or_create_source_cell(cell["name"], nb_name, a, cell_type=cell["cell_type"],
                                            locked=cell["locked"], source=cell["source"], checksum=cell["checksum"])
        gb.update_or_create_student(student)
        gb.update_or_create_submission(a, student)


@dataclasses.dataclass
class NotebookRun:
    """What running one notebook in the sandbox gave (run_notebook)."""

    nb: Any  # the executed notebook
    notes: list[str]  # what happened (restarts, truncation)
    mistakes: dict[str, str]  # {grade_id: catalogue id of the mistake its hidden check diagnosed}, never in the nb
    timeouts: list[str]  # each time limit reached: "cell 7: 60 s of CPU time"
    cpu_seconds: float | None  # the submission's CPU time over all its kernels; None where it is not accounted


class KernelStartFailed(AutograderError):
    """The kernel did not start, three times in a row (a busy machine, a port race): no cell ran."""


def run_notebook(nb, resources: dict, limits: Limits, gpu: str | None, executor_class=None,
                 config=None) -> NotebookRun:
    """Execute `nb` in the sandbox. Restarts after a dead kernel (see module doc); the notebook's time budget
    (CPU seconds of all its kernels, clock.py) is shared by the attempts. `config`: the nbgrader configuration of
    the Execute preprocessor (its limits are `limits`)."""
    spec = kernel_spec(limits, gpu=gpu)
    clock = SubmissionClock()
    budget = notebook_budget(clock, limits)
    skip: set[int] = set()
    notes: list[str] = []
    timeouts: list[str] = []
    startup_failures = 0
    attempt = 0
    while attempt <= limits.kernel_restarts:
        attempt_nb = nbformat.from_dict(nb)  # fresh copy: outputs of a failed attempt are discarded
        executor = (executor_class or JudgedExecute)(
            limits=limits, clock=clock, notebook=budget, skip_cells=skip,
            kernel_manager_class=kernel_manager_class(spec, limits, clock=clock),
            **({"config": config} if config is not None else {}))
        try:
            attempt_nb, resources = executor.preprocess(attempt_nb, resources)
            mistakes = {cell: mistake for cell, mistake in getattr(executor, "mistakes", {}).items()
                        if mistake in MISTAKES}
            return NotebookRun(attempt_nb, notes + executor.notes, mistakes, timeouts + executor.timeouts,
                               clock.cpu())
        except RuntimeError as exc:  # DeadKernelError is one too
            index = executor.current_index
            if index is None:  # died before its first reply (port race, busy machine): no cell ran, retry
                if startup_failures >= 2:
                    raise KernelStartFailed(f"the kernel did not start, 3 tries ({exc})") from exc
                startup_failures += 1
                notes.append(f"kernel failed to start ({exc}); retried")
                continue
            if not isinstance(exc, DeadKernelError):
                raise
            attempt += 1
            notes.extend(executor.notes)
            timeouts.extend(executor.timeouts)
            notes.append(f"kernel died in cell {index}; the cell is skipped and the notebook re-run")
            skip.add(index)
            if budget.exceeded():
                break
    # out of restarts: mark the crashing cell and everything after it as not run
    last = max(skip) if skip else 0
    for index, cell in enumerate(attempt_nb.cells):
        if cell.cell_type == "code" and index >= last:
            cell.outputs = [error_output("KernelDied", "Not run: the kernel died too many times in this notebook.")]
    notes.append("gave up after repeated kernel deaths")
    return NotebookRun(attempt_nb, notes, {}, timeouts, clock.cpu())


def cell_messages(nb) -> dict[str, str]:
    """grade_id -> the error its grade cell raised, or the judge's note of partial credit (what the student sees in
    feedback)."""
    messages = {}
    for cell in nb.cells:
        if not (cells.is_code(cell) and cells.is_grade(cell)):
            continue
        outputs = cell.get("outputs", [])
        errors = [o for o in outputs if o.get("output_type") == "error"]
        partial = [o for o in outputs if o.get("output_type") == "display_data"
                   and o.get("metadata", {}).get("autograder") == PARTIAL_METADATA["autograder"]]
        if errors:
            error = errors[-1]
            messages[cells.grade_id(cell)] = f"{error.get('ename', 'Error')}: {error.get('evalue', '')}"[:2000]
        elif partial:
            messages[cells.grade_id(cell)] = f"Partial credit: {partial[-1]['data'].get('text/plain', '')}"[:2000]
    return messages


RUNTIME_ERRORS = {
    "KernelDied": ("runtime-kernel-died", "a cell stopped the kernel (crash, os._exit or out of memory)"),
    "MemoryError": ("runtime-memory", "a cell ran out of memory (the kernel's memory cap)"),
}


def runtime_flags(nb) -> list[tamper_scan.Flag]:
    """What happened while running: kernel deaths, memory cap, output truncated (for review). Time limits are
    `timeout_flags`."""
    flags = []
    for index, cell in enumerate(nb.cells):
        where = cells.grade_id(cell) or f"cell {index}"
        for output in cell.get("outputs", []):
            ename = output.get("ename", "")
            if output.get("output_type") == "error" and (ename in RUNTIME_ERRORS or (
                    ename == "RuntimeError" and "can't allocate memory" in output.get("evalue", ""))):
                code, message = RUNTIME_ERRORS.get(ename, RUNTIME_ERRORS["MemoryError"])
                flags.append(tamper_scan.Flag(code, "review", where, message))
            elif output.get("output_type") == "stream" and "[output truncated by the grader" in output.get("text", ""):
                flags.append(tamper_scan.Flag("runtime-output", "review", where, "output over the limit was dropped"))
    return flags


def timeout_flags(nb, timeouts: list[str]) -> list[tamper_scan.Flag]:
    """One `timeout` flag per time limit reached ("cell 7: 60 s of CPU time"), naming the grade cell where there is
    one: the notebook is held for review (engine.py retries it once first), never a silent zero."""
    flags = []
    for entry in timeouts:
        where, _, limit = entry.partition(": ")
        index = where.split()[1] if where.startswith("cell ") else ""
        cell = nb.cells[int(index)] if index.isdigit() and int(index) < len(nb.cells) else None
        name = (cells.grade_id(cell) if cell is not None else None) or where
        flags.append(tamper_scan.Flag(TIMEOUT_FLAG, tamper_scan.HOLD, name, f"time limit reached: {limit}"))
    return flags


TIMEOUT_FLAG = "timeout"

# Options of a step beyond the course config: OverwriteCells adds grade cells a submission deleted (as autograde does)
STEP_OPTIONS = {"OverwriteCells": {"add_missing_cells": True}}


def run_steps(names, nb, resources: dict, config):
    """Run nbgrader's preprocessors `names` (jobs.SANITIZE or jobs.SCORE) in order, with the course config."""
    for name in names:
        step = getattr(nbgrader.preprocessors, name)(config=config, **STEP_OPTIONS.get(name, {}))
        nb, resources = step.preprocess(nb, resources)
    return nb, resources


def grade_cells_in_source_order(nb, assignment: str) -> list[str]:
    """Put the notebook's hand-in grade cells (their content already restored by OverwriteCells) back in the
    released notebook's order, which is the course API's order of the exercises (`coursekit.api.hand_in_names`;
    tests/autograder/grade/test_grade_order.py holds every source notebook to it); returns the grade ids that had
    moved. The grader owns the order its checks run in: the follow-through lending (autograder/checks/kit/parts.py)
    judges each part before the composites that use it. The student's own cells stay where they are; the grade
    cells fill the places where hand-in grade cells stood. An assignment outside the course API is left as it is."""
    from coursekit.api import hand_in_names

    try:
        rank = {name: index for index, name in enumerate(hand_in_names(assignment))}
    except KeyError:
        return []

    def check_rank(cell):
        calls = [rank[name] for name, *_ in handed_in(cell.source) if name in rank]
        return min(calls) if calls else None

    places = [index for index, cell in enumerate(nb.cells) if cell.cell_type == "code"
              and cells.is_grade(cell) and check_rank(cell) is not None]
    found = [nb.cells[index] for index in places]
    wanted = sorted(found, key=check_rank)  # stable: a duplicated check keeps its cells' relative order
    moved = [cells.grade_id(cell) or "?" for cell, want in zip(found, wanted) if cell is not want]
    for index, cell in zip(places, wanted):
        nb.cells[index] = cell
    return moved


def _zero_result(job: GradingJob, status: str, message: str, started: float, flags=()) -> GradingResult:
    return GradingResult.zero(job, status, message, time.monotonic() - started, flags)


def assigned_gpu(requested: str | None) -> str | None:
    """"auto": this Dask worker's share of the GPUs (worker k gets GPU k mod n); None on a CPU-only machine."""
    if requested != "auto":
        return requested
    from autograder.sandbox.kernel import visible_gpus

    gpus = visible_gpus()
    if not gpus:
        return None
    try:
        from distributed import get_worker

        name = str(get_worker().name)
    except (ImportError, ValueError):
        name = "0"
    index = int(name) if name.isdigit() else sum(name.encode())
    return gpus[index % len(gpus)]


def peak_memory_bytes() -> int:
    """The largest resident memory this worker process has had so far (Linux reports KiB)."""
    import resource

    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


def prepare(job: GradingJob, db_dir: str, run_dir: str) -> dict:
    """The job's private gradebook in `db_dir` and its files in `run_dir`; returns nbgrader's resources."""
    db_url = f"sqlite:///{os.path.join(db_dir, 'gradebook.db')}"
    build_gradebook(db_url, job)
    for relpath, data in job.files.items():
        target = os.path.join(run_dir, relpath)
        os.makedirs(os.path.dirname(target), exist_ok=True)
        with open(target, "wb") as fh:
            fh.write(data)
    return {"nbgrader": {"db_url": db_url, "assignment": job.assignment, "notebook": job.notebook,
                         "student": job.student}, "metadata": {"path": run_dir}}


def one_torch_thread() -> None:
    """The hidden checks' own torch work (reference models, probe inputs) runs on one thread in this process, as
    the kernels do (OMP_NUM_THREADS=1): a worker is one core of the cluster. With a thread per core, torch's pool
    spins while it waits; on a loaded machine that made 06's cached-decoding check cost ~45 CPU-s of the
    worker instead of ~2 (docs/benchmarks.md), CPU the check's budget counts (clock.Budget.extra_cpu)."""
    import torch

    if torch.get_num_threads() != 1:
        torch.set_num_threads(1)


def grade_job(job: GradingJob) -> GradingResult:
    """Grade one submission notebook. Never raises: a failure becomes a result with status "error"."""
    started = time.monotonic()
    one_torch_thread()
    limits = job.limits
    config = Config(job.config)  # the course's settings of nbgrader's preprocessors
    if job.nb_json is None:
        return _zero_result(job, "missing", "No notebook was submitted.", started)
    try:
        nb = nbformat.reads(job.nb_json, as_version=4)
    except Exception as exc:  # noqa: BLE001 - unreadable input is a result, not a crash
        return _zero_result(job, "unreadable", f"The notebook could not be read: {exc}", started)
    flags = tamper_scan.scan(nb, job.cells["source"], job.cells["grade"])
    problems = enforcement.unenforced_here(limits)
    if problems and not job.allow_unenforced:  # a cluster's worker on a machine without cgroups: nothing runs
        return _zero_result(job, "error", f"Not graded on {os.uname().nodename}: {enforcement.line(problems)} "
                                          f"(--allow-unenforced-limits grades anyway)", started, flags)
    try:
        scratch.sweep()  # what a worker killed mid-run left on this machine (folders, cgroups)
        with scratch.folder("db") as db_dir, scratch.folder("run") as run_dir:
            resources = prepare(job, db_dir, run_dir)
            db_url = resources["nbgrader"]["db_url"]
            nb, resources = run_steps(SANITIZE, nb, resources, config)
            moved = grade_cells_in_source_order(nb, job.assignment)
            if moved:
                flags.append(tamper_scan.Flag("reordered-grade-cells", "review", moved[0],
                                              "grade cells were moved; they ran in the released notebook's order"))
            with salted(job.draw_salt):  # this submission's draws (checks/kit/draws.py)
                run = run_notebook(nb, resources, limits, assigned_gpu(job.gpu), config=config)
            nb, notes, mistakes = run.nb, run.notes, run.mistakes
            scrub_notebook(nb, {run_dir: "<submission>", db_dir: "<grader-tmp>"})
            flags = flags + remove_leaks(nb)  # no stand-in code in what is stored, scored, shown (stand_in_leaks.py)
            nb, resources = run_steps(SCORE, nb, resources, config)
            flags = flags + make_inert(nb, [c["source"] for c in job.cells["source"] if c["locked"]])  # formgrader
            with open_gradebook(db_url=db_url, course=job.course_id) as gb:
                submission = gb.find_submission_notebook(job.notebook, job.assignment, job.student)
                grades = {g.name: {"auto_score": g.auto_score, "max_score": g.max_score,
                                   "needs_manual_grade": bool(g.needs_manual_grade)} for g in submission.grades}
    except KernelStartFailed as exc:  # a busy machine: retried (engine.py), then held, never a silent zero
        start = tamper_scan.Flag(TIMEOUT_FLAG, tamper_scan.HOLD, "start-up", f"time limit reached: {exc}")
        return _zero_result(job, "error", f"Grading failed: {exc}", started, [*flags, start])
    except Exception as exc:  # noqa: BLE001
        result = _zero_result(job, "error", f"Grading failed: {type(exc).__name__}: {exc}", started, flags)
        result.notes = [traceback.format_exc(limit=5)]
        return result
    messages = cell_messages(nb)
    flags = flags + runtime_flags(nb) + timeout_flags(nb, run.timeouts)
    notes = notes + [f"worker peak memory {peak_memory_bytes() // 2**20} MiB"]
    return GradingResult(
        assignment=job.assignment, notebook=job.notebook, student=job.student, status="graded", message="",
        content_hash=job.content_hash, grades=grades, messages=messages, mistakes=mistakes,
        flags=[f.to_dict() for f in flags], notes=notes, graded_nb=nbformat.writes(nb),
        seconds=round(time.monotonic() - started, 3), host=os.uname().nodename,
        cpu_seconds=None if run.cpu_seconds is None else round(run.cpu_seconds, 3))
