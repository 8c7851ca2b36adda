"""The course API lives once, in coursekit/api.py: docs/course-api.md is generated from it, and solutions/, the
public and hidden checks, the release machinery and every source notebook's hand-ins name exactly its entries;
the reference's signatures are the ones it states. Where the project's steering copy of the contract is present
beside the repository, its names agree too."""
from __future__ import annotations

import ast
import importlib
import inspect
import re
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest

import autograder.checks
import solutions
from autograder.course.provided import API_NAMES, COURSE_ASSIGNMENTS, TOPICS
from coursekit import api

REPO = Path(__file__).resolve().parents[1]
DOC = REPO / "docs" / "course-api.md"


def contract_names(path: Path) -> set[str]:
    """The names in the first column of every API table (`| `name` | ...`)."""
    return set(re.findall(r"^\| `([A-Za-z_][A-Za-z0-9_]*)` \|", path.read_text(), re.M))


def test_the_contract_page_is_generated_from_the_module():
    assert DOC.read_text(encoding="utf-8") == api.markdown(), (
        "docs/course-api.md is out of date: run `python -m coursekit.api --markdown > docs/course-api.md`")


def test_the_module_prints_the_page_from_the_command_line():
    result = subprocess.run([sys.executable, "-m", "coursekit.api", "--markdown"], cwd=REPO,
                            capture_output=True, text=True, check=True)
    assert result.stdout == api.markdown()
    refused = subprocess.run([sys.executable, "-m", "coursekit.api", "--html"], cwd=REPO,
                             capture_output=True, text=True)
    assert refused.returncode == 2 and "usage" in refused.stderr


def test_the_page_names_exactly_the_module_names():
    assert contract_names(DOC) == set(api.names())
    assert len(api.names()) == len(set(api.names())), "an API name is listed twice"


def test_solutions_exports_exactly_the_api_in_course_order():
    assert list(solutions.__all__) == list(api.names())
    for entry in api.API:
        obj = getattr(solutions, entry.name)
        assert obj is getattr(importlib.import_module(f"solutions.{entry.topic}"), entry.name)
        assert (entry.kind == "class") == inspect.isclass(obj), f"{entry.name} is not a {entry.kind}"


def test_the_release_machinery_takes_notebooks_and_names_from_the_module():
    assert TOPICS == tuple(book.topic for book in api.NOTEBOOKS)
    assert COURSE_ASSIGNMENTS == tuple(book.name for book in api.NOTEBOOKS)
    assert {name for names in API_NAMES.values() for name in names} == set(api.names())
    for entry in api.API:
        assert api.notebook(entry.notebook).topic == entry.topic, f"{entry.name}: notebook and topic disagree"


def test_every_source_notebook_hands_in_exactly_its_api_names_and_results():
    for book in api.NOTEBOOKS:
        path = REPO / "course" / "source" / book.name / f"{book.name}.ipynb"
        cells = nbformat.read(path, as_version=4).cells
        handed = [name for cell in cells if cell.cell_type == "code"
                  for name in re.findall(r'hand_in\(\s*"(\w+)"', cell.source)]
        assert handed == list(api.hand_in_names(book.name)), book.name


def test_every_hand_in_has_its_hidden_check_in_the_module_the_api_names():
    modules = api.check_modules()
    assert autograder.checks.__all__ == sorted(modules)
    for check, module_name in modules.items():
        module = importlib.import_module(f"autograder.checks.{module_name}")
        assert callable(module.__dict__.get(check)), f"{api.check_file(module_name)} defines no {check}"
        assert getattr(autograder.checks, check) is module.__dict__[check]
    assert modules["check_cached_greedy_decode"] == "transformer.kv_cache"  # its own module of 06's folder
    assert all(module.split(".")[0] in api.TOPICS for module in modules.values())  # each in its topic's folder


def test_every_api_name_has_its_public_check():
    for entry in api.API:
        module = importlib.import_module(f"coursekit.checks.{entry.topic}")
        assert callable(getattr(module, entry.check_name, None)), (
            f"{entry.public_check_file} defines no {entry.check_name}")


def _bare(signature: inspect.Signature) -> str:
    """The signature as Python prints it, without annotations: `(ids, pad_id=0)`."""
    parameters = [p.replace(annotation=inspect.Parameter.empty) for p in signature.parameters.values()]
    return str(signature.replace(parameters=parameters, return_annotation=inspect.Signature.empty))


# Parameters the reference adds after the contract's, with defaults (so every call the contract allows works):
# the hidden checks use them on the reference only.
REFERENCE_EXTRAS = {"greedy_decode": "use_cache=True"}


@pytest.mark.parametrize("name", api.names())
def test_the_reference_has_the_signature_the_module_states(name):
    entry = api.by_name(name)
    expected = entry.params + (f", {REFERENCE_EXTRAS[name]}" if name in REFERENCE_EXTRAS else "")
    assert _bare(inspect.signature(getattr(solutions, name))) == f"({expected})"


@pytest.mark.parametrize("name", api.names())
def test_the_contract_text_names_the_parameters_in_order(name):
    entry = api.by_name(name)
    parameters = [arg.arg for arg in ast.parse(f"def f({entry.params}): pass").body[0].args.args]
    positions = [entry.signature.find(parameter) for parameter in parameters]
    assert -1 not in positions and positions == sorted(positions), (entry.signature, parameters)


def test_snake_names_match_the_public_checks_helper():
    from coursekit.checks.toolkit import snake_case

    assert [api.snake_case(name) for name in api.names()] == [snake_case(name) for name in api.names()]
    assert snake_case is api.snake_case, "one definition: the public checks use the course API's"
    assert api.by_name("TokenEmbedding").check_name == "check_token_embedding"


def test_lookups_refuse_unknown_names_clearly():
    with pytest.raises(KeyError, match="'Attention' is not a name of the course API"):
        api.by_name("Attention")
    with pytest.raises(KeyError, match="neither a course assignment"):
        api.for_notebook("10_diffusion")
    with pytest.raises(ValueError, match="kind must be"):
        api.ApiEntry("f", "attention", "03_attention", "method", "x", "(x)", "", "")
    assert [entry.name for entry in api.for_notebook("attention")] == list(API_NAMES["attention"])
    assert api.for_notebook("03_attention") == api.for_notebook("attention")


def test_the_module_imports_neither_solutions_nor_autograder():
    code = ("import sys, coursekit.api; "
            "print(sorted(m for m in sys.modules if m.split('.')[0] in ('solutions', 'autograder')))")
    result = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, check=True)
    assert result.stdout.strip() == "[]"


def test_the_page_agrees_with_the_steering_copies_when_present():
    """Every name of the steering course-api.md is implemented; nothing is named that no steering copy names
    (course-api-08-09.md holds the third edition's names until they join course-api.md)."""
    steering = REPO.parent / "shared" / "course-api.md"
    if not steering.is_file():
        pytest.skip("no steering copy of the contract beside this clone")
    ours = contract_names(DOC)
    assert contract_names(steering) <= ours, "names of the contract the repository does not implement"
    every_copy = set().union(*(contract_names(path) for path in steering.parent.glob("course-api*.md")))
    assert ours <= every_copy, f"names no steering copy of the contract has: {sorted(ours - every_copy)}"
