"""The coordinator's progress: a bar on a terminal, one line per graded notebook in a log (issue #47)."""
from __future__ import annotations

import io

from autograder.grade.engine import Progress
from autograder.grade.jobs import GradingResult


def result(student: str, cpu: float | None) -> GradingResult:
    return GradingResult(assignment="03_attention", notebook="03_attention", student=student, status="graded",
                         seconds=12.5, cpu_seconds=cpu)


def test_off_a_terminal_each_notebook_graded_is_one_line(monkeypatch):
    log = io.StringIO()  # a file or a CI log: not a terminal
    monkeypatch.setattr("sys.stderr", log)
    progress = Progress(2, "grading 03_attention")
    progress.done(result("ada", 7.25))
    assert log.getvalue() == "grading 03_attention: 1/2 03_attention/ada/03_attention graded (12.5 s, 7.2 CPU-s)\n"
    progress.note("03_attention/bob/03_attention: a time limit was reached; graded again alone at the end")
    progress.done(result("bob", None))  # CPU not accounted: no CPU figure
    progress.close()
    lines = log.getvalue().splitlines()
    assert len(lines) == 3 and lines[-1] == "grading 03_attention: 2/2 03_attention/bob/03_attention graded (12.5 s)"
    assert "\r" not in log.getvalue()  # no bar redrawn into the log


def test_no_progress_prints_nothing(monkeypatch):
    log = io.StringIO()
    monkeypatch.setattr("sys.stderr", log)
    progress = Progress(1, "grading", enabled=False)
    progress.done(result("ada", 1.0))
    progress.close()
    assert log.getvalue() == ""


def test_a_machine_that_cannot_enforce_the_limits_is_refused_unless_accepted(tmp_path, monkeypatch, capsys):
    import pytest

    from autograder.errors import GradingError
    from autograder.grade.engine import GradingRun, check_enforced
    from autograder.sandbox import cgroup, enforcement
    from autograder.sandbox.limits import Limits

    monkeypatch.setenv(cgroup.ENV, "0")  # no cgroups: as a grader account nobody delegated a subtree to
    enforcement.unenforced_here.cache_clear()
    problems = enforcement.unenforced(Limits())
    assert problems and "no per-submission cgroup" in problems[0]
    with pytest.raises(GradingError, match="limits NOT enforced.*--allow-unenforced-limits"):
        check_enforced(GradingRun(tmp_path, limits=Limits(), allow_unenforced_limits=False))
    check_enforced(GradingRun(tmp_path, limits=Limits(), allow_unenforced_limits=True))
    said = capsys.readouterr().err.splitlines()
    assert len(said) == 1 and "limits NOT enforced" in said[0] and "graded anyway" in said[0]
    enforcement.unenforced_here.cache_clear()
