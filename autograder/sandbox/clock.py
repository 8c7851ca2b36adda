"""Time limits that count the submission's own work: CPU seconds of its cgroup, with a wall-clock backstop.

Wall time measures the machine's load as much as a submission's work: the reference answer of 06 graded beside
other work on a busy 2-core machine ran out of time in a hidden check and lost 20 points. So every time limit of a
grading run (a cell, a hidden check, the whole notebook) is counted in CPU seconds:

- the submission's: its cgroup's CPU time (v1 `cpuacct.usage` in nanoseconds, v2 `cpu.stat` `usage_usec`), every
  process and thread it started, over every attempt of the notebook (a kernel that died and was restarted counts
  with what it used);
- for a hidden check, also the grader's own (`time.process_time()` of the grading worker): the check's reference
  computations are part of its cost, and they too are CPU time, not the machine's load.

A kernel that sleeps or waits (`time.sleep`, a blocked read) uses no CPU, so each limit also has a wall-clock
backstop `Limits.wall_factor` times larger. Where no cgroup accounts the submission's CPU (no cgroups, or grading
with `--allow-unenforced-limits`), the limits are wall-clock limits as they were, and the run says so.
"""
from __future__ import annotations

import dataclasses
import os
import time
from typing import Callable


def cgroup_cpu_seconds(group) -> float | None:
    """CPU seconds used so far by everything in a cgroup.Cgroup, read from the folder that counts it
    (`Cgroup.cpuacct_dir`); None where none does."""
    if group is None or group.cpuacct_dir is None:
        return None
    try:
        if group.version == 1:
            with open(os.path.join(group.cpuacct_dir, "cpuacct.usage")) as fh:
                return int(fh.read().strip()) / 1e9
        with open(os.path.join(group.cpuacct_dir, "cpu.stat")) as fh:
            for line in fh:
                key, _, value = line.partition(" ")
                if key == "usage_usec":
                    return int(value) / 1e6
    except (OSError, ValueError):
        return None
    return None


class SubmissionClock:
    """The CPU seconds one submission has used, over every kernel (attempt) of its notebook, and the wall seconds
    since its grading began. The kernel manager `attach`es each kernel's cgroup when it starts and `detach`es it
    (reading its final count) before the group is removed. `cpu()` is None until a kernel whose cgroup accounts CPU
    has started, and stays None for a notebook whose kernels had none (the limits then count wall time)."""

    def __init__(self):
        self.started = time.monotonic()
        self.finished_cpu = 0.0  # what the kernels that have ended used
        self.accounted: bool | None = None  # None: no kernel yet
        self._group = None

    def attach(self, group) -> None:
        self._group = group
        reading = cgroup_cpu_seconds(group)
        self.accounted = (self.accounted is not False) and reading is not None

    def detach(self) -> None:
        if self._group is not None:
            reading = cgroup_cpu_seconds(self._group)
            self.finished_cpu += reading or 0.0
        self._group = None

    def cpu(self) -> float | None:
        if not self.accounted:
            return None
        live = cgroup_cpu_seconds(self._group) if self._group is not None else 0.0
        return self.finished_cpu + (live or 0.0)

    def wall(self) -> float:
        return time.monotonic() - self.started


@dataclasses.dataclass
class Budget:
    """One time limit: `cpu_limit` CPU seconds (the submission's, plus `extra_cpu()`: the grader's own for a hidden
    check) and a wall-clock backstop `wall_limit`, both counted from when the budget was made. When the submission's
    CPU is not accounted, only the wall clock counts, with the limit `cpu_limit` (the limits of old)."""

    clock: SubmissionClock
    cpu_limit: float
    wall_limit: float
    extra_cpu: Callable[[], float] | None = None
    cpu_start: float | None = None
    extra_start: float = 0.0
    wall_start: float = 0.0

    def __post_init__(self):
        self.cpu_start = self.clock.cpu()
        self.extra_start = self.extra_cpu() if self.extra_cpu else 0.0
        self.wall_start = time.monotonic()

    def cpu_used(self) -> float | None:
        now = self.clock.cpu()
        if now is None or self.cpu_start is None:
            return None
        extra = (self.extra_cpu() - self.extra_start) if self.extra_cpu else 0.0
        return now - self.cpu_start + extra

    def wall_used(self) -> float:
        return time.monotonic() - self.wall_start

    def exceeded(self) -> str | None:
        """None while within the limit; else which limit was reached, in words for the student and the instructor."""
        cpu = self.cpu_used()
        if cpu is None:
            if self.wall_used() >= self.cpu_limit:
                return f"{self.cpu_limit:g} s (wall-clock time: CPU time is not accounted on this grader)"
            return None
        if cpu >= self.cpu_limit:
            return f"{self.cpu_limit:g} s of CPU time"
        if self.wall_used() >= self.wall_limit:
            return f"{self.wall_limit:g} s of wall-clock time (the backstop for code that waits instead of computing)"
        return None

    def wall_left(self) -> float:
        """Seconds of wall time before this budget can run out at the earliest."""
        limit = self.cpu_limit if self.cpu_used() is None else self.wall_limit
        return max(0.0, limit - self.wall_used())


def cell_budget(clock: SubmissionClock, limits, notebook: "Budget", extra_cpu=None) -> Budget:
    """The budget of one cell or hidden check: `Limits.cell_timeout` CPU seconds and `wall_factor` times as much
    wall time, never past what the notebook has left of its own budget."""
    cpu_left = notebook.cpu_limit - (notebook.cpu_used() or 0.0)
    wall_left = notebook.wall_limit - notebook.wall_used()
    if notebook.cpu_used() is None:  # wall time only: the notebook's limit of old is its cpu_limit
        cpu_left = notebook.cpu_limit - notebook.wall_used()
    return Budget(clock, max(0.0, min(limits.cell_timeout, cpu_left)),
                  max(0.0, min(limits.cell_timeout * limits.wall_factor, wall_left)), extra_cpu)


def notebook_budget(clock: SubmissionClock, limits) -> Budget:
    """The whole notebook's budget: `Limits.notebook_timeout` CPU seconds over all its kernels, with the backstop."""
    budget = Budget(clock, limits.notebook_timeout, limits.notebook_timeout * limits.wall_factor)
    budget.cpu_start = 0.0  # counted from the notebook's first kernel (the clock starts at 0 CPU seconds)
    budget.wall_start = clock.started
    return budget


def interrupt_grace(clock: SubmissionClock, limits) -> Budget:
    """What an interrupted cell has to stop: `Limits.interrupt_grace` CPU seconds of the submission (a loop that
    ignores SIGINT spends them at once), `wall_factor` times as much wall time (a hung call that waits)."""
    grace = max(0.0, float(limits.interrupt_grace))
    return Budget(clock, grace, grace * limits.wall_factor)
