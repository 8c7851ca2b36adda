"""Exercises ask for thought: at least half of a notebook's automatic points sit on exercises whose statement does
not contain the code of its answer (issue 35, for 08 and 09; 10 is held to the same).

An exercise's statement is the prose above its solution cell, without the folded hints (`<details>` blocks: a
student opens them only when stuck). It "contains the code" when its code spans (inline and fenced) hold at least
`DICTATED` of the reference answer's token 4-grams (`self.` dropped on both sides, comments ignored): a statement
that lists the answer's lines, even reordered or split across bullets, shares most of them; one that gives names,
shapes and behaviour shares few.
"""
from __future__ import annotations

import re
from pathlib import Path

import nbformat
import pytest

COURSE = Path(__file__).resolve().parents[2] / "course"
DICTATED = 0.25
THOUGHT_SHARE = 50  # of the 100 automatic points
NOTEBOOKS = ["08_gpt_language_model", "09_modern_block", "10_translation"]

_TOKEN = re.compile(r"[A-Za-z_][A-Za-z_0-9]*|\d+\.?\d*|\*\*|//|==|<=|>=|!=|[-+*/%@()\[\]{}.,:=<>]")


def _tokens(code: str) -> list[str]:
    return _TOKEN.findall(re.sub(r"\bself\.", "", code))


def _grams(tokens: list[str], n: int = 4) -> list[tuple]:
    return [tuple(tokens[i:i + n]) for i in range(len(tokens) - n + 1)]


def _code_spans(markdown: str) -> str:
    markdown = re.sub(r"<details>.*?</details>", "", markdown, flags=re.S)
    fenced = re.findall(r"```.*?```", markdown, flags=re.S)
    inline = re.findall(r"`([^`\n]+)`", re.sub(r"```.*?```", "", markdown, flags=re.S))
    return "\n".join(fenced + inline)


def _answer(source: str) -> str:
    """The lines between BEGIN and END SOLUTION, without comments."""
    lines, inside = [], False
    for line in source.splitlines():
        if "BEGIN SOLUTION" in line or "END SOLUTION" in line:
            inside = "BEGIN" in line
        elif inside:
            lines.append(line.split("#")[0])
    return "\n".join(lines)


def dictated_share(statement: str, answer_source: str) -> float:
    """The share of the answer's token 4-grams that the statement's code spans hold."""
    spoken = set(_grams(_tokens(_code_spans(statement))))
    answer = _grams(_tokens(_answer(answer_source)))
    return sum(g in spoken for g in answer) / max(1, len(answer))


def exercises(assignment: str) -> list[tuple[str, float, float]]:
    """(exercise, points, dictated share) for each solution cell of a source notebook."""
    cells = nbformat.read(COURSE / "source" / assignment / f"{assignment}.ipynb", as_version=4).cells
    points = {c.metadata["nbgrader"]["grade_id"]: c.metadata["nbgrader"].get("points", 0) for c in cells
              if c.metadata.get("nbgrader", {}).get("grade")}
    rows = []
    for at, cell in enumerate(cells):
        meta = cell.metadata.get("nbgrader", {})
        if cell.cell_type != "code" or not meta.get("solution"):
            continue
        above = at - 1
        while above >= 0 and cells[above].cell_type == "markdown":
            above -= 1
        statement = "\n".join(c.source for c in cells[above + 1:at])
        rows.append((meta["grade_id"], points[f"test_{meta['grade_id']}"], dictated_share(statement, cell.source)))
    return rows


@pytest.mark.parametrize("assignment", NOTEBOOKS)
def test_half_of_the_points_ask_for_thought(assignment):
    rows = exercises(assignment)
    thought = sum(points for _, points, share in rows if share < DICTATED)
    table = ", ".join(f"{name} {points:g} pts {share:.0%}" for name, points, share in rows)
    assert thought >= THOUGHT_SHARE, f"{assignment}: {thought:g} points on undictated exercises ({table})"


def test_a_statement_that_lists_the_answer_is_measured_as_dictated():
    """The measure has teeth: each 08 and 09 answer, pasted into its statement (whole, or as one line per bullet with
    `self.` and a different order), counts as dictated; the same statement without it does not."""
    for assignment in NOTEBOOKS[:2]:
        cells = nbformat.read(COURSE / "source" / assignment / f"{assignment}.ipynb", as_version=4).cells
        for cell in cells:
            if cell.cell_type != "code" or not cell.metadata.get("nbgrader", {}).get("solution"):
                continue
            lines = [line.strip() for line in _answer(cell.source).splitlines() if line.strip()]
            pasted = "Write it:\n```python\n" + "\n".join(lines) + "\n```"
            bullets = "\n".join(f"* `{line}`;" for line in reversed(lines))
            assert dictated_share(pasted, cell.source) > 0.95
            assert dictated_share(bullets, cell.source) >= DICTATED
            assert dictated_share("<details><summary>Hint</summary>\n\n" + pasted + "\n</details>",
                                  cell.source) == 0


def test_lm_loss_no_longer_prints_its_answer():
    """Issue 35's example: 08's statement gave `lm_loss`'s answer verbatim; it now says what, and the hint how."""
    old = ("**Exercise 6 (5 points).** `lm_loss(logits, targets)` with `logits (B, T, V)`, `targets (B, T)` returns\n"
           "`F.cross_entropy(logits.reshape(-1, V), targets.reshape(-1))`, a scalar tensor.")
    cells = nbformat.read(COURSE / "source" / NOTEBOOKS[0] / f"{NOTEBOOKS[0]}.ipynb", as_version=4).cells
    answer = next(c.source for c in cells if c.metadata.get("nbgrader", {}).get("grade_id") == "lm_loss")
    assert dictated_share(old, answer) >= DICTATED
    assert dict((name, share) for name, _, share in exercises(NOTEBOOKS[0]))["lm_loss"] < DICTATED
