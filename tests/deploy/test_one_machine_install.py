"""deploy/one-machine/install.sh, run for real as root into a scratch root prefix, with real accounts.

The session's `machine` fixture (installkit.py) makes the accounts and runs the script with the full stack, as
deploy/README.md says; the journey (test_journey.py) then uses the same install. Here a student account tries to
read every instructor file of the install and must fail, while the grader account reads the same files (so each
refusal is the permissions', not a missing file), and the student environment and the exchange stay usable by the
student. A second run of the script keeps the gradebook and the site's settings. Needs root, useradd, chpasswd and
runuser; skipped otherwise.
"""
from __future__ import annotations

from pathlib import Path

import pytest

from installkit import SITE, as_user, run_install

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
