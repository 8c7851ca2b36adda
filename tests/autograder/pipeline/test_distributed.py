"""Grading through --scheduler: a real `dask scheduler` and two `dask worker` processes on 127.0.0.1.

The workers share no filesystem with the course (they run in their own empty folders); only this process
writes the gradebook.
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

from autograder.cli import main
from autograder.submissions.collect import collect

DASK = str(Path(sys.executable).with_name("dask"))


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.fixture
def cluster(tmp_path):
    port = _free_port()
    address = f"tcp://127.0.0.1:{port}"
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"}
    procs = [subprocess.Popen([DASK, "scheduler", "--host", "127.0.0.1", "--port", str(port),
                               "--dashboard-address", ":0"], cwd=tmp_path, env=env,
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)]
    for index in range(2):
        folder = tmp_path / f"worker{index}"
        folder.mkdir()
        procs.append(subprocess.Popen([DASK, "worker", address, "--nthreads", "1", "--nworkers", "1",
                                       "--memory-limit", "0", "--no-dashboard", "--name", str(index)],
                                      cwd=folder, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
    try:
        deadline = time.monotonic() + 120
        while True:
            try:
                with Client(address, timeout="5s") as client:
                    client.wait_for_workers(2, timeout=120)
                    break
            except (OSError, TimeoutError):
                if time.monotonic() > deadline:
                    raise
                time.sleep(1)
        yield address
    finally:
        for proc in reversed(procs):
            proc.terminate()
        for proc in procs:
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                proc.kill()


def test_grade_through_scheduler(course, tmp_path, cluster, helpers):
    inbox = tmp_path / "inbox"
    kinds = {"ann": "solution", "ben": "mistake", "cyd": "blank", "dee": "solution"}
    for student, kind in kinds.items():
        helpers.write_submission(inbox, course, student, kind)
    collect(course, inbox)
    code = main(["grade", "ps1", "--scheduler", cluster, "--course-dir", str(course), "--cell-timeout", "30"])
    assert code == 0
    from autograder.gradebook.store import RunsTable

    runs = RunsTable(f"sqlite:///{course / 'gradebook.db'}")
    rows = {r["student"]: r for r in runs.all("ps1")}
    runs.dispose()
    assert {s: r["score"] for s, r in rows.items()} == {"ann": 7, "ben": 1, "cyd": 0, "dee": 7}
    assert all((course / "autograded" / s / "ps1" / "ps1.ipynb").exists() for s in kinds)
