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
"""
from __future__ import annotations

import shutil
import warnings
from pathlib import Path

import nbformat
from nbgrader.converters import Autograde
from nbgrader.converters.base import NbGraderException
from nbgrader.preprocessors import AssignLatePenalties

from autograder.coursedir import nbgrader_coursedir

warnings.filterwarnings("ignore", module="nbgrader.api")  # SQLAlchemy autoflush chatter when submissions are added


class StudentRefused(RuntimeError):
    """nbgrader would not grade this student (not on the roster while Autograde.create_student is False)."""


class SubmissionRules:
    def __init__(self, course_dir: Path, db_url: str):
        self.config, self.coursedir = nbgrader_coursedir(Path(course_dir), db_url)
        self.db_url = db_url
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
        return self.coursedir.get_existing_timestamp(str(self.submitted_folder(assignment, student)))

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
