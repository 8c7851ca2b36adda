"""Tiers of the suite, by folder, so that they can be selected (`pytest -m "not notebooks"`, `make test-fast`):

    notebooks  tests/course/   runs or grades the course notebooks
    hub        tests/deploy/   (the end-to-end hub test marks itself)
    pipeline   tests/autograder/pipeline/   grades a class end to end
    browser    tests/browser/  drives Chromium

`make test` runs every tier; markers only make them visible and selectable.
"""
from __future__ import annotations

from pathlib import Path

TIERS = {"course": "notebooks", "pipeline": "pipeline", "browser": "browser"}


def pytest_configure(config):
    """Tests open nbgrader gradebooks of their own (fixtures): nbgrader runs the environment's `alembic` command."""
    try:
        from autograder.course.coursedir import alembic_on_path
    except ImportError:  # an environment without the instructor packages
        return
    alembic_on_path()


def pytest_collection_modifyitems(config, items):
    import pytest

    here = Path(__file__).resolve().parent
    for item in items:
        try:
            parts = Path(str(item.fspath)).resolve().relative_to(here).parts
        except ValueError:
            continue
        for part in parts[:-1]:
            if part in TIERS:
                item.add_marker(getattr(pytest.mark, TIERS[part]))
