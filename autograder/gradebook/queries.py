"""The gradebook's reads: every question that export, report, the CLI and the demo ask of nbgrader's gradebook and
of our runs table, answered here once. Those modules only format what these functions return; the one writer is
`gradebook.py`.

Two rules live here and nowhere else:
- **final score**: a submission's score minus its late penalty, never below 0 (`final_score`), as nbgrader's own
  CSV export computes it;
- **waits for a grader**: a grade nbgrader marks `needs_manual_grade`, outside the notebooks held for review (those
  are reviewed whole) (`waits_for_grader`).
"""
from __future__ import annotations

from pathlib import Path

from nbgrader.api import (Assignment, Grade, GradeCell, Gradebook, MissingEntry, Notebook, SubmittedAssignment,
                          SubmittedNotebook)

from autograder.course.coursedir import course_id, default_db_url
from autograder.gradebook.store import RunsTable, open_gradebook


def final_score(submission) -> float:
    """nbgrader's final score of a `SubmittedAssignment`: score minus late penalty, never below 0."""
    return max(0.0, (submission.score or 0.0) - (submission.late_submission_penalty or 0.0))


def final_scores(gb: Gradebook, assignments=None) -> tuple[list, list, dict]:
    """(assignments [(name, max_score)], students, {(assignment, student): final score, 0 when nothing was
    submitted})."""
    chosen = [a for a in gb.assignments if not assignments or a.name in assignments]
    students = sorted(gb.students, key=lambda s: s.id)
    scores = {}
    for a in chosen:
        for student in students:
            try:
                scores[(a.name, student.id)] = final_score(gb.find_submission(a.name, student.id))
            except MissingEntry:
                scores[(a.name, student.id)] = 0.0
    return [(a.name, a.max_score or 0.0) for a in chosen], students, scores


def roster(gb: Gradebook) -> list[str]:
    """Every student id of the gradebook, sorted."""
    return sorted(s.id for s in gb.students)


def submission_results(gb: Gradebook, assignment: str | None = None) -> tuple[dict, list[dict], list[dict]]:
    """({assignment: max score}, one dict per submission, one dict per grade), of one assignment or all, in the
    gradebook's order. A submission: assignment, student, score (before the late penalty), final (`final_score`),
    penalty, max_score, timestamp, duedate, seconds_late. A grade: assignment, student, cell, cell_type, max_score,
    score (nbgrader's: the manual score when given, else the automatic one)."""
    maxima, submissions, grades = {}, [], []
    for a in gb.assignments:
        if assignment and a.name != assignment:
            continue
        maxima[a.name] = a.max_score or 0.0
        for sub in a.submissions:
            submissions.append({"assignment": a.name, "student": sub.student.id, "score": sub.score or 0.0,
                                "final": final_score(sub), "penalty": sub.late_submission_penalty or 0.0,
                                "max_score": a.max_score, "timestamp": sub.timestamp, "duedate": sub.duedate,
                                "seconds_late": sub.total_seconds_late})
            for nb in sub.notebooks:
                for grade in nb.grades:
                    grades.append({"assignment": a.name, "student": sub.student.id, "cell": grade.name,
                                   "cell_type": grade.cell.cell_type, "max_score": grade.max_score,
                                   "score": grade.score})
    return maxima, submissions, grades


def run_rows(db_url: str, assignment: str | None = None) -> list[dict]:
    """Our runs table's rows (status, held, flags, messages, mistakes, notes, seconds), of one assignment or all."""
    with RunsTable(db_url) as runs:
        return runs.all(assignment)


def grade_rows(gb: Gradebook, assignments=None) -> list[dict]:
    """Every grade of every submission, one query: assignment, notebook, student, cell, max_score, auto_score,
    manual_score, needs_manual_grade."""
    query = (gb.db.query(Assignment.name, Notebook.name, SubmittedAssignment.student_id, GradeCell.name,
                         GradeCell.max_score, Grade.auto_score, Grade.manual_score, Grade.needs_manual_grade)
             .select_from(Grade)
             .join(GradeCell, Grade.cell_id == GradeCell.id)
             .join(SubmittedNotebook, Grade.notebook_id == SubmittedNotebook.id)
             .join(SubmittedAssignment, SubmittedNotebook.assignment_id == SubmittedAssignment.id)
             .join(Notebook, SubmittedNotebook.notebook_id == Notebook.id)
             .join(Assignment, Notebook.assignment_id == Assignment.id)
             .filter(Assignment.course_id == gb.course_id))
    if assignments:
        query = query.filter(Assignment.name.in_(list(assignments)))
    keys = ("assignment", "notebook", "student", "cell", "max_score", "auto_score", "manual_score",
            "needs_manual_grade")
    return [dict(zip(keys, row)) for row in query.all()]


def held_notebooks(runs: list[dict]) -> set[tuple[str, str, str]]:
    """(assignment, notebook, student) of the notebooks held for review (our runs table)."""
    return {(r["assignment"], r["notebook"], r["student"]) for r in runs if r["held"]}


def waits_for_grader(grade: dict, held: set) -> bool:
    """A grade (a `grade_rows` dict) that a grader still has to score, outside the notebooks held for review (those
    are reviewed whole)."""
    return bool(grade["needs_manual_grade"]) and (grade["assignment"], grade["notebook"], grade["student"]) not in held


def waiting_for_grader(course_dir, db_url: str | None = None, assignments=None) -> list[dict]:
    """The grades that wait for a grader: one dict per cell (assignment, notebook, student, cell, max_score,
    auto_score, ...)."""
    course_dir = Path(course_dir).resolve()
    db_url = db_url or default_db_url(course_dir)
    held = held_notebooks(run_rows(db_url))
    with open_gradebook(course_dir, db_url=db_url) as gb:
        grades = grade_rows(gb, assignments)
    return [g for g in grades if waits_for_grader(g, held)]
