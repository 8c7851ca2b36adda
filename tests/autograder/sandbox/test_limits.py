"""Grading is configured like nbgrader: the course's nbgrader_config.py sets the sandbox's limits (one per-cell time
limit, nbgrader's Execute.timeout) and configures nbgrader's preprocessors on the workers (issue #15 item 5)."""
from __future__ import annotations

import argparse
import dataclasses
import pickle
import shutil

import nbformat
import pytest
from nbformat.v4 import new_code_cell
from nbgrader.preprocessors import Execute, LimitOutput
from traitlets.config import Config

from autograder.cli import _limit_overrides
from autograder.course.coursedir import REPO_ROOT, default_db_url, nbgrader_config
from autograder.grade.jobs import GradingJob, GradingResult, preprocessor_config
from autograder.sandbox.limits import allows_unenforced, course_limits, Limits, SandboxLimits

COURSE = REPO_ROOT / "course"


def test_the_course_config_sets_every_limit_and_one_cell_timeout():
    config = nbgrader_config(COURSE)
    limits = course_limits(config)
    execute = Execute(config=config)  # what `nbgrader autograde` in course/ uses
    assert limits.cell_timeout == execute.timeout and limits.startup_timeout == execute.startup_timeout
    sandbox = SandboxLimits(config=config)
    for name in sandbox.trait_names():
        if sandbox.trait_metadata(name, "config"):
            assert name in config.SandboxLimits, f"course/nbgrader_config.py does not set SandboxLimits.{name}"
            if name in {field.name for field in dataclasses.fields(Limits)}:  # allow_unenforced is the run's policy
                assert getattr(limits, name) == config.SandboxLimits[name]
            else:
                assert allows_unenforced(config) == config.SandboxLimits[name]


def test_limits_follow_a_course_config_file(tmp_path):
    (tmp_path / "nbgrader_config.py").write_text(
        "c = get_config()  # noqa: F821\nc.Execute.timeout = 7\nc.Execute.startup_timeout = 33\n"
        "c.SandboxLimits.memory_bytes = 123456789\nc.SandboxLimits.kernel_restarts = 0\n")
    limits = course_limits(nbgrader_config(tmp_path))
    assert limits == dataclasses.replace(Limits(), cell_timeout=7.0, startup_timeout=33.0, memory_bytes=123456789,
                                         kernel_restarts=0)


def test_without_settings_the_defaults_are_nbgrader_s_and_the_sandbox_s():
    execute = Execute(config=Config())
    assert course_limits(Config()) == Limits()
    assert Limits().cell_timeout == execute.timeout and Limits().startup_timeout == execute.startup_timeout
    assert Limits().memory_bytes == SandboxLimits().memory_bytes


@pytest.mark.parametrize("setting", ["c.Execute.timeout = None", "c.Execute.timeout = -1",
                                     "c.Execute.startup_timeout = 0"])
def test_grading_needs_a_cell_time_limit(tmp_path, setting):
    (tmp_path / "nbgrader_config.py").write_text(f"c = get_config()  # noqa: F821\n{setting}\n")
    with pytest.raises(ValueError, match=r"Execute\.\w+ must be a positive number of seconds"):
        course_limits(nbgrader_config(tmp_path))


def test_cli_overrides_only_what_it_names():
    args = argparse.Namespace(cell_timeout=None, notebook_timeout=None, memory_gb=None)
    assert _limit_overrides(args) == {}  # the engine then reads the course config alone
    args.cell_timeout, args.memory_gb = 9.0, 0.5
    overrides = _limit_overrides(args)
    assert overrides == {"cell_timeout": 9.0, "memory_bytes": 2**29}
    assert course_limits(nbgrader_config(COURSE), **overrides) == dataclasses.replace(
        course_limits(nbgrader_config(COURSE)), cell_timeout=9.0, memory_bytes=2**29)
    with pytest.raises(ValueError, match="not a limit: cell_timout"):
        course_limits(nbgrader_config(COURSE), cell_timout=9.0)


def test_only_the_preprocessors_sections_travel_to_workers():
    config = nbgrader_config(COURSE)
    config.CourseDirectory.db_url = "postgresql://grader:secret@db/course"
    config.LimitOutput.max_lines = 5
    sections = preprocessor_config(config)
    assert sections["Execute"]["timeout"] == config.Execute.timeout
    assert sections["LimitOutput"] == {"max_lines": 5}
    assert "CourseDirectory" not in sections and "SandboxLimits" not in sections and "ClearSolutions" not in sections
    assert all(type(section) is dict for section in sections.values())


@pytest.fixture
def printing_submission(released_synthetic_course, tmp_path):
    """The synthetic course with a submission that prints 40 lines, and `LimitOutput.max_lines = 5` in its config."""
    from autograder.submissions.collect import collect
    from synthetic_course import SYNTHETIC_ASSIGNMENT, synthetic_submission

    course = tmp_path / "course"
    shutil.copytree(released_synthetic_course, course)
    with open(course / "nbgrader_config.py", "a") as config_file:
        config_file.write("c.LimitOutput.max_lines = 5\nc.Execute.timeout = 25\n")
    nb = nbformat.reads(synthetic_submission(course, "solution"), as_version=4)
    nb.cells.insert(1, new_code_cell("print('\\n'.join(f'line {i}' for i in range(40)))"))
    target = tmp_path / "inbox" / "alice" / SYNTHETIC_ASSIGNMENT / f"{SYNTHETIC_ASSIGNMENT}.ipynb"
    target.parent.mkdir(parents=True)
    nbformat.write(nb, target)
    collect(course, tmp_path / "inbox")
    yield course
    shutil.rmtree(course, ignore_errors=True)


def test_the_worker_runs_nbgrader_s_preprocessors_with_the_course_config(printing_submission):
    from autograder.grade.plan import build_jobs
    from autograder.grade.worker import grade_job
    from synthetic_course import SYNTHETIC_ASSIGNMENT, SYNTHETIC_POINTS

    course = printing_submission
    (job,) = build_jobs(course, default_db_url(course), SYNTHETIC_ASSIGNMENT,
                        limits=course_limits(nbgrader_config(course))).jobs
    assert job.limits.cell_timeout == 25.0 and job.config["LimitOutput"] == {"max_lines": 5}
    job = pickle.loads(pickle.dumps(dataclasses.replace(job, gpu=None)))  # as Dask ships it
    assert isinstance(job, GradingJob)
    result = grade_job(job)
    assert isinstance(result, GradingResult) and result.status == "graded", result.notes
    assert sum(g["auto_score"] for g in result.grades.values()) == sum(SYNTHETIC_POINTS.values())
    printed = nbformat.reads(result.graded_nb, as_version=4).cells[1]
    # what nbgrader's LimitOutput with that setting makes of the cell's full output
    full = new_code_cell(printed.source, outputs=[nbformat.v4.new_output(
        "stream", name="stdout", text="".join(f"line {i}\n" for i in range(40)))])
    expected, _ = LimitOutput(config=nbgrader_config(course)).preprocess_cell(full, {}, 1)
    assert printed.outputs == expected.outputs
    assert "line 0" in printed.outputs[0]["text"] and "line 39" not in printed.outputs[0]["text"]


def test_the_settings_tables_are_generated_from_the_declarations():
    """docs/grading-config.md's tables come from the traits (defaults and help texts): one home per limit."""
    from tools import settings_table

    page = settings_table.PAGE.read_text(encoding="utf-8")
    assert settings_table.render_page(page, settings_table.course_file_config()) == page, (
        "docs/grading-config.md is out of date: run `python -m tools.settings_table`")
    assert SandboxLimits.memory_bytes.help in page and "| `c.Execute.timeout` | 30 (nbgrader's) | 120 |" in page
    assert settings_table.shown(6 * 2**30) == "6 GiB" and settings_table.shown(20000) == "20,000"


def test_the_limits_value_takes_its_defaults_from_the_declarations():
    for name, trait in SandboxLimits.class_traits(config=True).items():
        if name == "allow_unenforced":  # the run's policy, not a limit of the submission
            assert not hasattr(Limits(), name) and allows_unenforced() is trait.default_value is False
            continue
        assert getattr(Limits(), name) == trait.default_value, name
    assert Limits().cell_timeout == float(Execute.timeout.default_value)
