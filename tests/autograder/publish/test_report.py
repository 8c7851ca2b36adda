"""`autograder report`: the course page (class matrix, late work, held submissions, manual grading, copied work) and
the assignment page (score distribution per grade cell, common mistakes with an anonymised example).

The class is graded for real on the synthetic course plus one exercise judged by a hidden check of the course
(`hand_in("make_causal_mask", ...)`, 2 points: its diagnosed mistake reaches the report as a catalogue id) and one
manually graded written answer (a markdown cell, as nbgrader's "Manually graded answer"): ann (right), ben (three
mistakes, one of them the upper-triangular causal mask), cat (monkeypatches: held), dan
(right but a day late; the course zeroes late work), eve (on the roster, nothing handed in) and fay (ann's
code, renamed: a copy). A manual score given afterwards through nbgrader's gradebook, as formgrader does, shows
in the report and in `autograder export`.
"""
from __future__ import annotations

import csv
import datetime as dt
import re
from html import escape as esc

import nbformat
import pytest
from nbformat.v4 import new_code_cell, new_markdown_cell

from autograder.cli import main
from autograder.gradebook.store import open_gradebook
from autograder.publish import similarity as sim
from autograder.grade.engine import grade
from autograder.course.units import GiB
from autograder.sandbox.limits import Limits
from coursekit.mistakes import MISTAKES
from synthetic_course import SYNTHETIC_ASSIGNMENT, release_assignment, synthetic_course, synthetic_submission

DUE = dt.datetime(2026, 10, 1, 12, 0)
STAMP = "%Y-%m-%d %H:%M:%S.%f"
LIMITS = Limits(cell_timeout=20, notebook_timeout=90, memory_bytes=3 * GiB, startup_timeout=90)
ANSWER_ID = "written_answer"
NORMALIZE = '''total = 0.0
    for value in x:
        total = total + value
    if total == 0:
        raise ValueError("cannot normalize a vector that sums to zero")
    weights = np.array([value / total for value in x])
    return weights'''
CAUSAL_MASK = '''import torch


def make_causal_mask(size, device=None):
    ### BEGIN SOLUTION
    return torch.ones(size, size, dtype=torch.bool, device=device).tril()
    ### END SOLUTION'''
JUDGED = ("# Autograder test (2 points).\n### BEGIN HIDDEN TESTS\nfrom coursekit.probe import hand_in\n"
          "hand_in('make_causal_mask', make_causal_mask)\n### END HIDDEN TESTS")


def manual_course(root):
    """The synthetic course with one judged exercise (2 points) and one manually graded written answer (3 points),
    released."""
    course = synthetic_course(root, release=False)
    (course / "nbgrader_config.py").write_text((course / "nbgrader_config.py").read_text()
                                               + "c.LateSubmissionPlugin.penalty_method = 'zero'\n")
    path = course / "source" / SYNTHETIC_ASSIGNMENT / f"{SYNTHETIC_ASSIGNMENT}.ipynb"
    nb = nbformat.read(path, as_version=4)
    nb.cells[-1:-1] = [
        new_code_cell(CAUSAL_MASK, metadata={"nbgrader": {"grade_id": "causal_mask", "grade": False, "solution": True,
                                                          "locked": False, "schema_version": 3, "task": False}}),
        new_code_cell(JUDGED, metadata={"nbgrader": {"grade_id": "test_causal_mask", "grade": True, "solution": False,
                                                     "locked": True, "points": 2, "schema_version": 3,
                                                     "task": False}})]
    nb.cells.insert(-1, new_markdown_cell(
        "Why divide by the sum?\n\n=== BEGIN MARK SCHEME ===\nSo that it sums to one.\n=== END MARK SCHEME ===",
        metadata={"nbgrader": {"grade_id": ANSWER_ID, "grade": True, "solution": True, "locked": False,
                               "points": 3, "schema_version": 3, "task": False}}))
    nbformat.write(nb, path)
    release_assignment(course, SYNTHETIC_ASSIGNMENT)
    return course


def _with_normalize(text: str, body: str) -> str:
    nb = nbformat.reads(text, as_version=4)
    for cell in nb.cells:
        if cell.metadata.get("nbgrader", {}).get("grade_id") == "normalize":
            cell.source = re.sub(r"return x / x\.sum\(\)", body, cell.source)
    return nbformat.writes(nb)


def _with_causal_mask(text: str, body: str = "return torch.ones(size, size, dtype=torch.bool, device=device).tril()"):
    """The judged exercise answered with `body` (the release leaves it as a stub)."""
    nb = nbformat.reads(text, as_version=4)
    for cell in nb.cells:
        if cell.metadata.get("nbgrader", {}).get("grade_id") == "causal_mask":
            cell.source = re.sub(r"# YOUR CODE HERE\s*\n\s*raise NotImplementedError\(\)", body, cell.source)
    return nbformat.writes(nb)


def _answered(text: str, answer: str = "So that the weights add up to one.") -> str:
    """The written answer filled in (an unchanged answer cell scores 0 with no manual grade, as in nbgrader)."""
    nb = nbformat.reads(text, as_version=4)
    for cell in nb.cells:
        if cell.metadata.get("nbgrader", {}).get("grade_id") == ANSWER_ID:
            cell.source = answer
    return nbformat.writes(nb)


@pytest.fixture(scope="module")
def graded(tmp_path_factory):
    root = tmp_path_factory.mktemp("report")
    course = manual_course(root / "course")
    with open_gradebook(course) as gb:
        gb.update_or_create_assignment(SYNTHETIC_ASSIGNMENT, duedate=DUE)
        for student in ("ann", "ben", "cat", "dan", "eve", "fay"):
            gb.update_or_create_student(student)
    solution = synthetic_submission(course, "solution")
    texts = {"ann": _with_normalize(solution, NORMALIZE), "ben": synthetic_submission(course, "mistake"),
             "cat": synthetic_submission(course, "monkeypatch"), "dan": solution,
             "fay": _with_normalize(solution, NORMALIZE.replace("total", "s").replace("value", "v"))}
    texts = {student: _with_causal_mask(text) for student, text in texts.items()}
    texts["ben"] = _with_causal_mask(synthetic_submission(course, "mistake"),
                                     "return torch.ones(size, size, dtype=torch.bool, device=device).triu()")
    for student, text in texts.items():
        text = _answered(text)
        folder = course / "submitted" / student / SYNTHETIC_ASSIGNMENT
        folder.mkdir(parents=True)
        (folder / f"{SYNTHETIC_ASSIGNMENT}.ipynb").write_text(text)
        when = DUE + (dt.timedelta(days=1) if student == "dan" else -dt.timedelta(hours=3))
        (folder / "timestamp.txt").write_text(when.strftime(STAMP))
    grade(course, SYNTHETIC_ASSIGNMENT, workers=2, limits=LIMITS)
    args = ["--course-dir", str(course)]
    codes = {"before": main(["report", *args])}  # before `autograder similarity`: nothing to link to yet
    before = (course / "reports" / "course" / "index.html").read_text()
    codes["similarity"] = main(["similarity", SYNTHETIC_ASSIGNMENT, *args])
    # the assignment page first: each page links to what `autograder similarity` wrote, in either order
    codes["assignment"] = main(["report", SYNTHETIC_ASSIGNMENT, *args])
    codes["course"] = main(["report", *args])
    return {"course": course, "root": root, "codes": codes, "before": before,
            "page": (course / "reports" / "course" / "index.html").read_text(),
            "assignment_page": (course / "reports" / SYNTHETIC_ASSIGNMENT / "index.html").read_text()}


def _text(page: str) -> str:
    return re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", page))


def _table_after(page: str, heading: str) -> str:
    start = page.index(heading)
    return page[start:page.index("</table>", start)]


def test_commands_succeed(graded):
    assert graded["codes"] == {"before": 0, "similarity": 0, "course": 0, "assignment": 0}


def test_pages_are_self_contained(graded):
    for page in (graded["page"], graded["assignment_page"]):
        assert not re.search(r"(src|href)=['\"]https?://", page)
        assert "<script src" not in page and "table.sortable" in page and "class='sortable'" in page
        images = re.findall(r"<img [^>]*src='([^']+)'", page)
        assert images and all(src.startswith("data:image/png;base64,") for src in images)


def test_course_matrix_has_every_student_and_totals(graded):
    page = graded["page"]
    assert "Scores per student and assignment" in page  # the heat map
    matrix = _table_after(page, "id='matrix'")
    for student in ("ann", "ben", "cat", "dan", "eve", "fay"):
        assert f"<td>{student}</td>" in matrix
    row = re.search(r"<tr><td>ann</td>(.*?)</tr>", matrix).group(1)
    assert re.findall(r">([\d.]+)<", row)[:2] == ["9", "9"]  # ps1 score, total (the written answer waits)
    assert re.search(r"<tr><td>eve</td><td class='num' data-sort='-1'>&ndash;</td><td class='num'>0</td>", matrix)
    assert "mean (submitted)" in matrix and "5 submitted" in matrix


def test_late_work_and_penalty(graded):
    late = _table_after(graded["page"], "Late submissions (1)")
    assert "<td>dan</td>" in late and "24.0" in late  # a day late, the whole score taken
    dan = re.search(r"<tr><td>dan</td>(.*?)</tr>", _table_after(graded["page"], "id='matrix'")).group(1)
    assert re.findall(r">([\d.]+)<", dan)[0] == "0"


def test_held_and_manual_grading(graded):
    page = graded["page"]
    held = _table_after(page, "Held for review (1)")
    assert "<td>cat</td>" in held and "monkeypatch" in held
    manual = _table_after(page, "Waiting for manual grading (4)")  # ann, ben, dan, fay: cat is held instead
    assert ANSWER_ID in manual and "<td>cat</td>" not in manual


def test_copied_work_section(graded):
    page = graded["page"]
    section = page[page.index("id='similarity'"):page.index("id='figures'")]
    # ann and fay (the renamed copy) come first
    first = re.search(r"<tr><td><a href='[^']*#pair-1'>1</a></td><td>(\w+)</td><td>(\w+)</td><td>(\d+)%", section)
    assert first.groups()[:2] == ("ann", "fay") and int(first.group(3)) >= 90
    assert (graded["course"] / "reports" / SYNTHETIC_ASSIGNMENT / "similarity.html").exists()
    assert "../ps1/similarity.html" in section
    assert "href='similarity.html'" in graded["assignment_page"]  # written before the course page


def test_the_report_shows_the_similarity_check_it_finds_and_runs_none(graded):
    """The course page only shows what `autograder similarity` wrote: before it ran, it says how to run it, and the
    pairs it shows are that run's (the summary beside its page), not a comparison of its own."""
    before = graded["before"]
    section = before[before.index("id='similarity'"):before.index("id='figures'")]
    assert "ps1: not compared yet" in section and "autograder similarity ps1" in section
    assert "pair-1" not in section
    saved = sim.saved_similarity(graded["course"], SYNTHETIC_ASSIGNMENT)
    assert saved is not None
    result, include_reference = saved
    fresh = sim.similarity(graded["course"], SYNTHETIC_ASSIGNMENT)
    assert not include_reference and [(p.a, p.b, p.similarity, p.overlap) for p in result.pairs] == \
        [(p.a, p.b, p.similarity, p.overlap) for p in fresh.pairs]
    page = graded["page"]
    assert sim.pairs_table(result, link="../ps1/similarity.html") in page


def test_assignment_page_cells_and_mistakes_with_examples(graded):
    page = graded["assignment_page"]
    for text in ("Score distribution", "Pass rate per grade cell", "Score distribution per grade cell",
                 "Flagged submissions (1)", "held for review", "Grading time", "example (anonymised)"):
        assert text in page, text
    mistakes = _table_after(page, "diagnosed mistake</th>")
    # the judged cell's mistake, counted by its id and shown with the catalogue's text; the synthetic course's own
    # cells are plain nbgrader asserts, whose messages are not parsed for mistakes
    rows = re.findall(r"<tr><td>(\w+)</td><td class='mistake'>([^<]*)</td><td class='num'>(\d+)</td>", mistakes)
    assert [(cell, n) for cell, _, n in rows] == [("test_causal_mask", "1")]
    assert rows[0][1] == esc(MISTAKES["causal_mask.upper_triangle"].text)
    assert ".triu()" in mistakes  # ben's code, as the example ...
    assert "ben" not in _text(mistakes)  # ... without his id
    assert (graded["course"] / "reports" / SYNTHETIC_ASSIGNMENT / "cell_scores.png").stat().st_size > 1000


def test_manual_score_reaches_report_and_export(graded, tmp_path):
    """A score given to the written answer (as formgrader saves it) shows in the report and in every export."""
    course = graded["course"]
    with open_gradebook(course) as gb:
        answer = gb.find_grade(ANSWER_ID, SYNTHETIC_ASSIGNMENT, SYNTHETIC_ASSIGNMENT, "ann")
        answer.manual_score = 2.5
        answer.needs_manual_grade = False
        gb.db.commit()
    assert main(["report", "--course-dir", str(course)]) == 0
    page = (course / "reports" / "course" / "index.html").read_text()
    assert "Waiting for manual grading (3)" in page
    ann = re.search(r"<tr><td>ann</td>(.*?)</tr>", _table_after(page, "id='matrix'")).group(1)
    assert re.findall(r">([\d.]+)<", ann)[0] == "11.5"
    assert main(["export", "--course-dir", str(course), "--to", str(tmp_path / "g.csv")]) == 0
    assert main(["export", "--course-dir", str(course), "--format", "canvas", "--to", str(tmp_path / "c.csv")]) == 0
    rows = {r["student_id"]: r for r in csv.DictReader((tmp_path / "g.csv").open())}
    assert float(rows["ann"]["score"]) == 11.5
    canvas = list(csv.reader((tmp_path / "c.csv").open()))
    assert canvas[1][5] == "12"  # Points Possible: 9 autograded + 3 written
    assert [r[5] for r in canvas if r[2] == "ann"] == ["11.5"]
