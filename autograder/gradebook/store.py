"""The single writer: nbgrader's gradebook, plus our table `autograder_runs` in the same database.

Only the coordinator (the engine's process) opens the gradebook for writing. Workers get the cell records as plain
dicts (`notebook_cells`) in their job and return a `jobs.GradingResult` (`record_result` writes it). Any SQLAlchemy
URL works.

Every gradebook is opened through `open_gradebook` (a course folder, or a database URL and a course id): it brings a
database that lacks nbgrader's schema version (`alembic_version`, e.g. one made by another tool without alembic) to
nbgrader's schema first, as `nbgrader db upgrade` would, instead of failing later on the missing table.

`autograder_runs` keeps what nbgrader has no column for: the content hash used to skip already graded
submissions, status, review flags (tamper scan, runtime), per-cell messages and diagnosed mistakes, notes, grading time.
"""
from __future__ import annotations

import contextlib
import datetime
import json
import logging
from pathlib import Path

import sqlalchemy as sa
from nbgrader.api import Gradebook, MissingEntry


log = logging.getLogger(__name__)


@contextlib.contextmanager
def open_gradebook(course_dir: Path | str | None = None, *, db_url: str | None = None, course: str | None = None,
                   authenticator=None):
    """`with open_gradebook(course_dir) as gb:` nbgrader's Gradebook of a course, closed on exit.

    `db_url` defaults to the course's gradebook.db (`coursedir.default_db_url`), `course` to its course id (without
    a course folder: nbgrader's default course). A database without nbgrader's schema version is brought to
    nbgrader's schema first (`ensure_schema`)."""
    from autograder.course.coursedir import course_id, default_db_url

    if course_dir is None and db_url is None:
        raise ValueError("open_gradebook needs a course folder or a database URL")
    db_url = db_url or default_db_url(Path(course_dir).resolve())
    if course is None and course_dir is not None:
        course = course_id(Path(course_dir).resolve())
    ensure_schema(db_url)
    named = {"authenticator": authenticator} if authenticator is not None else {}
    with Gradebook(db_url, *([course] if course else []), **named) as gb:
        yield gb


# nbgrader's schema migrations (nbgrader/alembic/versions), newest first, each with a mark of what it added: the
# schema of a database without `alembic_version` is the newest whose mark it has.
_REVISIONS = (
    ("e43177bfe90b", lambda tables: "course_id" in tables.get("assignment", ())),  # the course table
    ("282d30a0218e", lambda tables: "lms_user_id" in tables.get("student", ())),
    ("167914646830", lambda tables: "base_cell" in tables),  # task cells: cells split into base_cell and kinds
    ("724cde206c17", lambda tables: "extra_credit" in tables.get("grade", ())),
    ("50a4d84c131a", lambda tables: "kernelspec" in tables.get("notebook", ())),
    ("b6d005d67074", lambda tables: True),  # the initial revision
)


def schema_revision(db_url: str) -> str | None:
    """The nbgrader schema revision of a database that has nbgrader's tables but no `alembic_version`, as its tables
    and columns show it; None for an empty database or one that records its revision."""
    engine = sa.create_engine(db_url)
    try:
        inspector = sa.inspect(engine)
        names = set(inspector.get_table_names())
        if not names or "alembic_version" in names:
            return None
        tables = {name: {column["name"] for column in inspector.get_columns(name)} for name in names}
    finally:
        engine.dispose()
    return next(revision for revision, has in _REVISIONS if has(tables))


def ensure_schema(db_url: str) -> None:
    """A database that lacks `alembic_version` (made without alembic): record the schema revision its tables show,
    then run nbgrader's own migrations (`nbgrader db upgrade`) up to the current schema. Any other database is left
    to nbgrader's Gradebook (it creates an empty one with the current schema)."""
    revision = schema_revision(db_url)
    if revision is None:
        return
    from nbgrader import dbutil

    from autograder.course.coursedir import alembic_on_path

    log.warning("the gradebook %s records no schema version: taken as nbgrader's revision %s, then upgraded",
                db_url, revision)
    engine = sa.create_engine(db_url)
    try:
        with engine.begin() as conn:
            conn.execute(sa.text("CREATE TABLE alembic_version (version_num VARCHAR(32) NOT NULL)"))
            conn.execute(sa.text("INSERT INTO alembic_version (version_num) VALUES (:v)"), {"v": revision})
    finally:
        engine.dispose()
    alembic_on_path()  # nbgrader's migrations run its `alembic` command
    dbutil.upgrade(db_url)


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
    sa.Column("seconds", sa.Float),  # wall-clock seconds of the grading job
    sa.Column("graded_at", sa.DateTime),
    sa.Column("cpu_seconds", sa.Float),  # CPU seconds of the submission's kernels (NULL: not accounted)
)
ADDED_COLUMNS = ("cpu_seconds",)  # columns newer than the first runs table: added to an older one in place


class RunsTable:
    """Our runs table in the gradebook's database; a context manager (`with RunsTable(url) as runs:`) that disposes
    of its engine on exit."""

    def __init__(self, db_url: str):
        self.engine = sa.create_engine(db_url)
        RUNS.metadata.create_all(self.engine)
        present = {column["name"] for column in sa.inspect(self.engine).get_columns(RUNS.name)}
        with self.engine.begin() as conn:
            for name in ADDED_COLUMNS:
                if name not in present:  # a gradebook graded by an earlier version: its rows keep NULL there
                    column = RUNS.c[name]
                    conn.execute(sa.text(f"ALTER TABLE {RUNS.name} ADD COLUMN {name} "
                                         f"{column.type.compile(self.engine.dialect)}"))

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


HOLD_SEVERITY = "tamper"  # held with every grade at 0 until reviewed
HOLD_AS_GRADED = "hold"  # held with its scores as graded; the flagged cells marked for a grader (a time limit)


def record_result(gb: Gradebook, runs: RunsTable, result,
                  timestamp: datetime.datetime | None = None) -> dict:
    """Write one worker result into the gradebook and the runs table; returns the runs row written.

    A result with a "tamper" flag is held: every grade of the notebook gets manual_score 0 and needs_manual_grade,
    so the submission scores 0 until an instructor reviews it (the automatic score stays in auto_score). A result
    with a "hold" flag (a time limit reached, even when graded alone) is held too, with its scores as graded: the
    flagged grade cells get needs_manual_grade, so a grader sees them.
    """
    a, nb_name, student = result.assignment, result.notebook, result.student
    gb.update_or_create_student(student)
    try:
        gb.find_submission(a, student)
        if timestamp is not None:
            gb.update_or_create_submission(a, student, timestamp=timestamp)
    except MissingEntry:
        gb.add_submission(a, student, **({"timestamp": timestamp} if timestamp else {}))
    zeroed = any(f["severity"] == HOLD_SEVERITY for f in result.flags)
    held = zeroed or any(f["severity"] == HOLD_AS_GRADED for f in result.flags)
    to_review = {f["cell"] for f in result.flags if f["severity"] == HOLD_AS_GRADED}
    previous = runs.get(a, nb_name, student)
    # its manual 0s were the hold's, not a grader's
    was_held = bool(previous and previous.get("held") and any(f.get("severity") == HOLD_SEVERITY
                                                              for f in previous.get("flags") or []))
    submission_nb = gb.find_submission_notebook(nb_name, a, student)
    score = 0.0
    max_score = 0.0
    for grade in submission_nb.grades:
        values = result.grades.get(grade.name, {"auto_score": 0.0, "needs_manual_grade": False})
        grade.auto_score = values["auto_score"]
        # As nbgrader's SaveAutoGrades: a score given by hand survives a regrade, and the cell is flagged so that
        # a grader looks at it again.
        kept = None if (zeroed or was_held) else grade.manual_score
        grade.needs_manual_grade = (bool(values.get("needs_manual_grade")) or zeroed or kept is not None
                                    or grade.name in to_review)
        grade.manual_score = 0.0 if zeroed else kept
        if not zeroed:
            score += float(kept if kept is not None else (values["auto_score"] or 0.0))
        max_score += float(grade.max_score or 0.0)
    gb.db.commit()
    row = {
        "assignment": a, "notebook": nb_name, "student": student, "content_hash": result.content_hash,
        "status": result.status + (" (held for review)" if held else ""), "held": held, "score": score,
        "max_score": max_score, "flags": result.flags, "messages": result.messages,
        "mistakes": result.mistakes, "notes": result.notes + ([result.message] if result.message else []),
        "seconds": result.seconds, "cpu_seconds": getattr(result, "cpu_seconds", None), "graded_at": datetime.datetime.now(datetime.timezone.utc).replace(tzinfo=None),
    }
    runs.put(row)
    return row
