"""Notebook 08's text: tinyshakespeare, its 90/10 split, a character vocabulary, and bits per character.

    text = load_shakespeare()                        # 1,115,394 characters
    train_text, val_text = split_text(text)          # text[:n], text[n:] with n = int(0.9 * len(text))
    chars = CharVocabulary(text)                     # 65 distinct characters, sorted
    chars.decode(chars.encode("To be")) == "To be"

The file is `data/tinyshakespeare/input.txt` of the repository (see data/README.md), found next to the package or
above the working directory, or `$COURSE_DATA_DIR/tinyshakespeare/input.txt` where the course's data lives elsewhere
(the student image sets it to its copy of data/).
Nothing is downloaded.
"""
from __future__ import annotations

import math
import os
from pathlib import Path

from .bundled_data import BUNDLED_DATA, find_data

__all__ = ["SHAKESPEARE_CHARS", "TRAIN_FRACTION", "shakespeare_path", "load_shakespeare", "split_text",
           "CharVocabulary", "bits_per_char"]

SHAKESPEARE_CHARS = 1_115_394   # len(text) of the char-rnn file
TRAIN_FRACTION = 0.9
_RELATIVE = Path("tinyshakespeare") / "input.txt"


def shakespeare_path() -> Path:
    """Where input.txt is: $COURSE_DATA_DIR/tinyshakespeare/, else the copy the student wheel carries, else the data/ folder of the repository this package
    lives in, else a data/ folder in the working directory or one of its parents (a student's copy of the course,
    with the notebook open in exercises/08_.../, and a coursekit installed from a wheel)."""
    return find_data(_RELATIVE, "tinyshakespeare", bundled=BUNDLED_DATA, package_file=__file__)


def load_shakespeare(path: str | os.PathLike | None = None) -> str:
    """The whole text, decoded as UTF-8 (`path` defaults to shakespeare_path())."""
    path = Path(path) if path is not None else shakespeare_path()
    return path.read_text(encoding="utf-8")


def split_text(text: str, train_fraction: float = TRAIN_FRACTION) -> tuple[str, str]:
    """(text[:n], text[n:]) with n = int(train_fraction * len(text)): the first 90% trains, the rest validates."""
    if not 0.0 < train_fraction < 1.0:
        raise ValueError(f"train_fraction must lie strictly between 0 and 1, got {train_fraction}")
    n = int(train_fraction * len(text))
    return text[:n], text[n:]


class CharVocabulary:
    """One id per distinct character of `text`, in sorted order: the simplest tokenizer of a language model."""

    def __init__(self, text: str):
        self.chars: list[str] = sorted(set(text))
        if not self.chars:
            raise ValueError("cannot build a character vocabulary from an empty text")
        self.stoi: dict[str, int] = {ch: i for i, ch in enumerate(self.chars)}

    def __len__(self) -> int:
        return len(self.chars)

    @property
    def vocab_size(self) -> int:
        return len(self.chars)

    def encode(self, text: str) -> list[int]:
        """Characters -> ids; a character the vocabulary never saw raises KeyError naming it."""
        try:
            return [self.stoi[ch] for ch in text]
        except KeyError as error:
            raise KeyError(f"character {error.args[0]!r} is not in the vocabulary ({len(self)} characters)") from None

    def decode(self, ids) -> str:
        """Ids (a list or a 1-d tensor) -> the text."""
        return "".join(self.chars[int(i)] for i in ids)


def bits_per_char(loss_per_token: float, num_tokens: int, num_chars: int) -> float:
    """Nats per token -> bits per character of the same text: loss * num_tokens / num_chars / ln 2."""
    if num_chars <= 0:
        raise ValueError("num_chars must be positive")
    return loss_per_token * num_tokens / num_chars / math.log(2)
