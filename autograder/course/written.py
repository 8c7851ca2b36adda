"""Written answers (issue #13): hand-graded "why" questions, the course's convention in one place.

A written answer is a markdown cell with nbgrader's `grade` and `solution` set (formgrader's "Manually graded
answer"), grade_id `written_<name>`, right after the prose cell that asks the question. In course/source its text
is for graders only:

    **Model answer.** <2-5 sentences>

    **Rubric (5 points).** 2 points: <criterion>. 2 points: <criterion>. 1 point: <criterion>.

The rubric's points match the cell's nbgrader points and its criteria add up to them. nbgrader's ClearSolutions
replaces the whole cell by the course's text stub ("YOUR ANSWER HERE") in the release. When grading, an answer
left as released scores 0 on its own (nbgrader's checksum rule); any other answer waits for a grader (formgrader).
"""
from __future__ import annotations

import dataclasses
import re
from pathlib import Path

import nbformat

from autograder.course import cells
from autograder.course.cells import is_grade, is_written, points  # noqa: F401 -- is_written: read here by the tests

PREFIX = "written_"
TEXT_STUB = "YOUR ANSWER HERE"  # course/nbgrader_config.py: ClearSolutions.text_stub
MODEL_HEADING = "**Model answer.**"
RUBRIC_HEADING = re.compile(r"\*\*Rubric \((\d+(?:\.\d+)?) points?\)\.\*\*")
CRITERION = re.compile(r"(?<![\w.])(\d+(?:\.\d+)?) points?:")


@dataclasses.dataclass(frozen=True)
class AnswerKey:
    """What a grader needs for one written answer: the question, the model answer, the rubric."""
    grade_id: str
    points: float
    question: str
    model_answer: str
    rubric: str  # the criteria, without the heading

    @property
    def criteria_points(self) -> list[float]:
        return [float(p) for p in CRITERION.findall(self.rubric)]


def written_cells(nb) -> list:
    return [cell for cell in nb.cells if is_written(cell)]


def automatic_points(nb) -> float:
    """The points of the grade cells that the autograder scores (everything but the written answers)."""
    return sum(points(c) for c in nb.cells if is_grade(c) and not is_written(c))


def written_points(nb) -> float:
    return sum(points(c) for c in written_cells(nb))


def split_key(source: str) -> tuple[str, float, str]:
    """(model answer, rubric points, rubric criteria) of a source answer cell; ValueError when not in the format."""
    text = source.strip()
    if not text.startswith(MODEL_HEADING):
        raise ValueError(f"a written answer's source starts with {MODEL_HEADING!r}")
    heading = RUBRIC_HEADING.search(text)
    if heading is None:
        raise ValueError("a written answer's source has a '**Rubric (N points).**' paragraph after the model answer")
    model = text[len(MODEL_HEADING):heading.start()].strip()
    rubric = text[heading.end():].strip()
    if not model or not rubric:
        raise ValueError("a written answer's model answer and rubric are both non-empty")
    return model, float(heading.group(1)), rubric


def answer_keys(nb) -> dict[str, AnswerKey]:
    """grade_id -> AnswerKey for every written answer of a SOURCE notebook (ValueError on a malformed one)."""
    keys = {}
    for index, cell in enumerate(nb.cells):
        if not is_written(cell):
            continue
        grade_id = cells.grade_id(cell)
        try:
            model, _, rubric = split_key(cell.source)
        except ValueError as exc:
            raise ValueError(f"{grade_id}: {exc}") from None
        question = nb.cells[index - 1].source if index and nb.cells[index - 1].cell_type == "markdown" else ""
        keys[grade_id] = AnswerKey(grade_id, points(cell), question, model, rubric)
    return keys


def source_answer_keys(course_dir: Path, assignment: str, notebook: str) -> dict[str, AnswerKey]:
    """The answer keys of course_dir/source/<assignment>/<notebook>.ipynb; {} when it is missing or malformed."""
    path = Path(course_dir) / "source" / assignment / f"{notebook}.ipynb"
    try:
        return answer_keys(nbformat.read(path, as_version=4))
    except (OSError, ValueError, KeyError):
        return {}


def sentences(text: str) -> list[str]:
    """Plain sentence split (on '. ', '? ', '! ' followed by a capital or a formula), newlines joined."""
    flat = re.sub(r"\s+", " ", text).strip()
    return [s for s in re.split(r"(?<=[.?!])\s+(?=[A-Z$(])", flat) if s]
