"""grade/worker.py: what a grading worker process sets up for itself before a submission."""
from __future__ import annotations

import subprocess
import sys

PROGRAM = r"""
import torch
torch.set_num_threads(2)  # as torch starts on a 2-core worker: one thread per core
from autograder.grade.jobs import GradingJob
from autograder.grade.worker import grade_job
result = grade_job(GradingJob(assignment="a", notebook="a", student="s", course_id="c", cells={"grade": [], "source": []}))
print(result.status, torch.get_num_threads())
"""


def test_a_worker_grades_with_one_torch_thread():
    # a worker is one core of the cluster; the hidden checks' reference work in its process runs on one thread, as
    # the kernel's does (a pool of several spins while it waits and counts against the check's CPU budget)
    done = subprocess.run([sys.executable, "-c", PROGRAM], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.split() == ["missing", "1"]
