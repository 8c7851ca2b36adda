"""What the public self-checks of notebook 10's parts share (`loss.py`, `bleu.py`): the stated ValueError of an edge
case."""
from __future__ import annotations

from coursekit.checks.toolkit import fail, run


def expect_value_error(name: str, call, problem: str, hint: str | None = None) -> None:
    """`call()` must raise ValueError (any other exception, or none, fails with `problem`)."""
    try:
        call()
    except ValueError:
        return
    except NotImplementedError:
        run(name, call)
    except Exception as error:  # noqa: BLE001
        fail(f"{problem}, got {type(error).__name__}: {error}", hint)
    fail(problem + ".", hint)
