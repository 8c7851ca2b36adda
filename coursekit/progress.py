"""Progress bars that stay quiet while nbgrader grades a notebook (no thousand-line bars in the feedback)."""
from __future__ import annotations

from .env import grading_mode

__all__ = ["progress"]


def progress(iterable=None, **kwargs):
    """tqdm.auto.tqdm(iterable, **kwargs), disabled in grading mode unless disable= is given explicitly."""
    from tqdm.auto import tqdm

    kwargs.setdefault("disable", grading_mode())
    return tqdm(iterable, **kwargs)
