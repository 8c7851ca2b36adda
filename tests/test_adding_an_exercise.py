"""The recipe for a new exercise (tools/exercise_recipe.py, printed in docs/architecture.md): every exercise of the
course has every step, and an exercise that lacks one fails with that step's number and name."""
from __future__ import annotations

import importlib.util
import shutil
import sys
from pathlib import Path

import pytest

from coursekit import api

REPO = Path(__file__).resolve().parents[1]
_spec = importlib.util.spec_from_file_location("exercise_recipe", REPO / "tools" / "exercise_recipe.py")
recipe = importlib.util.module_from_spec(_spec)
sys.modules.setdefault("exercise_recipe", recipe)  # dataclasses look their module up
_spec.loader.exec_module(recipe)


@pytest.mark.parametrize("name", api.names())
def test_every_exercise_has_every_step(name):
    assert recipe.missing(api.by_name(name)) == []


def _where(step, entry) -> str:
    return recipe.where(step, entry)


@pytest.fixture(scope="module")
def copy_of_the_places(tmp_path_factory):
    """A copy of just the files the recipe reads for one exercise (scaled_dot_product_attention)."""
    entry = api.by_name("scaled_dot_product_attention")
    root = tmp_path_factory.mktemp("recipe")
    for relative in {_where(step, entry) for step in recipe.STEPS} | {"docs/course-api.md"}:
        (root / relative).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(REPO / relative, root / relative)
    assert recipe.missing(entry, root) == []
    return entry, root


@pytest.mark.parametrize("number", range(1, len(recipe.STEPS) + 1))
def test_a_forgotten_step_is_named(number, copy_of_the_places, tmp_path):
    entry, complete = copy_of_the_places
    step = recipe.STEPS[number - 1]
    root = tmp_path / "repo"
    shutil.copytree(complete, root)
    target = root / ("docs/course-api.md" if step.name == "contract" else _where(step, entry))
    target.unlink()
    assert f"step {number} ({step.name}): {_where(step, entry)}" in recipe.missing(entry, root)


def test_a_catalogue_id_that_does_not_exist_is_a_missing_catalogue_step(copy_of_the_places, tmp_path):
    entry, complete = copy_of_the_places
    root = tmp_path / "repo"
    shutil.copytree(complete, root)
    check = root / entry.check_file
    check.write_text(check.read_text() + '\n\n_X = dict(mistake="attention.made_up_mistake")\n')
    number = [step.name for step in recipe.STEPS].index("catalogue") + 1
    assert recipe.missing(entry, root) == [f"step {number} (catalogue): coursekit/mistakes.py"]


def test_the_architecture_page_prints_the_recipe():
    page = (REPO / "docs" / "architecture.md").read_text(encoding="utf-8")
    assert recipe.markdown() in page
