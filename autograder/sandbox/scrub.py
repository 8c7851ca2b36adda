"""Take the grading machine's paths out of a graded notebook before anyone sees it.

A student's own error in a library call, or a `print(torch.__file__)`, would otherwise put the grader's
folders (its Python environment, the repository, its temporary folders) into the feedback. Every text the
kernel produced (streams, error values and tracebacks, text/plain, text/html, text/markdown, JSON data) has
those prefixes replaced by short placeholders such as `<python-env>`. The verdicts of the judge never contain
a path in the first place.
"""
from __future__ import annotations

import os
import sys
import tempfile
from pathlib import Path

from autograder.course.coursedir import REPO_ROOT


TEXT_TYPES = ("text/plain", "text/html", "text/markdown", "text/latex", "application/javascript")


def _socket_root() -> list[tuple[str, str]]:
    """The kernels' socket folders' root (scratch.socket_root, e.g. /dev/shm/ag-...), when it is a tmpfs."""
    from autograder.sandbox import scratch

    try:
        root = scratch.socket_root()
    except ValueError:
        return []
    return [(root + os.sep + "ag-", "<grader-tmp>/ag-")] if root else []


def grading_paths(extra: dict[str, str] | None = None) -> list[tuple[str, str]]:
    """(prefix, placeholder) pairs, longest prefix first, for this machine."""
    pairs = {}
    for path, name in ((sys.prefix, "<python-env>"), (sys.exec_prefix, "<python-env>"),
                       (sys.base_prefix, "<python>"), (sys.base_exec_prefix, "<python>"),
                       (str(REPO_ROOT), "<course-repo>"), (tempfile.gettempdir() + os.sep + "ag-", "<grader-tmp>/ag-"),
                       (os.path.expanduser("~"), "<home>"), *_socket_root()):
        for variant in {path, os.path.realpath(path)}:
            if variant and variant not in ("/", os.sep) and len(variant) > 4:
                pairs[variant] = name
    for path, name in (extra or {}).items():
        pairs[path] = name
    return sorted(pairs.items(), key=lambda pair: -len(pair[0]))


def scrub_text(text: str, pairs) -> str:
    for prefix, placeholder in pairs:
        if prefix in text:
            text = text.replace(prefix, placeholder)
    return text


def _scrub(value, pairs):
    if isinstance(value, str):
        return scrub_text(value, pairs)
    if isinstance(value, list):
        return [_scrub(v, pairs) for v in value]
    if isinstance(value, dict):
        return {k: _scrub(v, pairs) for k, v in value.items()}
    return value


def scrub_notebook(nb, extra: dict[str, str] | None = None):
    """Replace grading-machine paths in every output of `nb` (in place); returns `nb`."""
    pairs = grading_paths(extra)
    for cell in nb.cells:
        for output in cell.get("outputs", []):
            kind = output.get("output_type")
            if kind == "stream":
                output["text"] = _scrub(output.get("text", ""), pairs)
            elif kind == "error":
                output["evalue"] = _scrub(output.get("evalue", ""), pairs)
                output["traceback"] = _scrub(output.get("traceback", []), pairs)
            elif kind in ("display_data", "execute_result", "update_display_data"):
                data = output.get("data", {})
                for mime in list(data):
                    if mime in TEXT_TYPES or mime.endswith("json"):
                        data[mime] = _scrub(data[mime], pairs)
    return nb


def contains_grading_path(text: str) -> list[str]:
    """The grading-machine prefixes found in `text` (for tests and the review of feedback)."""
    return [prefix for prefix, _ in grading_paths() if prefix in text]

