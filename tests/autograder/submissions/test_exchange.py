"""`autograder release` and `autograder collect` with a real nbgrader exchange in a scratch folder (issue #33).

The course (a one-exercise course with the real course's nbgrader_config.py, plus `c.Exchange.root` as the hub's
instructor config sets it) is released with the CLI; students fetch and submit with nbgrader's own
ExchangeFetchAssignment and ExchangeSubmit, each from her own folder, as nbgrader does in her server; the CLI then
collects from the exchange: nbgrader's choice of submission, the collect rules of autograder.submissions.collect.
"""
from __future__ import annotations

import os
import shutil
import time
from pathlib import Path

import nbformat
import pytest
from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook
from traitlets.config import Config

from autograder.cli import main

REPO = Path(__file__).resolve().parents[3]
A = "01_tiny"


def _meta(grade_id, **flags):
    meta = {"grade": False, "solution": False, "locked": False, "task": False, "grade_id": grade_id,
            "schema_version": 3}
    meta.update(flags)
    return {"nbgrader": meta}


@pytest.fixture
def course(tmp_path, monkeypatch):
    monkeypatch.setenv("JUPYTER_CONFIG_PATH", str(tmp_path / "no-global-config"))  # only the course's config
    root = tmp_path / "course"
    (root / "source" / A).mkdir(parents=True)
    exchange = tmp_path / "exchange"
    exchange.mkdir(mode=0o1777)
    config = (REPO / "course" / "nbgrader_config.py").read_text()
    (root / "nbgrader_config.py").write_text(
        config + f"\nc.Exchange.root = {str(exchange)!r}\nc.Exchange.path_includes_course = True\n")
    notebook = new_notebook(cells=[
        new_markdown_cell("# Tiny"),
        new_code_cell("def double(x):\n    ### BEGIN SOLUTION\n    return 2 * x\n    ### END SOLUTION",
                      metadata=_meta("double", solution=True)),
        new_code_cell("# tests\n### BEGIN HIDDEN TESTS\nassert double(2) == 4\n### END HIDDEN TESTS",
                      metadata=_meta("test_double", grade=True, locked=True, points=1)),
    ], metadata={"kernelspec": {"name": "python3", "display_name": "Python 3", "language": "python"}})
    nbformat.write(notebook, root / "source" / A / f"{A}.ipynb")
    return root


def _student(tmp_path: Path, course: Path, name: str):
    """(config, CourseDirectory) of a student's server: her own folder, her hub name, the course's exchange."""
    from nbgrader.coursedir import CourseDirectory

    config = Config()
    config.Exchange.root = str(tmp_path / "exchange")
    config.Exchange.path_includes_course = True
    config.CourseDirectory.course_id = "transformers101"
    config.CourseDirectory.student_id = name
    config.CourseDirectory.assignment_id = A
    home = tmp_path / "home" / name
    home.mkdir(parents=True, exist_ok=True)
    config.Exchange.assignment_dir = str(home)
    return config, CourseDirectory(config=config)


def _run(app):
    from nbgrader.apps.api import capture_log

    result = capture_log(app)
    assert result["success"], result
    return result


def fetch(tmp_path, course, name) -> Path:
    from nbgrader.auth import Authenticator
    from nbgrader.exchange.default.fetch_assignment import ExchangeFetchAssignment

    config, coursedir = _student(tmp_path, course, name)
    _run(ExchangeFetchAssignment(coursedir=coursedir, authenticator=Authenticator(config=config), config=config))
    return tmp_path / "home" / name / "transformers101" / A


def submit(tmp_path, course, name):
    from nbgrader.auth import Authenticator
    from nbgrader.exchange.default.submit import ExchangeSubmit

    config, coursedir = _student(tmp_path, course, name)
    _run(ExchangeSubmit(coursedir=coursedir, authenticator=Authenticator(config=config), config=config))
    time.sleep(0.01)  # nbgrader names a submission by its timestamp (microseconds)


def answer(folder: Path, body: str) -> None:
    path = folder / f"{A}.ipynb"
    nb = nbformat.read(path, as_version=4)
    nb.cells[1].source = f"def double(x):\n    {body}"
    nbformat.write(nb, path)


def test_release_hands_the_student_version_to_the_exchange(course, tmp_path, capsys):
    assert main(["release", A, "--course-dir", str(course)]) == 0
    outbound = tmp_path / "exchange" / "transformers101" / "outbound" / A
    out = capsys.readouterr().out
    assert f"released {A} to the exchange: {outbound}" in out
    released = (outbound / f"{A}.ipynb").read_text()
    assert "return 2 * x" not in released and "HIDDEN TESTS" not in released and "raise NotImplementedError" in released
    assert main(["release", A, "--course-dir", str(course)]) == 0  # again: replaces it (a fix after the first)
    assert (outbound / f"{A}.ipynb").read_text() == released
    assert fetch(tmp_path, course, "ann").joinpath(f"{A}.ipynb").read_text() == released


def test_release_without_exchange_or_with_no_exchange_writes_folders_only(course, tmp_path, capsys):
    assert main(["release", A, "--course-dir", str(course), "--no-exchange"]) == 0
    assert "not released to an exchange: --no-exchange" in capsys.readouterr().out
    assert (course / "release" / A / f"{A}.ipynb").is_file()
    assert not (tmp_path / "exchange" / "transformers101").exists()
    (course / "nbgrader_config.py").write_text((REPO / "course" / "nbgrader_config.py").read_text())
    assert main(["release", A, "--course-dir", str(course)]) == 0
    assert "the course's nbgrader config names none (c.Exchange.root)" in capsys.readouterr().out
    assert not (tmp_path / "exchange" / "transformers101").exists()


def test_collect_takes_each_students_latest_submission_from_the_exchange(course, tmp_path, capsys):
    assert main(["release", A, "--course-dir", str(course)]) == 0
    ann, ben = fetch(tmp_path, course, "ann"), fetch(tmp_path, course, "ben")
    answer(ann, "return x + x  # first try")
    submit(tmp_path, course, "ann")
    answer(ann, "return 2 * x  # final")
    submit(tmp_path, course, "ann")
    answer(ben, "return x * 2")
    submit(tmp_path, course, "ben")
    capsys.readouterr()

    assert main(["collect", A, "--course-dir", str(course)]) == 0
    out = capsys.readouterr().out
    assert "collected 2 notebook(s) from 2 student(s), 2 new, 0 file(s) skipped" in out
    assert "# final" in (course / "submitted" / "ann" / A / f"{A}.ipynb").read_text()  # nbgrader's choice: latest
    assert "return x * 2" in (course / "submitted" / "ben" / A / f"{A}.ipynb").read_text()
    inbound = sorted((tmp_path / "exchange" / "transformers101" / "inbound").glob(f"ann+{A}+*"))
    assert len(inbound) == 2  # both stay in the exchange
    # the exchange's timestamp of that submission is kept (late penalties are computed from it)
    assert (course / "submitted" / "ann" / A / "timestamp.txt").read_text() == \
        (inbound[-1] / "timestamp.txt").read_text()
    from nbgrader.api import Gradebook

    with Gradebook(f"sqlite:///{course / 'gradebook.db'}", "transformers101") as gb:
        assert {s.id for s in gb.students} == {"ann", "ben"}


def test_collect_never_follows_a_link_a_student_put_into_the_exchange(course, tmp_path, capsys):
    """nbgrader's own copy (shutil.copytree) would copy the file a link points to; here the link is refused and
    nothing of the course reaches submitted/. Her submission's folder in the exchange is hers: after submitting
    she can put anything into it (here: links to the source notebook and folder, a FIFO, a large file)."""
    assert main(["release", A, "--course-dir", str(course)]) == 0
    mal = fetch(tmp_path, course, "mal")
    answer(mal, "return 2 * x")
    submit(tmp_path, course, "mal")
    (inbound,) = (tmp_path / "exchange" / "transformers101" / "inbound").glob(f"mal+{A}+*")
    os.symlink(course / "source" / A / f"{A}.ipynb", inbound / "reference.ipynb.txt")
    os.symlink(course / "source", inbound / "source")
    os.mkfifo(inbound / "pipe")  # a plain read would wait on it forever
    (inbound / "big.bin").write_bytes(b"0" * (3 * 1024 * 1024))
    config_file = course / "nbgrader_config.py"
    config_file.write_text(config_file.read_text() + "\nc.SubmissionLimits.file_bytes = 1024 * 1024\n")
    capsys.readouterr()

    assert main(["collect", A, "--course-dir", str(course)]) == 1  # collected, with problems to look at
    out = capsys.readouterr().out
    target = course / "submitted" / "mal" / A
    # what nbgrader submitted (its submission_secret.txt names the feedback nbgrader releases)
    assert sorted(p.name for p in target.iterdir()) == [f"{A}.ipynb", "submission_secret.txt", "timestamp.txt"]
    for name, reason in (("reference.ipynb.txt", "symbolic link refused"), ("pipe", "FIFO"),
                         ("big.bin", "too large")):
        assert any(name in line and reason in line for line in out.splitlines()), (name, out)
    assert "BEGIN SOLUTION" not in "".join(p.read_text() for p in target.iterdir())


def test_collect_of_an_assignment_needs_an_exchange(course, tmp_path, capsys):
    (course / "nbgrader_config.py").write_text((REPO / "course" / "nbgrader_config.py").read_text())
    assert main(["collect", A, "--course-dir", str(course)]) == 2
    err = capsys.readouterr().err
    assert "has no nbgrader exchange (c.Exchange.root" in err and "collect a folder or zip" in err
    assert main(["collect", "no_such_thing", "--course-dir", str(course)]) == 1  # as for any missing folder
    assert "nothing to collect at no_such_thing: no such folder or zip, and no such assignment" in \
        capsys.readouterr().err


def test_collect_leaves_students_off_the_roster_where_the_course_refuses_unknown_ones(course, tmp_path, capsys):
    """The hub's instructor config sets Autograde.create_student = False: somebody not on the roster who gets a
    submission into the exchange is collected and reported, never added to the roster (which the hub's roster
    service would turn into a hub login)."""
    config_file = course / "nbgrader_config.py"
    config_file.write_text(config_file.read_text() + "\nc.Autograde.create_student = False\n")
    assert main(["release", A, "--course-dir", str(course)]) == 0
    from nbgrader.api import Gradebook

    with Gradebook(f"sqlite:///{course / 'gradebook.db'}", "transformers101") as gb:
        gb.add_student("ann")
    for name in ("ann", "eve"):
        answer(fetch(tmp_path, course, name), "return 2 * x")
        submit(tmp_path, course, name)
    capsys.readouterr()
    assert main(["collect", A, "--course-dir", str(course)]) == 1
    out = capsys.readouterr().out
    assert "eve is not on the roster (Autograde.create_student = False): collected, not graded" in out
    assert (course / "submitted" / "eve" / A / f"{A}.ipynb").is_file()
    with Gradebook(f"sqlite:///{course / 'gradebook.db'}", "transformers101") as gb:
        assert {s.id for s in gb.students} == {"ann"}
