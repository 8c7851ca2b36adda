"""The plan of a grading run: which submissions are graded, with what, and which are refused or unchanged.

`build_jobs` turns one assignment's submissions into `GradingJob`s (jobs.py), each carrying everything its worker
needs. Before that, every submission is admitted (`admit_submission`) or refused, and each notebook is graded
again only when what decides its grade changed (`content_hash`, `needs_grading`); after grading, nbgrader's
AssignLatePenalties prices late work (`assign_late_penalties`).

nbgrader parity (autograder.submissions.admission, nbgrader's own code): before grading, each submission goes
through nbgrader's Autograde.init_assignment (roster check honouring `Autograde.create_student`, timestamp,
timestamp.txt and the assignment's files into autograded/); after grading, nbgrader's AssignLatePenalties
prices late work with the configured plugin. A refused student is reported in `GradeSummary.refused`.

A submission never reaches outside its folder (autograder.submissions.files): before nbgrader sees it, the folder
course/submitted/<student>/<assignment>/ is scanned without following anything; a link (the folder itself, the
student's folder, a notebook or any other file), a hard link, a FIFO, socket or device, or a notebook over
MAX_NOTEBOOK_BYTES makes that submission fail with a message naming the file (every notebook scores 0, status
"error", the reason in its notes and on stderr), and the batch goes on. An unreadable timestamp.txt counts as no
timestamp (no late penalty) and the notebooks are flagged for review ("timestamp-unreadable"). Any other failure
while preparing one submission costs that submission only, in the same way.

provided.py of a course assignment (every notebook from `provided.FIRST_WITH_PROVIDED` on: 04-11) is always
generated here from solutions/ (the grader is trusted), whatever the release or course/source hold, so grading
never depends on whether it was released to students.
"""
from __future__ import annotations

import dataclasses
import fnmatch
import hashlib
import json
import os
import sys
from pathlib import Path

import sqlalchemy as sa
from nbgrader.api import MissingEntry

from autograder.course.coursedir import NOTEBOOK_IGNORE, course_id
from autograder.course.draw_secret import course_secret, submission_salt
from autograder.course.provided import PROVIDED_FILENAME, build_provided_source, provided_topics
from autograder.errors import GradingError
from autograder.gradebook.store import RunsTable, notebook_cells, open_gradebook
from autograder.grade.jobs import GradingJob, GradingResult, preprocessor_config
from autograder.sandbox.limits import Limits
from autograder.submissions import files as submission_files
from autograder.submissions.admission import StudentRefused, SubmissionRules
from autograder.submissions.files import RefusedFile, read_regular

MAX_EXTRA_FILE_BYTES = 50 * 1024 * 1024


def assignment_files(course_dir: Path, assignment: str) -> dict[str, bytes]:
    """The assignment's files other than notebooks (provided.py, data), as nbgrader's autograde copies them.

    A course assignment with a provided module (04-11) always gets provided.py freshly generated from solutions/
    (never released to students while gated, so never taken from the release or trusted from course/source)."""
    source = Path(course_dir) / "source" / assignment
    files: dict[str, bytes] = {}
    total = 0
    for path in sorted(source.rglob("*")):
        rel = path.relative_to(source)
        if not path.is_file() or path.suffix == ".ipynb" or any(
                fnmatch.fnmatch(part, pattern) for part in rel.parts for pattern in NOTEBOOK_IGNORE):
            continue
        total += path.stat().st_size
        if total > MAX_EXTRA_FILE_BYTES:
            raise GradingError(f"files of {assignment} exceed {MAX_EXTRA_FILE_BYTES} bytes; keep data out of source/")
        files[rel.as_posix()] = path.read_bytes()
    try:
        needs_provided = bool(provided_topics(assignment))
    except ValueError:  # not named like a course assignment (NN_name): its own files only
        needs_provided = False
    if needs_provided:
        files[PROVIDED_FILENAME] = build_provided_source(assignment).encode("utf-8")
    return files


def submission_problems(folder: Path, notebooks,
                        notebook_bytes: int = submission_files.MAX_NOTEBOOK_BYTES) -> list[str]:
    """Why the submission in `folder` must not be graded (links, special files, oversized notebooks), or []."""
    problems = []
    student_dir = folder.parent
    if student_dir.is_symlink():
        return [f"{student_dir.name}/ is a symbolic link: refused (grade never follows links)"]
    for rel, reason in submission_files.scan_tree(folder):
        where = folder.name if rel == "." else f"{folder.name}/{rel}"
        problems.append(f"{where}: {reason}")
    if problems:
        return problems
    for notebook in notebooks:
        path = folder / f"{notebook}.ipynb"
        if path.is_file() and path.stat().st_size > notebook_bytes:
            problems.append(f"{notebook}.ipynb: " + submission_files.too_large(
                path.stat().st_size, notebook_bytes, "notebook"))
    return problems


def content_hash(nb_bytes: bytes | None, cells: dict, files: dict[str, bytes], limits: Limits,
                 config: dict | None = None) -> str:
    """What decides a grade: the submission, the released cells, the files, the limits and the grading config."""
    digest = hashlib.sha256()
    digest.update(nb_bytes if nb_bytes is not None else b"<missing>")
    digest.update(json.dumps(cells, sort_keys=True, default=str).encode())
    for name in sorted(files):
        digest.update(name.encode() + hashlib.sha256(files[name]).digest())
    digest.update(json.dumps(limits.to_dict(), sort_keys=True).encode())
    if config:
        digest.update(json.dumps(config, sort_keys=True, default=repr).encode())
    return digest.hexdigest()


@dataclasses.dataclass
class Plan:
    """What `build_jobs` decided for one assignment."""
    jobs: list[GradingJob]
    skipped: list[tuple[str, str]]  # (student, notebook) unchanged since its last successful run
    timestamps: dict  # student -> submission time (None without timestamp.txt)
    admitted: list[str]  # students that passed nbgrader's init_assignment (graded or skipped)
    refused: list[tuple[str, str]]  # (student, nbgrader's reason)
    failed: list[GradingResult] = dataclasses.field(default_factory=list)  # decided here: submissions refused
    problems: list[tuple[str, str]] = dataclasses.field(default_factory=list)  # (student, message) to report


def build_jobs(course_dir: Path, db_url: str, assignment: str, students=None, force=False, *,
               limits: Limits, rules: SubmissionRules | None = None) -> Plan:
    """Jobs for every submitted notebook of `assignment` (or of `students`), after nbgrader's init_assignment.

    `limits`: this grading run's, resolved once by the caller (`sandbox.course_limits`)."""
    course_dir = Path(course_dir)
    rules = rules or SubmissionRules(course_dir, db_url)
    config = preprocessor_config(rules.config)
    cid = course_id(course_dir)
    with open_gradebook(db_url=db_url, course=cid) as gb:
        try:
            gb_assignment = gb.find_assignment(assignment)
        except MissingEntry:
            raise GradingError(f"assignment {assignment!r} is not in the gradebook: release it first "
                               f"(autograder release {assignment})") from None
        cells = {nb.name: notebook_cells(gb, assignment, nb.name) for nb in gb_assignment.notebooks}
        alembic_version = gb.db.execute(sa.text("SELECT version_num FROM alembic_version")).scalar()
    if not cells:
        raise GradingError(f"assignment {assignment!r} has no notebooks in the gradebook: release it again")
    files = assignment_files(course_dir, assignment)
    secret = course_secret(course_dir)
    notebook_bytes = submission_files.submission_limits(rules.config).notebook_bytes
    submitted = course_dir / "submitted"
    wanted = set(students) if students else None
    student_dirs = sorted(p / assignment for p in submitted.iterdir()
                          if os.path.lexists(p / assignment)) if submitted.is_dir() else []
    plan = Plan([], [], {}, [], [])
    with RunsTable(db_url) as runs:
        for folder in student_dirs:
            student = folder.parent.name
            if (wanted is not None and student not in wanted) or rules.excluded(student):
                continue
            base = {"assignment": assignment, "student": student, "course_id": cid}
            admitted = admit_submission(plan, rules, folder, base, cells, notebook_bytes)
            if admitted is None:
                continue
            notebooks, flags = admitted
            for notebook, nb_cells in cells.items():
                job = GradingJob(notebook=notebook, cells=nb_cells, **base,
                                 nb_json=None if notebooks[notebook] is None else
                                 notebooks[notebook].decode("utf-8", errors="replace"),
                                 content_hash=content_hash(notebooks[notebook], nb_cells, files, limits, config),
                                 files=files, limits=limits, config=config, alembic_version=alembic_version,
                                 coordinator_flags=tuple(flags),
                                 draw_salt=submission_salt(secret, cid, assignment, student, notebook,
                                                            notebooks[notebook]))
                if force or needs_grading(runs.get(assignment, notebook, student), job.content_hash):
                    plan.jobs.append(job)
                else:
                    plan.skipped.append((student, notebook))
    if wanted:
        unknown = wanted - {p.parent.name for p in student_dirs}
        if unknown:
            raise GradingError(f"no submission of {assignment} for: {', '.join(sorted(unknown))}")
    return plan


def admit_submission(plan: Plan, rules: SubmissionRules, folder: Path, base: dict, cells: dict,
                     notebook_bytes: int) -> tuple[dict, list] | None:
    """Admit one student's submission: its files pass the checks of `submission_files`, nbgrader's
    init_assignment accepts the student, its notebooks are read. Returns ({notebook: bytes or None}, coordinator
    flags), or None when it was refused or failed (recorded in `plan`; the batch goes on)."""
    assignment, student = base["assignment"], base["student"]
    problems = submission_problems(folder, list(cells), notebook_bytes)
    if problems:
        _fail_submission(plan, base, cells, "refused: " + "; ".join(problems[:5]))
        return None
    try:
        stamp_problem = rules.timestamp_problem(assignment, student)
        rules.admit(assignment, student, list(cells))
        stamp = rules.timestamp(assignment, student)
    except StudentRefused as exc:
        plan.refused.append((student, str(exc)))
        return None
    except Exception as exc:  # noqa: BLE001 - one broken submission never stops the batch
        _fail_submission(plan, base, cells, f"could not be prepared for grading: {type(exc).__name__}: {exc}")
        return None
    flags = []
    if stamp_problem:
        message = (f"{stamp_problem}: graded with the submission time unknown (no late penalty); "
                   "check when it was submitted")
        flags.append({"code": "timestamp-unreadable", "severity": "review", "cell": "timestamp.txt",
                      "message": message})
        plan.problems.append((student, message))
    notebooks = {}
    try:
        for notebook in cells:
            path = folder / f"{notebook}.ipynb"
            notebooks[notebook] = read_regular(path, notebook_bytes, "notebook") if os.path.lexists(path) else None
    except RefusedFile as exc:  # changed since the scan
        _fail_submission(plan, base, cells, f"refused: {notebook}.ipynb: {exc}")
        return None
    plan.admitted.append(student)
    plan.timestamps[student] = stamp
    return notebooks, flags


def needs_grading(previous: dict | None, digest: str) -> bool:
    """Job or skip: a notebook is graded again unless its last run graded the very same content and settings
    (`content_hash`) without an error."""
    return not (previous and previous["content_hash"] == digest and not previous["status"].startswith("error"))


def _fail_submission(plan: Plan, base: dict, cells: dict, message: str) -> None:
    """Every notebook of one submission fails with `message` (recorded without a worker; the batch goes on)."""
    plan.problems.append((base["student"], message))
    for notebook, nb_cells in cells.items():
        job = GradingJob(notebook=notebook, cells=nb_cells, **base)
        plan.failed.append(GradingResult.zero(job, "error", message))


def assign_late_penalties(rules: SubmissionRules, course_dir: Path, plan: Plan, assignment: str) -> None:
    """nbgrader's AssignLatePenalties on every submitted notebook of the admitted students (graded or unchanged:
    a new timestamp on the same content still changes the penalty)."""
    notebooks = sorted({job.notebook for job in plan.jobs} | {nb for _, nb in plan.skipped})
    for student in plan.admitted:
        for notebook in notebooks:
            if (Path(course_dir) / "submitted" / student / assignment / f"{notebook}.ipynb").is_file():
                try:
                    rules.late_penalties(assignment, student, notebook)
                except Exception as exc:  # noqa: BLE001 - one student's penalty never stops the others'
                    print(f"autograder grade: {assignment}/{student}: late penalty not applied: "
                          f"{type(exc).__name__}: {exc}", file=sys.stderr)
