"""The Dask side of grading: the cluster the jobs run on, and what a failed worker means for a submission.

One code path for both set-ups: `Client(LocalCluster(...))` (worker processes on this machine, one thread each,
default one per core) or `Client(address)` (an existing cluster, --scheduler). A worker that dies (over its
memory limit, killed) is replaced by its nanny; the submission it held is tried once more, then fails alone
(`worker_failure`).
"""
from __future__ import annotations

import contextlib
import os
import sys

WORKER_DEATHS_ALLOWED = 1  # a submission whose worker died is graded once more; a second death fails it


@contextlib.contextmanager
def dask_client(workers: int | None = None, scheduler: str | None = None, memory_bytes: int = 0):
    """A Dask client on an existing scheduler (`scheduler` address) or on a LocalCluster of worker processes,
    each with at most `memory_bytes` of memory (0: no limit; see sandbox.GradingWorkers)."""
    from distributed import Client, LocalCluster

    if scheduler:
        with Client(scheduler, timeout="30s") as client:
            yield client
        return
    import dask

    import autograder.grade.worker  # noqa: F401  (imported once here, inherited by forked workers)

    n = workers or os.cpu_count() or 1
    # fork: workers start in ~1 s instead of re-importing everything (spawn takes 10-20 s on a busy machine);
    # safe here because this process never initialises CUDA. Other platforms keep Dask's default.
    key = "distributed.worker.multiprocessing-method"
    method = "fork" if sys.platform.startswith("linux") else dask.config.get(key)
    # a worker over its memory limit is restarted by its nanny; the submission it held is tried once more on
    # another worker, then fails with KilledWorker (WORKER_DIED): a dead worker costs only what it held
    with dask.config.set({key: method, "distributed.scheduler.allowed-failures": WORKER_DEATHS_ALLOWED}), \
            LocalCluster(n_workers=n, threads_per_worker=1, processes=True, dashboard_address=":0",
                         memory_limit=worker_memory_limit(memory_bytes, method), silence_logs=40) as cluster, \
            Client(cluster) as client:
        yield client


def worker_memory_limit(memory_bytes: int, method: str) -> int:
    """Dask's memory limit for a local worker that may use `memory_bytes` of its own (0: none).

    A forked worker starts with this process's resident pages: shared copy-on-write, yet counted in the worker's
    RSS, which is what the nanny compares with the limit. Without adding them, a grading command that has grown
    (a notebook server, a test run with torch loaded) starts workers that are over the limit before their first
    submission: paused (over 80%) or restarted forever (over 95%), and grading never ends."""
    if not memory_bytes:
        return 0
    if method != "fork":
        return int(memory_bytes)
    import psutil

    return int(memory_bytes) + psutil.Process().memory_info().rss


def worker_failure(exc: BaseException, memory_bytes: int) -> str:
    """Why a submission could not be graded when its worker failed (told to the instructor, never student text)."""
    if type(exc).__name__ == "KilledWorker":
        limit = f" (each may use {memory_bytes} bytes of memory: GradingWorkers.memory_bytes)" if memory_bytes else ""
        return (f"the grading worker died {WORKER_DEATHS_ALLOWED + 1} times while grading this submission{limit}; "
                "it was not graded (the other submissions were)")
    return f"the grading worker failed: {type(exc).__name__}"
