"""Tiers of the suite, by folder, so that they can be selected (`pytest -m "not notebooks"`, `make test-fast`):

    notebooks  tests/course/   runs or grades the course notebooks
    hub        tests/deploy/   (the end-to-end hub test marks itself)
    pipeline   tests/autograder/pipeline/   grades a class end to end
    browser    tests/browser/  drives Chromium

`make test` runs every tier; markers only make them visible and selectable.

`make test` runs the suite on two pytest-xdist workers (`--dist loadgroup`). Each test gets an `xdist_group`, so
that what shares an expensive fixture runs in one worker (it is built once) and the longest groups start first:

    course-runs      tests of tests/course that read the full notebook runs (notebook_runner)
    course-grading   tests of tests/course that read the graded course copy (course_copy, autograded)
    browser          tests/browser (one student environment, one JupyterLab)
    deploy           tests/deploy (one installed machine, one hub at a time)
    <file>           everything else, a file at a time (module fixtures are built once)
"""
from __future__ import annotations

import os
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
FIRST = ("course-runs", "course-grading", "browser", "deploy",
         "tests/autograder/pipeline/test_busy_machine.py")


def xdist_group(item, parts: tuple[str, ...]) -> str:
    """The group of a test (the module docstring): `parts` is its path relative to tests/."""
    fixtures = set(getattr(item, "fixturenames", ()))
    if parts[0] == "course" and fixtures & {"notebook_runner", "executed_notebook"}:
        return "course-runs"
    if parts[0] == "course" and fixtures & {"course_copy", "autograded"}:
        return "course-grading"
    if parts[0] in ("browser", "deploy"):
        return parts[0]
    return "tests/" + "/".join(parts)


def pytest_collection_modifyitems(config, items):
    here = Path(__file__).resolve().parent
    groups = {}
    for item in items:
        try:
            parts = Path(str(item.fspath)).resolve().relative_to(here).parts
        except ValueError:
            continue
        for part in parts[:-1]:
            if part in TIERS:
                item.add_marker(getattr(pytest.mark, TIERS[part]))
        groups[item.nodeid] = xdist_group(item, parts)
        item.add_marker(pytest.mark.xdist_group(groups[item.nodeid]))
    # the longest groups first; a stable sort keeps every other order (and each file's) as collected
    rank = {group: i for i, group in enumerate(FIRST)}
    items.sort(key=lambda item: rank.get(groups.get(item.nodeid), len(FIRST)))


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
