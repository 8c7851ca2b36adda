"""deploy/one-machine/cgroups.sh against fake cgroup trees: the v1 subtree it hands to the grader account, the v2
delegation it makes in the hub's systemd unit, and the start of the course service inside the delegated subtree.

The real v1 run (the subtree on this machine, a grading kernel in it as the grader account) is in
test_one_machine_install.py; a v2 machine with systemd is not available to the tests, so the v2 steps are checked
here on folders laid out as the kernel lays them out. Needs root (the script chowns) and the account `nobody`.
"""
from __future__ import annotations

import os
import pwd
import subprocess
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[2] / "deploy" / "one-machine" / "cgroups.sh"
USER = "nobody"
UNIT = "/system.slice/t101-hub.service"

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="cgroups.sh runs as root (it sets owners)")


def run(*args: str, root: Path, proc: Path | None = None, **env: str) -> subprocess.CompletedProcess:
    environment = {"PATH": "/usr/sbin:/usr/bin:/sbin:/bin", "CGROUP_ROOT": str(root), **env}
    if proc is not None:
        environment["PROC_ROOT"] = str(proc)
    return subprocess.run(["sh", str(SCRIPT), *args], capture_output=True, text=True, env=environment, timeout=30)


def owner(path: Path) -> str:
    return pwd.getpwuid(path.stat().st_uid).pw_name


def settings(stdout: str) -> dict[str, str]:
    return dict(line.split("=", 1) for line in stdout.splitlines())


def fake_v1(tmp_path: Path, together: bool = False) -> Path:
    root = tmp_path / "cgroup"
    for mount in (["memory", "pids", "cpu,cpuacct"] if together else ["memory", "pids", "cpu", "cpuacct"]):
        (root / mount).mkdir(parents=True)
    if together:
        (root / "cpu").symlink_to("cpu,cpuacct")
        (root / "cpuacct").symlink_to("cpu,cpuacct")
    return root


@pytest.mark.parametrize("together", [False, True])
def test_v1_setup_hands_the_subtree_to_the_grader(tmp_path, together):
    root = fake_v1(tmp_path, together)
    done = run("setup", "t101", USER, root=root)
    assert done.returncode == 0, done.stderr
    for controller in ("memory", "pids", "cpu", "cpuacct"):
        assert owner(root / controller / "t101") == USER, controller
    again = run("hub", "t101", USER, "1", root=root)  # the hub's start script: the same, and the parent to use
    assert again.returncode == 0 and settings(again.stdout) == {"AUTOGRADER_CGROUP_PARENT": "/t101"}, again.stderr


def test_v1_without_a_memory_hierarchy_says_so(tmp_path):
    root = tmp_path / "cgroup"
    (root / "pids").mkdir(parents=True)
    done = run("setup", "t101", USER, root=root)
    assert done.returncode != 0 and "no cgroup v1 memory hierarchy" in done.stderr


def fake_v2(tmp_path: Path, pid: int) -> tuple[Path, Path]:
    """The hub's unit group as systemd makes it with Delegate=yes (the hub's start script in it), and the folders
    the kernel would fill in when the script makes grading/ and service/ (mkdir makes a plain folder here)."""
    root = tmp_path / "cgroup"
    unit = root / UNIT.lstrip("/")
    for folder in (unit, unit / "grading", unit / "grading" / "service"):
        folder.mkdir(parents=True)
        (folder / "cgroup.controllers").write_text("cpuset cpu io memory pids\n")
        for name in ("cgroup.procs", "cgroup.subtree_control", "cgroup.threads"):
            (folder / name).write_text("")
    (root / "cgroup.controllers").write_text("cpuset cpu io memory pids\n")
    (unit / "cgroup.procs").write_text(f"{pid}\n")
    proc = tmp_path / "proc"
    (proc / str(pid)).mkdir(parents=True)
    (proc / str(pid) / "cgroup").write_text(f"0::{UNIT}\n")
    return root, proc


def test_v2_in_the_hubs_unit_delegates_grading_to_the_grader(tmp_path):
    root, proc = fake_v2(tmp_path, 4242)
    unit = root / UNIT.lstrip("/")
    done = run("hub", "t101", USER, "4242", root=root, proc=proc, HUB_CGROUP_DELEGATED="1")
    assert done.returncode == 0, done.stderr
    assert settings(done.stdout) == {"AUTOGRADER_CGROUP_PARENT": f"{UNIT}/grading",
                                     "COURSE_SERVICE_CGROUP": f"{UNIT}/grading/service",
                                     "COURSE_SERVICE_CGROUP_EXEC": str(SCRIPT)}
    assert (unit / "hub" / "cgroup.procs").read_text().split() == ["4242"]  # the hub leaves the unit's own group
    for folder in (unit, unit / "grading"):
        assert (folder / "cgroup.subtree_control").read_text().split() == ["+memory", "+pids", "+cpu"]
    for folder in (unit / "grading", unit / "grading" / "service"):
        for path in (folder, folder / "cgroup.procs", folder / "cgroup.threads"):
            assert owner(path) == USER, path
    assert owner(unit / "grading" / "cgroup.subtree_control") == USER
    assert owner(unit) == owner(unit / "hub") == "root"  # what is above the grader's subtree stays root's


def test_v2_outside_the_unit_delegates_nothing_and_says_why(tmp_path):
    root, proc = fake_v2(tmp_path, 4242)
    done = run("hub", "t101", USER, "4242", root=root, proc=proc)
    assert done.returncode == 0 and done.stdout == ""
    assert "systemctl start" in done.stderr and "cannot cap" in done.stderr
    assert not (root / UNIT.lstrip("/") / "hub").exists()


def test_exec_starts_the_command_in_the_group_as_the_account(tmp_path):
    root, _ = fake_v2(tmp_path, 4242)
    service = root / UNIT.lstrip("/") / "grading" / "service"
    done = run("exec", f"{UNIT}/grading/service", USER, "--", "sh", "-c", 'echo "$(id -un) $HOME $USER $KEPT $$"',
               root=root, KEPT="yes")
    assert done.returncode == 0, done.stderr
    name, home, user, kept, pid = done.stdout.split()
    assert (name, home, user, kept) == (USER, pwd.getpwnam(USER).pw_dir, USER, "yes")  # the rest of the env is kept
    assert service.joinpath("cgroup.procs").read_text().split() == [pid]  # the same process: it joined, then became
