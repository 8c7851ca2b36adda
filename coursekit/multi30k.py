"""Notebook 10's data: Multi30k (German image captions and their English translations), tokens and splits.

    pairs = load_multi30k("train")                     # 29,000 (German, English) caption pairs, raw text
    tokenize_caption("Ein Mädchen, im Park.")          # ['ein', 'mädchen', ',', 'im', 'park', '.']
    src, tgt = tokenized_multi30k("val")               # token lists of each side, line i translating line i

The six files are `data/multi30k/{train,val,test_2016_flickr}.{de,en}.gz` of the repository (copied byte for byte
from the Multi30k dataset, task 1; terms and citation in data/multi30k/README.md), found like 08's Shakespeare:
`$COURSE_DATA_DIR/multi30k/`, the copy the student wheel carries, the repository's data/, or a data/ folder above
the working directory. Nothing is downloaded.
"""
from __future__ import annotations

import gzip
import os
import re
from pathlib import Path

from .bundled_data import BUNDLED_DATA, find_data

__all__ = ["SPLITS", "SPLIT_SIZES", "multi30k_dir", "load_multi30k", "tokenize_caption", "tokenized_multi30k"]

SPLITS = ("train", "val", "test_2016_flickr")
SPLIT_SIZES = {"train": 29_000, "val": 1_014, "test_2016_flickr": 1_000}
_FOLDER = "multi30k"
_TOKEN = re.compile(r"\w+|[^\w\s]")   # a run of letters/digits, or one punctuation mark


def multi30k_dir() -> Path:
    """The folder holding the six .gz files (see the module docstring for where it is looked for)."""
    found = find_data(Path(_FOLDER) / "train.de.gz", "Multi30k", bundled=BUNDLED_DATA, package_file=__file__)
    return found.parent


def _read_lines(path: Path) -> list[str]:
    with gzip.open(path, "rb") as handle:
        text = handle.read().decode("utf-8")
    lines = text.split("\n")          # not splitlines(): a caption may hold other Unicode line breaks
    return lines[:-1] if lines and lines[-1] == "" else lines


def load_multi30k(split: str = "train", folder: str | os.PathLike | None = None) -> list[tuple[str, str]]:
    """The (German, English) caption pairs of one split, as raw text, in file order."""
    if split not in SPLITS:
        raise ValueError(f"unknown Multi30k split {split!r}; the splits are {', '.join(SPLITS)}")
    folder = Path(folder) if folder is not None else multi30k_dir()
    german = _read_lines(folder / f"{split}.de.gz")
    english = _read_lines(folder / f"{split}.en.gz")
    if len(german) != len(english):
        raise ValueError(f"{split}: {len(german)} German lines but {len(english)} English lines; the files are "
                         "not a parallel pair")
    return list(zip(german, english))


def tokenize_caption(line: str) -> list[str]:
    """Lower-case, then every run of word characters and every punctuation mark is a token."""
    return _TOKEN.findall(line.lower())


def tokenized_multi30k(split: str = "train", folder=None) -> tuple[list[list[str]], list[list[str]]]:
    """(German token lists, English token lists) of one split."""
    pairs = load_multi30k(split, folder)
    return [tokenize_caption(de) for de, _ in pairs], [tokenize_caption(en) for _, en in pairs]
