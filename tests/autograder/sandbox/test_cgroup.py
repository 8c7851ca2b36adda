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


@pytest.fixture(autouse=True)
def no_delegated_parent(monkeypatch):
    """Groups go under the process's own group unless a test names a parent (the course service's environment
    names one)."""
    monkeypatch.delenv(cgroup.PARENT_ENV, raising=False)


def fake_v2(tmp_path, controllers="cpuset cpu io memory hugetlb pids rdma", enabled="", procs="", own="/grader"):
    """A folder laid out like a delegated v2 group `/grader` holding the processes `procs`, this process's group
    being `own` (mkdir makes a plain folder: no kernel files)."""
    root = tmp_path / "cgroup"
    parent = root / "grader"
    parent.mkdir(parents=True)
    (root / "cgroup.controllers").write_text(controllers + "\n")
    (parent / "cgroup.controllers").write_text(controllers + "\n")
    (parent / "cgroup.subtree_control").write_text(enabled + "\n")
    (parent / "cgroup.procs").write_text(procs)
    proc = tmp_path / "proc_cgroup"
    proc.write_text(f"0::{own}\n")
    return root, parent, proc


def fake_v1(tmp_path, parent="/transformers101", together=False):
    """Folders laid out like cgroup v1's memory, pids, cpu and cpuacct hierarchies, each holding the delegated
    group `parent` (`together`: cpu and cpuacct mounted as one, `cpu,cpuacct`, with the two names as links, as
    systemd mounts them); this process's own groups are elsewhere (/elsewhere, or the root)."""
    root = tmp_path / "cgroup"
    mounts = ["memory", "pids", "cpu,cpuacct"] if together else ["memory", "pids", "cpu", "cpuacct"]
    for mount in mounts:
        (root / mount / parent.strip("/")).mkdir(parents=True)
    if together:
        (root / "cpu").symlink_to("cpu,cpuacct")
        (root / "cpuacct").symlink_to("cpu,cpuacct")
    proc = tmp_path / "proc_cgroup"
    cpu_lines = "3:cpu,cpuacct:/\n" if together else "1:cpu:/\n2:cpuacct:/\n"
    proc.write_text(f"4:memory:/elsewhere\n8:pids:/elsewhere\n{cpu_lines}0::/\n")
    return root, proc


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
    assert sorted(os.listdir(parent)) == sorted(["cgroup.controllers", "cgroup.subtree_control", "cgroup.procs",
                                                 f"autograder-{ownership.owner()}-bbbb", "autograder-unowned"])


def test_v1_groups_go_under_the_delegated_parent_in_every_controller(tmp_path, monkeypatch):
    root, proc = fake_v1(tmp_path)
    monkeypatch.setenv(cgroup.PARENT_ENV, "transformers101")  # the leading slash is optional
    group = cgroup.create(300 * MiB, 40, cpus=0.5, root=str(root), proc_cgroup=str(proc), name="autograder-x")
    folders = {c: root / c / "transformers101" / "autograder-x" for c in ("memory", "pids", "cpu", "cpuacct")}
    assert group is not None and group.version == 1
    assert group.dirs == [str(folders[c]) for c in ("memory", "pids", "cpu", "cpuacct")]
    assert group.cpuacct_dir == str(folders["cpuacct"])  # apart from cpu: a folder of its own counts the CPU time
    assert read(folders["memory"] / "memory.limit_in_bytes") == str(300 * MiB)
    assert read(folders["pids"] / "pids.max") == "40"
    assert read(folders["cpu"] / "cpu.cfs_quota_us") == "50000"
    assert not (root / "memory" / "elsewhere").exists()  # not under the process's own group
    assert cgroup._parents(str(root), str(proc)) == [str(root / c / "transformers101")
                                                     for c in ("memory", "pids", "cpu", "cpuacct")]


@pytest.mark.parametrize("cpus", [1.0, 0.0])
def test_v1_cpu_and_cpuacct_mounted_together_share_one_folder(tmp_path, monkeypatch, cpus):
    root, proc = fake_v1(tmp_path, together=True)
    monkeypatch.setenv(cgroup.PARENT_ENV, "/transformers101")
    group = cgroup.create(MiB, 4, cpus=cpus, root=str(root), proc_cgroup=str(proc), name="autograder-y")
    assert group is not None
    shared = [d for d in group.dirs if "/cpu" in d]
    assert len(shared) == 1 and group.cpuacct_dir == shared[0]  # made once, counted in the same folder
    assert (root / "cpu,cpuacct" / "transformers101" / "autograder-y").is_dir()
    assert (root / "cpu,cpuacct" / "transformers101" / "autograder-y" / "cpu.cfs_quota_us").exists() == (cpus > 0)
    assert len(cgroup._parents(str(root), str(proc))) == 3


def test_a_missing_delegated_parent_falls_back_and_names_it(tmp_path, monkeypatch, caplog):
    root, proc = fake_v1(tmp_path)
    monkeypatch.setenv(cgroup.PARENT_ENV, "/not-made")
    cgroup._warned.clear()
    with caplog.at_level("WARNING", logger="autograder.grade"):
        assert cgroup.create(MiB, 4, cpus=1.0, root=str(root), proc_cgroup=str(proc)) is None
    message = " ".join(r.getMessage() for r in caplog.records)
    assert f"{root}/memory/not-made is missing" in message and cgroup.PARENT_ENV in message
    assert not list((root / "memory").glob("*/autograder-*"))  # nothing left half made


def test_v2_delegated_group_holding_processes_moves_them_into_its_leaf_first(tmp_path, monkeypatch):
    """The no-internal-process rule: the grader's own processes (here 4242 and 4243, in the group delegated to its
    account) go into `service/`; then the controllers are enabled and the submission's group is made beside it."""
    root, parent, proc = fake_v2(tmp_path, procs="4242\n4243\n")
    monkeypatch.setenv(cgroup.PARENT_ENV, "/grader")
    group = cgroup.create(300 * MiB, 40, cpus=1.0, root=str(root), proc_cgroup=str(proc), name="autograder-v")
    assert group is not None and group.dirs == [str(parent / "autograder-v")]
    assert group.cpuacct_dir == str(parent / "autograder-v")  # v2: its cpu.stat counts the CPU time
    assert read(parent / cgroup.LEAF / "cgroup.procs") == "4243"  # each pid written there (a plain file keeps the last)
    assert read(parent / "cgroup.subtree_control") == "+memory +pids +cpu"


def test_v2_a_process_in_the_leaf_makes_its_groups_beside_it(tmp_path):
    """Once moved into `service/`, the next group (no parent named) still goes into the delegated group."""
    root, parent, proc = fake_v2(tmp_path, enabled="memory pids cpu", own=f"/grader/{cgroup.LEAF}")
    (parent / cgroup.LEAF).mkdir()
    group = cgroup.create(MiB, 4, cpus=1.0, root=str(root), proc_cgroup=str(proc), name="autograder-w")
    assert group is not None and group.dirs == [str(parent / "autograder-w")]
    assert cgroup._parents(str(root), str(proc)) == [str(parent)]


def test_sweep_looks_in_the_delegated_parent(tmp_path, monkeypatch):
    root, proc = fake_v1(tmp_path)
    monkeypatch.setenv(cgroup.PARENT_ENV, "/transformers101")
    dead = subprocess.run([sys.executable, "-c", "from autograder.sandbox import ownership; print(ownership.owner())"],
                          capture_output=True, text=True, check=True).stdout.strip()
    left = [root / c / "transformers101" / f"autograder-{dead}-cccc" for c in ("memory", "pids", "cpu", "cpuacct")]
    for folder in left:
        folder.mkdir()
    assert sorted(cgroup.sweep(root=str(root), proc_cgroup=str(proc))) == sorted(map(str, left))
    assert not any(folder.exists() for folder in left)


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
