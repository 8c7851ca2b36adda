"""Grading through --scheduler: a real `dask scheduler` and two `dask worker` processes on 127.0.0.1, over TLS.

The workers share no filesystem with the course (they run in their own empty folders); only this process
writes the gradebook. The grader reaches the scheduler with the credentials of `c.GradingCluster` (a certificate
authority of this test signs every certificate); a plain tcp:// scheduler, or one without credentials, is
refused before anything runs.
"""
from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
from distributed import Client
from distributed.security import Security

from autograder.cli import main
from autograder.grade.cluster import self_signed_credentials
from autograder.submissions.collect import collect

DASK = str(Path(sys.executable).with_name("dask"))


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.fixture
def cluster(tmp_path):
    port = _free_port()
    address = f"tls://127.0.0.1:{port}"
    tls = self_signed_credentials(tmp_path)
    tls_args = ["--tls-ca-file", str(tls["ca"]), "--tls-cert", str(tls["cert"]), "--tls-key", str(tls["key"])]
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"}
    procs = [subprocess.Popen([DASK, "scheduler", "--host", "127.0.0.1", "--port", str(port), "--protocol", "tls",
                               "--no-dashboard", *tls_args], cwd=tmp_path, env=env,
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)]
    for index in range(2):
        folder = tmp_path / f"worker{index}"
        folder.mkdir()
        procs.append(subprocess.Popen([DASK, "worker", address, "--nthreads", "1", "--nworkers", "1",
                                       "--memory-limit", "0", "--no-dashboard", "--name", str(index), *tls_args],
                                      cwd=folder, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
    security = Security(tls_ca_file=str(tls["ca"]), tls_client_cert=str(tls["cert"]),
                        tls_client_key=str(tls["key"]), require_encryption=True)
    try:
        deadline = time.monotonic() + 120
        while True:
            try:
                with Client(address, timeout="5s", security=security) as client:
                    client.wait_for_workers(2, timeout=120)
                    break
            except (OSError, TimeoutError):
                if time.monotonic() > deadline:
                    raise
                time.sleep(1)
        yield {"address": address, **tls}
    finally:
        for proc in reversed(procs):
            proc.terminate()
        for proc in procs:
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                proc.kill()


def _configure(course: Path, **settings) -> None:
    with open(course / "nbgrader_config.py", "a") as config:
        for name, value in settings.items():
            config.write(f"c.GradingCluster.{name} = {str(value)!r}\n")


def test_grade_through_scheduler(course, tmp_path, cluster, helpers, capsys):
    inbox = tmp_path / "inbox"
    kinds = {"ann": "solution", "ben": "mistake", "cyd": "blank", "dee": "solution"}
    for student, kind in kinds.items():
        helpers.write_submission(inbox, course, student, kind)
    collect(course, inbox)
    args = ["grade", "ps1", "--course-dir", str(course), "--cell-timeout", "30"]
    plain = cluster["address"].replace("tls://", "tcp://")
    assert main([*args, "--scheduler", plain]) == 2  # refused before anything runs: no plain TCP
    assert f"refusing the scheduler {plain}" in capsys.readouterr().err
    assert main([*args, "--scheduler", cluster["address"]]) == 2  # no credentials configured yet
    assert "c.GradingCluster.tls_ca_file and c.GradingCluster.tls_cert" in capsys.readouterr().err
    assert not (course / "autograded").exists()
    _configure(course, tls_ca_file=cluster["ca"], tls_cert=cluster["cert"], tls_key=cluster["key"])
    code = main([*args, "--scheduler", cluster["address"]])
    assert code == 0
    from autograder.gradebook.store import RunsTable

    runs = RunsTable(f"sqlite:///{course / 'gradebook.db'}")
    rows = {r["student"]: r for r in runs.all("ps1")}
    runs.dispose()
    assert {s: r["score"] for s, r in rows.items()} == {"ann": 7, "ben": 1, "cyd": 0, "dee": 7}
    assert all((course / "autograded" / s / "ps1" / "ps1.ipynb").exists() for s in kinds)
