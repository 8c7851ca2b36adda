"""deploy/one-machine/install.sh, run for real as root into a scratch root prefix, with real accounts.

The script creates a grader account, builds the three environments from constraints.txt, installs the configs and
sets who may read what. Then a second account (a student) tries to read every instructor file of the install and
must fail, while the grader account reads the same files (so each refusal is the permissions', not a missing
file), and the student environment and the exchange stay usable by the student. A second run of the script keeps
the gradebook.

The environments are built without third-party dependencies (INSTALL_DEPS=0: the course's own packages only), which
is what decides the layout and the permissions; DEPLOY_INSTALL_DEPS=1 builds the full stack (several minutes) and
also imports coursekit as the student. Needs root, useradd and runuser; skipped otherwise.
"""
from __future__ import annotations

import os
import secrets
import shutil
import subprocess
import tempfile
from pathlib import Path

import pytest


REPO = Path(__file__).resolve().parents[2]
SCRIPT = REPO / "deploy" / "one-machine" / "install.sh"
FULL = os.environ.get("DEPLOY_INSTALL_DEPS") == "1"
SYSTEM_PYTHON = "/usr/bin/python3.11"  # an interpreter every account can run (not one in root's home)
SITE = "lib/python3.11/site-packages"
# the full stack takes many minutes to install on a busy machine (the fixture counts toward the first test)
pytestmark = [pytest.mark.hub, pytest.mark.timeout(5400 if FULL else 900)]

needs = [tool for tool in ("useradd", "userdel", "runuser") if not shutil.which(tool)]
if os.geteuid() != 0 or needs or not Path(SYSTEM_PYTHON).is_file():
    pytest.skip(f"needs root, {SYSTEM_PYTHON} and useradd/userdel/runuser ({needs or 'not root'})",
                allow_module_level=True)


def as_user(user: str, *command: str, cwd: str = "/") -> subprocess.CompletedProcess:
    """`command` as `user` (a clean environment: PATH=/usr/bin:/bin, no home)."""
    return subprocess.run([shutil.which("runuser"), "-u", user, "--", *command], cwd=cwd, capture_output=True, text=True,
                          timeout=120, env={"PATH": "/usr/bin:/bin", "HOME": "/nonexistent", "LANG": "C.UTF-8"})


@pytest.fixture(scope="module")
def install():
    tag = secrets.token_hex(3)
    grader, student = f"t101g{tag}", f"t101s{tag}"
    prefix = Path(tempfile.mkdtemp(prefix="t101-install-", dir="/tmp"))
    prefix.chmod(0o755)  # like / : every account may walk into it
    subprocess.run(["useradd", "--no-create-home", "--shell", "/bin/bash", student], check=True)
    env = {**os.environ, "PREFIX": str(prefix), "GRADER_USER": grader, "COURSE_INSTRUCTORS": "",
           "PYTHON": SYSTEM_PYTHON, "INSTALL_DEPS": "1" if FULL else "0"}
    for name in ("VIRTUAL_ENV", "PYTHONPATH", "COURSE_PROFILE"):
        env.pop(name, None)
    if FULL:  # the project's own proxy on PATH: the script then leaves the machine's npm alone
        from hubkit import find_or_install_chp

        env["PATH"] = f"{find_or_install_chp().parent}:{env['PATH']}"
    try:
        first = subprocess.run(["bash", str(SCRIPT)], env=env, capture_output=True, text=True,
                               timeout=5000 if FULL else 900)
        assert first.returncode == 0, first.stdout[-3000:] + first.stderr[-3000:]
        yield {"prefix": prefix, "grader": grader, "student": student, "env": env, "log": first.stdout}
    finally:
        for user in (student, grader):
            subprocess.run(["userdel", user], capture_output=True)
            subprocess.run(["groupdel", user], capture_output=True)
        shutil.rmtree(prefix, ignore_errors=True)


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


def test_student_reads_no_instructor_file(install):
    prefix, grader, student = install["prefix"], install["grader"], install["student"]
    gradebook = prefix / "srv" / "transformers101" / "course" / "gradebook.db"
    made = as_user(grader, "sh", "-c", f"echo roster > '{gradebook}'")  # as the course service would make it
    assert made.returncode == 0, made.stderr
    for what, path in instructor_files(prefix).items():
        assert as_user(grader, "cat", str(path)).returncode == 0, f"the grader cannot read {what}: {path}"
        denied = as_user(student, "cat", str(path))
        assert denied.returncode != 0 and "Permission denied" in denied.stderr, f"a student reads {what}: {path}"
        listing = as_user(student, "ls", str(path.parent))
        assert listing.returncode != 0, f"a student lists the folder of {what}: {path.parent}"
    ran = as_user(student, str(prefix / "opt" / "grader" / "bin" / "python"), "-c", "print('in')")
    assert ran.returncode != 0, "a student runs the grader environment's Python"


def test_student_environment_and_exchange_stay_usable(install):
    prefix, student = install["prefix"], install["student"]
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
    if FULL:
        imported = as_user(student, python, "-c", "import coursekit.shakespeare as s; print(s.shakespeare_path())")
        assert imported.returncode == 0 and "_bundled_data" in imported.stdout, imported.stderr
    exchange = prefix / "srv" / "nbgrader" / "exchange"
    assert (exchange.stat().st_mode & 0o7777) == 0o1777
    wrote = as_user(student, "sh", "-c", f"echo hi > '{exchange}/{student}.txt'")
    assert wrote.returncode == 0, wrote.stderr


def test_grader_shell_finds_the_grader_tools(install):
    prefix, grader, student = install["prefix"], install["grader"], install["student"]
    profile = prefix / "etc" / "profile.d" / "transformers101-grader.sh"
    found = as_user(grader, "bash", "-c", f". '{profile}' && command -v autograder")
    assert found.stdout.strip() == str(prefix / "opt" / "grader" / "bin" / "autograder"), found.stderr
    other = as_user(student, "bash", "-c", f". '{profile}' && command -v autograder || echo none")
    assert other.stdout.strip() == "none"


def test_hub_settings_name_the_installed_paths(install):
    prefix = install["prefix"]
    settings = dict(line.split("=", 1) for line in
                    (prefix / "etc" / "jupyterhub" / "transformers101.env").read_text().splitlines()
                    if line and not line.startswith("#"))
    assert settings["COURSE_GRADER_USER"] == install["grader"]
    assert settings["COURSE_SERVICE_COMMAND"] == str(prefix / "opt" / "grader" / "bin" / "jupyterhub-singleuser")
    for key in ("COURSE_ROOT", "NBGRADER_EXCHANGE", "STUDENT_JUPYTER_CONFIG", "INSTRUCTOR_JUPYTER_CONFIG"):
        assert Path(settings[key]).is_dir(), key
    if FULL:
        for key in ("STUDENT_SINGLEUSER_CMD", "INSTRUCTOR_SINGLEUSER_CMD"):
            assert Path(settings[key]).is_file(), key
    for name in ("jupyterhub_config.py", "roster_sync.py"):  # the config runs roster_sync.py from its own folder
        assert (prefix / "etc" / "jupyterhub" / name).read_text() == (REPO / "deploy" / "jupyterhub" / name).read_text()
    assert (prefix / "srv" / "jupyterhub").stat().st_mode & 0o077 == 0


def test_second_run_keeps_the_course_folder(install):
    """Idempotent: a second run succeeds, keeps the gradebook and the grading state, and the permissions hold."""
    prefix, grader, student = install["prefix"], install["grader"], install["student"]
    course = prefix / "srv" / "transformers101" / "course"
    marker = course / "submitted" / "someone" / "note.txt"
    assert as_user(grader, "sh", "-c", f"mkdir -p '{marker.parent}' && echo kept > '{marker}'").returncode == 0
    again = subprocess.run(["bash", str(SCRIPT)], env=install["env"], capture_output=True, text=True,
                           timeout=5000 if FULL else 900)
    assert again.returncode == 0, again.stdout[-3000:] + again.stderr[-3000:]
    assert "kept as it is" in again.stdout
    assert marker.read_text() == "kept\n"
    assert as_user(student, "cat", str(marker)).returncode != 0
    assert as_user(student, "cat", str(instructor_files(prefix)["a reference solution"])).returncode != 0
