"""bench/grading.py runs end to end (on the tiny synthetic course) and prints its markdown report."""
from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[2] / "bench" / "grading.py"


@pytest.mark.slow
def test_grading_bench_prints_every_measurement():
    res = subprocess.run([sys.executable, str(BENCH), "--synthetic", "--submissions", "2"],
                         capture_output=True, text=True, timeout=600)
    assert res.returncode == 0, res.stderr[-3000:]
    report = res.stdout
    assert "# Grading benchmark" in report
    for row in ("plain sequential `nbgrader autograde`", "`autograder grade --workers 2`", "bare nbclient",
                "our worker (`grade_job`)", "`--scheduler` with 2 `dask worker` processes"):
        assert row in report, f"missing row: {row}"
    # every ratio is a measured number, not a placeholder
    assert len(re.findall(r"\d+\.\d+x", report)) >= 3
