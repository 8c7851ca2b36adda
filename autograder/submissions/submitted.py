"""What the students handed in, as the instructor's reports read it: the notebooks under course/submitted/.

The similarity report (`autograder.publish.similarity`) and the course report's example of a mistake
(`autograder.publish.report`) read students' notebooks after grading; they read them as every submission is read
(`files.read_regular`: a plain file, never through a link, at most the course's notebook size), and a student
folder or assignment folder that is a link is never followed. A notebook that is refused or does not parse is
left out (None): it has nothing to show.
"""
from __future__ import annotations

import os
import stat
from pathlib import Path

import nbformat

from autograder.course.coursedir import nbgrader_config
from autograder.submissions.files import read_regular, submission_limits


def read_submitted(path: Path, limit: int):
    """A student's notebook, read as `autograder.submissions.files` reads submissions (a plain file, never through
    a link, at most `limit` bytes); None when it is refused or does not parse (it has no code to compare)."""
    try:
        return nbformat.reads(read_regular(path, limit, "notebook").decode("utf-8", "replace"), as_version=4)
    except Exception:  # refused, or broken: no code to compare
        return None


def is_folder(path: Path) -> bool:
    """A folder itself, not a link to one."""
    try:
        return stat.S_ISDIR(os.lstat(path).st_mode)
    except OSError:
        return False


def plain_folders(folder: Path) -> list[Path]:
    """The sub-folders of `folder` (links are never followed), sorted by name."""
    return sorted(p for p in folder.iterdir() if is_folder(p)) if is_folder(folder) else []


def submitted_notebooks(course_dir: Path, assignment: str) -> dict[str, list]:
    """student -> the notebooks of `assignment` they handed in (submitted/<student>/<assignment>/*.ipynb, in name
    order), each read through `read_submitted` (refused or broken ones left out); a student whose assignment folder
    is missing (or a link) is not listed."""
    course_dir = Path(course_dir)
    limit = submission_limits(nbgrader_config(course_dir)).notebook_bytes
    notebooks = {}
    for student in plain_folders(course_dir / "submitted"):
        folder = student / assignment
        if not is_folder(folder):
            continue
        paths = sorted(p for p in folder.iterdir() if p.suffix == ".ipynb")
        notebooks[student.name] = [nb for nb in (read_submitted(p, limit) for p in paths) if nb is not None]
    return notebooks
