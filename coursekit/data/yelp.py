"""The Yelp loader: `load_yelp` reads reviews in the yelp_review_full format (`yelp_format.py`) from

* "synthetic": the synthetic set shipped in data/yelp_synthetic (see its README);
* a folder holding train.csv/test.csv, or yelp_review_full_csv/train.csv, or the tarball, or parquet files;
* the tarball yelp_review_full_csv.tgz itself, streamed member by member (never unpacked to disk);
* Hugging Face parquet files (columns label 0..4 and text), a folder or one file, when pyarrow is installed.

Files are streamed row by row: the real train.csv has 650,000 reviews (a progress bar appears when reading
takes more than two seconds). Labels come back as 0..4.

Blank lines are ignored. Bad rows (label outside 1..5, a missing or extra field, an empty text, invalid UTF-8,
broken quoting) raise YelpFormatError naming the file and the line. With skip_bad_rows=True they are skipped
instead; then a YelpSkippedRowsWarning (with .count and .rows) is issued, a line is logged to the
"coursekit.data" logger, and `last_skipped_rows()` returns the skipped rows of the latest call.
"""
from __future__ import annotations

import logging
import os
import random
import tarfile
import warnings
from pathlib import Path
from typing import Iterable

from ..bundled_data import BUNDLED_DATA, DATA_DIR_ENV
from ..progress import progress
from .synth import generate_splits
from .yelp_format import SkippedRow, YelpFormatError, decode_yelp_escapes, encode_yelp_text, read_yelp_csv, \
    write_yelp_csv

__all__ = [
    "load_yelp", "YelpFormatError", "YelpSkippedRowsWarning", "SkippedRow", "last_skipped_rows",
    "write_yelp_csv", "encode_yelp_text", "synthetic_dir", "TARBALL_NAME", "SPLITS",
]

logger = logging.getLogger("coursekit.data")

SPLITS = ("train", "test")
NUM_CLASSES = 5
TARBALL_NAME = "yelp_review_full_csv.tgz"
TARBALL_FOLDER = "yelp_review_full_csv"
# DATA_DIR_ENV (COURSE_DATA_DIR) overrides where the "synthetic" set is looked for: $COURSE_DATA_DIR/yelp_synthetic


class YelpSkippedRowsWarning(UserWarning):
    """Issued when skip_bad_rows=True skipped rows; `.count` and `.rows` (list of SkippedRow) say which."""

    def __init__(self, rows: list[SkippedRow]):
        first = "; ".join(f"{row.source}, line {row.line}: {row.problem}" for row in rows[:3])
        more = f" (and {len(rows) - 3} more)" if len(rows) > 3 else ""
        super().__init__(f"skipped {len(rows)} bad row(s): {first}{more}")
        self.rows = rows
        self.count = len(rows)


_last_skipped: list[SkippedRow] = []


def last_skipped_rows() -> list[SkippedRow]:
    """The rows skipped by the most recent load_yelp call in this process (empty when none were)."""
    return list(_last_skipped)


# --- reading ----------------------------------------------------------------------------------------------------
def _parquet_rows(path: Path, skip_bad_rows: bool, skipped: list[SkippedRow]):
    """Yield (label 0..4, text) from a Hugging Face parquet file, one record batch at a time."""
    try:
        import pyarrow.parquet as pq
    except ImportError:
        raise ImportError(
            f"reading {path} needs pyarrow, which is not installed; use the CSV files or the tarball instead "
            "(python -m coursekit.data download yelp_review_full)"
        ) from None
    parquet = pq.ParquetFile(path)
    missing = {"label", "text"} - set(parquet.schema_arrow.names)
    if missing:
        raise YelpFormatError(str(path), 0, f"parquet file lacks column(s) {sorted(missing)}")
    row_number = 0
    for batch in parquet.iter_batches(columns=["label", "text"], batch_size=8192):
        for label, text in zip(batch.column("label").to_pylist(), batch.column("text").to_pylist()):
            row_number += 1
            problem = None
            if isinstance(label, bool) or not isinstance(label, int) or not 0 <= label < NUM_CLASSES:
                problem = f"label must be 0..4, found {label!r}"
            elif not isinstance(text, str) or not text.strip():
                problem = "empty or missing review text"
            if problem is None:
                yield label, decode_yelp_escapes(text)
            elif skip_bad_rows:
                skipped.append(SkippedRow(str(path), row_number, problem))
            else:
                raise YelpFormatError(str(path), row_number, problem)


def _tarball_rows(path: Path, split: str, skip_bad_rows: bool, skipped: list[SkippedRow]):
    wanted = f"{TARBALL_FOLDER}/{split}.csv"
    try:
        with tarfile.open(path, mode="r|gz") as archive:  # "|": a stream, members read in order, nothing unpacked
            for member in archive:
                if member.isfile() and member.name.lstrip("./") == wanted:
                    stream = archive.extractfile(member)
                    yield from read_yelp_csv(stream, f"{path}:{wanted}", skip_bad_rows, skipped)
                    return
    except (tarfile.TarError, EOFError, OSError) as error:
        if isinstance(error, FileNotFoundError):
            raise
        raise YelpFormatError(str(path), 0, f"not a readable .tgz archive ({error})") from None
    raise YelpFormatError(str(path), 0, f"the archive has no member {wanted}")


def synthetic_dir() -> Path | None:
    """Where the shipped synthetic set lives: $COURSE_DATA_DIR/yelp_synthetic, else the student wheel's copy, else
    the repository's data/."""
    candidates = []
    if os.environ.get(DATA_DIR_ENV):
        candidates.append(Path(os.environ[DATA_DIR_ENV]) / "yelp_synthetic")
    candidates.append(BUNDLED_DATA / "yelp_synthetic")  # the student wheel's copy
    candidates.append(Path(__file__).resolve().parents[2] / "data" / "yelp_synthetic")
    for folder in candidates:
        if (folder / "train.csv").is_file() and (folder / "test.csv").is_file():
            return folder
    return None


def _synthetic_rows(split: str):
    folder = synthetic_dir()
    if folder is not None:
        return ("csv", folder / f"{split}.csv")
    # Installed without the repository's data/ folder: the generator rebuilds the same set (byte-identical).
    logger.info("data/yelp_synthetic not found; generating the synthetic set in memory (seed 0)")
    train, test = generate_splits(seed=0)
    reviews = train if split == "train" else test
    return ("rows", [(review.label - 1, review.text) for review in reviews])


def _parquet_files(folder: Path, split: str) -> list[Path]:
    files = sorted(folder.rglob("*.parquet"))
    chosen = [f for f in files if f.name.startswith(f"{split}-") or f.name.startswith(f"{split}.")
              or f.parent.name == split]
    return chosen


def _resolve(source, split: str):
    """('csv' | 'tarball' | 'parquet', paths) for a source, or ('rows', list) for the in-memory synthetic set."""
    if source == "synthetic":
        return _synthetic_rows(split)
    path = Path(source).expanduser()
    if not path.exists():
        raise FileNotFoundError(
            f"Yelp source {str(source)!r} does not exist; use 'synthetic', a folder with train.csv/test.csv, "
            f"{TARBALL_NAME} or parquet files (python -m coursekit.data download yelp_review_full --dest data/)"
        )
    if path.is_file():
        name = path.name.lower()
        if name.endswith((".tgz", ".tar.gz")):
            return ("tarball", path)
        if name.endswith(".parquet"):
            return ("parquet", [path])
        if name.endswith(".csv"):
            return ("csv", path)
        raise ValueError(f"{path}: expected a .csv, .tgz/.tar.gz or .parquet file")
    for candidate in (path / f"{split}.csv", path / TARBALL_FOLDER / f"{split}.csv"):
        if candidate.is_file():
            return ("csv", candidate)
    if (path / TARBALL_NAME).is_file():
        return ("tarball", path / TARBALL_NAME)
    parquet = _parquet_files(path, split)
    if parquet:
        return ("parquet", parquet)
    raise FileNotFoundError(
        f"{path} holds no {split}.csv, {TARBALL_FOLDER}/{split}.csv, {TARBALL_NAME} or {split} parquet file"
    )


def _rows(source, split: str, skip_bad_rows: bool, skipped: list[SkippedRow]):
    kind, where = _resolve(source, split)
    if kind == "rows":
        yield from where
    elif kind == "csv":
        with open(where, "rb") as handle:
            yield from read_yelp_csv(handle, str(where), skip_bad_rows, skipped)
    elif kind == "tarball":
        yield from _tarball_rows(where, split, skip_bad_rows, skipped)
    else:
        for file in where:
            yield from _parquet_rows(file, skip_bad_rows, skipped)


def _class_quotas(available: list[int], limit: int) -> list[int]:
    """Split `limit` over the classes as evenly as their sizes allow (leftover ones go to the lowest labels)."""
    quotas = [0] * len(available)
    remaining = limit
    open_classes = [c for c, n in enumerate(available) if n > 0]
    while remaining > 0 and open_classes:
        share = remaining // len(open_classes)
        if share == 0:
            for c in open_classes[:remaining]:
                quotas[c] += 1
            break
        for c in list(open_classes):
            take = min(share, available[c] - quotas[c])
            quotas[c] += take
            remaining -= take
            if quotas[c] == available[c]:
                open_classes.remove(c)
    return quotas


def _stratified(rows: Iterable[tuple[int, str]], limit: int, seed: int):
    """A class-balanced random subset of at most `limit` rows, kept in file order, in O(limit) memory.

    One reservoir sample of up to `limit` rows per class (a class may have to fill the whole limit when the
    others are short), then each class gives its quota from its reservoir.
    """
    rng = random.Random(seed)
    reservoirs: list[list[tuple[int, int, str]]] = [[] for _ in range(NUM_CLASSES)]
    seen = [0] * NUM_CLASSES
    for index, (label, text) in enumerate(rows):
        seen[label] += 1
        reservoir = reservoirs[label]
        if len(reservoir) < limit:
            reservoir.append((index, label, text))
        else:
            slot = rng.randrange(seen[label])
            if slot < limit:
                reservoir[slot] = (index, label, text)
    quotas = _class_quotas([len(r) for r in reservoirs], limit)
    chosen = []
    for reservoir, quota in zip(reservoirs, quotas):
        chosen.extend(rng.sample(reservoir, quota))
    chosen.sort()
    return [text for _, _, text in chosen], [label for _, label, _ in chosen]


def load_yelp(source="synthetic", split: str = "train", limit: int | None = None, seed: int = 0,
              skip_bad_rows: bool = False) -> tuple[list[str], list[int]]:
    """Reviews and their labels 0..4 (one to five stars) from a Yelp source (see the module docstring).

    limit: keep a class-balanced random subset of this many reviews (deterministic for a given seed).
    skip_bad_rows: skip rows that break the format instead of raising YelpFormatError; the count is reported
    by a YelpSkippedRowsWarning, the "coursekit.data" logger and last_skipped_rows().
    """
    if split not in SPLITS:
        raise ValueError(f"split must be one of {SPLITS}, got {split!r}")
    if limit is not None and (isinstance(limit, bool) or not isinstance(limit, int) or limit < 1):
        raise ValueError(f"limit must be a positive int or None, got {limit!r}")
    if not isinstance(source, (str, os.PathLike)):
        raise TypeError(f"source must be 'synthetic' or a path, got {type(source).__name__}")
    skipped: list[SkippedRow] = []
    rows = _rows(source, split, skip_bad_rows, skipped)
    if source != "synthetic":  # a bar appears only if reading takes more than 2 s (the real set: 650k rows)
        rows = progress(rows, desc=f"reading {split}", unit=" reviews", delay=2)
    if limit is None:
        texts, labels = [], []
        for label, text in rows:
            labels.append(label)
            texts.append(text)
    else:
        texts, labels = _stratified(rows, limit, seed)
    _last_skipped[:] = skipped
    if skipped:
        warning = YelpSkippedRowsWarning(skipped)
        logger.warning("%s", warning)
        warnings.warn(warning, stacklevel=2)
    return texts, labels
