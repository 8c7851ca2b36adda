"""What one submission may use while it is graded: the sandbox's limits as nbgrader configuration.

The per-cell time limit and the kernel start-up time are nbgrader's own `Execute.timeout` and
`Execute.startup_timeout` (one value for `nbgrader autograde` and for this grader), the rest are the traits of
`SandboxLimits` (`c.SandboxLimits.memory_bytes = ...`). `course_limits(config)` reads them into a `Limits`, the
plain value that travels with every grading job (and into its content hash). The local grading workers' memory
is not a limit of one submission: `GradingWorkers`, beside the cluster (autograder/grade/cluster.py).
"""
from __future__ import annotations

import dataclasses

from nbgrader.preprocessors import Execute
from traitlets import Bool, Float, Integer
from traitlets.config import Config, LoggingConfigurable

from autograder.course.units import GiB, MiB

class SandboxLimits(LoggingConfigurable):
    """The grading sandbox's limits, as nbgrader configuration: `c.SandboxLimits.<name>` in nbgrader_config.py.

    This is the one declaration of each limit: its default and its meaning (the help text, from which the table of
    docs/grading-config.md is generated). The per-cell time limit and the kernel start-up time are not here: they
    are nbgrader's `Execute.timeout` and `Execute.startup_timeout` (EXECUTE_TIMES), so `nbgrader autograde` and
    this grader stop a cell at the same moment."""

    notebook_timeout = Float(600.0, help=(
        "CPU seconds the whole notebook may use, all its kernels together (wall-clock backstop: `wall_factor` times "
        "as much); cells left when the time is used up are not run (they score 0)."
    )).tag(config=True)
    memory_bytes = Integer(6 * GiB, help=(
        "Bytes of memory of the whole submission (its cgroup), also the cap of any one of its processes; 0: no cap."
    )).tag(config=True)
    output_bytes = Integer(1 * MiB, help=(
        "Bytes of output one cell may produce; the rest is dropped with a note (error outputs are kept, shortened)."
    )).tag(config=True)
    notebook_output_bytes = Integer(8 * MiB, help=(
        "Bytes of output of the whole notebook, errors included."
    )).tag(config=True)
    kernel_restarts = Integer(2, help=(
        "How often a cell that kills the kernel is skipped and the notebook run again from the top."
    )).tag(config=True)
    disk_bytes = Integer(1 * GiB, help=(
        "Bytes the submission may write (its private /tmp, which holds the notebook folder); also the largest file."
    )).tag(config=True)
    processes = Integer(512, help=(
        "Processes and threads the submission may have at once (its cgroup's pids.max)."
    )).tag(config=True)
    interrupt_grace = Float(5.0, help=(
        "CPU seconds of the submission a timed-out cell has to stop after the interrupt before the whole submission "
        "is killed (`wall_factor` times as many wall seconds for one that waits)."
    )).tag(config=True)
    wall_factor = Float(4.0, help=(
        "Every time limit (a cell's `Execute.timeout`, each hidden check's, the notebook's `notebook_timeout`) counts "
        "CPU seconds of the submission's cgroup (and, for a hidden check, the grader's own), so a busy machine costs "
        "no points; this many times as much wall-clock time is the backstop for code that waits instead of computing. "
        "Where the submission's CPU time is not accounted, the limits count wall-clock time."
    )).tag(config=True)
    allow_unenforced = Bool(False, help=(
        "Grade even where the per-submission limits cannot be enforced (no cgroup for the memory, processes and CPU "
        "of a submission, CPU time not accounted): said in one line per run. Off: `autograder grade` refuses to run "
        "there (`--allow-unenforced-limits` allows it for one run). Not a limit of the submission: not in `Limits`."
    )).tag(config=True)
    warm_template = Bool(True, help=(
        "Not a limit but how a kernel starts. True: a warm template in a jail that has imported what kernels import "
        "(ipykernel, numpy, torch, matplotlib, coursekit) forks every submission's kernel into fresh namespaces of "
        "its own, in the submission's cgroup, with no capability (autograder/sandbox/zygote.py): the same jail and "
        "limits, without paying Python and torch start-up per notebook. A run on local workers starts one template "
        "before its workers, which share it, and keeps it for the grading process's next runs; a worker of an "
        "existing cluster (--scheduler) keeps its own. GPU kernels, and an address-space cap below what the "
        "template maps plus 1 GiB, start cold. False: every kernel starts in a new jail of its own "
        "(docs/benchmarks.md, \"The warm template\")."
    )).tag(config=True)
    cpus = Float(1.0, help=(
        "CPU cores the whole submission may use at once, all its processes together (its cgroup's CPU quota: "
        "v2 `cpu.max`, v1 `cpu.cfs_quota_us`; each submission also gets the same CPU weight); 0: no cap."
    )).tag(config=True)


# Limits field -> (nbgrader's Execute trait, what it limits): the two times nbgrader itself declares.
EXECUTE_TIMES = {
    "cell_timeout": ("timeout", "CPU seconds for any one cell and each hidden check (`nbgrader autograde`: wall seconds)."),
    "startup_timeout": ("startup_timeout", "Seconds for a kernel to start (a start-up that runs out is retried)."),
}


def _default(name: str):
    """The declared default of a limit: SandboxLimits' trait, or nbgrader's Execute trait for the two times."""
    if name in EXECUTE_TIMES:
        return float(getattr(Execute, EXECUTE_TIMES[name][0]).default_value)
    return getattr(SandboxLimits, name).default_value


@dataclasses.dataclass(frozen=True)
class Limits:
    """What one submission may use while it is graded, resolved once per grading run (`course_limits`) and passed
    on as this plain value (it travels in every grading job and is part of its content hash). The meaning and
    default of each field are declared once, by `SandboxLimits` (and `Execute` for the two times)."""

    cell_timeout: float = _default("cell_timeout")
    notebook_timeout: float = _default("notebook_timeout")
    memory_bytes: int = _default("memory_bytes")
    output_bytes: int = _default("output_bytes")
    kernel_restarts: int = _default("kernel_restarts")
    startup_timeout: float = _default("startup_timeout")
    notebook_output_bytes: int = _default("notebook_output_bytes")
    disk_bytes: int = _default("disk_bytes")
    processes: int = _default("processes")
    interrupt_grace: float = _default("interrupt_grace")
    cpus: float = _default("cpus")
    wall_factor: float = _default("wall_factor")
    warm_template: bool = _default("warm_template")

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)


def course_limits(config=None, **overrides) -> Limits:
    """The Limits of one grading run: those a course's nbgrader configuration sets (`coursedir.nbgrader_config`:
    SandboxLimits, plus Execute.timeout and Execute.startup_timeout for the two times), with this run's
    `overrides` (e.g. `autograder grade --cell-timeout`). No config: the declared defaults, `Limits()`."""
    config = config if config is not None else Config()
    sandbox = SandboxLimits(config=config)
    fields = {field.name for field in dataclasses.fields(Limits)}
    values = {name: getattr(sandbox, name) for name in sandbox.trait_names()
              if sandbox.trait_metadata(name, "config") and name in fields}
    execute = Execute(config=config)
    for field, (trait, _meaning) in EXECUTE_TIMES.items():
        seconds = getattr(execute, trait)
        if seconds is None or seconds <= 0:
            raise ValueError(f"Execute.{trait} must be a positive number of seconds for grading, not {seconds!r} "
                             f"(nbgrader_config.py)")
        values[field] = float(seconds)
    unknown = set(overrides) - set(values)
    if unknown:
        raise ValueError(f"not a limit: {', '.join(sorted(unknown))}")
    return Limits(**{**values, **overrides})


def allows_unenforced(config=None) -> bool:
    """Whether the course's configuration accepts grading where the limits cannot be enforced
    (`c.SandboxLimits.allow_unenforced`)."""
    return bool(SandboxLimits(config=config if config is not None else Config()).allow_unenforced)
