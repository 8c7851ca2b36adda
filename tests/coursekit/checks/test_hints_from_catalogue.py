"""The public checks take the words of every known mistake from the catalogue (`coursekit.mistakes`), so a
mistake's text lives in one place: the checks call `mistake_hint(<id>)` and never write a catalogue text out."""
from __future__ import annotations

import ast
from pathlib import Path

import pytest

import coursekit.checks
from coursekit.mistakes import MISTAKES

CHECKS_DIR = Path(coursekit.checks.__file__).resolve().parent
MODULES = sorted(CHECKS_DIR.rglob("*.py"))
MIN_LENGTH = 30  # shorter texts ("the mask is not applied") may fairly occur in other words


def _string_pieces(source: str) -> list[str]:
    """Every string literal of `source` (adjacent literals arrive joined; f-strings give their literal parts)."""
    return [node.value for node in ast.walk(ast.parse(source))
            if isinstance(node, ast.Constant) and isinstance(node.value, str)]


def inline_catalogue_texts(source: str) -> list[str]:
    """The ids of catalogue texts (longer than MIN_LENGTH) that `source` writes out in a string literal."""
    pieces = _string_pieces(source)
    return sorted(m.id for m in MISTAKES.values()
                  if len(m.text) > MIN_LENGTH and any(m.text in piece for piece in pieces))


def mistake_ids_used(source: str) -> list[ast.expr]:
    """The first arguments of every mistake_hint(...) call in `source`."""
    return [node.args[0] for node in ast.walk(ast.parse(source))
            if isinstance(node, ast.Call) and getattr(node.func, "id", None) == "mistake_hint" and node.args]


def test_the_scan_finds_an_inline_text():
    text = MISTAKES["attention.scale_multiplied"].text
    written_out = f'HINT = ("{text[:20]}" "{text[20:]}; divide instead.")\n'  # split over two adjacent literals
    assert inline_catalogue_texts(written_out) == ["attention.scale_multiplied"]
    assert inline_catalogue_texts('HINT = mistake_hint("attention.scale_multiplied", "divide instead.")\n') == []


def test_there_are_public_check_modules():
    names = {path.parent.name for path in MODULES}
    assert {"embeddings", "positional", "attention", "multi_head", "encoder", "transformer", "classifier"} <= names


@pytest.mark.parametrize("path", MODULES, ids=lambda p: p.name)
def test_no_public_check_writes_a_catalogue_text_inline(path):
    assert inline_catalogue_texts(path.read_text()) == [], (
        f"{path.name} writes these catalogue texts out; use mistake_hint(<id>) instead")


@pytest.mark.parametrize("path", MODULES, ids=lambda p: p.name)
def test_every_named_mistake_is_in_the_catalogue(path):
    for argument in mistake_ids_used(path.read_text()):
        assert isinstance(argument, ast.Constant), f"{path.name}:{argument.lineno}: name the id literally"
        assert argument.value in MISTAKES, f"{path.name}:{argument.lineno}: no mistake {argument.value!r}"


def test_the_public_checks_name_mistakes_of_every_notebook():
    used = {arg.value for path in MODULES for arg in mistake_ids_used(path.read_text())}
    topics = {mistake_id.split(".")[0] for mistake_id in used}
    assert {"vocab", "positional", "attention", "multi_head", "encoder", "decoder", "transformer", "greedy", "pool",
            "classifier", "training", "evaluate"} <= topics
