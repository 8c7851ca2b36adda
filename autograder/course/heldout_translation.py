"""The Multi30k captions that 10's trained-translator check scores on, kept out of the jail.

The check (`autograder/checks/translation/trained.py`) translates the last HELDOUT_PAIRS caption pairs of
`test_2016_flickr` (lines 500-999). The data folder bound into the jail is the course's own, so without more the
kernel could read those pairs and learn them. The jail therefore sees `masked()` copies of the two test files
(autograder/sandbox/jail.py's `masked_multi30k_file`): line i of the held-out slice is replaced by line i of
`val` in both languages, so the files keep 1,000 lines, stay a parallel pair (line i of .de still translates line
i of .en), and the notebook's own test BLEU still runs; in the jail, half of that figure is measured on validation
captions (captions the model was not trained on either). The first 500 lines, which the grading budget's BLEU
reads (coursekit.translation_training's `test_sentences`), are untouched. No held-out pair occurs in `train` or
`val` (tests/autograder/checks/translation/test_trained.py).
"""
from __future__ import annotations

import gzip
import os

from coursekit.multi30k import SPLITS

HELDOUT_SPLIT = SPLITS[2]  # test_2016_flickr (a name the grade-id rule would take for a grade id: not spelled here)
HELDOUT_START = 500        # the held-out slice: lines HELDOUT_START .. HELDOUT_START + HELDOUT_PAIRS - 1
HELDOUT_PAIRS = 500
REPLACEMENT_SPLIT = "val"  # whose first HELDOUT_PAIRS lines stand in for the slice in the jail
LANGUAGES = ("de", "en")
MASKED_FILES = tuple(f"{HELDOUT_SPLIT}.{language}.gz" for language in LANGUAGES)


def heldout_pairs() -> list[tuple[str, str]]:
    """The held-out (German, English) caption pairs, read from the course's data on the grader's side."""
    from coursekit.multi30k import load_multi30k

    return load_multi30k(HELDOUT_SPLIT)[HELDOUT_START:HELDOUT_START + HELDOUT_PAIRS]


def _lines(path: str) -> list[str]:
    """The lines of a gzip caption file as coursekit.multi30k reads them (split on "\\n" only)."""
    with gzip.open(path, "rb") as handle:
        lines = handle.read().decode("utf-8").split("\n")
    return lines[:-1] if lines and lines[-1] == "" else lines


def masked_lines(test_lines: list[str], replacement_lines: list[str]) -> list[str]:
    """The test file's lines with the held-out slice replaced by the first lines of the replacement file."""
    end = HELDOUT_START + HELDOUT_PAIRS
    if len(test_lines) < end or len(replacement_lines) < HELDOUT_PAIRS:
        raise ValueError(f"a {HELDOUT_SPLIT} file needs {end} lines and its {REPLACEMENT_SPLIT} file "
                         f"{HELDOUT_PAIRS}; got {len(test_lines)} and {len(replacement_lines)}")
    return test_lines[:HELDOUT_START] + replacement_lines[:HELDOUT_PAIRS] + test_lines[end:]


def masked(source: str) -> bytes:
    """The gzip bytes of the test file `source` (`<folder>/test_2016_flickr.<lang>.gz`) with its held-out slice
    replaced by the first lines of `<folder>/val.<lang>.gz` (see the module docstring). Deterministic (mtime 0)."""
    folder, name = os.path.split(source)
    language = name[len(HELDOUT_SPLIT) + 1:-len(".gz")]
    if name not in MASKED_FILES:
        raise ValueError(f"{name!r} is not one of the held-out files {MASKED_FILES}")
    lines = masked_lines(_lines(source), _lines(os.path.join(folder, f"{REPLACEMENT_SPLIT}.{language}.gz")))
    return gzip.compress(("\n".join(lines) + "\n").encode("utf-8"), mtime=0)
