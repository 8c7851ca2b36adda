"""A grading worker that dies (over its memory limit) costs only the submission it held (issue #20, door 3).

Each local Dask worker runs with a memory limit (grade.cluster.GradingWorkers.memory_bytes); its nanny restarts a
worker that goes over it. The submission it held is graded once more, then recorded as failed with the reason;
every other submission of the batch is graded normally. The limit is what a worker may use of its own: a forked
worker also counts the grading command's memory (a big test process, a notebook server), which must not make
it "over the limit" before it grades anything (CI once hung here: every worker paused or restarted forever).
"""
from __future__ import annotations

import os
import time

import psutil
import pytest

from autograder.submissions.collect import collect
from autograder.grade import engine, worker

pytestmark = [pytest.mark.slow, pytest.mark.pipeline]


def grade_or_blow_up(job):
    """Stands in for worker.grade_job: the submission of "hog" takes its worker past any memory limit."""
    if job.student == "hog":
        hoard = []
        for _ in range(30):  # 1.5 GB of its own, 50 MB at a time: the nanny sees it grow
            hoard.append(bytearray(50 * 1024**2))
            time.sleep(0.05)
        time.sleep(30)
    return worker._zero_result(job, "graded", "", time.monotonic())


def test_a_dead_worker_costs_only_its_submission(course, tmp_path, helpers, monkeypatch):
    inbox = tmp_path / "inbox"
    for student in ("ann", "hog", "cyd"):
        helpers.write_submission(inbox, course, student, "solution")
    collect(course, inbox)
    monkeypatch.setattr(worker, "grade_job", grade_or_blow_up)  # forked workers inherit it
    monkeypatch.setattr(engine, "worker_memory_bytes", lambda config: 700 * 1024**2)
    started = time.monotonic()
    summary = engine.grade(course, "ps1", workers=2, progress=False, force=True)
    rows = {r["student"]: r for r in summary.graded}
    assert set(rows) == {"ann", "hog", "cyd"}
    assert rows["ann"]["status"] == rows["cyd"]["status"] == "graded"
    assert rows["hog"]["status"] == "error"
    reason = rows["hog"]["notes"][-1]
    assert "died 2 times" in reason and str(700 * 1024**2) in reason and "GradingWorkers.memory_bytes" in reason
    assert time.monotonic() - started < 240


def grade_and_log(job):
    """Stands in for worker.grade_job: notes which worker process graded which student, then passes."""
    with open(os.environ["WORKER_LOG"], "a") as log:
        log.write(f"{job.student} {os.getpid()}\n")
    time.sleep(1)  # long enough for the nanny (every 0.1 s) to see a worker over its limit
    return worker._zero_result(job, "graded", "", time.monotonic())


def test_workers_forked_from_a_big_grading_process_are_not_over_their_limit(course, tmp_path, helpers,
                                                                          monkeypatch):
    inbox = tmp_path / "inbox"
    for student in ("ann", "bob", "cyd"):
        helpers.write_submission(inbox, course, student, "solution")
    collect(course, inbox)
    monkeypatch.setenv("WORKER_LOG", str(tmp_path / "workers.log"))
    monkeypatch.setattr(worker, "grade_job", grade_and_log)
    monkeypatch.setattr(engine, "worker_memory_bytes", lambda config: 700 * 1024**2)
    ballast = bytearray(800 * 1024**2)  # the grading process itself is bigger than one worker's own limit
    assert psutil.Process().memory_info().rss > 800 * 1024**2
    summary = engine.grade(course, "ps1", workers=2, progress=False, force=True)
    del ballast
    rows = {r["student"]: r["status"] for r in summary.graded}
    assert rows == {"ann": "graded", "bob": "graded", "cyd": "graded"}
    graded = (tmp_path / "workers.log").read_text().split("\n")[:-1]
    assert sorted(line.split()[0] for line in graded) == ["ann", "bob", "cyd"], (
        f"a submission was graded more than once (its worker was restarted): {graded}")
