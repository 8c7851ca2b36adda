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


@pytest.mark.slow
def test_class_bench_prints_every_measurement():
    """`--class N` at its smallest honest size: one student, two light assignments (one of them 03, the notebook of
    the per-notebook goal), every row measured."""
    res = subprocess.run([sys.executable, str(BENCH), "--class", "1", "--assignments",
                          "02_positional_encoding,03_attention"], capture_output=True, text=True, timeout=600)
    assert res.returncode == 0, res.stderr[-3000:]
    report = res.stdout
    assert "# Grading benchmark: a class" in report
    assert re.search(r"load average [\d.]+/[\d.]+/[\d.]+ at the start", report)
    assert "Ours graded 2 of 2 (0 errors" in report
    number = r"\d+\.\d+"
    for row in ("ours: `grade_many(..., workers=2)`", "plain sequential `nbgrader autograde`", "bare nbclient, one",
                "our worker (`grade_job`, jailed, warm template, in this process)",
                "our worker without the template"):
        line = next((line for line in report.splitlines() if line.startswith(f"| {row}")), None)
        assert line is not None, f"missing row: {row}"
        wall, per_minute, core = line.split("|")[2:5]  # seconds, notebooks per minute, core-seconds per notebook
        for cell in (wall, per_minute, core):
            assert re.fullmatch(rf"\s*{number}\s*", cell), f"not a measured number in {line!r}"
    assert re.search(rf"\| {number}x the notebooks per minute of sequential nbgrader \| >= 3x \|", report)
    assert re.search(rf"\| our worker on `03_attention`, mean per notebook, warm template \| {number} \|.*{number}x "
                     rf"bare nbclient's {number} s \| <= 0.6x \|", report)
    assert re.search(rf"\| our worker on `03_attention`, mean per notebook, without the template \| {number} \|", report)
    assert re.search(rf"\| warm template: start-up .* \| {number} \|.*RSS \d+ MiB, address space \d+ MiB, \d+ "
                     rf"modules imported \|", report)
    for how in ("from the warm template", "without the template"):
        assert re.search(rf"\| a kernel start {how} .* \| {number} \|.*RSS \d+ MiB after the start", report), how
    assert "cgroup" in report or "getrusage" in report  # how the core-seconds were counted
    phases = ("set-up", "kernel start", "first code cell", "the other cells", "judge", "kernel stop", "the rest of",
              "write-back", "**total `grade_job`**", "bare nbclient, same notebooks", "CPU s of the kernel",
              "CPU s of the worker", "kernel RSS right after its start", "kernel peak RSS", "submission cgroup's peak")
    for phase in phases:
        line = next((line for line in report.splitlines() if line.startswith(f"| {phase}")), None)
        assert line is not None, f"missing phase row: {phase}"
        cells = [cell.strip() for cell in line.split("|")[2:5]] + [line.split("|")[6].strip()]  # 02, 03, all; cold
        assert all(re.fullmatch(r"\d+(\.\d+)?", cell) for cell in cells), f"not measured: {line!r}"
    assert "nan" not in report
