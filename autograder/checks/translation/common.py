"""What the hidden checks of notebook 10's parts share (`loss.py`, `beam.py`, `bleu.py`): a returned number read as a
float, equality up to float64 rounding, a draw space whose value with no salt is given, and an exercise's known
mistakes from the topic's table (`mistakes.TABLE`)."""
from __future__ import annotations

import math
import numbers
from typing import Any, Callable, Mapping

import torch

from autograder.checks.kit.compare import candidates
from autograder.checks.kit.tolerance import tolerance
from autograder.checks.kit.toolkit import fail
from autograder.checks.translation import mistakes as M


def as_float(got, label: str, tested: str) -> float:
    """A returned number (a Python or numpy float, or a one-element tensor) as a float, or a clear failure."""
    if isinstance(got, torch.Tensor) and got.numel() == 1 and got.is_floating_point():
        got = float(got)
    if not isinstance(got, numbers.Real) or isinstance(got, bool):
        fail(f"{label} must return a float.", tested=tested, details=[f"got a {type(got).__name__}"])
    return float(got)


def close64(got: float, expected: float) -> bool:
    """Equal up to float64 rounding (the tolerance of tolerance.py for float64)."""
    tol = tolerance(dtype=torch.float64)
    return math.isclose(got, expected, rel_tol=tol["rtol"], abs_tol=tol["atol"])


def first(value, options) -> list:
    """`value` first, then the other `options`: a space for `pick` whose value with no salt is `value`."""
    return [value, *(option for option in options if option != value)]


def known_mistakes(prefix: str, run: Callable[[Callable[..., Any], Mapping[str, Any]], Any]
                   ) -> list[tuple[str, Callable[[], Any]]]:
    """[(mistake id, thunk)]: the rows of `mistakes.TABLE` whose id starts with `prefix` (one exercise's), in the
    table's order, each followed by its other forms (`mistakes.FORMS`); each thunk runs `run(variant, switches)` on
    the check's own inputs (kit/compare.py's `candidates`). The first that reproduces the answer names the mistake."""
    ids = [mistake_id for mistake_id in M.TABLE if mistake_id.startswith(prefix)]
    return candidates(M.TABLE, run, ids, M.FORMS)
