"""Release: course/source/<assignment>/ -> nbgrader generate_assignment -> exercises/<assignment>/.

`release()` is the function behind `autograder release` (and `make release`). For each assignment it
  1. refreshes the generated provided.py in the source folder (earlier topics only, see autograder.provided),
  2. runs nbgrader's generate_assignment through its Python API, with the course's nbgrader_config.py,
  3. replaces exercises/<assignment>/ with the fresh course/release/<assignment>/.
"""
from __future__ import annotations

import shutil
from pathlib import Path

from autograder.coursedir import nbgrader_api
from autograder.provided import topic_of, write_provided_module

REPO_ROOT = Path(__file__).resolve().parent.parent
COURSE_ROOT = REPO_ROOT / "course"
EXERCISES_DIR = REPO_ROOT / "exercises"
CONFIG_FILENAME = "nbgrader_config.py"


class ReleaseError(RuntimeError):
    """nbgrader could not generate an assignment; the message carries nbgrader's log."""


def find_assignments(course_root: Path | str = COURSE_ROOT) -> list[str]:
    """Every assignment folder of course/source that holds its notebook `<assignment>.ipynb`, sorted."""
    source = Path(course_root) / "source"
    if not source.is_dir():
        return []
    return sorted(p.name for p in source.iterdir() if p.is_dir() and (p / f"{p.name}.ipynb").is_file())


def generate_assignment(assignment: str, course_root: Path | str = COURSE_ROOT, db_url: str | None = None) -> Path:
    """Run nbgrader generate_assignment for one assignment; return course/release/<assignment>.

    The gradebook is `db_url`, else the course's (see autograder.coursedir.default_db_url)."""
    config_file = Path(course_root).resolve() / CONFIG_FILENAME
    if not config_file.is_file():
        raise FileNotFoundError(f"{config_file} is missing: {config_file.parent} is not an nbgrader course root")
    api = nbgrader_api(course_root, db_url)
    result = api.generate_assignment(assignment, force=True, create=True)
    if not result.get("success"):
        raise ReleaseError(f"nbgrader generate_assignment failed for {assignment}:\n"
                           f"{result.get('error', '')}\n{result.get('log', '')}")
    released = Path(course_root).resolve() / "release" / assignment
    if not (released / f"{assignment}.ipynb").is_file():
        raise ReleaseError(f"nbgrader reported success but wrote no {released / (assignment + '.ipynb')}")
    return released


def _replace_tree(src: Path, dest: Path) -> None:
    """Copy `src` to `dest`, swapping it in only once the copy is complete (a failed copy loses nothing)."""
    staging = dest.with_name(dest.name + ".staging")
    if staging.exists():
        shutil.rmtree(staging)
    shutil.copytree(src, staging, ignore=shutil.ignore_patterns(".ipynb_checkpoints", "__pycache__", "*.pyc"))
    old = dest.with_name(dest.name + ".old")
    if old.exists():
        shutil.rmtree(old)
    if dest.exists():
        dest.rename(old)
    staging.rename(dest)
    if old.exists():
        shutil.rmtree(old)


def release(assignments: list[str] | str | None = None, course_root: Path | str = COURSE_ROOT,
            exercises_dir: Path | str = EXERCISES_DIR, db_url: str | None = None) -> list[Path]:
    """Release `assignments` (default: all in course/source) into `exercises_dir`; return the folders written."""
    course_root = Path(course_root).resolve()
    exercises_dir = Path(exercises_dir)
    available = find_assignments(course_root)
    if assignments is None:
        assignments = available
    elif isinstance(assignments, str):
        assignments = [assignments]
    unknown = [a for a in assignments if a not in available]
    if unknown:
        raise ValueError(f"no such assignment in {course_root / 'source'}: {unknown}; available: {available}")
    for assignment in assignments:
        topic_of(assignment)  # a clear error for a folder outside the course's naming scheme
    written = []
    exercises_dir.mkdir(parents=True, exist_ok=True)
    for assignment in assignments:
        write_provided_module(assignment, course_root / "source" / assignment)
        released = generate_assignment(assignment, course_root, db_url)
        target = exercises_dir / assignment
        _replace_tree(released, target)
        written.append(target)
    return written
