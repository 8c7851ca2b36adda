"""Follow-through credit: each hidden check judges its own exercise, given working parts.

Some exercises use other exercises of the same notebook: `PositionalEncoding` calls
`sinusoidal_positional_encoding`, `EncoderBlock` builds a `PositionwiseFeedForward`, `MultiHeadAttention` calls
`split_heads` and `merge_heads`... (`PARTS`, declared with the course's contract in `coursekit/api.py`). Their grade
cells come later in the released notebook than their parts', and the grader runs them in that order whatever order
the submission has (`autograder/grade/worker.py`).
The judge (`autograder/grade/judge.py`) records, per notebook, whether each check passed (`channel.verdicts`; a
recorded verdict is final).
When a part FAILED its own check, the composite's check lends the course's stand-in for it
(`autograder/checks/stand_ins.py`): the stand-in is sent into the kernel (compiled) and bound to the part's name in the
namespace the student's code reads, for the time of the check only. So the composite is judged on its own work:
with the student's own part when that part passed (follow-through credit), else with a working one, and an
unfinished or wrong part costs its own points only. Whatever the kernel receives may be kept by the student's code,
so a stand-in is sent only when every exercise it holds has already been judged in this run (`safe_to_lend`):
lending cannot earn a point; the stand-ins also stop working when the check is over.

Intended cascades (INTENDED_CASCADES) are results that need the student's own parts to have worked, such as the
classifier the student trained in notebook 07: nothing is lent there; the notebook says so next to the exercise,
and such a result is worth at most 10 points. The report (`autograder/publish/report.py`) tells the points lost that way
from the points lost in an exercise itself.
"""
from __future__ import annotations

import contextlib
import functools

from autograder.checks.kit.remote import ProbeBroken, StudentError, define, unlend
from autograder.checks.stand_ins import compiled_for, with_needs
from coursekit.api import INTENDED_CASCADES, PARTS, Part, snake_case  # noqa: F401 -- the graph, re-exported
from coursekit.checks.toolkit import CheckFailed


# The parts graph and the intended cascades are declared once, in the course's contract (`coursekit.api`).
# Each intended cascade is worth at most MAX_CASCADE_POINTS.
MAX_CASCADE_POINTS = 10

_assumed: dict[str, bool] = {}


@contextlib.contextmanager
def assume_verdicts(verdicts: dict[str, bool]):
    """For checks run outside the judge (tests): the parts' verdicts, as the judge would have recorded them."""
    saved = dict(_assumed)
    _assumed.clear()
    _assumed.update(verdicts)
    try:
        yield
    finally:
        _assumed.clear()
        _assumed.update(saved)


def verdicts_of(channel) -> dict[str, bool]:
    """{check name: passed} of the checks judged so far in this notebook (empty: nothing known, nothing lent)."""
    verdicts = getattr(channel, "verdicts", None)
    return verdicts if verdicts is not None else _assumed


def failed_parts(check: str, channel) -> list[Part]:
    """The parts of `check` that failed their own check in this notebook, when every stand-in the lending would
    send is safe to send (`safe_to_lend`); else none: the object is judged as it is."""
    verdicts = verdicts_of(channel)
    failed = [part for part in PARTS.get(check, ()) if verdicts.get(part.check) is False]
    return failed if failed and safe_to_lend({part.name for part in failed}, channel) else []


def safe_to_lend(names, channel) -> bool:
    """Whether the kernel may receive the stand-ins `names` and everything they need (`stand_ins.with_needs`).

    Whatever reaches the kernel can be kept by the student's code (an audit hook sees the code), so each stand-in
    sent must be one whose exercise can no longer earn a point in this run: its check has already been recorded in
    this notebook (a recorded verdict is final, `judge.verdict`), or no grade cell of this notebook judges it (an
    earlier notebook's exercise). A notebook whose grade cells run a composite before its parts gets nothing lent.
    Outside the judge (tests under `assume_verdicts`) the assumed verdicts are all there is: nothing to refuse.
    """
    verdicts = getattr(channel, "verdicts", None)
    if verdicts is None:
        return True
    judged_here = getattr(channel, "judged_here", None)
    for name in with_needs(names):
        if name.startswith("_"):
            continue  # a helper of the stand-ins, no exercise
        check = snake_case(name)
        if check in verdicts:
            continue
        if judged_here is None or check in judged_here:
            return False
    return True


@contextlib.contextmanager
def lending(check: str, objects: tuple):
    """Yields the handed-in objects to judge, with stand-ins in place of the parts that failed their own check."""
    if not objects or not hasattr(objects[0], "channel"):
        yield objects
        return
    channel = objects[0].channel
    failed = failed_parts(check, channel)
    if not failed:
        yield objects
        return
    objects = list(objects)
    try:
        module = define(channel, compiled_for(sorted({part.name for part in failed})))
        replaced = {part.replaces for part in failed if part.replaces is not None}
        for part in failed:
            if part.replaces is not None:
                objects[part.replaces] = module.attr(part.name)
        for part in failed:
            if part.replaces is None and part.into not in replaced:
                objects[part.into].lend(**{part.name: module.attr(part.name)})
    except (StudentError, ProbeBroken):
        pass  # nothing could be lent (e.g. the student's object is not code): it is judged as it is
    names = ", ".join(f"`{part.name}`" for part in failed)
    try:
        yield tuple(objects)
    except CheckFailed as failure:
        note = (f"  (judged with the course's working {names} in place of yours, which fails its own check: this "
                f"failure is in the exercise itself)")
        raise CheckFailed(f"{failure}\n{note}", failure.mistake_id) from None
    finally:
        with contextlib.suppress(StudentError, ProbeBroken):
            unlend(channel)


def given_working_parts(check: str):
    """Decorator of a hidden check (under `@hidden_check`): judge it with `lending(check, ...)`."""
    def decorate(function):
        @functools.wraps(function)
        def wrapper(*objects, **named):
            with lending(check, objects) as lent:
                return function(*lent, **named)

        return wrapper

    return decorate
