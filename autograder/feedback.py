"""Per-student HTML feedback through nbgrader's generate_feedback.

Feedback restores the hidden-test cells, which by the course's design hold only `check_x(obj)` calls, so it shows
each check's message but never test logic nor reference code.
"""
from __future__ import annotations

from pathlib import Path

from autograder.coursedir import nbgrader_api


def generate_feedback(course_dir, assignment: str, db_url: str | None = None, students=None) -> dict:
    """Feedback for every autograded student of `assignment`; returns {"written": [...], "failed": {student: log}}."""
    course_dir = Path(course_dir).resolve()
    api = nbgrader_api(course_dir, db_url)
    autograded = course_dir / "autograded"
    done = sorted(p.parent.name for p in autograded.glob(f"*/{assignment}") if any(p.glob("*.ipynb"))) \
        if autograded.is_dir() else []
    written, failed = [], {}
    for student in done:
        if students and student not in students:
            continue
        result = api.generate_feedback(assignment, student_id=student, force=True)
        if result["success"]:
            written.extend(sorted(str(p) for p in (course_dir / "feedback" / student / assignment).glob("*.html")))
        else:
            failed[student] = (result.get("error") or "") + result.get("log", "")[-2000:]
    return {"written": written, "failed": failed}
