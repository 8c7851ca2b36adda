"""Partial credit by criterion: a hidden check's core behaviour, its arguments with teeth, its stated edge cases.

A check tries its core behaviour with ordinary calls (every optional argument at its default): any failure there
fails the exercise (0 points). Each other criterion of the catalogue coursekit/criteria.py is tried in a block:

    with argument("sample_next_token.temperature"):       # an argument with teeth: its non-default values
        ...
    with edge_case("GroupedQueryAttention.too_long"):     # a stated edge case
        ...

(`toolkit.expect_raises` opens the edge case's block itself). A failure inside a block is recorded, not raised, and
the check goes on. When the check's core passed and some criteria failed, the check raises `PartialCredit` (an
AssertionError, so a caller that only asks "did it pass?" still sees a failure): the exercise keeps

    1 - ARGUMENT_SHARE * failed arguments / arguments tried - EDGE_SHARE * failed edge cases / edge cases tried

of its points. So all arguments of one exercise together are worth ARGUMENT_SHARE of its points, all its edge cases
EDGE_SHARE, and the core the rest (at least 55%). Its message lists every criterion with a tick or a cross. The
judge turns it into a numeric grade-cell result, which nbgrader scores as partial credit.

Criteria count on top of a working core only: an answer whose core fails gets 0, whatever its other criteria do
(a stub that always raises ValueError earns nothing).
"""
from __future__ import annotations

import contextlib
import contextvars
import functools

from coursekit.checks.toolkit import CheckFailed
from coursekit.criteria import CRITERIA, lookup

EDGE_SHARE = 0.2  # all stated edge cases of one exercise together
ARGUMENT_SHARE = 0.25  # all arguments with teeth of one exercise together; the core behaviour is worth the rest
SHARES = {"edge": EDGE_SHARE, "argument": ARGUMENT_SHARE}

_RECORD: contextvars.ContextVar[dict | None] = contextvars.ContextVar("criteria_record", default=None)


class PartialCredit(CheckFailed):
    """The core behaviour passed, some other criteria did not: `fraction` of the exercise's points."""

    def __init__(self, message: str, fraction: float, mistake_id: str | None = None, failed: tuple[str, ...] = ()):
        super().__init__(message, mistake_id)
        self.fraction = fraction
        self.failed = failed  # the ids of the criteria that failed

    @property
    def works_as_a_part(self) -> bool:
        """Only stated edge cases failed: later exercises may build on this answer. An argument that fails (a
        temperature ignored, a pre-norm arrangement missing) would fail the composites' own tries of that argument:
        they get the part's stand-in instead, so the mistake costs its own exercise only."""
        return all(CRITERIA[c].kind == "edge" for c in self.failed)


@contextlib.contextmanager
def _tried(criterion: str, kind: str):
    lookup(criterion, kind)
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


def edge_case(criterion: str):
    """Try one stated edge case: a failure inside is recorded (the check goes on) while a check is judged."""
    return _tried(criterion, "edge")


def argument(criterion: str):
    """Try one argument with teeth (its non-default values): a failure inside is recorded, as for an edge case."""
    return _tried(criterion, "argument")


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


def fraction_kept(record: dict) -> float:
    """The share of the points an answer with a working core keeps, given each criterion tried (failure or None)."""
    fraction = 1.0
    for kind, share in SHARES.items():
        tried = [c for c in record if CRITERIA[c].kind == kind]
        failed = [c for c in tried if record[c] is not None]
        if tried:
            fraction -= share * len(failed) / len(tried)
    return fraction


def partial_credit(record: dict, failed: dict) -> PartialCredit:
    fraction = fraction_kept(record)
    parts = []
    for kind, one, many in (("argument", "argument with teeth", "arguments with teeth"),
                            ("edge", "stated edge case", "stated edge cases")):
        tried = [c for c in record if CRITERIA[c].kind == kind]
        wrong = [c for c in tried if c in failed]
        if wrong:
            parts.append(f"{len(wrong)} of the {len(tried)} {one if len(tried) == 1 else many}")
    lines = [f"The main behaviour works, but {' and '.join(parts)} failed: this answer keeps {fraction:.0%} of the "
             "points.", "  ✓ the main behaviour"]
    for kind in ("argument", "edge"):  # the arguments, then the edge cases
        for criterion, failure in record.items():
            if CRITERIA[criterion].kind == kind:
                lines.append(f"  {'✗' if failure is not None else '✓'} {CRITERIA[criterion].text}")
    first = next(iter(failed.values()))
    lines.extend("    " + line for line in str(first).splitlines()[:6])
    return PartialCredit("\n".join(lines), fraction, getattr(first, "mistake_id", None), tuple(failed))
