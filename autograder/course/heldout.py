"""The slice of Shakespeare that 08's trained-GPT check scores on, kept out of the jail.

The check (`autograder/checks/gpt/trained.py`) measures the student's trained GPT on the first HELDOUT_CHARS
characters of the validation split (the contract's `text[n:]`, n = 90% of the text). The data folder bound into the
jail is the course's own, so without more the kernel could read that slice and train on it. The jail therefore sees
`masked()` of it (autograder/sandbox/jail.py's `masked_text_file`) over `tinyshakespeare/input.txt`: the same text with the slice replaced by the HELDOUT_CHARS
characters just before it (training text), so its length, its characters (all 65) and its split point are
unchanged, and the notebook's own validation estimates still run; they read a copy of training text there.
"""
from __future__ import annotations


HELDOUT_CHARS = 20_000


def heldout_span(length: int, train_fraction: float = 0.9) -> tuple[int, int]:
    """(start, end) of the held-out slice in a text of `length` characters (as coursekit.shakespeare.split_text)."""
    start = int(train_fraction * length)
    return start, min(length, start + HELDOUT_CHARS)


def heldout_text() -> str:
    """The held-out slice, read from the course's data on the grader's side."""
    from coursekit.shakespeare import TRAIN_FRACTION, load_shakespeare

    text = load_shakespeare()
    start, end = heldout_span(len(text), TRAIN_FRACTION)
    return text[start:end]


def masked(text: str) -> str:
    """`text` with its held-out slice replaced by the characters before it (see the module docstring)."""
    from coursekit.shakespeare import TRAIN_FRACTION

    start, end = heldout_span(len(text), TRAIN_FRACTION)
    return text[:start] + text[start - (end - start):start] + text[end:]
