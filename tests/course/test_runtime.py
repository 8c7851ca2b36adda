"""Every source notebook runs top to bottom, offline, in about a minute on 2 CPU cores.

The budget is 60 s; the assertion allows 120 s because the test machines are shared. Times are printed in the
pytest summary ("course notebooks, top to bottom").
"""
from __future__ import annotations

from pathlib import Path

import pytest

from autograder.release import find_assignments

REPO = Path(__file__).resolve().parents[2]
ASSIGNMENTS = find_assignments(REPO / "course")

pytestmark = pytest.mark.slow


@pytest.mark.parametrize("assignment", ASSIGNMENTS)
def test_notebook_runs_top_to_bottom_in_time(assignment, notebook_runner):
    seconds = notebook_runner(assignment)
    assert seconds < 120, f"{assignment} took {seconds:.0f} s (budget 60 s)"
