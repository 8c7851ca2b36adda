"""Whether this machine enforces a run's limits, said once per grading run, before any submission runs.

A grading worker that cannot make a cgroup for a submission falls back to per-process rlimits (cgroup.py): the
total memory of a submission (its tmpfs folders included), its CPU share and its CPU time are then not limited, and
its time limits count wall-clock time (clock.py), so a busy machine can cost an honest student points. The grading
run refuses such a machine unless the instructor accepts it (`--allow-unenforced-limits`, or
`c.SandboxLimits.allow_unenforced = True`), and says in one line what is not enforced either way.
"""
from __future__ import annotations

import functools
import logging
import os

from autograder.sandbox import cgroup
from autograder.sandbox.clock import cgroup_cpu_seconds
from autograder.sandbox.limits import Limits

CPU_QUOTA_FILES = ("cpu.cfs_quota_us", "cpu.max")


def unenforced(limits: Limits) -> list[str]:
    """What of `limits` this process cannot enforce for a submission (empty: everything), found by making a
    submission's cgroup with those limits and removing it again."""
    saved = cgroup.log.level
    cgroup.log.setLevel(logging.ERROR)  # said here, in one line, not in cgroup's own warnings
    try:
        group = cgroup.create(int(limits.memory_bytes), int(limits.processes), float(limits.cpus))
    finally:
        cgroup.log.setLevel(saved)
    if group is None:
        return ["no per-submission cgroup (the total memory and processes of a submission, its CPU share; time "
                "limits count wall-clock time)"]
    try:
        problems = []
        if cgroup_cpu_seconds(group) is None:
            problems.append("CPU time is not accounted (time limits count wall-clock time)")
        if limits.cpus > 0 and not any(_has(folder, name) for folder in group.dirs for name in CPU_QUOTA_FILES):
            problems.append("no CPU cap (a submission's processes compete with its classmates' for every core)")
        return problems
    finally:
        group.remove()


@functools.lru_cache(maxsize=8)
def unenforced_here(limits: Limits) -> tuple[str, ...]:
    """`unenforced`, found once per process for each `limits` (a Dask worker checks before its first job)."""
    return tuple(unenforced(limits))


def line(problems) -> str:
    """The run's one line about it."""
    return "limits NOT enforced on this machine: " + "; ".join(problems)


def _has(folder: str, name: str) -> bool:
    return os.path.exists(os.path.join(folder, name))
