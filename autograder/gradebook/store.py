"""The single writer: nbgrader's gradebook, plus our table `autograder_runs` in the same database.

Only the coordinator (the engine's process) opens the gradebook for writing. Workers get the cell records as plain
dicts (`notebook_cells`) in their job and return a `jobs.GradingResult` (`record_result` writes it). Any SQLAlchemy
URL works.

`autograder_runs` keeps what nbgrader has no column for: the content hash used to skip already graded
submissions, status, review flags (tamper scan, runtime), per-cell messages and diagnosed mistakes, notes, grading time.
"""
from __future__ import annotations

import datetime
import json

import sqlalchemy as sa
from nbgrader.api import Gradebook, MissingEntry

from autograder.grade.jobs import GradingResult


RUNS = sa.Table(
    "autograder_runs", sa.MetaData(),
    sa.Column("assignment", sa.String(128), primary_key=True),
    sa.Column("notebook", sa.String(128), primary_key=True),
    sa.Column("student", sa.String(128), primary_key=True),
    sa.Column("content_hash", sa.String(64)),
    sa.Column("status", sa.String(32)),
    sa.Column("held", sa.Boolean, default=False),
    sa.Column("score", sa.Float),
    sa.Column("max_score", sa.Float),
    sa.Column("flags", sa.Text),  # JSON list of {code, severity, cell, message}
    sa.Column("messages", sa.Text),  # JSON {grade_id: message}
    sa.Column("mistakes", sa.Text),  # JSON {grade_id: mistake}
    sa.Column("notes", sa.Text),  # JSON list of str
    sa.Column("seconds", sa.Float),
    sa.Column("graded_at", sa.DateTime),
)


class RunsTable:
    """Our runs table in the gradebook's database; a context manager (`with RunsTable(url) as runs:`) that disposes
    of its engine on exit."""

    def __init__(self, db_url: str):
        self.engine = sa.create_engine(db_url)
        RUNS.metadata.create_all(self.engine)

    def get(self, assignment: str, notebook: str, student: str) -> dict | None:
        with self.engine.connect() as conn:
            row = conn.execute(sa.select(RUNS).where(
                RUNS.c.assignment == assignment, RUNS.c.notebook == notebook, RUNS.c.student == student)).first()
        return _decode(row._asdict()) if row else None

    def all(self, assignment: str | None = None) -> list[dict]:
        query = sa.select(RUNS)
        if assignment:
            query = query.where(RUNS.c.assignment == assignment)
        with self.engine.connect() as conn:
            return [_decode(r._asdict()) for r in conn.execute(query)]

    def put(self, row: dict) -> None:
        data = dict(row)
        for key in ("flags", "messages", "mistakes", "notes"):
            data[key] = json.dumps(data.get(key) or ([] if key in ("flags", "notes") else {}))
        keys = {k: data[k] for k in ("assignment", "notebook", "student")}
        with self.engine.begin() as conn:
            conn.execute(sa.delete(RUNS).where(*(getattr(RUNS.c, k) == v for k, v in keys.items())))
            conn.execute(sa.insert(RUNS).values(**{c.name: data.get(c.name) for c in RUNS.columns}))

    def dispose(self):
        self.engine.dispose()

    def __enter__(self) -> "RunsTable":
        return self

    def __exit__(self, *exc) -> None:
        self.dispose()


def _decode(row: dict) -> dict:
    for key in ("flags", "messages", "mistakes", "notes"):
        row[key] = json.loads(row[key]) if row.get(key) else ([] if key in ("flags", "notes") else {})
    return row


def notebook_cells(gb: Gradebook, assignment: str, notebook: str) -> dict:
    """The cell records of one released notebook, as plain dicts for a worker."""
    nb = gb.find_notebook(notebook, assignment)
    return {
        "grade": [{"name": c.name, "max_score": c.max_score, "cell_type": c.cell_type} for c in nb.grade_cells],
        "solution": [{"name": c.name} for c in nb.solution_cells],
        "task": [{"name": c.name, "max_score": c.max_score, "cell_type": c.cell_type} for c in nb.task_cells],
        "source": [{"name": c.name, "cell_type": c.cell_type, "locked": c.locked, "source": c.source,
                    "checksum": c.checksum} for c in nb.source_cells],
        "kernelspec": nb.kernelspec,
    }


HOLD_SEVERITY = "tamper"


def record_result(gb: Gradebook, runs: RunsTable, result: GradingResult,
                  timestamp: datetime.datetime | None = None) -> dict:
    """Write one worker result into the gradebook and the runs table; returns the runs row written.

    A result with a "tamper" flag is held: every grade of the notebook gets manual_score 0 and needs_manual_grade,
    so the submission scores 0 until an instructor reviews it (the automatic score stays in auto_score).
    """
    a, nb_name, student = result.assignment, result.notebook, result.student
    gb.update_or_create_student(student)
    try:
        gb.find_submission(a, student)
        if timestamp is not None:
            gb.update_or_create_submission(a, student, timestamp=timestamp)
    except MissingEntry:
        gb.add_submission(a, student, **({"timestamp": timestamp} if timestamp else {}))
    held = any(f["severity"] == HOLD_SEVERITY for f in result.flags)
    previous = runs.get(a, nb_name, student)
    was_held = bool(previous and previous.get("held"))  # its manual 0s were the hold's, not a grader's
    submission_nb = gb.find_submission_notebook(nb_name, a, student)
    score = 0.0
    max_score = 0.0
    for grade in submission_nb.grades:
        values = result.grades.get(grade.name, {"auto_score": 0.0, "needs_manual_grade": False})
        grade.auto_score = values["auto_score"]
        # As nbgrader's SaveAutoGrades: a score given by hand survives a regrade, and the cell is flagged so that
        # a grader looks at it again.
        kept = None if (held or was_held) else grade.manual_score
        grade.needs_manual_grade = bool(values.get("needs_manual_grade")) or held or kept is not None
        grade.manual_score = 0.0 if held else kept
        if not held:
            score += float(kept if kept is not None else (values["auto_score"] or 0.0))
        max_score += float(grade.max_score or 0.0)
    gb.db.commit()
    row = {
        "assignment": a, "notebook": nb_name, "student": student, "content_hash": result.content_hash,
        "status": result.status + (" (held for review)" if held else ""), "held": held, "score": score,
        "max_score": max_score, "flags": result.flags, "messages": result.messages,
        "mistakes": result.mistakes, "notes": result.notes + ([result.message] if result.message else []),
        "seconds": result.seconds, "graded_at": datetime.datetime.now(datetime.timezone.utc).replace(tzinfo=None),
    }
    runs.put(row)
    return row
