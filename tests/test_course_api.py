"""docs/course-api.md (the course's contract) names exactly the API that solutions/ provides and the release
machinery lists; where the project's steering copy of the contract is present beside the repository, the names
agree with it too."""
from __future__ import annotations

import re
from pathlib import Path

import pytest

import solutions
from autograder.provided import API_NAMES

REPO = Path(__file__).resolve().parents[1]


def contract_names(path: Path) -> set[str]:
    """The names in the first column of every API table (`| `name` | ...`)."""
    return set(re.findall(r"^\| `([A-Za-z_][A-Za-z0-9_]*)` \|", path.read_text(), re.M))


def test_the_contract_page_names_exactly_the_reference_api():
    documented = contract_names(REPO / "docs" / "course-api.md")
    assert documented == set(solutions.__all__)
    assert documented == {name for names in API_NAMES.values() for name in names}


def test_the_page_agrees_with_the_steering_copy_when_present():
    steering = REPO.parent / "shared" / "course-api.md"
    if not steering.is_file():
        pytest.skip("no steering copy of the contract beside this clone")
    assert contract_names(REPO / "docs" / "course-api.md") == contract_names(steering)
