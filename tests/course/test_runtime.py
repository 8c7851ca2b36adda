"""Every source notebook runs top to bottom, offline, on CPU, as a student would run it (not in grading mode).

Speed is measured, not asserted: the time of each notebook is printed in the pytest summary ("course notebooks,
top to bottom"), two notebooks running at a time (tests/course/conftest.py); `bench/notebook_times.py` times them
one at a time, as recorded in docs/benchmarks.md (budget: 60 s each for 01-06 on 2 cores, 3 minutes for 07's, 08's
and 09's default runs). A cell that hangs still fails, through nbclient's per-cell timeout.
"""
from __future__ import annotations

from pathlib import Path

import pytest

from autograder.publish.release import find_assignments

REPO = Path(__file__).resolve().parents[2]
ASSIGNMENTS = find_assignments(REPO / "course")

pytestmark = pytest.mark.slow


@pytest.mark.parametrize("assignment", ASSIGNMENTS)
def test_notebook_runs_top_to_bottom(assignment, notebook_runner):
    seconds = notebook_runner(assignment)  # raises CellExecutionError / CellTimeoutError on any failure
    assert seconds > 0
