"""Door 2 of #31 at the level of the checks: a table recorded from one run answers another run's probes only when
both runs have the same draws (the same salt), i.e. only for the very same submission.

The recorder and the replayer are the code a student would run (tests/fixtures/replay.py); here they run in this
process on the reference of notebook 03, and the hidden checks judge them with per-submission inputs.
"""
from __future__ import annotations

import contextlib
import io

import pytest

import solutions.attention
from autograder.checks import attention
from autograder.checks.kit.draws import salted
from coursekit.api import hand_in_names
from replay import PRINT_TABLE, decode, recorder_source, replayer_source, table_in

NAMES = hand_in_names("03_attention")
CHECKS = {name: getattr(attention, f"check_{name}") for name in NAMES}


def _namespace(source: str, **given) -> dict:
    namespace = dict(given)
    exec(compile(source, "<student>", "exec"), namespace)
    return namespace


def _judged(namespace) -> dict[str, bool]:
    passed = {}
    for name, check in CHECKS.items():
        try:
            check(namespace[name])
        except AssertionError:
            passed[name] = False
        else:
            passed[name] = True
    return passed


def _record(salt: int) -> str:
    namespace = _namespace(recorder_source(NAMES), **{n: getattr(solutions.attention, n) for n in NAMES})
    with salted(salt):
        assert all(_judged(namespace).values())
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        exec(PRINT_TABLE, {"_TABLE": namespace["_TABLE"]})
    return table_in(printed.getvalue())


@pytest.mark.fixed_inputs
@pytest.mark.parametrize("recorded_with, replayed_with", [(0, 0), (11, 11), (11, 12), (0, 12), (12, 11)])
def test_a_recorded_table_answers_only_the_submission_it_was_recorded_from(recorded_with, replayed_with):
    table = _record(recorded_with)
    assert len(decode(table)) >= len(NAMES)  # every check's calls were recorded
    replayer = _namespace(replayer_source(NAMES, table))
    with salted(replayed_with):
        passed = _judged(replayer)
    if recorded_with == replayed_with:  # the control: the same inputs, so the table is a full answer
        assert all(passed.values()), passed
    else:
        assert not any(passed.values()), passed
