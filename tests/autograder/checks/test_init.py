"""Every graded hand-in named by the course API (`coursekit/api.py`) has its hidden check exported from
`autograder.checks`, defined in the module the API names."""
from __future__ import annotations

import pytest

import autograder.checks
from coursekit import api

CHECK_MODULES = api.check_modules()  # check_<name> -> module of autograder/checks/


def test_every_api_entry_has_a_check():
    assert {entry.check_name for entry in api.API} <= set(CHECK_MODULES)
    assert len(CHECK_MODULES) == len(api.API) + len(api.GRADED_RESULTS)


@pytest.mark.parametrize("check_name", sorted(CHECK_MODULES))
def test_check_is_exported_from_its_module(check_name):
    assert check_name in autograder.checks.__all__
    check = getattr(autograder.checks, check_name)
    assert callable(check)
    assert check.__module__ == f"autograder.checks.{CHECK_MODULES[check_name]}", check.__module__


def test_unknown_name_is_an_attribute_error():
    with pytest.raises(AttributeError):
        autograder.checks.check_does_not_exist  # noqa: B018
