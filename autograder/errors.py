"""The root of every exception the autograder defines: `AutograderError`.

Each room keeps its own exception classes next to the code that raises them; they all derive from
`AutograderError` (and, where callers catch a built-in, from that built-in too: `GradingError` is still a
`RuntimeError`). `autograder.cli.main` catches the root and prints one line, `autograder <command>: <message>`.
"""
from __future__ import annotations


class AutograderError(Exception):
    """Something the autograder refuses or cannot do; the message says what, for the instructor."""


class GradingError(AutograderError, RuntimeError):
    """The instructor must act before grading can run (nothing released, unknown assignment...)."""
