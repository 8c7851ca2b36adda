"""The mistake catalogue (`coursekit.mistakes`) is the one home of every diagnosis: each id the hidden checks name is
in it, each entry is named by some check, and it ships to students without grader code."""
from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

import coursekit.mistakes as catalogue
from autograder.checks.kit.toolkit import CheckFailed, fail
from coursekit.api import API
from coursekit.mistakes import MISTAKES, Mistake, mistakes_for

ROOT = Path(__file__).resolve().parents[3]
ID = re.compile(r"""["']([a-z0-9_]+\.[a-zA-Z0-9_]+)["']""")


def _ids_named_in(folder: str) -> set[str]:
    found = set()
    for path in (ROOT / folder).rglob("*.py"):
        found |= {m for m in ID.findall(path.read_text()) if m in MISTAKES}
    return found


def test_entries_are_well_formed():
    api_names = {entry.name for entry in API}
    for key, mistake in MISTAKES.items():
        assert isinstance(mistake, Mistake) and mistake.id == key
        assert ID.fullmatch(f'"{key}"'), key
        assert mistake.api in api_names, f"{key}: {mistake.api} is not a course API name"
        assert mistake.text and mistake.text == mistake.text.strip() and "\n" not in mistake.text
    assert len({m.text for m in MISTAKES.values()}) == len(MISTAKES), "two ids with one text"


def test_every_entry_is_diagnosed_by_a_hidden_check_or_made_by_the_demo_class():
    from autograder.demo.students import CODE_EDITS, STUDENT_MISTAKES

    assert set(MISTAKES) - _ids_named_in("autograder/checks") - set(CODE_EDITS) == set()
    assert set(CODE_EDITS) == {m for made in STUDENT_MISTAKES.values() for m in made} and set(CODE_EDITS) <= set(MISTAKES)


def test_mistakes_for_an_api():
    sdpa = mistakes_for("scaled_dot_product_attention")
    assert "attention.missing_scale" in {m.id for m in sdpa}
    assert all(m.api == "scaled_dot_product_attention" for m in sdpa)
    assert mistakes_for("no_such_api") == []


def test_a_failure_carries_the_id_as_data_and_shows_the_text():
    with pytest.raises(CheckFailed) as info:
        fail("output: values differ.", mistake="attention.missing_scale")
    assert info.value.mistake_id == "attention.missing_scale"
    assert "\n  likely mistake: " + MISTAKES["attention.missing_scale"].text + "\n" in str(info.value)
    assert str(info.value).endswith("  hint: " + MISTAKES["attention.missing_scale"].fix)
    with pytest.raises(CheckFailed) as info:
        fail("output: values differ.")
    assert info.value.mistake_id is None and "likely mistake" not in str(info.value)
    with pytest.raises(KeyError, match="no_such.mistake"):
        fail("output: values differ.", mistake="no_such.mistake")


def test_the_catalogue_ships_to_students_without_grader_code():
    tree = ast.parse(Path(catalogue.__file__).read_text())
    imported = {alias.name for node in ast.walk(tree) if isinstance(node, ast.Import) for alias in node.names}
    imported |= {node.module for node in ast.walk(tree) if isinstance(node, ast.ImportFrom) and node.module}
    assert not {name for name in imported if name.split(".")[0] in ("solutions", "autograder")}


# ---------------------------------------------------------------------------------- each mistake's advice: one home

def test_every_entry_has_its_fix():
    """The advice for a mistake lives in its catalogue entry (`fix`), one sentence, shown by both check layers."""
    without = sorted(key for key, mistake in MISTAKES.items() if not mistake.fix.strip())
    assert without == []
    for key, mistake in MISTAKES.items():
        assert mistake.fix == mistake.fix.strip() and "\n" not in mistake.fix, key


def test_a_named_mistake_shows_the_catalogues_fix_in_both_layers():
    from coursekit.checks.toolkit import mistake_hint

    mistake = MISTAKES["attention.missing_scale"]
    assert mistake_hint(mistake.id) == f"{mistake.text}; {mistake.fix}"
    with pytest.raises(CheckFailed) as info:
        fail("output: values differ.", mistake=mistake.id, hint="a check's own words lose to the catalogue's")
    assert f"  hint: {mistake.fix}" in str(info.value) and "own words" not in str(info.value)
    with pytest.raises(CheckFailed) as info:
        fail("output: values differ.", hint="with no mistake named, the check's hint stays")
    assert str(info.value).endswith("  hint: with no mistake named, the check's hint stays")


def _calls(folder: str, name: str):
    for path in sorted((ROOT / folder).rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Call) and getattr(node.func, "id", getattr(node.func, "attr", None)) == name:
                yield f"{path.relative_to(ROOT)}:{node.lineno}", node


def test_no_check_writes_a_named_mistakes_advice_again():
    """Public: `mistake_hint(id)` takes the id only. Hidden: `fail(..., mistake="<id>")` with a literal id takes no
    `hint=` (the catalogue's fix is shown)."""
    public = [where for where, call in _calls("coursekit/checks", "mistake_hint") if len(call.args) + len(call.keywords) > 1]
    hidden = [where for where, call in _calls("autograder/checks", "fail")
              if any(k.arg == "mistake" and isinstance(k.value, ast.Constant) and k.value.value for k in call.keywords)
              and any(k.arg == "hint" for k in call.keywords)]
    assert public == [] and hidden == []

