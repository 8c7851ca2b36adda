"""The yelp_review_full file format: its escapes, and reading and writing its rows.

The format (Zhang et al., 2015, as distributed by fast.ai): CSV without a header, two columns "label","text",
every field quoted, a quote inside a field doubled (""), labels "1".."5" (stars), a newline inside a review
stored as the two characters backslash + n (and some reviews carry a backslash-escaped quote).

This module knows nothing about where files come from: the generator (`synth.py`) writes with it, the loader
(`yelp.py`) reads with it.
"""
from __future__ import annotations

import csv
import os
import re
from dataclasses import dataclass
from typing import Iterable, Iterator

__all__ = ["encode_yelp_text", "decode_yelp_escapes", "write_yelp_csv", "read_yelp_csv", "YelpFormatError",
           "SkippedRow", "STARS"]

STARS = ("1", "2", "3", "4", "5")  # the labels as the files store them; readers return 0..4

# --- escapes ----------------------------------------------------------------------------------------------------
_ESCAPES = {"\\n": "\n", '\\"': '"'}
_ESCAPE_PATTERN = re.compile(r'\\n|\\"')


def encode_yelp_text(text: str) -> str:
    """Store newlines the way the Yelp files do: as a literal backslash + n."""
    return text.replace("\r\n", "\n").replace("\n", "\\n")


def decode_yelp_escapes(text: str) -> str:
    """Replace the literal escapes of the Yelp CSV files: backslash-n -> newline, backslash-quote -> quote."""
    return _ESCAPE_PATTERN.sub(lambda match: _ESCAPES[match.group(0)], text)


# --- errors -----------------------------------------------------------------------------------------------------
class YelpFormatError(ValueError):
    """A row that does not follow the yelp_review_full format; the message names the file and the line."""

    def __init__(self, source: str, line: int, problem: str):
        super().__init__(f"{source}, line {line}: {problem}")
        self.source, self.line, self.problem = source, line, problem


@dataclass(frozen=True)
class SkippedRow:
    source: str
    line: int
    problem: str


# --- writing ----------------------------------------------------------------------------------------------------
def write_yelp_csv(path: str | os.PathLike, rows: Iterable[tuple[int, str]]) -> None:
    """Write (stars 1..5, text) rows in the exact yelp_review_full format (UTF-8, "\\n" line ends)."""
    with open(path, "w", encoding="utf-8", newline="") as handle:
        writer = csv.writer(handle, quoting=csv.QUOTE_ALL, lineterminator="\n")
        for stars, text in rows:
            writer.writerow([str(stars), encode_yelp_text(text)])


# --- reading ----------------------------------------------------------------------------------------------------
class _LineDecoder:
    """Decodes a binary stream line by line as strict UTF-8, remembering which lines were not valid."""

    def __init__(self, stream: Iterable[bytes], source: str, skip_bad_rows: bool):
        self.stream, self.source, self.skip_bad_rows = stream, source, skip_bad_rows
        self.bad_lines: dict[int, str] = {}
        self.line = 0

    def __iter__(self) -> Iterator[str]:
        for raw in self.stream:
            self.line += 1
            if self.line == 1 and raw.startswith(b"\xef\xbb\xbf"):
                raw = raw[3:]  # a byte order mark left by a spreadsheet program
            try:
                yield raw.decode("utf-8")
            except UnicodeDecodeError as error:
                problem = f"invalid UTF-8 (byte {error.start})"
                if not self.skip_bad_rows:
                    raise YelpFormatError(self.source, self.line, problem) from None
                self.bad_lines[self.line] = problem
                yield raw.decode("utf-8", errors="replace")


def read_yelp_csv(stream: Iterable[bytes], source: str, skip_bad_rows: bool, skipped: list[SkippedRow]):
    """Yield (label 0..4, text) from a binary CSV stream in the Yelp format.

    Blank lines are ignored. A bad row raises YelpFormatError naming `source` and its line, or, with
    skip_bad_rows, is appended to `skipped` instead."""
    decoder = _LineDecoder(stream, source, skip_bad_rows)
    reader = csv.reader(decoder, strict=True)
    first_line = 1
    while True:
        try:
            row = next(reader)
        except StopIteration:
            return
        except csv.Error as error:
            # the record that starts at first_line is broken; the parser resumes after the line it stopped on
            span = f" (lines {first_line}-{decoder.line})" if decoder.line > first_line else ""
            problem = f"broken CSV quoting: {error}{span}"
            if not skip_bad_rows:
                raise YelpFormatError(source, first_line, problem) from None
            skipped.append(SkippedRow(source, first_line, problem))
            first_line = decoder.line + 1
            continue
        last_line = decoder.line
        lines = range(first_line, last_line + 1)
        first_line = last_line + 1
        if not row and not any(n in decoder.bad_lines for n in lines):
            continue  # a blank line is not a review (e.g. an empty last line added by an editor)
        problem = next((decoder.bad_lines.pop(n) for n in lines if n in decoder.bad_lines), None)
        if problem is None:
            problem, result = _check_row(row)
        if problem is None:
            yield result
        elif skip_bad_rows:
            skipped.append(SkippedRow(source, lines[0], problem))
        else:
            raise YelpFormatError(source, lines[0], problem)


def _check_row(row: list[str]):
    if len(row) != 2:
        return f"expected 2 fields (label, text), found {len(row)}", None
    label, text = row
    if label.strip() not in STARS:
        return f"label must be 1..5, found {label!r}", None
    text = decode_yelp_escapes(text)
    if not text.strip():
        return "empty review text", None
    return None, (int(label) - 1, text)
