"""Submissions from the course's nbgrader exchange: `autograder collect ASSIGNMENT` where the course has one.

Which submission of each student is taken is nbgrader's decision, made by nbgrader's own ExchangeCollect (what the
formgrader's Collect button runs): the latest one in the exchange's inbound folder, or with
`CollectApp.before_duedate` the latest before the due date in the gradebook; `CourseDirectory.student_id` limits it to
one student as usual. Only its copy step is replaced: nbgrader's `do_copy` is `shutil.copytree`, which follows
symbolic links, so a link a student put into her submission (to a reference solution, a hidden check, another
student's work) would be copied as the file it points to. Here each submission is copied into a private staging
folder by `autograder.submissions.files` (regular files only, never through a link, sizes capped by the course's
`SubmissionLimits`; links, FIFOs and devices are reported and left in the exchange), and then `collect()` takes the
staging folder like any folder in nbgrader's layout, with all of its rules (notebooks checked, clashes refused,
the submission's timestamp.txt from the exchange kept for late penalties). Unknown students are added to the roster
unless the course refuses them (`Autograde.create_student = False`, as the hub's instructor config sets): then
their submission is collected, reported and left ungraded, as with nbgrader's own collect and autograde.
"""
from __future__ import annotations

import os
import stat
import tempfile
from pathlib import Path

from autograder.course.coursedir import exchange_root, nbgrader_coursedir
from autograder.errors import AutograderError
from autograder.submissions.collect import CollectReport, Problem, assignment_notebooks, collect, over_submission
from autograder.submissions.files import RefusedFile, copy_regular, refusal, submission_limits


class ExchangeCollectError(AutograderError, RuntimeError):
    """The course has no exchange, or nbgrader's collect refused (the message carries its log)."""


def _staging_collect_class():
    from nbgrader.exchange.default.collect import ExchangeCollect
    from nbgrader.utils import ignore_patterns

    class StagingCollect(ExchangeCollect):
        """nbgrader's ExchangeCollect whose copy reads the exchange through autograder.submissions.files."""

        limits = None
        problems: list

        def do_copy(self, src, dest, log=None):
            inbound = Path(self.inbound_path)
            name = Path(src).relative_to(inbound).as_posix()
            reason = refusal(os.lstat(src))
            if reason is None and not stat.S_ISDIR(os.lstat(src).st_mode):
                reason = "not a folder"
            if reason:
                self.problems.append(Problem(f"exchange:{name}", reason + ": not collected"))
                return
            ignore = ignore_patterns(exclude=self.coursedir.ignore, include=self.coursedir.include,
                                     max_file_size=self.coursedir.max_file_size, log=self.log)
            used = 0
            for dirpath, dirnames, filenames in os.walk(src, followlinks=False):
                target = Path(dest) / Path(dirpath).relative_to(src)
                target.mkdir(parents=True, exist_ok=True)
                skipped = set(ignore(dirpath, dirnames + filenames))
                dirnames[:] = sorted(d for d in dirnames if d not in skipped and not os.path.islink(
                    os.path.join(dirpath, d)))
                # notebooks first: they are what the submission's byte budget is for
                entries = sorted((n for n in os.listdir(dirpath) if n not in skipped and n not in dirnames),
                                 key=lambda n: (not n.endswith(".ipynb"), n))
                for entry in entries:
                    path = os.path.join(dirpath, entry)
                    rel = f"exchange:{name}/{Path(path).relative_to(src).as_posix()}"
                    what = "notebook" if entry.endswith(".ipynb") else "file"
                    own = self.limits.notebook_bytes if what == "notebook" else self.limits.file_bytes
                    try:
                        size = os.lstat(path).st_size
                        if size <= own and used + size > self.limits.submission_bytes:
                            raise RefusedFile(over_submission(used, size, self.limits))
                        used += copy_regular(path, target / entry, own, what)
                    except (OSError, RefusedFile) as exc:
                        self.problems.append(Problem(rel, str(exc)))

    return StagingCollect


def collect_from_exchange(course_dir, assignment: str, db_url: str | None = None) -> CollectReport:
    """Each student's submission of `assignment` from the course's exchange into submitted/ (see the module doc)."""
    from nbgrader.apps.api import capture_log
    from nbgrader.auth import Authenticator
    from nbgrader.coursedir import CourseDirectory

    course_dir = Path(course_dir).resolve()
    if assignment not in assignment_notebooks(course_dir):
        raise FileNotFoundError(f"nothing to collect at {assignment}: no such folder or zip, and no such "
                                f"assignment in {course_dir / 'source'}")
    root = exchange_root(course_dir)
    if root is None:
        raise ExchangeCollectError(f"the course has no nbgrader exchange (c.Exchange.root in {course_dir}/"
                                   f"nbgrader_config.py or on Jupyter's config path): collect a folder or zip "
                                   f"of {assignment}'s submissions instead")
    config, coursedir = nbgrader_coursedir(course_dir, db_url)
    limits = submission_limits(config)
    with tempfile.TemporaryDirectory(prefix="ag-exchange-") as staging:
        staged = CourseDirectory(config=config)
        staged.root = staging  # submitted/ of the staging folder; gradebook (due date), course id: the course's
        staged.db_url = coursedir.db_url
        staged.assignment_id = assignment
        app = _staging_collect_class()(coursedir=staged, authenticator=Authenticator(config=config), config=config)
        app.limits, app.problems = limits, []
        result = capture_log(app)
        if not result.get("success"):
            raise ExchangeCollectError(f"nbgrader collect failed for {assignment} from {root}:\n"
                                       f"{result.get('error', '')}\n{result.get('log', '')}".rstrip())
        submitted = Path(staging) / "submitted"
        if submitted.is_dir():
            report = collect(course_dir, submitted, db_url=db_url,
                             add_students=bool(config.Autograde.get("create_student", True)))
        else:
            report = CollectReport()
        report.problems[:0] = app.problems
    return report
