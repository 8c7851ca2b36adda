"""The per-submission cgroup's files: the v2 writes against a fake cgroup folder (many servers run v2), the v1
writes on this machine's real hierarchy where it is writable, the CPU cap's fallback, and the sweep of a dead
worker's groups (issue #32, door 3)."""
from __future__ import annotations

import os
import subprocess
import sys

import pytest

from autograder.course.units import MiB
from autograder.sandbox import cgroup, ownership


def fake_v2(tmp_path, controllers="cpuset cpu io memory hugetlb pids rdma", enabled=""):
    """A folder laid out like a delegated v2 group `/grader` (mkdir makes a plain folder: no kernel files)."""
    root = tmp_path / "cgroup"
    parent = root / "grader"
    parent.mkdir(parents=True)
    (root / "cgroup.controllers").write_text(controllers + "\n")
    (parent / "cgroup.controllers").write_text(controllers + "\n")
    (parent / "cgroup.subtree_control").write_text(enabled + "\n")
    proc = tmp_path / "proc_cgroup"
    proc.write_text("0::/grader\n")
    return root, parent, proc


def read(path) -> str:
    return open(path).read().strip()


def test_v2_group_gets_memory_processes_and_cpu_caps(tmp_path):
    root, parent, proc = fake_v2(tmp_path)
    group = cgroup.create(300 * MiB, 40, cpus=1.5, root=str(root), proc_cgroup=str(proc), name="autograder-x")
    assert group is not None and group.version == 2 and group.dirs == [str(parent / "autograder-x")]
    folder = parent / "autograder-x"
    assert read(parent / "cgroup.subtree_control") == "+memory +pids +cpu"
    assert read(folder / "memory.max") == str(300 * MiB)
    assert read(folder / "pids.max") == "40"
    assert read(folder / "cpu.max") == f"{cgroup.cpu_quota_us(1.5)} {cgroup.CPU_PERIOD_US}"
    assert cgroup.cpu_quota_us(1.5) == 150_000
    assert read(folder / "cpu.weight") == str(cgroup.CPU_WEIGHT)


def test_v2_without_a_cpu_controller_caps_the_rest_and_says_the_cpu_is_not(tmp_path, caplog):
    root, parent, proc = fake_v2(tmp_path, controllers="memory pids")
    cgroup._warned.clear()
    with caplog.at_level("WARNING", logger="autograder.grade"):
        group = cgroup.create(300 * MiB, 40, cpus=1.0, root=str(root), proc_cgroup=str(proc), name="autograder-y")
    assert group is not None
    assert read(parent / "cgroup.subtree_control") == "+memory +pids"
    assert not (parent / "autograder-y" / "cpu.max").exists()
    assert any("NOT their CPU use" in r.getMessage() for r in caplog.records)


def test_v2_no_cpu_cap_asked_writes_no_cpu_file(tmp_path):
    root, parent, proc = fake_v2(tmp_path, enabled="memory pids")
    group = cgroup.create(0, 0, cpus=0, root=str(root), proc_cgroup=str(proc), name="autograder-z")
    assert group is not None
    assert sorted(os.listdir(parent / "autograder-z")) == []  # no caps asked, none written
    assert read(parent / "cgroup.subtree_control") == "memory pids"  # already enabled: not written again


def test_the_fallback_says_what_it_cannot_enforce(tmp_path, monkeypatch, caplog):
    monkeypatch.setenv(cgroup.ENV, "0")
    cgroup._warned.clear()
    with caplog.at_level("WARNING", logger="autograder.grade"):
        assert cgroup.create(MiB, 4, cpus=1.0) is None
    message = " ".join(r.getMessage() for r in caplog.records)
    assert "NOT enforced" in message and "total memory" in message and "CPU" in message


def test_sweep_removes_the_groups_of_a_dead_owner_only(tmp_path):
    root, parent, proc = fake_v2(tmp_path, enabled="memory pids cpu")
    dead = subprocess.run([sys.executable, "-c", "from autograder.sandbox import ownership; print(ownership.owner())"],
                          capture_output=True, text=True, check=True).stdout.strip()
    for name in (f"autograder-{dead}-aaaa", f"autograder-{ownership.owner()}-bbbb", "autograder-unowned"):
        (parent / name).mkdir()
    removed = cgroup.sweep(root=str(root), proc_cgroup=str(proc))
    assert removed == [str(parent / f"autograder-{dead}-aaaa")]
    assert sorted(os.listdir(parent)) == sorted(["cgroup.controllers", "cgroup.subtree_control",
                                                 f"autograder-{ownership.owner()}-bbbb", "autograder-unowned"])


def real_v1_cpu() -> bool:
    groups = cgroup._own_groups()
    return "cpu" in groups and "memory" in groups and os.access(
        os.path.join(cgroup.ROOT, "cpu", groups["cpu"].lstrip("/")), os.W_OK)


@pytest.mark.skipif(not real_v1_cpu(), reason="no writable cgroup v1 cpu controller here")
def test_v1_group_has_the_cpu_quota_and_setsid_does_not_leave_it():
    group = cgroup.create(256 * MiB, 32, cpus=0.5)
    assert group is not None and group.version == 1
    try:
        cpu_dir = next(d for d in group.dirs if "/cpu/" in d)
        assert read(os.path.join(cpu_dir, "cpu.cfs_quota_us")) == "50000"
        assert read(os.path.join(cpu_dir, "cpu.cfs_period_us")) == str(cgroup.CPU_PERIOD_US)
        assert read(os.path.join(cpu_dir, "cpu.shares")) == "1024"
        # a process in the group that starts a new session, and its grandchild, are still in it
        child = subprocess.Popen(["sh", "-c", f"echo $$ > {cpu_dir}/cgroup.procs; exec setsid sh -c 'sleep 30 & wait'"])
        try:
            for _ in range(100):
                if len(group.pids()) >= 2:
                    break
                subprocess.run(["sleep", "0.05"])
            members = group.pids()
            assert len(members) >= 2, members
            for pid in members:
                assert cpu_dir.split(cgroup.ROOT + "/cpu")[1] in open(f"/proc/{pid}/cgroup").read()
        finally:
            child.kill()
    finally:
        group.remove()
    assert not any(os.path.exists(d) for d in group.dirs)
