"""Partial credit by criterion: a hidden check's core behaviour, and the stated edge cases it also tries.

A check tries its core behaviour with ordinary calls: any failure there fails the exercise (0 points), as before.
A stated edge case (an error the statement asks for, an empty text, a top-k past the vocabulary) is tried inside

    with edge_case("GroupedQueryAttention.too_long"):     # an id of the catalogue coursekit/criteria.py
        ...

(`toolkit.expect_raises` does this itself). A failure inside the block is recorded, not raised, and the check goes
on. When the check's core passed and some edge cases failed, the check raises `PartialCredit` (an AssertionError,
so a caller that only asks "did it pass?" still sees a failure): the exercise keeps `1 - EDGE_SHARE * failed / n`
of its points, where n is the number of distinct edge cases the check tried. So all edge cases of one exercise
together are worth EDGE_SHARE of its points, and the core the rest. Its message lists every criterion with a tick or
a cross. The judge turns it into a numeric grade-cell result, which nbgrader scores as partial credit.

Edge cases count on top of a working core only: an answer whose core fails gets 0, whatever its edge cases do
(a stub that always raises ValueError earns nothing).
"""
from __future__ import annotations

import contextlib
import contextvars
import functools

from coursekit.checks.toolkit import CheckFailed
from coursekit.criteria import CRITERIA

EDGE_SHARE = 0.2  # all stated edge cases of one exercise together; the core behaviour is worth the rest

_RECORD: contextvars.ContextVar[dict | None] = contextvars.ContextVar("criteria_record", default=None)


class PartialCredit(CheckFailed):
    """The core behaviour passed, some stated edge cases did not: `fraction` of the exercise's points."""

    def __init__(self, message: str, fraction: float, mistake_id: str | None = None):
        super().__init__(message, mistake_id)
        self.fraction = fraction


@contextlib.contextmanager
def edge_case(criterion: str):
    """Try one stated edge case: a failure inside is recorded (the check goes on) while a check is judged."""
    if criterion not in CRITERIA:
        raise KeyError(f"edge case {criterion!r} is not in the catalogue coursekit/criteria.py")
    record = _RECORD.get()
    if record is None:  # outside a judged check (a helper called on its own): fail as usual
        yield
        return
    try:
        yield
    except CheckFailed as failure:
        record[criterion] = record.get(criterion) or failure  # the first failure of this criterion is kept
        return
    record.setdefault(criterion, None)


def judged_by_criteria(check):
    """Wrap a check: record its edge cases; raise PartialCredit when its core passed and some of them failed."""
    @functools.wraps(check)
    def wrapper(*args, **kwargs):
        record: dict = {}
        token = _RECORD.set(record)
        try:
            result = check(*args, **kwargs)
        finally:
            _RECORD.reset(token)
        failed = {c: f for c, f in record.items() if f is not None}
        if failed:
            raise partial_credit(record, failed)
        return result

    return wrapper


def partial_credit(record: dict, failed: dict) -> PartialCredit:
    fraction = 1.0 - EDGE_SHARE * len(failed) / len(record)
    cases = "edge case" if len(record) == 1 else "edge cases"
    lines = [f"The main behaviour works, but {len(failed)} of the {len(record)} stated {cases} failed: this answer "
             f"keeps {fraction:.0%} of the points.", "  ✓ the main behaviour"]
    for criterion, failure in record.items():
        mark = "✗" if failure is not None else "✓"
        lines.append(f"  {mark} {CRITERIA[criterion].text}")
    first = next(iter(failed.values()))
    lines.extend("    " + line for line in str(first).splitlines()[:6])
    return PartialCredit("\n".join(lines), fraction, getattr(first, "mistake_id", None))
