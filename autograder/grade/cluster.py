"""The Dask side of grading: the cluster the jobs run on, and what a failed worker means for a submission.

One code path for both set-ups: `Client(local_cluster(...))` (worker processes on this machine, one thread each,
default one per core, each with the memory of `GradingWorkers`) or `Client(address)` (an existing cluster,
--scheduler). A worker that dies (over its memory limit, killed) is replaced by its nanny; the submission it held
is tried once more, then fails alone (`worker_failure`).

Whoever can talk to the scheduler can run code in a worker, as the grader, next to the gradebook and solutions/
(issue #32, door 2). So no cluster speaks plain TCP: a local cluster uses TLS with a certificate made for this
run only (`Security.temporary()`: in memory, never on disk; a process without it cannot connect) and starts no
HTTP server at all (no dashboard, nor the HTTP server Dask otherwise starts in every scheduler and worker:
`dask_nodes.py`), so its TLS comms are all it listens on (issue #47); an existing scheduler must be a tls://
address, and the grader authenticates with the certificate and key of `GradingCluster` (nbgrader configuration),
which student servers never get.
"""
from __future__ import annotations

import contextlib
import os
import sys

from traitlets import Integer, Unicode
from traitlets.config import Config, LoggingConfigurable

from autograder.course.units import GiB
from autograder.errors import GradingError

WORKER_DEATHS_ALLOWED = 1  # a submission whose worker died is graded once more; a second death fails it


class GradingCluster(LoggingConfigurable):
    """How the grader authenticates to an existing Dask scheduler (`autograder grade --scheduler tls://...`), as
    nbgrader configuration: `c.GradingCluster.<name>`. Local clusters need nothing: each run makes its own
    certificate."""

    tls_ca_file = Unicode("", help=(
        "PEM file of the certificate authority that signed the scheduler's and workers' certificates (and the "
        "grader's): required with --scheduler.")).tag(config=True)
    tls_cert = Unicode("", help=(
        "PEM file of the grader's client certificate for the scheduler: required with --scheduler. Keep it "
        "on the grader's machine only: whoever holds it can run code on the workers.")).tag(config=True)
    tls_key = Unicode("", help=(
        "PEM file of the private key of `tls_cert` (or empty when `tls_cert` holds the key too).")).tag(config=True)


class GradingWorkers(LoggingConfigurable):
    """The grading cluster's local workers, as nbgrader configuration: `c.GradingWorkers.<name>`.

    Not part of `Limits` (not a limit of one submission, and not in the content hash). On an existing cluster
    (`--scheduler`) the admin sets the same with `dask worker --memory-limit` and the scheduler's
    `distributed.scheduler.allowed-failures: 1`."""

    memory_bytes = Integer(4 * GiB, help=(
        "Bytes of memory one local grading worker process may use of its own (Dask's memory limit: a worker "
        "above it is restarted, and the submission it held is graded once more, then marked failed). A worker "
        "forked from the grading command also counts that command's memory, shared with it; that share is added "
        "to the limit. 0: no limit."
    )).tag(config=True)


def worker_memory_bytes(config=None) -> int:
    """GradingWorkers.memory_bytes of a course's nbgrader configuration (default 4 GiB)."""
    return int(GradingWorkers(config=config if config is not None else Config()).memory_bytes)


def scheduler_tls(config, scheduler: str | None) -> tuple[str, str, str]:
    """(CA file, certificate, key) to reach `scheduler` (none for a local cluster); refuses, before anything runs,
    a scheduler reached without TLS or without the grader's credentials."""
    if not scheduler:
        return ("", "", "")
    settings = GradingCluster(config=config if config is not None else Config())
    if not scheduler.startswith("tls://"):
        raise GradingError(
            f"refusing the scheduler {scheduler}: only a tls:// scheduler is used (whoever can reach a plain one "
            "can run code in its workers); see deploy/README.md")
    missing = [name for name in ("tls_ca_file", "tls_cert") if not getattr(settings, name)]
    if missing:
        raise GradingError(
            f"the scheduler {scheduler} needs the grader's TLS credentials: set "
            + " and ".join(f"c.GradingCluster.{name}" for name in missing) + " in nbgrader_config.py")
    for name in ("tls_ca_file", "tls_cert", "tls_key"):
        path = getattr(settings, name)
        if path and not os.path.isfile(path):
            raise GradingError(f"c.GradingCluster.{name}: no such file {path}")
    return (settings.tls_ca_file, settings.tls_cert, settings.tls_key)


def self_signed_credentials(folder) -> dict:
    """{"ca", "cert", "key"}: PEM files in `folder` of a certificate signed by itself, so its own authority (Dask's
    `Security.temporary()`), for a scheduler, its workers and the grader on one machine (tests and benchmarks; a
    real cluster's admin issues its own, see docs/grading-config.md)."""
    from pathlib import Path

    from distributed.security import Security

    temporary = Security.temporary()
    files = {"ca": Path(folder) / "ca.pem", "cert": Path(folder) / "cert.pem", "key": Path(folder) / "key.pem"}
    files["ca"].write_text(temporary.tls_ca_file)
    files["cert"].write_text(temporary.tls_scheduler_cert)
    files["key"].write_text(temporary.tls_scheduler_key)
    return files


@contextlib.contextmanager
def dask_client(workers: int | None = None, scheduler: str | None = None, memory_bytes: int = 0,
                tls: tuple[str, str, str] = ("", "", "")):
    """A Dask client on an existing scheduler (`scheduler` address, reached with the `tls` credentials of
    `scheduler_tls`) or on a local cluster of worker processes (`local_cluster`), each with at most `memory_bytes`
    of memory (0: no limit; see GradingWorkers), over TLS with a certificate of this run only."""
    from distributed import Client
    from distributed.security import Security

    if scheduler:
        ca_file, cert, key = tls
        security = Security(tls_ca_file=ca_file, tls_client_cert=cert, tls_client_key=key or None,
                            require_encryption=True)
        with Client(scheduler, timeout="30s", security=security) as client:
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
            local_cluster(n, worker_memory_limit(memory_bytes, method)) as cluster, Client(cluster) as client:
        yield client


def local_cluster(n_workers: int, memory_limit: int):
    """A cluster of `n_workers` worker processes on this machine (one thread each, `memory_limit` bytes: 0 for
    none) that listens on nothing but its TLS comms on 127.0.0.1: Dask's LocalCluster as a `SpecCluster` of
    `dask_nodes`' scheduler and nannies, which start no HTTP server (no dashboard, no Dask HTTP route at all)."""
    from distributed import SpecCluster
    from distributed.security import Security

    from autograder.grade.dask_nodes import QuietNanny, QuietScheduler

    security = Security.temporary()  # this run's own certificate authority, in memory only
    node = {"host": "127.0.0.1", "protocol": "tls://", "security": security, "dashboard": False,
            "dashboard_address": None}
    worker = {"cls": QuietNanny, "options": {**node, "nthreads": 1, "memory_limit": memory_limit,
                                             "silence_logs": 40}}
    return SpecCluster(scheduler={"cls": QuietScheduler, "options": {**node, "port": 0}},
                       workers={i: worker for i in range(n_workers)}, worker=worker, security=security,
                       silence_logs=40)


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
