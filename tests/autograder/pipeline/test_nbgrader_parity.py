"""`autograder grade` against `nbgrader autograde` on the same submissions, with the deployment's nbgrader config.

Two copies of the synthetic course get the same roster, due date and submissions; one is graded by our CLI, the
other by nbgrader's own `autograde`. Both read deploy/jupyter/instructor/nbgrader_config.py through
$JUPYTER_CONFIG_PATH, as on the hub: `Autograde.create_student = False` and the DailyLatePenalty plugin. The
expected values are whatever nbgrader wrote, so the test compares behaviour rather than numbers typed in here:
  * timestamp.txt lands in autograded/<student>/<assignment>/ (release_feedback needs it);
  * the late penalties (per notebook and per submission) and submission timestamps agree;
  * the student who is not on the roster is refused, named in the output, absent from the gradebook and from
    autograded/, and the command exits non-zero.
"""
from __future__ import annotations

import contextlib
import datetime as dt
import io
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from nbgrader.api import Gradebook, MissingEntry

from autograder import cli
from autograder.course.coursedir import REPO_ROOT, course_id, default_db_url
from autograder.grade.engine import grade
from autograder.submissions.admission import StudentRefused, SubmissionRules
from autograder.sandbox.limits import Limits

DEPLOY_CONFIG = REPO_ROOT / "deploy" / "jupyter" / "instructor"
ROSTER = ("alice", "carol")
INTRUDER = "mallory"
DAYS_LATE = 1.5  # alice submits now, 1.5 days after the due date: 2 started days late
STAMP_FORMAT = "%Y-%m-%d %H:%M:%S.%f"


def prepare(course: Path, helpers, due: dt.datetime) -> None:
    """Roster, due date, and three submissions (nbgrader layout, each with its timestamp.txt)."""
    with Gradebook(default_db_url(course), course_id(course)) as gb:
        gb.update_or_create_assignment("ps1", duedate=due)
        for student in ROSTER:
            gb.update_or_create_student(student)
    submitted = course / "submitted"
    stamps = {"alice": due + dt.timedelta(days=DAYS_LATE), "carol": due - dt.timedelta(hours=2),
              INTRUDER: due + dt.timedelta(days=DAYS_LATE)}
    kinds = {"alice": "solution", "carol": "mistake", INTRUDER: "solution"}
    for student, kind in kinds.items():
        helpers.write_submission(submitted, course, student, kind)
        (submitted / student / "ps1" / "timestamp.txt").write_text(stamps[student].strftime(STAMP_FORMAT))


def gradebook_state(course: Path) -> dict:
    state = {}
    with Gradebook(default_db_url(course), course_id(course)) as gb:
        state["roster"] = sorted(s.id for s in gb.students)
        for student in (*ROSTER, INTRUDER):
            try:
                sub = gb.find_submission("ps1", student)
            except MissingEntry:
                continue
            state[student] = {
                "timestamp": sub.timestamp, "seconds_late": sub.total_seconds_late, "score": sub.score,
                "penalty": sub.late_submission_penalty,
                "notebook_penalties": {nb.name: nb.late_submission_penalty for nb in sub.notebooks},
            }
    return state


def graded_files(course: Path) -> dict:
    root = course / "autograded"
    return {str(p.relative_to(root)): p.read_text() for p in sorted(root.rglob("timestamp.txt"))}


@pytest.fixture(scope="module")
def both(released_course, tmp_path_factory, helpers):
    root = tmp_path_factory.mktemp("parity")
    ours, theirs = root / "ours" / "course", root / "theirs" / "course"
    due = dt.datetime.now(dt.timezone.utc).replace(tzinfo=None, microsecond=0) - dt.timedelta(days=DAYS_LATE)
    for course in (ours, theirs):
        shutil.copytree(released_course, course)
        prepare(course, helpers, due)

    limits = helpers.TEST_LIMITS
    env = {k: v for k, v in os.environ.items() if not k.startswith(("JUPYTER", "NBGRADER"))}
    env["JUPYTER_CONFIG_PATH"] = str(DEPLOY_CONFIG)
    with pytest.MonkeyPatch.context() as mp:
        for key in [k for k in os.environ if k.startswith(("JUPYTER", "NBGRADER"))]:
            mp.delenv(key)
        mp.setenv("JUPYTER_CONFIG_PATH", str(DEPLOY_CONFIG))
        out, err = io.StringIO(), io.StringIO()
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            code = cli.main(["grade", "ps1", "--course-dir", str(ours), "--workers", "1",
                             "--cell-timeout", str(limits.cell_timeout),
                             "--notebook-timeout", str(limits.notebook_timeout)])
    nbgrader = subprocess.run([str(Path(sys.executable).parent / "nbgrader"), "autograde", "ps1"], cwd=theirs,
                              env=env, capture_output=True, text=True, timeout=600)
    return {"ours": {"code": code, "output": out.getvalue() + err.getvalue(), "course": ours},
            "theirs": {"code": nbgrader.returncode, "output": nbgrader.stdout + nbgrader.stderr, "course": theirs}}


def test_timestamp_file_is_copied_like_nbgrader(both):
    ours, theirs = graded_files(both["ours"]["course"]), graded_files(both["theirs"]["course"])
    assert sorted(ours) == [f"{s}/ps1/timestamp.txt" for s in ROSTER], both["ours"]["output"]
    assert ours == theirs


def test_late_penalties_match_nbgrader(both):
    ours, theirs = gradebook_state(both["ours"]["course"]), gradebook_state(both["theirs"]["course"])
    for student in ROSTER:
        mine, nbgraders = dict(ours[student]), dict(theirs[student])
        assert mine.pop("notebook_penalties") == pytest.approx(nbgraders.pop("notebook_penalties")), student
        assert mine.pop("timestamp") == nbgraders.pop("timestamp"), student
        assert mine == pytest.approx(nbgraders), (student, both["theirs"]["output"][-2000:])
    # the comparison means something: alice is late with a positive score, carol is on time
    assert theirs["alice"]["seconds_late"] > 0 and theirs["alice"]["score"] > 0
    assert 0 < ours["alice"]["penalty"] < ours["alice"]["score"]
    assert theirs["carol"]["seconds_late"] == 0 and ours["carol"]["penalty"] == 0


def test_unknown_student_is_refused_like_nbgrader(both):
    for side in ("ours", "theirs"):
        state = gradebook_state(both[side]["course"])
        assert state["roster"] == sorted(ROSTER), side
        assert INTRUDER not in state, side
        assert not (both[side]["course"] / "autograded" / INTRUDER / "ps1").exists(), side
        assert both[side]["code"] != 0, side
        assert INTRUDER in both[side]["output"], side


def test_new_timestamp_on_unchanged_work_reprices_the_penalty(both, helpers):
    """A resubmission with the same content is skipped by the content hash, yet its timestamp still counts."""
    course = both["ours"]["course"]
    stamp = course / "submitted" / "alice" / "ps1" / "timestamp.txt"
    with Gradebook(default_db_url(course), course_id(course)) as gb:
        due = gb.find_assignment("ps1").duedate
    stamp.write_text((due - dt.timedelta(minutes=5)).strftime(STAMP_FORMAT))
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("JUPYTER_CONFIG_PATH", str(DEPLOY_CONFIG))
        limits = Limits(cell_timeout=float(helpers.TEST_LIMITS.cell_timeout),  # what the CLI run of `both` used
                        notebook_timeout=float(helpers.TEST_LIMITS.notebook_timeout))
        summary = grade(course, "ps1", students=["alice"], workers=1, limits=limits, progress=False)
    assert summary.graded == [] and summary.skipped == [("alice", "ps1")]
    state = gradebook_state(course)["alice"]
    assert state["seconds_late"] == 0 and state["penalty"] == 0 and state["score"] > 0
    assert (course / "autograded" / "alice" / "ps1" / "timestamp.txt").read_text() == stamp.read_text()


def test_create_student_default_adds_unknown_students(course, helpers, monkeypatch):
    """Without the deployment config nbgrader's default applies: an unknown student is added to the roster."""
    monkeypatch.setenv("JUPYTER_CONFIG_PATH", str(course / "no-global-config"))
    helpers.write_submission(course / "submitted", course, "newcomer", "blank")
    rules = SubmissionRules(course, default_db_url(course))
    assert rules.create_student is True
    rules.admit("ps1", "newcomer", ["ps1"])
    with Gradebook(default_db_url(course), course_id(course)) as gb:
        assert gb.find_student("newcomer").id == "newcomer"


def test_create_student_false_refuses_before_touching_anything(course, helpers, monkeypatch):
    monkeypatch.setenv("JUPYTER_CONFIG_PATH", str(DEPLOY_CONFIG))
    helpers.write_submission(course / "submitted", course, INTRUDER, "solution")
    rules = SubmissionRules(course, default_db_url(course))
    assert rules.create_student is False
    with pytest.raises(StudentRefused, match=INTRUDER):
        rules.admit("ps1", INTRUDER, ["ps1"])
    with Gradebook(default_db_url(course), course_id(course)) as gb:
        with pytest.raises(MissingEntry):
            gb.find_student(INTRUDER)
    assert not (course / "autograded").exists()
