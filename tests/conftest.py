"""Tiers of the suite, by folder, so that they can be selected (`pytest -m "not notebooks"`, `make test-fast`):

    notebooks  tests/course/   runs or grades the course notebooks
    hub        tests/deploy/   (the end-to-end hub test marks itself)
    pipeline   tests/autograder/pipeline/   grades a class end to end
    browser    tests/browser/  drives Chromium

`make test` runs every tier; markers only make them visible and selectable.

`make test` runs the suite on two pytest-xdist workers (`-n 2 --dist loadgroup`). Each test belongs to a group, and a
group runs in one worker, so that what shares an expensive session fixture is built once (`group_of`):

    course-runs      the files that name the full notebook runs (notebook_runner, executed_notebook)
    course-grading   the files that name the graded course copy (course_copy, autograded)
    browser          tests/browser and the files that name its cached student environment
    deploy           tests/deploy (one installed machine, one hub at a time)
    tests/autograder/checks/   the hidden checks' tests (the naming figure, run last, counts what they all tried)
    <file>           any other file (its module fixtures are built once)

pytest-xdist's own loadgroup reads `xdist_group` marks through a nodeid suffix that pytest 9.2 no longer takes
(pytest-xdist issue #1386: the tests are spread one by one), so the scheduler here groups by `group_of` itself.
The longest groups start first (collection order, which the scheduler keeps).
"""
from __future__ import annotations

import functools
import os
import re
from pathlib import Path

import pytest

TIERS = {"course": "notebooks", "pipeline": "pipeline", "browser": "browser"}


def pytest_configure(config):
    """Tests open nbgrader gradebooks of their own (fixtures): nbgrader runs the environment's `alembic` command."""
    try:
        from autograder.course.coursedir import alembic_on_path
    except ImportError:  # an environment without the instructor packages
        return
    alembic_on_path()


# The groups that take longest first (measured with --durations): a worker that starts them late ends the run late.
FIRST = ("course-runs", "course-grading", "browser", "deploy", "tests/autograder/pipeline/test_busy_machine.py")
# A file that names one of these runs in that group's worker: what it names is built once per worker (the course
# runs and the graded course copy are session fixtures of tests/course; the student environment is cached on disk,
# and a refresh of its coursekit must not happen under a JupyterLab that runs from it).
SHARED = {"course-runs": ("tests/course/", ("notebook_runner", "executed_notebook")),   # group: (where, names)
          "course-grading": ("tests/course/", ("course_copy", "autograded")),
          "browser": ("tests/", ("cached_student_env",))}
# A folder whose files run in one worker: the hidden checks' tests, whose naming figure reads what all of them tried.
TOGETHER = "tests/autograder/checks/"
REPO = Path(__file__).resolve().parents[1]


@functools.lru_cache(maxsize=None)
def group_of(path: str) -> str:
    """The group of the tests of the file `path` (relative to the repository, as in a nodeid)."""
    parts = Path(path).parts
    if len(parts) > 2 and parts[1] in ("browser", "deploy"):
        return parts[1]
    if path.startswith(TOGETHER):  # its last test counts what the folder's tests recorded (test_zz_naming_figure.py)
        return TOGETHER
    if (REPO / path).is_file():
        text = (REPO / path).read_text(encoding="utf-8")
        for group, (where, names) in SHARED.items():
            if path.startswith(where) and any(re.search(rf"\b{name}\b", text) for name in names):
                return group
    return path


def pytest_collection_modifyitems(config, items):
    here = Path(__file__).resolve().parent
    for item in items:
        try:
            parts = Path(str(item.fspath)).resolve().relative_to(here).parts
        except ValueError:
            continue
        for part in parts[:-1]:
            if part in TIERS:
                item.add_marker(getattr(pytest.mark, TIERS[part]))
    # the longest groups first; a stable sort keeps every other order (and each file's) as collected
    rank = {group: i for i, group in enumerate(FIRST)}
    items.sort(key=lambda item: rank.get(group_of(item.nodeid.split("::", 1)[0]), len(FIRST)))


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config, log):
    """`--dist loadgroup`: whole groups (group_of) to a worker, in collection order."""
    if config.getoption("dist") != "loadgroup":
        return None
    from xdist.scheduler import LoadScopeScheduling

    class GroupScheduling(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            return group_of(nodeid.split("::", 1)[0])

    config.option.loadscopereorder = False  # keep the collection order (longest first), not the largest groups first
    return GroupScheduling(config, log)


def _course_conftest(config):
    """tests/course/conftest.py, where this process loaded it (an xdist controller collects nothing)."""
    for plugin in config.pluginmanager.get_plugins():
        if str(getattr(plugin, "__file__", "")).endswith(os.path.join("tests", "course", "conftest.py")):
            return plugin
    return None


def pytest_sessionfinish(session):
    """In an xdist worker: hand the course runs' times to the controller, which prints them."""
    output = getattr(session.config, "workeroutput", None)
    course = _course_conftest(session.config)
    if output is not None and course is not None:
        output["course_summary"] = course.summary_lines()


@pytest.hookimpl(optionalhook=True)
def pytest_testnodedown(node, error):
    lines = (getattr(node, "workeroutput", None) or {}).get("course_summary", [])
    node.config.course_summary = getattr(node.config, "course_summary", []) + lines


def pytest_terminal_summary(terminalreporter, config):
    course = _course_conftest(config)
    for line in (course.summary_lines() if course else []) + getattr(config, "course_summary", []):
        terminalreporter.write_line(line)
