"""Fixtures shared by the autograder tests: the synthetic course (tests/fixtures/synthetic_course.py), released once
per session. Tests copy it (`shutil.copytree`) before changing anything: it is shared."""
from __future__ import annotations

from pathlib import Path

import pytest

from synthetic_course import synthetic_course


@pytest.fixture(scope="session")
def released_synthetic_course(tmp_path_factory) -> Path:
    """The synthetic course, released (nbgrader generate_assignment) once for the whole session: read-only."""
    return synthetic_course(tmp_path_factory.mktemp("synthetic") / "course")
