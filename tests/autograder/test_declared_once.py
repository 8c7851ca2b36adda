"""Rules declared once (issue #30): each is said in one module and the others derive from it.

- the parts graph and the intended cascades: `coursekit.api` (the public checks' `@uses_parts`, the hidden checks'
  `PARTS`, the report and the credit test read it);
- the grade-id rule (`test_<name>`): `coursekit.api`;
- cell kinds (nbgrader's cell metadata): `autograder/course/cells.py`;
- opening the gradebook: `autograder/gradebook/store.py` (`open_gradebook`);
- the demo's class: `autograder/demo/students.py`;
- publishing (`autograder/publish/`) reads the gradebook's and the files' results, never the checks or the grading.
"""
from __future__ import annotations

import ast
import importlib
import inspect
from pathlib import Path

import pytest

from coursekit import api

REPO = Path(__file__).resolve().parents[2]
AUTOGRADER = REPO / "autograder"
PUBLIC_CHECKS = sorted((REPO / "coursekit" / "checks").rglob("*.py"))


def _tree(path: Path) -> ast.Module:
    return ast.parse(path.read_text(), filename=str(path))


def _relative(path: Path) -> str:
    return path.relative_to(REPO).as_posix()


def _python(folder: Path) -> list[Path]:
    return sorted(p for p in folder.rglob("*.py") if "__pycache__" not in p.parts)


def _uses_parts_decorators(path: Path) -> list[ast.Call]:
    return [decorator for node in ast.walk(_tree(path)) if isinstance(node, ast.FunctionDef)
            for decorator in node.decorator_list
            if isinstance(decorator, ast.Call) and getattr(decorator.func, "id", None) == "uses_parts"]


def test_public_checks_name_their_exercise_only_and_take_the_parts_from_the_api():
    decorated = set()
    for path in PUBLIC_CHECKS:
        for decorator in _uses_parts_decorators(path):
            assert len(decorator.args) == 1 and not decorator.keywords, \
                f"{_relative(path)}:{decorator.lineno}: @uses_parts names its exercise only (the parts: coursekit.api)"
            decorated.add(decorator.args[0].value)
    composites = {entry.name for entry in api.API if api.public_parts(entry.name)}
    assert decorated == composites  # every composite's public check says what its parts are, and only those


@pytest.mark.parametrize("owner", sorted({e.name for e in api.API if api.public_parts(e.name)}))
def test_each_public_check_reads_its_parts_from_the_graph(owner):
    entry = api.by_name(owner)
    check = getattr(importlib.import_module(f"coursekit.checks.{entry.topic}"), entry.check_name)
    graph = {p.name: p.check for p in api.PARTS[entry.snake_name] if p.into == 0 and p.replaces is None}
    assert {name: where.split(":")[1] for name, where in check.parts.items()} == \
        {name: f"check_{part}" for name, part in graph.items()}
    for where in check.parts.values():  # each part's own public check exists
        module, function = where.split(":")
        assert callable(getattr(importlib.import_module(module), function))
    # the self-check names the earliest failing part first: the parts in course order
    order = [e.name for e in api.API]
    names = [api.public_parts(owner)[name] for name in check.parts]
    assert names == sorted(names, key=order.index)


def test_hidden_checks_read_the_same_graph():
    from autograder.checks.kit import parts

    assert parts.PARTS is api.PARTS and parts.INTENDED_CASCADES is api.INTENDED_CASCADES
    for path in _python(AUTOGRADER) + [REPO / "tests" / "course" / "test_credit.py"]:
        for node in ast.walk(_tree(path)):
            targets = node.targets if isinstance(node, ast.Assign) else [getattr(node, "target", None)]
            for target in targets:
                assert getattr(target, "id", None) not in ("PARTS", "INTENDED_CASCADES"), \
                    f"{_relative(path)}:{node.lineno} declares the parts graph again: it is coursekit.api's"


def test_the_graph_names_checks_of_the_course():
    checks = {entry.snake_name for entry in api.API} | {result.name for result in api.GRADED_RESULTS}
    for composite, parts in api.PARTS.items():
        assert composite in checks and all(p.check in checks for p in parts), composite
    for dependent, parts in api.INTENDED_CASCADES.items():
        assert dependent in checks and set(parts) <= checks, dependent


def test_the_grade_id_rule():
    assert api.grade_id("EncoderBlock") == "test_EncoderBlock"
    assert api.tested_name(api.grade_id("EncoderBlock")) == "EncoderBlock"
    assert api.tested_name("written_attention") is None
    assert api.check_of(api.grade_id("TransformerClassifier")) == "transformer_classifier"
    assert api.check_of(api.grade_id("trained_gpt")) == "trained_gpt"
    literal = api.GRADE_ID_PREFIX
    for path in _python(AUTOGRADER) + [REPO / "tests" / "course" / "test_credit.py"]:
        for node in ast.walk(_tree(path)):
            if isinstance(node, ast.Constant) and isinstance(node.value, str):
                assert not node.value.startswith(literal), \
                    f"{_relative(path)}:{node.lineno}: the grade-id rule is coursekit.api's (grade_id, check_of)"
            if isinstance(node, ast.JoinedStr) and node.values and isinstance(node.values[0], ast.Constant):
                assert node.values[0].value != literal, f"{_relative(path)}:{node.lineno}: use coursekit.api.grade_id"


def _reads_nbgrader_metadata(node: ast.AST) -> bool:
    """`x["nbgrader"]` or `x.get("nbgrader", ...)` read (a `del`, and nbconvert's `resources["nbgrader"]`, which is
    not a cell's metadata, are not reads of a cell kind)."""
    if isinstance(node, ast.Subscript):
        if isinstance(node.ctx, ast.Del) or getattr(node.value, "id", None) == "resources":
            return False
        return isinstance(node.slice, ast.Constant) and node.slice.value == "nbgrader"
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "get":
        return bool(node.args) and isinstance(node.args[0], ast.Constant) and node.args[0].value == "nbgrader"
    return False


def test_cell_kinds_are_read_in_cells_py_only():
    home = AUTOGRADER / "course" / "cells.py"
    assert any(_reads_nbgrader_metadata(node) for node in ast.walk(_tree(home)))  # the scan sees such a read
    found = [f"{_relative(path)}:{node.lineno}" for path in _python(AUTOGRADER) if path != home
             for node in ast.walk(_tree(path)) if _reads_nbgrader_metadata(node)]
    assert not found, f"nbgrader metadata read outside autograder/course/cells.py: {found}"


def _calls(path: Path, name: str) -> list[int]:
    return [node.lineno for node in ast.walk(_tree(path)) if isinstance(node, ast.Call)
            and (getattr(node.func, "id", None) == name or getattr(node.func, "attr", None) == name)]


def test_the_gradebook_is_opened_in_store_py_only():
    home = AUTOGRADER / "gradebook" / "store.py"
    assert _calls(home, "Gradebook")
    found = [f"{_relative(path)}:{line}" for path in _python(AUTOGRADER) + _python(REPO / "coursekit")
             if path != home for line in _calls(path, "Gradebook")]
    assert not found, f"Gradebook(...) opened by hand (use gradebook.store.open_gradebook): {found}"


def _imported_modules(path: Path) -> set[str]:
    modules = set()
    for node in ast.walk(_tree(path)):
        if isinstance(node, ast.Import):
            modules |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module:
            modules.add(node.module)
            modules |= {f"{node.module}.{alias.name}" for alias in node.names}
    return modules


def test_publishing_imports_neither_the_checks_nor_the_grading():
    for path in _python(AUTOGRADER / "publish"):
        bad = {m for m in _imported_modules(path)
               if m.split(".")[:2] in (["autograder", "checks"], ["autograder", "grade"])}
        assert not bad, f"{_relative(path)} imports {sorted(bad)}"


def test_the_demo_declares_its_class_in_students_py_only():
    from autograder.demo import run, students

    run_functions = {n.name for n in ast.walk(_tree(AUTOGRADER / "demo" / "run.py"))
                     if isinstance(n, ast.FunctionDef)}
    student_functions = {n.name for n in ast.walk(_tree(AUTOGRADER / "demo" / "students.py"))
                         if isinstance(n, ast.FunctionDef)}
    assert not run_functions & student_functions
    assert "build_class" in inspect.getsource(run.run_demo)
    assert "demo_class" in inspect.getsource(run.build_class)
    assert not any(name in vars(run) for name in ("COPIED_PAIR", "PHRASING", "STUDENT_MISTAKES"))
    assert callable(students.demo_class)
