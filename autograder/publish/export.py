"""Grades as CSV: nbgrader's own CSV export (its columns unchanged), plus our columns at the end.

Added columns (joined on assignment + student): `status`, `held_for_review`, `flags` (codes, ";"-joined),
`mistakes` ("grade_id: mistake" ";"-joined), `grading_seconds`, then manual grading: `manual_score` (the points
given by hand in formgrader, already part of nbgrader's `score`; empty when none) and `waiting_for_grader` (the
grade cells that still need a grader, ";"-joined; a held notebook not yet reviewed is one entry "<notebook>: held
for review"). A cell that waits counts 0 in `score` until its grade is given. Exposed to nbgrader as an export
plugin (`nbgrader export --exporter=autograder.publish.export.AnnotatedCsvExportPlugin`) and used by `autograder export`.
`waiting_line` says in one line what `autograder.gradebook.queries.waiting_for_grader` lists: the written answers (and
other manual cells) still to grade, as the report's "Waiting for manual grading" does. The gradebook's reads (and
the final-score and waits-for-a-grader rules) live in `autograder.gradebook.queries`; this module only formats.

`export_lms` (`autograder export --format canvas|moodle`) writes one row per student of the roster (nbgrader's
students: `id`, names, `email`, `lms_user_id`) and one column per assignment holding nbgrader's final score: the
submission's score minus its late penalty, never below 0 (0 when nothing was submitted), as nbgrader's own CSV
export computes it. The layouts follow the LMS documentation:

* Canvas, "Grades" > "Import" (Canvas Instructor Guide, "How do I import grades in the Gradebook?", and the
  layout of the Gradebook export it mirrors): the header `Student, ID, SIS User ID, SIS Login ID, Section`, then
  one column per assignment titled `Name (canvas assignment id)` (a title without an id makes Canvas create the
  assignment); the second row is `Points Possible` with each assignment's points under its column and the
  student columns left empty; then one row per student: `Last, First`, the Canvas user id (nbgrader's
  `lms_user_id`, set when the roster comes from the LMS), the SIS user id (the nbgrader student id), the SIS login
  (e-mail), the section (empty).
* Moodle, "Grades" > "Import" > "CSV file" (Moodle docs, "Grade import"; gradeimport_csv): any columns, one of
  which identifies the user; the import form maps it to a user field ("Map from" / "Map to": email address,
  ID number, username or user id), and each further column to a grade item by its name. We write `First name`,
  `Last name`, `ID number` (the nbgrader student id: map it to the user's ID number) and `Email address` (the
  alternative identifier), then one column per assignment named after it, as in Moodle's own plain-text export.
"""
from __future__ import annotations

import csv
import io
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from nbgrader.api import Gradebook
from nbgrader.plugins.export import CsvExportPlugin

from autograder.gradebook.store import open_gradebook
from autograder.gradebook.queries import final_scores, grade_rows, held_notebooks, run_rows
from coursekit.mistakes import shown_text

RUN_COLUMNS = ["status", "held_for_review", "flags", "mistakes", "grading_seconds"]
MANUAL_COLUMNS = ["manual_score", "waiting_for_grader"]
EXTRA_COLUMNS = RUN_COLUMNS + MANUAL_COLUMNS


def extra_columns(runs: list[dict]) -> dict[tuple[str, str], dict]:
    """(assignment, student) -> our columns, over all notebooks of that assignment."""
    merged: dict[tuple[str, str], dict] = {}
    for run in sorted(runs, key=lambda r: r["notebook"]):
        row = merged.setdefault((run["assignment"], run["student"]),
                                {"status": [], "held_for_review": False, "flags": [], "mistakes": [],
                                 "grading_seconds": 0.0})
        row["status"].append(run["status"])
        row["held_for_review"] = row["held_for_review"] or bool(run["held"])
        row["flags"].extend(f"{f['code']}@{f['cell']}" for f in run["flags"])
        # the runs store catalogue ids (coursekit.mistakes); the column shows their text
        row["mistakes"].extend(f"{cell}: {shown_text(mistake)}" for cell, mistake in sorted(run["mistakes"].items()))
        row["grading_seconds"] += run["seconds"] or 0.0
    return {key: {"status": "; ".join(sorted(set(v["status"]))), "held_for_review": v["held_for_review"],
                  "flags": "; ".join(v["flags"]), "mistakes": "; ".join(v["mistakes"]),
                  "grading_seconds": round(v["grading_seconds"], 2)} for key, v in merged.items()}


# ---------------------------------------------------------------------------------------------- manual grading
def manual_columns(grades: list[dict], held: set) -> dict[tuple[str, str], dict]:
    """(assignment, student) -> {manual_score, waiting_for_grader} (see the module doc)."""
    merged: dict[tuple[str, str], dict] = {}
    for g in sorted(grades, key=lambda g: (g["notebook"], g["cell"])):
        row = merged.setdefault((g["assignment"], g["student"]), {"manual_score": None, "waiting": []})
        if g["needs_manual_grade"]:
            if (g["assignment"], g["notebook"], g["student"]) in held:
                entry = f"{g['notebook']}: held for review"
            else:
                entry = g["cell"] if g["notebook"] == g["assignment"] else f"{g['notebook']}:{g['cell']}"
            if entry not in row["waiting"]:
                row["waiting"].append(entry)
        elif g["manual_score"] is not None:  # given by a grader (or a reviewer who lifted a hold)
            row["manual_score"] = (row["manual_score"] or 0.0) + float(g["manual_score"])
    return {key: {"manual_score": "" if v["manual_score"] is None else round(v["manual_score"], 2),
                  "waiting_for_grader": "; ".join(v["waiting"])} for key, v in merged.items()}


def waiting_line(waiting: list[dict]) -> str:
    """One line for the instructor: how many answers in how many notebooks wait, and where to grade them."""
    if not waiting:
        return "manual grading: nothing waits for a grader"
    notebooks = {(w["assignment"], w["notebook"], w["student"]) for w in waiting}
    return (f"manual grading: {len(waiting)} answer(s) in {len(notebooks)} notebook(s) wait for a grader; "
            "give their scores in formgrader (Manual Grading), then run `autograder export` and `autograder report` "
            "again (the report's 'Waiting for manual grading' lists them, with each rubric)")


class AnnotatedCsvExportPlugin(CsvExportPlugin):
    """nbgrader's CSV export, then our columns appended to every row."""

    def export(self, gradebook: Gradebook) -> None:
        dest = self.to or "grades.csv"
        super().export(gradebook)
        # str(url) masks a password ("***"): the runs table needs the real one
        runs = run_rows(gradebook.engine.url.render_as_string(hide_password=False))
        extra = extra_columns(runs)
        manual = manual_columns(grade_rows(gradebook), held_notebooks(runs))
        with open(dest, newline="") as fh:
            rows = list(csv.DictReader(fh))
            fieldnames = list(rows[0].keys()) if rows else _nbgrader_columns(dest)
        out = io.StringIO()
        writer = csv.DictWriter(out, fieldnames=fieldnames + EXTRA_COLUMNS, lineterminator="\n")
        writer.writeheader()
        for row in rows:
            key = (row["assignment"], row["student_id"])
            row.update(extra.get(key, {c: "" for c in RUN_COLUMNS}))
            row.update(manual.get(key, {c: "" for c in MANUAL_COLUMNS}))
            writer.writerow(row)
        Path(dest).write_text(out.getvalue())


def _nbgrader_columns(path: str) -> list[str]:
    with open(path) as fh:
        return fh.readline().strip().split(",")


def export_grades(course_dir, to: str | Path = "grades.csv", db_url: str | None = None,
                  assignments=None, students=None) -> Path:
    course_dir = Path(course_dir).resolve()
    plugin = AnnotatedCsvExportPlugin(to=str(to), assignment=list(assignments or []), student=list(students or []))
    with open_gradebook(course_dir, db_url=db_url) as gb:
        plugin.export(gb)
    return Path(to)


# ------------------------------------------------------------------------------------------ LMS gradebook imports
CANVAS_STUDENT_COLUMNS = ["Student", "ID", "SIS User ID", "SIS Login ID", "Section"]
CANVAS_POINTS_ROW = "Points Possible"
MOODLE_STUDENT_COLUMNS = ["First name", "Last name", "ID number", "Email address"]


def _number(value: float) -> str:
    return f"{round(float(value), 2):g}"


def canvas_rows(assignments, students, scores, assignment_ids: dict | None = None) -> list[list[str]]:
    ids = assignment_ids or {}
    titles = [f"{name} ({ids[name]})" if name in ids else name for name, _ in assignments]
    rows = [CANVAS_STUDENT_COLUMNS + titles,
            [CANVAS_POINTS_ROW] + [""] * (len(CANVAS_STUDENT_COLUMNS) - 1) + [_number(m) for _, m in assignments]]
    for s in students:
        name = ", ".join(p for p in (s.last_name, s.first_name) if p) or s.id
        rows.append([name, s.lms_user_id or "", s.id, s.email or "", ""]
                    + [_number(scores[(a, s.id)]) for a, _ in assignments])
    return rows


def moodle_rows(assignments, students, scores) -> list[list[str]]:
    rows = [MOODLE_STUDENT_COLUMNS + [name for name, _ in assignments]]
    for s in students:
        rows.append([s.first_name or "", s.last_name or "", s.id, s.email or ""]
                    + [_number(scores[(a, s.id)]) for a, _ in assignments])
    return rows


def export_lms(course_dir, to: str | Path, fmt: str, db_url: str | None = None, assignments=None,
               assignment_ids: dict | None = None) -> Path:
    """Write the Canvas or Moodle gradebook import CSV (see the module doc); returns its path."""
    if fmt not in LMS_ROWS:
        raise ValueError(f"unknown LMS format {fmt!r}: {' or '.join(LMS_ROWS)}")
    course_dir = Path(course_dir).resolve()
    with open_gradebook(course_dir, db_url=db_url) as gb:
        columns, students, scores = final_scores(gb, assignments)
        rows = LMS_ROWS[fmt](columns, students, scores, assignment_ids)
    with open(to, "w", newline="", encoding="utf-8") as fh:
        csv.writer(fh, lineterminator="\n").writerows(rows)
    return Path(to)


# LMS format -> its rows (assignments, students, scores, assignment ids) -> list of CSV rows
LMS_ROWS = {"canvas": canvas_rows,
            "moodle": lambda assignments, students, scores, _ids=None: moodle_rows(assignments, students, scores)}


@dataclass(frozen=True)
class ExportFormat:
    """One choice of `autograder export --format`: its default file and what writes it."""

    default_name: str
    help: str
    write: Callable[..., Path]  # (course_dir, to, db_url=...) -> the path written


FORMATS = {
    "csv": ExportFormat("grades.csv", "nbgrader's columns + ours", export_grades),
    **{fmt: ExportFormat(f"{fmt}_grades.csv", f"{fmt.capitalize()}'s gradebook import layout",
                         lambda course_dir, to, db_url=None, _fmt=fmt: export_lms(course_dir, to, _fmt, db_url=db_url))
       for fmt in LMS_ROWS},
}
