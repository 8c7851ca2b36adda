"""What travels between the coordinator (engine.py, plan.py) and a Dask worker (worker.py): one job in, one result out.

Both are plain dataclasses of plain values (str, bytes, numbers, dicts, lists, `Limits`), so they pickle for Dask,
and a worker needs no shared filesystem and no gradebook: the job carries the submitted notebook, the released
notebook's cell records, the assignment's other files, the limits and the part of the course's nbgrader
configuration that nbgrader's preprocessors read. The coordinator alone writes results (gradebook.record_result).
"""
from __future__ import annotations

import dataclasses
import os

from autograder.sandbox.limits import Limits

# The nbgrader preprocessors a worker runs, in order (their configuration travels in `GradingJob.config`).
SANITIZE = ("ClearOutput", "DeduplicateIds", "OverwriteKernelspec", "OverwriteCells", "CheckCellMetadata")
SCORE = ("IgnorePattern", "LimitOutput", "SaveAutoGrades")


@dataclasses.dataclass(frozen=True)
class GradingJob:
    """One submitted notebook to grade."""

    assignment: str
    notebook: str
    student: str
    course_id: str
    cells: dict  # the released notebook's cell records (gradebook.notebook_cells): grade, solution, task, source
    nb_json: str | None = None  # the submitted notebook; None: not submitted
    content_hash: str | None = None  # submission + cells + files + limits + config (plan.content_hash)
    files: dict = dataclasses.field(default_factory=dict)  # the assignment's other files: relative path -> bytes
    limits: Limits = Limits()
    config: dict = dataclasses.field(default_factory=dict)  # nbgrader config sections of the preprocessors (plain)
    gpu: str | None = "auto"  # "auto": the worker's share of the GPUs; None: CPU only; else a GPU index
    alembic_version: str | None = None  # the course gradebook's schema version (no `alembic` run on workers)
    coordinator_flags: tuple = ()  # review flags the coordinator found (dicts, as Flag.to_dict())
    draw_salt: str = ""  # this notebook's draws (autograder/course/draw_secret.py); "" only in tests: fixed inputs
    allow_unenforced: bool = False  # grade on a worker that cannot enforce the limits (enforcement.py)

    @property
    def key(self) -> str:
        return f"{self.assignment}/{self.student}/{self.notebook}"

    @property
    def kernelspec(self):
        return self.cells.get("kernelspec")


@dataclasses.dataclass
class GradingResult:
    """What grading one job gave: scores per grade cell, messages for the student, flags for the instructor."""

    assignment: str
    notebook: str
    student: str
    status: str  # graded | missing | unreadable | error
    message: str = ""  # why, when it is not "graded"
    content_hash: str | None = None
    grades: dict = dataclasses.field(default_factory=dict)  # grade_id -> {auto_score, max_score, needs_manual_grade}
    messages: dict = dataclasses.field(default_factory=dict)  # grade_id -> the error its cell raised
    mistakes: dict = dataclasses.field(default_factory=dict)  # grade_id -> the diagnosed mistake
    flags: list = dataclasses.field(default_factory=list)  # [{code, severity, cell, message}]
    notes: list = dataclasses.field(default_factory=list)  # what happened while grading (restarts, truncation)
    graded_nb: str | None = None  # the graded notebook (nbformat JSON), None when it could not be graded
    seconds: float = 0.0  # wall-clock seconds of the whole job
    host: str = ""
    cpu_seconds: float | None = None  # CPU seconds of the submission's kernels (its cgroups); None: not accounted
    retried: bool = False  # graded a second time, alone, after a time limit was reached (engine.py)

    @property
    def timed_out(self) -> bool:
        """Whether a time limit was reached (a cell, a hidden check, the notebook, the kernel's start-up)."""
        return any(flag.get("code") == "timeout" for flag in self.flags)

    @property
    def key(self) -> str:
        return f"{self.assignment}/{self.student}/{self.notebook}"

    @classmethod
    def zero(cls, job: "GradingJob", status: str, message: str, seconds: float = 0.0, flags=()) -> "GradingResult":
        """Every grade cell of `job` at 0 with `message`: a notebook that could not be graded (`status` error,
        missing, unreadable...), decided by a worker or, before any worker ran, by the coordinator."""
        return cls(
            assignment=job.assignment, notebook=job.notebook, student=job.student, status=status, message=message,
            content_hash=job.content_hash,
            grades={c["name"]: {"auto_score": 0.0, "max_score": c["max_score"], "needs_manual_grade": False}
                    for c in job.cells["grade"]},
            messages={c["name"]: message for c in job.cells["grade"]}, mistakes={},
            flags=[f.to_dict() for f in flags], notes=[], graded_nb=None, seconds=round(seconds, 3),
            host=os.uname().nodename)


def preprocessor_config(config) -> dict:
    """The sections of an nbgrader config (`coursedir.nbgrader_config`) that the worker's nbgrader preprocessors
    read (their classes and base classes), as plain dicts. Only these travel to the workers: never, say, the
    gradebook's URL of `CourseDirectory`."""
    import nbgrader.preprocessors as preprocessors
    from traitlets.config import Configurable

    names = {klass.__name__ for name in (*SANITIZE, "Execute", *SCORE)
             for klass in getattr(preprocessors, name).__mro__
             if isinstance(klass, type) and issubclass(klass, Configurable)}
    return {name: _plain(config[name]) for name in sorted(names) if name in config and config[name]}


def _plain(section):
    return {key: _plain(value) if isinstance(value, dict) else value for key, value in section.items()}
