"""`make demo` = `autograder demo`: the whole pipeline on a sample class, in a copy of the course.

demo_output/ (or --output) holds a fresh copy of course/source and nbgrader_config.py, so the instructor's own
gradebook is never touched; each run starts that folder afresh (idempotent). Steps: release -> build the
students (autograder.demo.students.demo_class) -> collect -> grade in parallel -> feedback -> export ->
similarity -> report, then a summary table and the paths of the CSV, the feedback and, last, the course page.

The class (`autograder.demo.students.demo_class`) holds one pair of copied solutions (`with_copied_pair`):
`reference` adds a helper function of her own to her first solution cell, and `hostile` hands in her notebook
with the helper moved to the last solution cell, variables renamed and other comments (hostile is held for
review, so its score stays 0; the helper changes no score). Every demo student is an edit of the reference, so the
similarity check ignores the reference solution too (`include_reference`): what remains is what the students wrote
themselves, and the copied helper is found in every assignment.

Written answers (hand-graded markdown cells, `autograder.course.written`): every student but `blank` writes a short answer
of their own words in each of them (`with_written_answers`: the first sentences of the model answer, in a
student's phrasing; the copy hands in the original's answers); `blank` leaves "YOUR ANSWER HERE", which scores 0
on its own. No student hands in the model answer or the rubric of the source notebook. The written answers change
no automatic score; they wait for a grader, and the summary says how many (`autograder.publish.export.waiting_line`).
"""
from __future__ import annotations

import shutil
import time
from pathlib import Path

import nbformat

from autograder.course.coursedir import REPO_ROOT, assignments_in_source, default_course_dir


def prepare_course(output: Path, assignments: list[str]) -> Path:
    course = output / "course"
    if output.exists():
        shutil.rmtree(output)
    (course / "source").mkdir(parents=True)
    real = default_course_dir()
    shutil.copy2(real / "nbgrader_config.py", course / "nbgrader_config.py")
    for assignment in assignments:
        shutil.copytree(real / "source" / assignment, course / "source" / assignment,
                        ignore=shutil.ignore_patterns(".ipynb_checkpoints", "__pycache__"))
    return course


def run_demo(assignments=None, students: int = 6, output: Path | None = None, workers: int | None = None) -> int:
    from autograder.submissions.collect import collect
    from autograder.publish.export import export_grades, waiting_line
    from autograder.gradebook.queries import waiting_for_grader
    from autograder.publish.feedback import generate_feedback
    from autograder.grade.engine import grade_many
    from autograder.publish.release import release
    from autograder.publish.report import write_report
    from autograder.checks import stand_ins
    from autograder.publish.similarity import write_similarity

    started = time.monotonic()
    available = assignments_in_source(default_course_dir())
    assignments = assignments or available
    unknown = sorted(set(assignments) - set(available))
    if unknown:
        print(f"autograder demo: unknown assignment(s) {unknown}; available: {available}")
        return 2
    output = Path(output or REPO_ROOT / "demo_output").resolve()
    course = prepare_course(output, assignments)
    print(f"[1/6] release {len(assignments)} assignment(s) into {course}")
    release(assignments, course_root=course, exercises_dir=output / "exercises")

    print(f"[2/6] build a class of {max(6, students)} students")
    inbox = output / "inbox"
    what_they_did = build_class(course, assignments, students, inbox)

    print("[3/6] collect")
    collected = collect(course, inbox)
    print("      " + collected.line())

    print("[4/6] grade")
    # a newcomer's machine may lack cgroups (not root, a container): the demo grades anyway and says so in one line
    summaries = grade_many(course, assignments, workers=workers, allow_unenforced_limits=True)
    for summary in summaries:
        print("      " + summary.line())

    print("[5/6] feedback and export")
    feedback_count = sum(len(generate_feedback(course, a)["written"]) for a in assignments)
    csv_path = export_grades(course, output / "grades.csv")

    print("[6/6] copied work and report")
    for assignment in assignments:  # the similarity pages, which the report pages link to
        write_similarity(course, assignment, include_reference=True, lent_code=stand_ins.code_for(assignment))
    course_page = write_report(course)
    pages = [write_report(course, a) for a in assignments]

    print()
    print(summary_table(summaries, what_they_did))
    print()
    print(f"demo finished in {time.monotonic() - started:.0f} s")
    print(f"  grades:   {csv_path}")
    print(f"  feedback: {feedback_count} HTML file(s) under {course / 'feedback'}")
    print(f"  copied:   {copied_work(course, assignments)}")
    print(f"  {waiting_line(waiting_for_grader(course, assignments=assignments))}")
    print(f"  per assignment: {', '.join(str(p) for p in pages)}")
    print(f"  report:   {course_page}")
    return 0


def build_class(course: Path, assignments, students: int, inbox: Path) -> dict[tuple[str, str], str]:
    """The demo class (`autograder.demo.students.demo_class`, built from each assignment's source and release)
    written into `inbox` as a class hands it in, `<student>/<assignment>/<assignment>.ipynb`; returns (student,
    assignment) -> what that student did."""
    from autograder.demo.students import demo_class

    what_they_did: dict[tuple[str, str], str] = {}
    for assignment in assignments:
        source_nb = nbformat.read(course / "source" / assignment / f"{assignment}.ipynb", as_version=4)
        release_nb = nbformat.read(course / "release" / assignment / f"{assignment}.ipynb", as_version=4)
        built = demo_class(source_nb, release_nb, students)
        for student, (text, note) in built.items():
            target = inbox / student / assignment / f"{assignment}.ipynb"
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(text)
            what_they_did[(student, assignment)] = note
    return what_they_did


def copied_work(course: Path, assignments) -> str:
    """The reported pairs of the similarity check, per assignment, from its CSV."""
    import csv

    found = []
    for assignment in assignments:
        path = course / "reports" / assignment / "similarity.csv"
        if path.exists():
            with open(path, newline="") as fh:
                found += [f"{r['student_a']} ~ {r['student_b']} {100 * float(r['similarity']):.0f}% ({assignment})"
                          for r in csv.DictReader(fh) if r["reported"] == "True"]
    return "; ".join(found) or "no pair above the threshold"


def summary_table(summaries, what_they_did) -> str:
    rows = [f"{'student':<14} {'assignment':<28} {'score':>11}  {'status':<24} what the student did"]
    for summary in summaries:
        for row in summary.graded:
            rows.append(f"{row['student']:<14} {row['assignment']:<28} {row['score']:>5g}/{row['max_score']:<5g}  "
                        f"{row['status']:<24} {what_they_did.get((row['student'], row['assignment']), '')}")
    return "\n".join(rows)
