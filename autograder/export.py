"""Grades as CSV: nbgrader's own CSV export (its columns unchanged), plus our columns at the end.

Added columns (joined on assignment + student): `status`, `held_for_review`, `flags` (codes, ";"-joined),
`mistakes` ("grade_id: mistake" ";"-joined), `grading_seconds`. Exposed to nbgrader as an export plugin
(`nbgrader export --exporter=autograder.export.AnnotatedCsvExportPlugin`) and used by `autograder export`.
"""
from __future__ import annotations

import csv
import io
from pathlib import Path

from nbgrader.api import Gradebook
from nbgrader.plugins.export import CsvExportPlugin

from autograder.coursedir import course_id, default_db_url
from autograder.grade.gradebook import RunsTable

EXTRA_COLUMNS = ["status", "held_for_review", "flags", "mistakes", "grading_seconds"]


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
        row["mistakes"].extend(f"{cell}: {text}" for cell, text in sorted(run["mistakes"].items()))
        row["grading_seconds"] += run["seconds"] or 0.0
    return {key: {"status": "; ".join(sorted(set(v["status"]))), "held_for_review": v["held_for_review"],
                  "flags": "; ".join(v["flags"]), "mistakes": "; ".join(v["mistakes"]),
                  "grading_seconds": round(v["grading_seconds"], 2)} for key, v in merged.items()}


class AnnotatedCsvExportPlugin(CsvExportPlugin):
    """nbgrader's CSV export, then our columns appended to every row."""

    def export(self, gradebook: Gradebook) -> None:
        dest = self.to or "grades.csv"
        super().export(gradebook)
        runs = RunsTable(str(gradebook.engine.url))
        try:
            extra = extra_columns(runs.all())
        finally:
            runs.dispose()
        with open(dest, newline="") as fh:
            rows = list(csv.DictReader(fh))
            fieldnames = list(rows[0].keys()) if rows else _nbgrader_columns(dest)
        out = io.StringIO()
        writer = csv.DictWriter(out, fieldnames=fieldnames + EXTRA_COLUMNS, lineterminator="\n")
        writer.writeheader()
        for row in rows:
            row.update(extra.get((row["assignment"], row["student_id"]),
                                 {c: "" for c in EXTRA_COLUMNS}))
            writer.writerow(row)
        Path(dest).write_text(out.getvalue())


def _nbgrader_columns(path: str) -> list[str]:
    with open(path) as fh:
        return fh.readline().strip().split(",")


def export_grades(course_dir, to: str | Path = "grades.csv", db_url: str | None = None,
                  assignments=None, students=None) -> Path:
    course_dir = Path(course_dir).resolve()
    plugin = AnnotatedCsvExportPlugin(to=str(to), assignment=list(assignments or []), student=list(students or []))
    with Gradebook(db_url or default_db_url(course_dir), course_id(course_dir)) as gb:
        plugin.export(gb)
    return Path(to)
