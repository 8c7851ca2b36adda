"""Door 4 of #31: every edge case a hidden check scores is in the catalogue, tried by the public self-check of its
topic, stated in its notebook, and exercised by a test; the three lists are derived from the code, not typed here.

- hidden: the criterion ids the hidden checks use (`edge_case("<id>")`, `expect_raises(..., criterion="<id>")`)
  in autograder/checks/<the api's check module>.py;
- public: the same in coursekit/checks/<topic>.py;
- stated: the catalogue's `stated` phrase in the markdown of the notebook (course/source) of the api's exercise;
- tested: each id appears in a hidden-check test (tests/autograder/checks), which shows that a correct answer
  failing only that edge case keeps at least 1 - EDGE_SHARE of its points.
"""
from __future__ import annotations

import ast
from pathlib import Path

import nbformat
import pytest

from autograder.checks.criteria import EDGE_SHARE
from coursekit import api
from coursekit.criteria import CRITERIA

REPO = Path(__file__).resolve().parents[2]


def criterion_ids(path: Path) -> set[str]:
    """The literal criterion ids a module names: edge_case("<id>") and any call's criterion="<id>"."""
    ids = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if not isinstance(node, ast.Call):
            continue
        name = getattr(node.func, "id", getattr(node.func, "attr", None))
        if name == "edge_case" and node.args and isinstance(node.args[0], ast.Constant):
            ids.add(node.args[0].value)
        for keyword in node.keywords:
            if keyword.arg == "criterion" and isinstance(keyword.value, ast.Constant):
                ids.add(keyword.value.value)
    return ids


def _all(folder: Path) -> set[str]:
    return set().union(*(criterion_ids(p) for p in folder.rglob("*.py")))


def test_the_hidden_checks_and_the_catalogue_name_the_same_edge_cases():
    assert _all(REPO / "autograder" / "checks") == set(CRITERIA)


def test_the_public_self_checks_try_the_same_edge_cases():
    assert _all(REPO / "coursekit" / "checks") == set(CRITERIA)


@pytest.mark.parametrize("criterion", sorted(CRITERIA))
def test_each_edge_case_is_tried_by_both_checks_of_its_exercise_and_stated_in_its_notebook(criterion):
    entry = api.by_name(CRITERIA[criterion].api)
    assert criterion in criterion_ids(REPO / "autograder" / "checks" / f"{entry.check_module}.py")
    assert criterion in criterion_ids(REPO / "coursekit" / "checks" / f"{entry.topic}.py")
    notebook = nbformat.read(REPO / "course" / "source" / entry.notebook / f"{entry.notebook}.ipynb", as_version=4)
    text = "\n".join(cell.source for cell in notebook.cells if cell.cell_type == "markdown")
    assert CRITERIA[criterion].stated in text, f"{criterion}: the notebook does not state it"


@pytest.mark.parametrize("criterion", sorted(CRITERIA))
def test_each_edge_case_has_a_test_of_its_partial_credit(criterion):
    tests = "\n".join(p.read_text() for p in (REPO / "tests" / "autograder" / "checks").glob("test_*.py"))
    assert f'"{criterion}"' in tests or f"'{criterion}'" in tests, f"no hidden-check test names {criterion}"


def test_the_edge_cases_together_are_worth_a_small_share():
    assert 0 < EDGE_SHARE <= 0.2  # a correct GQA without its T > max_len error keeps at least 20 of its 25 points
