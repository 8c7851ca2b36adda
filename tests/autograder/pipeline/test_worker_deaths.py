"""A grading worker that dies (over its memory limit) costs only the submission it held (issue #20, door 3).

Each local Dask worker runs with a memory limit (sandbox.GradingWorkers.memory_bytes); its nanny restarts a
worker that goes over it. The submission it held is graded once more, then recorded as failed with the reason;
every other submission of the batch is graded normally.
"""
from __future__ import annotations

import time

import pytest

from autograder.collect import collect
from autograder.grade import engine, worker

pytestmark = [pytest.mark.slow, pytest.mark.pipeline]


def grade_or_blow_up(job):
    """Stands in for worker.grade_job: the submission of "hog" takes its worker past any memory limit."""
    if job.student == "hog":
        hoard = []
        for _ in range(40):  # 2 GB, 50 MB at a time: the nanny sees it grow
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
