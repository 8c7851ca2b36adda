"""Door 4 of #31: every criterion a hidden check scores (a stated edge case or an argument with teeth) is in the
catalogue, tried by the public self-check of its topic, stated in its notebook, and exercised by a test; the three
lists are derived from the code, not typed here. Every optional argument of the course API is an argument with teeth
or is listed in NOT_CRITERIA with its reason.

- hidden: the criterion ids the hidden checks use (`edge_case("<id>")`, `argument("<id>")`,
  `expect_raises(..., criterion="<id>")`) in autograder/checks/<the api's check module>.py;
- public: the same in coursekit/checks/<topic>.py;
- stated: the catalogue's `stated` phrase in the markdown of the notebook (course/source) of the api's exercise;
- tested: each id appears in a hidden-check test (tests/autograder/checks), which shows that a correct answer
  failing only that criterion keeps at least 1 - its kind's share of its points.
"""
from __future__ import annotations

import ast
from pathlib import Path

import nbformat
import pytest

from autograder.checks.kit.criteria import ARGUMENT_SHARE, EDGE_SHARE
from coursekit import api
from coursekit.criteria import CRITERIA, NOT_CRITERIA

REPO = Path(__file__).resolve().parents[2]


def criterion_ids(path: Path) -> set[str]:
    """The literal criterion ids a module names: edge_case("<id>"), argument("<id>"), any call's criterion="<id>"."""
    ids = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if not isinstance(node, ast.Call):
            continue
        name = getattr(node.func, "id", getattr(node.func, "attr", None))
        if name in ("edge_case", "argument") and node.args and isinstance(node.args[0], ast.Constant):
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
    assert criterion in criterion_ids(REPO / entry.check_file)
    assert criterion in criterion_ids(REPO / entry.public_check_file)
    notebook = nbformat.read(REPO / "course" / "source" / entry.notebook / f"{entry.notebook}.ipynb", as_version=4)
    text = "\n".join(cell.source for cell in notebook.cells if cell.cell_type == "markdown")
    assert CRITERIA[criterion].stated in text, f"{criterion}: the notebook does not state it"


@pytest.mark.parametrize("criterion", sorted(CRITERIA))
def test_each_edge_case_has_a_test_of_its_partial_credit(criterion):
    tests = "\n".join(p.read_text() for p in (REPO / "tests" / "autograder" / "checks").rglob("test_*.py"))
    assert f'"{criterion}"' in tests or f"'{criterion}'" in tests, f"no hidden-check test names {criterion}"


def test_the_edge_cases_together_are_worth_a_small_share():
    assert 0 < EDGE_SHARE <= 0.2  # a correct GQA without its T > max_len error keeps at least 20 of its 25 points


def optional_arguments() -> list[str]:
    """"<api>.<argument>" for every argument with a default in the course API (its `params`, as inspect prints)."""
    return [f"{entry.name}.{param.split('=')[0].strip()}" for entry in api.API
            for param in entry.params.split(",") if "=" in param]


def test_every_optional_argument_is_a_criterion_or_says_why_not():
    arguments = {c for c, entry in CRITERIA.items() if entry.kind == "argument"}
    optional = set(optional_arguments())
    assert not arguments & set(NOT_CRITERIA), "both an argument with teeth and listed as none"
    assert optional - arguments - set(NOT_CRITERIA) == set(), "optional arguments neither criterion nor excused"
    assert arguments - optional == set(), "arguments with teeth that are no optional argument of the API"
    assert set(NOT_CRITERIA) - optional == set(), "NOT_CRITERIA lists arguments the API does not have"
    for criterion in arguments:
        assert CRITERIA[criterion].api == criterion.split(".")[0]


def test_the_core_keeps_most_of_the_points():
    assert 0 < ARGUMENT_SHARE <= 0.25 and ARGUMENT_SHARE + EDGE_SHARE < 0.5
