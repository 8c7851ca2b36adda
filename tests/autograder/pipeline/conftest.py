"""Fixtures of the pipeline tests: the synthetic course (released once per session, tests/autograder/conftest.py;
copied per test) and
`helpers` (short grading limits, a submission writer, a folder hasher). The suite runs with
--import-mode=importlib, so test modules reach these through fixtures rather than imports.
"""
from __future__ import annotations

import hashlib
import shutil
import types
from pathlib import Path

import pytest

from autograder.course.units import GiB
from autograder.sandbox.limits import Limits
from synthetic_course import synthetic_submission

# Short limits keep the suite fast; the memory cap still stops a 20 GB allocation (and 4 GB in four children).
TEST_LIMITS = Limits(cell_timeout=8, notebook_timeout=40, memory_bytes=3 * GiB, output_bytes=64 * 1024,
                     kernel_restarts=2, startup_timeout=90, notebook_output_bytes=512 * 1024,
                     disk_bytes=256 * 1024**2, processes=128, interrupt_grace=3)

def write_submission(inbox: Path, course_root: Path, student: str, kind: str) -> Path:
    """inbox/<student>/ps1/ps1.ipynb holding a submission of `kind` (nbgrader layout)."""
    path = inbox / student / "ps1" / "ps1.ipynb"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(synthetic_submission(course_root, kind))
    return path

def tree_hashes(folder: Path) -> dict[str, str]:
    return {str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(folder.rglob("*")) if p.is_file()}


@pytest.fixture(scope="session")
def helpers():
    return types.SimpleNamespace(TEST_LIMITS=TEST_LIMITS, write_submission=write_submission, tree_hashes=tree_hashes)


@pytest.fixture(scope="session")
def released_course(released_synthetic_course) -> Path:
    """The synthetic course released once per session (tests/autograder/conftest.py): copy it, never change it."""
    return released_synthetic_course


@pytest.fixture
def course(released_course, tmp_path) -> Path:
    """A private copy of the released synthetic course (its own gradebook)."""
    target = tmp_path / "course"
    shutil.copytree(released_course, target)
    return target
