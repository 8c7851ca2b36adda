"""The environment of a notebook: random seeds, the compute device, and whether nbgrader is grading it."""
from __future__ import annotations

import os
import random

import numpy as np
import torch

__all__ = ["set_seed", "get_device", "grading_mode", "cpu_budget", "default_threads", "configure_threads",
           "DEVICE_ENV", "GRADING_ENV", "THREADS_ENV"]

DEVICE_ENV = "COURSE_DEVICE"  # e.g. COURSE_DEVICE=cpu forces the CPU on a GPU machine
GRADING_ENV = "NBGRADER_EXECUTION"  # nbgrader sets it ("autograde", "validate") while it executes a notebook
THREADS_ENV = "COURSE_NUM_THREADS"  # torch's CPU threads in a notebook; else OMP_NUM_THREADS; else default_threads()
_configured_threads: int | None = None


def set_seed(seed: int) -> torch.Generator:
    """Seed Python's `random`, NumPy, PyTorch (CPU and every CUDA device) with `seed`.

    Returns a CPU `torch.Generator` seeded with the same value, for code that wants its own stream
    (e.g. `torch.randn(..., generator=g)` or a DataLoader) without touching the global one.
    """
    if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)):
        raise TypeError(f"seed must be an int, got {type(seed).__name__}")
    seed = int(seed)
    if not 0 <= seed < 2**32:
        raise ValueError(f"seed must be in [0, 2**32), got {seed}")
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)  # also seeds every CUDA device
    if torch.cuda.is_available():
        torch.cuda.manual_seed_all(seed)
    generator = torch.Generator()
    generator.manual_seed(seed)
    return generator


def cpu_budget() -> int:
    """The CPUs this process may really use: its CPU affinity, capped by a cgroup CPU quota (containers, pods)."""
    try:
        cpus = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):  # not Linux
        cpus = os.cpu_count() or 1
    quota = None
    try:  # cgroup v2: "max 100000" or "200000 100000"
        limit, period = open("/sys/fs/cgroup/cpu.max").read().split()[:2]
        if limit != "max":
            quota = int(limit) / int(period)
    except (OSError, ValueError):
        try:  # cgroup v1
            limit = int(open("/sys/fs/cgroup/cpu/cpu.cfs_quota_us").read())
            period = int(open("/sys/fs/cgroup/cpu/cpu.cfs_period_us").read())
            if limit > 0 and period > 0:
                quota = limit / period
        except (OSError, ValueError):
            pass
    if quota is not None:
        cpus = min(cpus, max(1, int(quota)))
    return max(1, cpus)


def default_threads(cpus: int | None = None) -> int:
    """torch's CPU threads for a notebook on a machine with `cpus` usable CPUs (default: cpu_budget()).

    Half the CPUs, at most 4, and a single thread up to 2 CPUs. torch's own default (every core) is fastest only on an
    idle machine; on a shared JupyterHub node or a busy laptop its threads wait for each other and one epoch of
    notebook 07 took 149 s instead of 12 s on two busy cores (docs/benchmarks.md, "Student training threads").
    """
    cpus = cpu_budget() if cpus is None else cpus
    return 1 if cpus <= 2 else min(4, cpus // 2)


def configure_threads(threads: int | None = None) -> int:
    """Set torch's CPU threads: `threads`, else $COURSE_NUM_THREADS, else $OMP_NUM_THREADS, else default_threads().

    Returns the number now in use. get_device() calls it once per process, so every notebook gets it.
    """
    global _configured_threads
    if threads is None:
        for name in (THREADS_ENV, "OMP_NUM_THREADS"):
            value = os.environ.get(name, "").strip()
            if value:
                try:
                    threads = int(value)
                except ValueError:
                    raise ValueError(f"{name}={value!r} is not a whole number of threads") from None
                break
        else:
            threads = default_threads()
    if threads < 1:
        raise ValueError(f"the number of threads must be at least 1, got {threads}")
    if torch.get_num_threads() != threads:
        torch.set_num_threads(threads)
    _configured_threads = threads
    return threads


def get_device() -> torch.device:
    """The device to compute on: CUDA when available, else the CPU.

    The environment variable COURSE_DEVICE overrides the choice ("cpu", "cuda", "cuda:1", ...).
    Asking for CUDA on a machine without it raises a RuntimeError instead of failing later.
    The first call also sets torch's CPU threads (configure_threads) to a count that holds up on a shared machine.
    """
    if _configured_threads is None:
        configure_threads()
    requested = os.environ.get(DEVICE_ENV, "").strip()
    if not requested:
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    try:
        device = torch.device(requested)
    except RuntimeError as error:
        raise ValueError(f"{DEVICE_ENV}={requested!r} is not a device name (try 'cpu' or 'cuda')") from error
    if device.type == "cuda":
        if not torch.cuda.is_available():
            raise RuntimeError(f"{DEVICE_ENV}={requested!r} but CUDA is not available on this machine")
        if device.index is not None and device.index >= torch.cuda.device_count():
            raise RuntimeError(
                f"{DEVICE_ENV}={requested!r} but only {torch.cuda.device_count()} CUDA device(s) are present"
            )
    return device


def grading_mode() -> bool:
    """True while nbgrader executes the notebook (the environment variable NBGRADER_EXECUTION is set).

    Notebooks use it to train on less data or skip slow demos when the autograder runs them.
    """
    return GRADING_ENV in os.environ
