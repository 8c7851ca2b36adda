"""The time limits count the submission's CPU seconds (its cgroup's), with a wall-clock backstop (clock.py)."""
from __future__ import annotations

import dataclasses
import time
from pathlib import Path

import pytest

from autograder.sandbox.clock import (Budget, SubmissionClock, cell_budget, cgroup_cpu_seconds, interrupt_grace,
                                     notebook_budget)
from autograder.sandbox.limits import Limits


@dataclasses.dataclass
class FakeGroup:
    dirs: list
    version: int
    cpuacct_dir: str | None = None  # the folder that counts its CPU (cgroup.Cgroup's)


def v1_group(tmp_path, nanoseconds: int) -> FakeGroup:
    (tmp_path / "memory").mkdir(parents=True)
    (tmp_path / "cpuacct").mkdir()
    (tmp_path / "cpuacct" / "cpuacct.usage").write_text(f"{nanoseconds}\n")
    return FakeGroup([str(tmp_path / "memory"), str(tmp_path / "cpuacct")], 1, str(tmp_path / "cpuacct"))


def set_usage(group: FakeGroup, seconds: float) -> None:
    if group.version == 1:
        (Path(group.dirs[1]) / "cpuacct.usage").write_text(f"{int(seconds * 1e9)}\n")
    else:
        (Path(group.dirs[0]) / "cpu.stat").write_text(
            f"usage_usec {int(seconds * 1e6)}\nuser_usec 0\nsystem_usec 0\n")


def test_cpu_seconds_are_read_from_either_cgroup_version(tmp_path):
    assert cgroup_cpu_seconds(v1_group(tmp_path / "a", 2_500_000_000)) == 2.5
    (tmp_path / "b").mkdir()
    v2 = FakeGroup([str(tmp_path / "b")], 2, str(tmp_path / "b"))
    set_usage(v2, 1.25)
    assert cgroup_cpu_seconds(v2) == 1.25
    (tmp_path / "c").mkdir()
    assert cgroup_cpu_seconds(FakeGroup([str(tmp_path / "c")], 1)) is None  # no cpuacct: not accounted


def test_a_busy_machine_does_not_use_up_a_cpu_budget(tmp_path):
    """Wall time passes (the machine is busy) while the submission's CPU count stays low: within the limit."""
    group = v1_group(tmp_path, 0)
    clock = SubmissionClock()
    clock.attach(group)
    budget = Budget(clock, cpu_limit=0.05, wall_limit=60.0)
    time.sleep(0.1)  # twice the CPU limit in wall time, no CPU used
    assert budget.exceeded() is None
    set_usage(group, 0.06)
    assert budget.exceeded() == "0.05 s of CPU time"


def test_the_wall_clock_backstop_stops_a_kernel_that_only_waits(tmp_path):
    clock = SubmissionClock()
    clock.attach(v1_group(tmp_path, 0))
    budget = Budget(clock, cpu_limit=10.0, wall_limit=0.05)
    assert budget.exceeded() is None
    time.sleep(0.08)
    assert "0.05 s of wall-clock time" in budget.exceeded()


def test_without_cpu_accounting_the_limits_count_wall_time(tmp_path):
    clock = SubmissionClock()
    (tmp_path / "memory").mkdir()
    clock.attach(FakeGroup([str(tmp_path / "memory")], 1))  # a group without cpuacct
    assert clock.cpu() is None
    budget = Budget(clock, cpu_limit=0.05, wall_limit=10.0)
    time.sleep(0.08)
    assert "wall-clock time: CPU time is not accounted" in budget.exceeded()
    clock.attach(None)  # no group at all (rlimits only): still wall time
    assert clock.cpu() is None


def test_the_interrupt_grace_counts_cpu_seconds_with_a_wall_backstop(tmp_path):
    """An interrupted kernel that gets no CPU (a busy machine) keeps its grace; one that spins spends it."""
    group = v1_group(tmp_path, 1_000_000_000)
    clock = SubmissionClock()
    clock.attach(group)
    limits = Limits(interrupt_grace=0.05, wall_factor=4.0)
    starved = interrupt_grace(clock, limits)
    time.sleep(0.1)  # twice the grace in wall time, no CPU used
    assert starved.exceeded() is None
    set_usage(group, 1.06)
    assert starved.exceeded() == "0.05 s of CPU time"
    waiting = interrupt_grace(clock, limits)
    time.sleep(0.25)
    assert "0.2 s of wall-clock time" in waiting.exceeded()


def test_the_notebook_counts_every_kernel_it_started(tmp_path):
    """A kernel that died and was restarted: the notebook's budget keeps what the first one used."""
    clock = SubmissionClock()
    first = v1_group(tmp_path / "1", 0)
    clock.attach(first)
    set_usage(first, 3.0)
    clock.detach()
    second = v1_group(tmp_path / "2", 0)
    clock.attach(second)
    set_usage(second, 2.0)
    assert clock.cpu() == pytest.approx(5.0)
    limits = Limits(cell_timeout=4.0, notebook_timeout=6.0, wall_factor=3.0)
    notebook = notebook_budget(clock, limits)
    assert notebook.cpu_used() == pytest.approx(5.0) and notebook.exceeded() is None
    cell = cell_budget(clock, limits, notebook)  # what the notebook has left caps the cell
    assert cell.cpu_limit == pytest.approx(1.0) and cell.wall_limit == pytest.approx(12.0)
    set_usage(second, 3.5)
    assert notebook.exceeded() == "6 s of CPU time" and cell.exceeded() == "1 s of CPU time"


def test_a_hidden_check_also_counts_the_grader_s_own_cpu(tmp_path):
    clock = SubmissionClock()
    clock.attach(v1_group(tmp_path, 0))
    grader = [10.0]
    limits = Limits(cell_timeout=2.0, notebook_timeout=100.0)
    budget = cell_budget(clock, limits, notebook_budget(clock, limits), extra_cpu=lambda: grader[0])
    grader[0] = 11.5
    assert budget.exceeded() is None and budget.cpu_used() == pytest.approx(1.5)
    grader[0] = 12.0
    assert budget.exceeded() == "2 s of CPU time"
