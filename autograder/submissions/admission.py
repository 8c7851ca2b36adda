"""The per-submission rules of `nbgrader autograde`, applied by the coordinator with nbgrader's own code.

Grading itself runs on the workers; what nbgrader does around it, per (student, assignment), happens here:

* `SubmissionRules.admit` runs nbgrader's `Autograde.init_assignment`: the roster check (with
  `Autograde.create_student = False` a student missing from the gradebook is refused and, as nbgrader does,
  their autograded/<student>/<assignment>/ is removed; by default the student is added), the submission's timestamp into the gradebook, the submitted non-notebook files (timestamp.txt,
  which `release_feedback` needs) and then the assignment's own files copied into autograded/, and a zero
  score for notebooks that were not submitted.
* `SubmissionRules.late_penalties` runs nbgrader's `AssignLatePenalties` preprocessor once per submitted
  notebook after its grades are in: the configured `AssignLatePenalties.plugin_class` (nbgrader's
  LateSubmissionPlugin by default, a course plugin such as late_penalty.DailyLatePenalty when configured)
  prices `total_seconds_late`, capped to [0, score] by nbgrader.

Both open nbgrader's Gradebook in this (the coordinator's) process only, never while the coordinator's own
gradebook session is writing.

timestamp.txt is read by `read_timestamp` (never through a link, at most 1 KiB, nbgrader's parse_utc): nbgrader's
own CourseDirectory.get_existing_timestamp calls `self.fail` on a string it cannot parse, a method
CourseDirectory does not have, so one garbage timestamp used to stop the whole batch with an AttributeError. Here
an unreadable timestamp means "submission time unknown" (as with no timestamp.txt): the submission is graded
without a late penalty and the engine flags it for review with the reason (`timestamp_problem`).
"""
from __future__ import annotations

import datetime
import os
import shutil
import warnings
from pathlib import Path

import nbformat
from nbgrader.converters import Autograde
from nbgrader.converters.base import NbGraderException
from nbgrader.preprocessors import AssignLatePenalties
from nbgrader.utils import parse_utc

from autograder.course.coursedir import nbgrader_coursedir
from autograder.submissions.files import MAX_TIMESTAMP_BYTES, RefusedFile, read_regular
from autograder.errors import AutograderError

warnings.filterwarnings("ignore", module="nbgrader.api")  # SQLAlchemy autoflush chatter when submissions are added


class StudentRefused(AutograderError, RuntimeError):
    """nbgrader would not grade this student (not on the roster while Autograde.create_student is False)."""


def read_timestamp(folder: Path | str) -> tuple[datetime.datetime | None, str | None]:
    """(submission time as nbgrader stores it, or None; why timestamp.txt could not be used, or None).

    No timestamp.txt, or an empty one, is (None, None), as in nbgrader; anything unreadable is (None, reason)."""
    path = Path(folder) / "timestamp.txt"
    if not os.path.lexists(path):
        return None, None
    try:
        text = read_regular(path, MAX_TIMESTAMP_BYTES, "timestamp.txt").decode("utf-8").strip()
    except (RefusedFile, UnicodeDecodeError) as exc:
        return None, f"timestamp.txt unreadable ({exc})"
    if not text:
        return None, None
    try:
        stamp = parse_utc(text)
    except Exception as exc:  # noqa: BLE001 - dateutil raises ParserError, OverflowError, TypeError...
        return None, f"timestamp.txt holds {text[:60]!r}, not a date ({type(exc).__name__})"
    if not isinstance(stamp, datetime.datetime):
        return None, f"timestamp.txt holds {text[:60]!r}, not a date"
    return stamp, None


class SubmissionRules:
    def __init__(self, course_dir: Path, db_url: str):
        self.config, self.coursedir = nbgrader_coursedir(Path(course_dir), db_url)
        self.db_url = db_url
        # nbgrader's init_assignment reads the timestamp through this method; its own version crashes the batch
        # on a bad timestamp (self.fail does not exist) and would open a FIFO or follow a link
        self.coursedir.get_existing_timestamp = lambda dest_path: read_timestamp(dest_path)[0]
        self.autograde = Autograde(coursedir=self.coursedir, config=self.config)

    @property
    def create_student(self) -> bool:
        return bool(self.autograde.create_student)

    def excluded(self, student: str) -> bool:
        """`CourseDirectory.student_id_exclude` (comma separated ids), skipped by nbgrader without a word."""
        exclude = self.coursedir.student_id_exclude
        return bool(exclude) and student in exclude.split(",")

    def submitted_folder(self, assignment: str, student: str) -> Path:
        return Path(self.coursedir.format_path(self.coursedir.submitted_directory, student, assignment))

    def timestamp(self, assignment: str, student: str):
        """The submission time (None: no timestamp.txt, or an unreadable one; see timestamp_problem)."""
        return read_timestamp(self.submitted_folder(assignment, student))[0]

    def timestamp_problem(self, assignment: str, student: str) -> str | None:
        """Why the submission's timestamp.txt could not be used, or None."""
        return read_timestamp(self.submitted_folder(assignment, student))[1]

    def admit(self, assignment: str, student: str, notebooks: list[str]) -> None:
        """nbgrader's Autograde.init_assignment for one submission; raises StudentRefused when nbgrader would.

        `notebooks`: the assignment's notebook names (as in the gradebook).
        """
        folder = self.submitted_folder(assignment, student)
        self.autograde.notebooks = [str(folder / f"{name}.ipynb") for name in notebooks]
        try:
            self.autograde.init_assignment(assignment, student)
        except NbGraderException as exc:
            # like nbgrader's _handle_failure: what init_assignment already copied for this student goes away
            dest = Path(self.coursedir.format_path(self.coursedir.autograded_directory, student, assignment))
            if dest.exists():
                shutil.rmtree(dest)
            raise StudentRefused(str(exc)) from None

    def late_penalties(self, assignment: str, student: str, notebook: str) -> None:
        """nbgrader's AssignLatePenalties for one graded notebook: sets its late_submission_penalty."""
        step = AssignLatePenalties(config=self.config)
        resources = {"nbgrader": {"notebook": notebook, "assignment": assignment, "student": student,
                                  "db_url": self.db_url}}
        step.preprocess(nbformat.v4.new_notebook(), resources)
