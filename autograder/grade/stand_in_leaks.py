"""The stand-ins never leave the grader in a graded notebook (issue #47): a grading step on the worker.

A hidden check lends the course's working parts (autograder/checks/stand_ins.py) to a student's kernel, compiled
(the kernel never holds their source). A harvesting notebook can still print what it caught: the code objects'
bytes (`marshal.dumps`), or source it rebuilt from them. The graded notebook is what formgrader, the feedback page
and the report are made from, so `remove_leaks` takes out, before it is stored, every output that carries stand-in
code: streams, every mime type of rich outputs (display updates land there too), error values and tracebacks, and
output metadata. Each goes whole; a note takes its place (an error stays an error, so a grade cell keeps its 0),
and the cell gets a "stand-in-leak" flag for review. What is looked for:

- source: the stand-ins' lines (whitespace ignored, at least `MIN_LINE` characters), `LINES_FOR_A_LEAK` distinct
  ones in the notebook's outputs, not counting lines the notebook's own cells hold (an honest traceback quotes
  the student's own code, which may share a line with a stand-in);
- code: the bytes of any stand-in function's or class's compiled body (`co_code`, as marshal writes it);
- printed whole or in pieces (the outputs of the notebook are searched joined, whitespace removed), forwards or
  reversed, as text or base64 (standard or URL-safe), hex, `\\x` escapes (a printed `bytes`) or a list of byte
  values, zlib/gzip/bz2/lzma-compressed, nested up to `MAX_DEPTH` encodings deep.

Not closed: an encoding outside that list (a cipher, a rotation of the letters, a disassembly): the stand-ins
reach the kernel as code so that rebuilding their source takes real work, and nothing a kernel writes to its files
leaves the jail (autograder/sandbox/jail.py). A submission whose own cells carry stand-in code (a harvested code
object handed in: the similarity check compares source only) gets a "stand-in-code" tamper flag.
"""
from __future__ import annotations

import binascii
import bz2
import codecs
import dataclasses
import functools
import lzma
import marshal
import re
import zlib

import nbformat
import numpy as np

from autograder.course import cells
from autograder.grade.tamper_scan import Flag
from autograder.sandbox.execute import error_output

MIN_LINE = 20  # characters (whitespace removed) of a stand-in line that counts
LINES_FOR_A_LEAK = 2  # distinct stand-in lines, outside the notebook's own cells, that make a leak
MIN_CODE = 24  # bytes of a compiled body that counts (shorter ones are too common)
MAX_DEPTH = 3  # encodings inside encodings
MAX_INFLATED = 16 * 2**20  # bytes a compressed run may inflate to
FRAGMENT_WINDOWS = 4  # 8-byte windows of the compiled bodies that make a piece of them (`Detector.fragments_in`)
NOTE = ("[output removed by the grader: it carried code of the course's stand-ins, the working parts the grader lends "
        "to its checks, which are not handed out]")

_SPACE = re.compile(r"\s+")
_BASE64 = re.compile(r"[A-Za-z0-9+/_-]{24,}")
_HEX = re.compile(r"(?:[0-9a-fA-F]{2}){12,}")
_BYTE_LIST = re.compile(r"(?:(?:25[0-5]|2[0-4]\d|1?\d?\d),){12,}(?:25[0-5]|2[0-4]\d|1?\d?\d)")
_PLAIN_BASE64 = re.compile(r"[A-Za-z0-9+/\s]*=*\s*")
_ESCAPES = re.compile(r"\\x[0-9a-fA-F]{2}")
_STREAM_START = re.compile(rb"\x78|\x1f\x8b|BZh|\xfd7zXZ\x00")
_MAGIC = ((b"\x1f\x8b", lambda: zlib.decompressobj(16 + zlib.MAX_WBITS)), (b"BZh", bz2.BZ2Decompressor),
          (b"\xfd7zXZ\x00", lzma.LZMADecompressor))


def _squash(text: str) -> str:
    return _SPACE.sub("", text)


@functools.lru_cache(maxsize=1)
def fingerprint() -> tuple[frozenset[str], tuple[bytes, ...]]:
    """(the stand-ins' source lines, whitespace removed; the bytes of their compiled bodies), made from
    autograder/checks/stand_ins.py as it lends them."""
    from autograder.checks import stand_ins

    names = sorted(stand_ins.STAND_INS)
    lines = frozenset(line for line in map(_squash, stand_ins.source_for(names).splitlines()) if len(line) >= MIN_LINE)
    bodies, todo = set(), [marshal.loads(stand_ins.compiled_for(names))]
    while todo:
        code = todo.pop()
        todo.extend(const for const in code.co_consts if hasattr(const, "co_code"))
        if code.co_name != "<module>" and len(code.co_code) >= MIN_CODE and len(set(code.co_code)) >= 8:
            bodies.add(code.co_code)
    return lines, tuple(sorted(bodies))


class Detector:
    """Whether a text or bytes carries stand-in code; `own` is the notebook's own cells' text (not a leak)."""

    def __init__(self, own: str = ""):
        lines, self.bodies = fingerprint()
        self.heads = {body[:2] for body in self.bodies} | {body[:-3:-1] for body in self.bodies}  # looked for first
        own = _squash(own)
        self.lines = [line for line in lines if line not in own]

    def line_spans(self, text: str) -> tuple[set[str], list[tuple[int, int]]]:
        """(the stand-in lines in squashed `text`, forwards or reversed; where they are)."""
        found, spans = set(), []
        for line in self.lines:
            for needle in (line, line[::-1]):
                at = text.find(needle)
                while at >= 0:
                    found.add(line)
                    spans.append((at, at + len(needle)))
                    at = text.find(needle, at + 1)
        return found, spans

    def encoded_spans(self, text: str, depth: int = MAX_DEPTH) -> list[tuple[int, int]]:
        """Where squashed `text` holds encoded stand-in code: the characters that encode a compiled body, or the
        whole run when what it carries is deeper (compressed, or encoded twice)."""
        spans = []
        for run in _decoded_runs(text):
            found = self.body_in(run.data)
            if found is not None:
                spans.append(run.chars(*found))
            elif self.bytes_carry(run.data, depth):
                spans.append((run.start, run.end))
        return spans

    def body_in(self, data: bytes) -> tuple[int, int] | None:
        """Where in `data` a compiled body is (forwards or reversed), or None."""
        if any(head in data for head in self.heads):
            for body in self.bodies:
                for needle in (body, body[::-1]):
                    at = data.find(needle)
                    if at >= 0:
                        return at, at + len(needle)
        return None

    def text_carries(self, text: str, depth: int) -> bool:
        """Whether `text` holds stand-in lines enough for a leak, or encoded stand-in code (`depth` levels deep)."""
        text = _squash(text)
        return len(self.line_spans(text)[0]) >= LINES_FOR_A_LEAK or bool(depth and self.encoded_spans(text, depth))

    def bytes_carry(self, data: bytes, depth: int) -> bool:
        """Whether `data` holds a compiled body, or (`depth` levels deep) compresses or encodes stand-in code."""
        if self.body_in(data) is not None:
            return True
        if depth <= 1:
            return False
        if any(self.bytes_carry(inflated, depth - 1) for inflated in _inflated(data)):
            return True
        text = _as_text(data)
        return text is not None and self.text_carries(text, depth - 1)

    def fragments_in(self, data: bytes) -> bool:
        """Whether `data` holds pieces of the compiled bodies: at least `FRAGMENT_WINDOWS` of their 8-byte windows
        (what a notebook printed in bits; slower than `bytes_carry`, so a figure is not searched this way)."""
        anchors, hits = _anchors(), 0
        if len(data) < 3 * 8:
            return False
        for chunk in (data, data[::-1]):
            for offset in range(max(0, min(8, len(chunk) - 7))):
                windows = np.frombuffer(chunk, dtype="<u8", offset=offset, count=(len(chunk) - offset) // 8)
                where = np.searchsorted(anchors, windows).clip(max=len(anchors) - 1)
                hits += int((anchors[where] == windows).sum())
        return hits >= FRAGMENT_WINDOWS


@functools.lru_cache(maxsize=1)
def _anchors():
    """The sorted 8-byte windows (little-endian integers) of the compiled bodies, those of 4 distinct bytes or more."""
    windows = {int.from_bytes(body[at:at + 8], "little") for body in fingerprint()[1] for at in range(len(body) - 7)
               if len(set(body[at:at + 8])) >= 4}
    return np.array(sorted(windows), dtype=np.uint64)


def _as_text(data: bytes) -> str | None:
    """`data` as text when it is UTF-8 and mostly printable (what a decoded run of text looks like), else None."""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        return None
    sample = text[:4096]
    printable = sum(ch.isprintable() or ch.isspace() for ch in sample) >= 0.95 * len(sample)
    return text if len(text) >= MIN_LINE and printable else None


def _inflated(data: bytes):
    """`data` decompressed (at most MAX_INFLATED bytes) from each place in its first bytes where a zlib, gzip, bz2
    or xz stream may start (a run spliced from pieces may carry a few bytes of something else first)."""
    for match in _STREAM_START.finditer(data, 0, 72):
        head = data[match.start():]
        makers = [maker for magic, maker in _MAGIC if head.startswith(magic)]
        if head[0] == 0x78 and len(head) > 1 and (head[0] * 256 + head[1]) % 31 == 0:
            makers.append(zlib.decompressobj)
        for maker in makers:
            try:
                inflated = maker().decompress(head, MAX_INFLATED)
            except (OSError, EOFError, ValueError, zlib.error, lzma.LZMAError):
                continue
            yield inflated


@dataclasses.dataclass(frozen=True)
class _Run:
    """A run of characters of a text, read as bytes: `start`/`end` in the text, `data`, and how they map back."""

    start: int
    end: int
    data: bytes
    kind: str = "list"  # "base64" | "reversed base64" | "hex" | "list" (no map back: the whole run)
    offset: int = 0  # characters skipped before the first base64 quad

    def chars(self, first: int, last: int) -> tuple[int, int]:
        """The characters of the text that encode `data[first:last]`."""
        if self.kind == "hex":
            return self.start + 2 * first, self.start + 2 * last
        if self.kind == "list":
            return self.start, self.end
        low, high = self.offset + 4 * (first // 3), self.offset + 4 * -(-last // 3)
        if self.kind == "base64":
            return self.start + low, min(self.end, self.start + high)
        return max(self.start, self.end - high), self.end - low


def _decoded_runs(text: str):
    """Each run of squashed `text` read as base64 (forwards and reversed, at each of the four alignments a run
    spliced from pieces may need), hex, or a list of byte values (`_Run`s)."""
    for match in _BASE64.finditer(text):
        run = match.group().replace("-", "+").replace("_", "/")
        for kind, candidate in (("base64", run), ("reversed base64", run[::-1])):
            for offset in range(4) if len(run) <= 2**20 else (0,):
                chunk = candidate[offset:]
                chunk = chunk[:len(chunk) // 4 * 4]
                if len(chunk) >= 24:
                    yield _Run(match.start(), match.end(), binascii.a2b_base64(chunk), kind, offset)
    for match in _HEX.finditer(text):
        yield _Run(match.start(), match.end(), bytes.fromhex(match.group()), "hex")
    for match in _BYTE_LIST.finditer(text):
        yield _Run(match.start(), match.end(), bytes(int(value) for value in match.group().split(",")))


def _escaped_bytes(text: str) -> bytes | None:
    """A printed `bytes` (`b'\\xe3\\x00...'`) read back, when `text` has `\\x` escapes."""
    if len(_ESCAPES.findall(text[:65536])) < 8:
        return None
    try:
        return codecs.escape_decode(text.encode("latin-1", "backslashreplace"))[0]
    except ValueError:
        return None


def _strings(value, keys: list[str]) -> list[str]:
    """Every string of `value` (an output's field) in order; the keys of its dicts go to `keys`."""
    if isinstance(value, str):
        return [value]
    if isinstance(value, dict):
        keys.extend(str(key) for key in value)
        return [s for item in value.values() for s in _strings(item, keys)]
    if isinstance(value, (list, tuple)):
        return [s for item in value for s in _strings(item, keys)]
    return []


IMAGES = ("image/png", "image/jpeg", "image/gif")


def _content(output) -> tuple[list[str], list[str], list[bytes]]:
    """(the strings an output shows, the keys of its mime bundle and metadata, its images decoded): what a kernel
    can write into it. An image is what its mime type says only when its value is plain base64; else it is text."""
    keys: list[str] = []
    skip = ("output_type", "execution_count", "name" if output.get("output_type") == "stream" else "")
    data = output.get("data") if isinstance(output.get("data"), dict) else {}
    images = {mime: value for mime, value in data.items()
              if mime in IMAGES and isinstance(value, str) and _PLAIN_BASE64.fullmatch(value)}
    output = {**output, "data": {mime: value for mime, value in data.items() if mime not in images}}
    strings = [s for field, value in output.items() if field not in skip for s in _strings(value, keys)]
    keys.extend(images)
    decoded = [binascii.a2b_base64(squashed[:len(squashed) // 4 * 4]) for value in images.values()
               for squashed in (_squash(value).rstrip("="), _squash(value).rstrip("=")[::-1])]
    return strings, keys, decoded


def leaky_outputs(outputs: list[dict], detector: Detector) -> set[int]:
    """Indices of the `outputs` (in notebook order) that carry stand-in code, alone or joined with the others."""
    texts, starts, leaky, at = [], [], set(), 0
    for index, output in enumerate(outputs):
        strings, keys, images = _content(output)
        texts.append(_squash("".join(strings)))
        starts.append(at)
        at += len(texts[-1])
        escaped = [data for data in map(_escaped_bytes, strings + keys) if data is not None]
        if any(detector.text_carries(key, MAX_DEPTH) for key in keys) or \
                any(detector.bytes_carry(data, MAX_DEPTH) for data in images + escaped) or \
                any(detector.fragments_in(data) for data in escaped) or \
                any(detector.fragments_in(run.data) for run in _decoded_runs(texts[-1])):
            leaky.add(index)
    joined = "".join(texts)
    found, spans = detector.line_spans(joined)
    spans = (spans if len(found) >= LINES_FOR_A_LEAK else []) + detector.encoded_spans(joined)
    ends = [start + len(text) for start, text in zip(starts, texts)]
    leaky.update(index for index in range(len(outputs)) for a, b in spans if starts[index] < b and a < ends[index])
    return leaky


def _replacement(output) -> dict:
    if output.get("output_type") == "error":
        ename = output.get("ename", "")
        return error_output(ename if str(ename).isidentifier() and len(ename) <= 60 else "Error", NOTE)
    return nbformat.v4.new_output("stream", name="stdout", text=NOTE + "\n")


def remove_leaks(nb) -> list[Flag]:
    """Replace every output of `nb` that carries stand-in code by a note; flags for the instructor."""
    detector = Detector("\n".join(cell.get("source", "") for cell in nb.cells))
    places = [(number, cell, index) for number, cell in enumerate(nb.cells) if cell.get("cell_type") == "code"
              for index in range(len(cell.get("outputs", [])))]
    leaky = leaky_outputs([cell.outputs[index] for _, cell, index in places], detector)
    flagged: dict[str, Flag] = {}
    for place in sorted(leaky):
        number, cell, index = places[place]
        cell.outputs[index] = _replacement(cell.outputs[index])
        where = cells.grade_id(cell) or f"cell {number}"
        flagged.setdefault(where, Flag("stand-in-leak", "review", where, (
            "an output carried code of the stand-ins the grader lends its checks; it was removed")))
    return list(flagged.values()) + handed_in_code(nb, detector)


def handed_in_code(nb, detector: Detector) -> list[Flag]:
    """A "stand-in-code" tamper flag for each cell of the submission that carries the stand-ins' compiled code."""
    flags = []
    for number, cell in enumerate(nb.cells):
        keys: list[str] = []
        strings = _strings([cell.get("source", ""), cell.get("metadata", {}), cell.get("attachments", {})], keys)
        escaped = [data for data in map(_escaped_bytes, strings) if data is not None]
        if detector.encoded_spans(_squash("".join(strings + keys))) or \
                any(detector.bytes_carry(data, MAX_DEPTH) for data in escaped):
            where = cells.grade_id(cell) or f"cell {number}"
            flags.append(Flag("stand-in-code", "tamper", where, "holds compiled code of the grader's stand-ins"))
    return flags
