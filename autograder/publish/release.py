"""Release: course/source/<assignment>/ -> nbgrader generate_assignment -> exercises/<assignment>/.

`release()` is the function behind `autograder release` (and `make release`). For each assignment it
  1. refreshes the generated provided.py in the source folder (earlier topics only, see autograder.course.provided;
     course/source is the instructor's side, never handed out),
  2. runs nbgrader's generate_assignment through its Python API, with the course's nbgrader_config.py,
  3. decides whether course/release/<assignment>/ keeps provided.py (`provided_decision`, below),
  4. replaces exercises/<assignment>/ with the fresh course/release/<assignment>/.
Where the course has an nbgrader exchange (`c.Exchange.root` in its configuration, as on the hub),
`release_to_exchange()` then hands course/release/<assignment>/ to the students through it: nbgrader's own
ExchangeReleaseAssignment, as the formgrader's Release button runs it (NbGraderAPI), replacing an earlier release of
the assignment there (nbgrader's --force).

The provided module of 04-11 is the reference of the earlier notebooks it builds on, so it is GATED: with
`provided="gated"` (the default) it reaches the release only once every assignment it covers is past its due date
in the course gradebook (nbgrader's `Assignment.duedate`, set with `nbgrader db assignment add NAME --duedate ...`
or the formgrader); an assignment without a due date, or not in the gradebook, counts as open. Until then the
release holds no provided.py and the decision's message says when it will (re-release the assignment then).
`provided="force"` releases it anyway (the message names every assignment whose reference that reveals);
`provided="none"` never releases it. Grading never depends on this: the grader regenerates provided.py.
"""
from __future__ import annotations

import dataclasses
import datetime
import json
import shutil
from pathlib import Path

import nbformat

from autograder.course.coursedir import REPO_ROOT, default_db_url, nbgrader_api
from autograder.course.provided import PROVIDED_FILENAME, covered_assignments, topic_of, write_provided_module
from autograder.errors import AutograderError

COURSE_ROOT = REPO_ROOT / "course"
EXERCISES_DIR = REPO_ROOT / "exercises"
CONFIG_FILENAME = "nbgrader_config.py"
PROVIDED_MODES = ("gated", "force", "none")


class ReleaseError(AutograderError, RuntimeError):
    """nbgrader could not generate an assignment; the message carries nbgrader's log."""


@dataclasses.dataclass
class ProvidedDecision:
    """Whether an assignment's release holds provided.py, and why."""
    assignment: str
    mode: str                     # gated | force | none
    covers: list[str]             # the assignments whose reference provided.py holds (empty: no provided module)
    still_open: dict              # covered assignment -> its due date (naive UTC) or None, for those not past due
    released: bool

    @property
    def needed(self) -> bool:
        return bool(self.covers)

    @property
    def release_at(self) -> datetime.datetime | None:
        """When the gate opens: the last due date of the covered assignments (None: some have no due date)."""
        if not self.still_open or any(due is None for due in self.still_open.values()):
            return None
        return max(self.still_open.values())

    def message(self) -> str:
        a = self.assignment
        if not self.needed:
            return f"{a}: no provided module (self-contained notebook)"
        pending = ", ".join(f"{name} ({_due_text(due)})" for name, due in self.still_open.items())
        if self.mode == "force":
            if self.still_open:
                return (f"{a}: provided.py RELEASED (--provided force): it reveals the reference of {pending}, "
                        f"which {'is' if len(self.still_open) == 1 else 'are'} not past due, to every student "
                        f"who fetches {a}")
            return f"{a}: provided.py released (--provided force; {', '.join(self.covers)} are all past due)"
        if self.mode == "none":
            return f"{a}: provided.py withheld (--provided none)"
        if self.released:
            return f"{a}: provided.py released ({', '.join(self.covers)} are all past due)"
        when = (f"release {a} again after {self.release_at:%Y-%m-%d %H:%M} UTC (`autograder release {a}`)"
                if self.release_at is not None else
                "set the missing due dates (`nbgrader db assignment add NAME --duedate ...` or the formgrader), "
                f"then release {a} again once they are past")
        return (f"{a}: provided.py withheld: it holds the reference of {pending}, not yet past due; {when}, "
                f"or reveal it now with --provided force")


def _due_text(due: datetime.datetime | None) -> str:
    return "no due date" if due is None else f"due {due:%Y-%m-%d %H:%M} UTC"


def due_dates(course_root: Path | str, db_url: str | None = None) -> dict:
    """Every assignment of the course gradebook -> its Assignment.duedate (naive UTC, None when unset)."""
    from autograder.gradebook.store import open_gradebook

    course_root = Path(course_root).resolve()
    with open_gradebook(course_root, db_url=db_url) as gb:
        return {assignment.name: assignment.duedate for assignment in gb.assignments}


def provided_decision(assignment: str, course_root: Path | str = COURSE_ROOT, mode: str = "gated",
                      db_url: str | None = None, now: datetime.datetime | None = None) -> ProvidedDecision:
    """Whether `assignment`'s release may hold its provided module (see the module doc)."""
    if mode not in PROVIDED_MODES:
        raise ValueError(f"provided mode must be one of {PROVIDED_MODES}, not {mode!r}")
    if not covered_assignments(assignment):
        return ProvidedDecision(assignment, mode, [], {}, False)
    dates = due_dates(course_root, db_url)
    covers = covered_assignments(assignment, find_assignments(course_root) + sorted(dates))
    now = now or datetime.datetime.now(datetime.timezone.utc).replace(tzinfo=None)
    still_open = {name: dates.get(name) for name in covers if dates.get(name) is None or dates[name] > now}
    released = mode == "force" or (mode == "gated" and not still_open)
    return ProvidedDecision(assignment, mode, covers, still_open, released)


def find_assignments(course_root: Path | str = COURSE_ROOT) -> list[str]:
    """Every assignment folder of course/source that holds its notebook `<assignment>.ipynb`, sorted."""
    source = Path(course_root) / "source"
    if not source.is_dir():
        return []
    return sorted(p.name for p in source.iterdir() if p.is_dir() and (p / f"{p.name}.ipynb").is_file())


def generate_assignment(assignment: str, course_root: Path | str = COURSE_ROOT, db_url: str | None = None) -> Path:
    """Run nbgrader generate_assignment for one assignment; return course/release/<assignment>.

    The gradebook is `db_url`, else the course's (see autograder.course.coursedir.default_db_url)."""
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


def release_to_exchange(assignment: str, course_root: Path | str = COURSE_ROOT, db_url: str | None = None) -> Path:
    """course/release/<assignment>/ into the course's exchange (nbgrader release_assignment --force); returns the
    exchange's outbound folder of the assignment. ReleaseError with nbgrader's log when nbgrader refuses."""
    from nbgrader.apps.api import capture_log

    api = nbgrader_api(course_root, db_url)
    api.coursedir.assignment_id = assignment
    app = api.exchange.ReleaseAssignment(coursedir=api.coursedir, authenticator=api.authenticator, parent=api)
    app.force = True  # a second release replaces the first (students who fetched keep theirs)
    result = capture_log(app)
    if not result.get("success"):
        raise ReleaseError(f"nbgrader release_assignment failed for {assignment}:\n"
                           f"{result.get('error', '')}\n{result.get('log', '')}".rstrip())
    return Path(app.dest_path)


def kernel_language_info() -> dict:
    """The `language_info` that the course's kernel (ipykernel, this Python) reports when it starts."""
    from ipykernel.ipkernel import IPythonKernel

    return json.loads(json.dumps(IPythonKernel.language_info))


def complete_language_info(notebook_path: Path) -> None:
    """Store the kernel's full `language_info` in a released notebook.

    The source stores a bare {"name": "python"}; JupyterLab replaces it with what the kernel reports as soon as the
    kernel starts, which marks a notebook the student never touched as modified (and asks to save it on close)."""
    notebook = nbformat.read(notebook_path, as_version=nbformat.NO_CONVERT)
    info = kernel_language_info()
    if notebook.metadata.get("language_info") != info:
        notebook.metadata["language_info"] = info
        nbformat.write(notebook, notebook_path)


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
            exercises_dir: Path | str = EXERCISES_DIR, db_url: str | None = None, provided: str = "gated",
            decisions: list | None = None, now: datetime.datetime | None = None) -> list[Path]:
    """Release `assignments` (default: all in course/source) into `exercises_dir`; return the folders written.

    `provided`: gated | force | none (see the module doc); each assignment's ProvidedDecision is appended to
    `decisions` when a list is given."""
    if provided not in PROVIDED_MODES:
        raise ValueError(f"--provided must be one of {', '.join(PROVIDED_MODES)}, not {provided!r}")
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
        complete_language_info(released / f"{assignment}.ipynb")
        decision = provided_decision(assignment, course_root, provided, db_url, now)
        if decision.released:
            write_provided_module(assignment, released)
        elif (released / PROVIDED_FILENAME).exists():
            (released / PROVIDED_FILENAME).unlink()  # nbgrader copied the source folder's generated copy
        if decisions is not None:
            decisions.append(decision)
        target = exercises_dir / assignment
        _replace_tree(released, target)
        written.append(target)
    return written
