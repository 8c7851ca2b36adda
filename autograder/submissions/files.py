"""Reading what students submitted without ever leaving their folder.

Used by `autograder collect` (the input folder or zip) and `autograder grade` (course/submitted/): a submission
may hold symbolic links (to a classmate's notebook, to /etc/passwd), hard links, FIFOs, sockets or devices, or a
notebook too large to grade. None of these is ever followed, opened for long or copied: each is refused with a
reason meant for the instructor, and only that file (collect) or that submission (grade) is affected.

* `refusal(st)`: why an lstat() result is refused (None for a plain file or folder);
* `read_regular(path, limit)`: the bytes of a plain file, opened with O_NOFOLLOW | O_NONBLOCK and checked with
  fstat() on the open descriptor (no race between the check and the read), at most `limit` bytes;
* `copy_regular(path, target, limit)`: the same checks, streamed into `target` (never held in memory);
* `scan_tree(folder)`: every refused entry under a folder, found with lstat() and os.walk(followlinks=False).

The sizes are nbgrader configuration (`SubmissionLimits`, set in the course's nbgrader_config.py; the module
constants are their defaults): a notebook, any other file, one submission's files together, and a zip's total
uncompressed bytes and entries.
"""
from __future__ import annotations

import os
import stat
from pathlib import Path

from traitlets import Integer
from traitlets.config import Config, LoggingConfigurable

from autograder.course.units import MiB
from autograder.errors import AutograderError

MAX_NOTEBOOK_BYTES = 32 * MiB     # a submitted notebook larger than this is refused (collect and grade)
MAX_EXTRA_FILE_BYTES = 50 * MiB   # any other submitted file
MAX_TIMESTAMP_BYTES = 1024        # timestamp.txt holds one line

MAX_SUBMISSION_BYTES = 128 * MiB  # one student's files for one assignment together (notebooks first)
MAX_ARCHIVE_BYTES = 2 * 1024 * MiB  # everything a zip given to collect expands to (declared and actual)
MAX_ARCHIVE_ENTRIES = 20_000      # entries of that zip (files and folders)

_SPECIAL = ((stat.S_ISFIFO, "a FIFO (named pipe)"), (stat.S_ISSOCK, "a socket"),
            (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"))


class SubmissionLimits(LoggingConfigurable):
    """What `autograder collect` accepts (and grade, for notebooks): `c.SubmissionLimits.<name>` in
    nbgrader_config.py."""

    notebook_bytes = Integer(MAX_NOTEBOOK_BYTES, help="Largest submitted notebook, in bytes.").tag(config=True)
    file_bytes = Integer(MAX_EXTRA_FILE_BYTES, help="Largest other submitted file, in bytes.").tag(config=True)
    submission_bytes = Integer(MAX_SUBMISSION_BYTES, help=(
        "Total bytes of one student's files for one assignment (its notebooks first, then the other files in name "
        "order): a file that would take the total over it is refused with a reason, in a zip before it is "
        "extracted.")).tag(config=True)
    archive_bytes = Integer(MAX_ARCHIVE_BYTES, help=(
        "Total uncompressed bytes of a zip given to collect: its directory is checked before anything is "
        "extracted, and the bytes actually extracted are counted too.")).tag(config=True)
    archive_entries = Integer(MAX_ARCHIVE_ENTRIES, help="Entries (files and folders) of a zip given to collect."
                              ).tag(config=True)


def submission_limits(config=None):
    """The SubmissionLimits of a course's nbgrader configuration (`coursedir.nbgrader_config`)."""
    return SubmissionLimits(config=config if config is not None else Config())


class RefusedFile(AutograderError, ValueError):
    """A submitted file that is never read: the message says why."""


def refusal(st: os.stat_result) -> str | None:
    """Why an entry with this lstat() result is refused, or None (a plain file with one link, or a folder)."""
    mode = st.st_mode
    if stat.S_ISLNK(mode):
        return "symbolic link refused (links are never followed)"
    for test, what in _SPECIAL:
        if test(mode):
            return f"{what} refused (only plain files are accepted)"
    if stat.S_ISREG(mode) and st.st_nlink > 1:
        return "hard link refused (it may be another file's content)"
    if not (stat.S_ISREG(mode) or stat.S_ISDIR(mode)):
        return "special file refused (only plain files are accepted)"
    return None


def size_text(size: int) -> str:
    return f"{size / MiB:.1f} MiB" if size >= MiB / 10 else f"{size} bytes"


def too_large(size: int, limit: int, what: str = "file") -> str:
    return f"{what} too large: {size_text(size)}, over the {size_text(limit)} limit"


def read_regular(path: Path | str, limit: int, what: str = "file") -> bytes:
    """The content of a plain file at `path` (never through a link), at most `limit` bytes; else RefusedFile."""
    fd = _open_plain(path, limit, what)
    try:
        return b"".join(_chunks(fd, limit, what))
    finally:
        os.close(fd)


def copy_regular(path: Path | str, target: Path | str, limit: int, what: str = "file") -> int:
    """Copy the plain file at `path` (never through a link) into the new file `target`, streamed, at most `limit`
    bytes; returns the bytes copied. Else RefusedFile (and `target` is removed)."""
    fd = _open_plain(path, limit, what)
    total = 0
    try:
        with open(target, "xb") as out:
            for chunk in _chunks(fd, limit, what):
                total += len(chunk)
                out.write(chunk)
        return total
    except RefusedFile:
        if os.path.isfile(target) and not os.path.islink(target):
            os.unlink(target)
        raise
    finally:
        os.close(fd)


def _open_plain(path: Path | str, limit: int, what: str) -> int:
    """A read-only descriptor of the plain file at `path`, checked before and after opening (never through a
    link, never a FIFO or device), and no larger than `limit` bytes; else RefusedFile."""
    flags = os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0)
    try:
        st = os.lstat(path)
    except OSError as exc:
        raise RefusedFile(f"cannot be read ({exc.strerror or exc})") from None
    reason = refusal(st)
    if reason is None and not stat.S_ISREG(st.st_mode):
        reason = "a folder, not a file" if stat.S_ISDIR(st.st_mode) else "not a plain file"
    if reason:
        raise RefusedFile(reason)
    try:
        fd = os.open(path, flags)
    except OSError as exc:  # ELOOP: it became a link after the lstat
        raise RefusedFile(f"cannot be opened ({exc.strerror or exc})") from None
    try:
        st = os.fstat(fd)
        reason = refusal(st) or (None if stat.S_ISREG(st.st_mode) else "not a plain file")
        if reason:
            raise RefusedFile(reason)
        if st.st_size > limit:
            raise RefusedFile(too_large(st.st_size, limit, what))
    except RefusedFile:
        os.close(fd)
        raise
    return fd


def _chunks(fd: int, limit: int, what: str):
    """The content of `fd` in chunks of at most 1 MiB; RefusedFile as soon as it passes `limit` bytes (a file
    that grows after the size check)."""
    total = 0
    while chunk := os.read(fd, min(1 * MiB, limit + 1 - total)):
        total += len(chunk)
        if total > limit:
            raise RefusedFile(too_large(total, limit, what))
        yield chunk


def scan_tree(folder: Path | str) -> list[tuple[str, str]]:
    """(path relative to `folder`, reason) for every refused entry at or under `folder` (never followed)."""
    folder = Path(folder)
    try:
        st = os.lstat(folder)
    except OSError as exc:
        return [(".", f"cannot be read ({exc.strerror or exc})")]
    reason = refusal(st)
    if reason or not stat.S_ISDIR(st.st_mode):
        return [(".", reason or "not a folder")]
    found = []
    for dirpath, dirnames, filenames in os.walk(folder, followlinks=False):
        for name in sorted(dirnames + filenames):
            path = os.path.join(dirpath, name)
            try:
                reason = refusal(os.lstat(path))
            except OSError as exc:
                reason = f"cannot be read ({exc.strerror or exc})"
            if reason:
                found.append((os.path.relpath(path, folder), reason))
        dirnames[:] = [d for d in dirnames if not os.path.islink(os.path.join(dirpath, d))]
    return found
