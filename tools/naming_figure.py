"""How many of the wrong answers in the hidden checks' tests get their mistake named (issue 35's naming figure).

    python tools/naming_figure.py            # runs tests/autograder/checks (not slow), prints the figure

Every wrong answer those tests try goes through `variants.fails_with(check, answer, ...)`. This script runs them
with a plugin that records, for each such call, whether the check's failure carried a catalogue id
(`CheckFailed.mistake_id`), and sorts the unnamed ones by what the message says:

    stub         "not implemented yet"
    form         a wrong type, shape or dtype, a missing submodule or method, a NaN, an error raised
    edge case    a stated edge case missed (partial credit, its own criterion and message)
    mistake      everything else: an answer that runs, has the right form, and computes something wrong

The figure is the share of the last kind, the typical mistakes, that the checks name.
"""
from __future__ import annotations

import json
import os
import sys
import tempfile
from collections import Counter
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
FORM = ("wrong shape", "must return", "must be a", "expected submodule", "needs a method", "float32", "int64",
        "bool tensor", "NaN or inf", "must be a buffer", "raised an error", "tuple (output", "numpy array")


def kind(message: str) -> str:
    first = message.splitlines()[0]
    if "not implemented yet" in first:
        return "stub"
    if "stated edge case" in first:
        return "edge case"
    if any(words in first for words in FORM):
        return "form"
    return "mistake"


class Recorder:
    """A pytest plugin: wraps `variants.fails_with` in every test and writes one JSON line per call."""

    def __init__(self, path: Path):
        self.out = path.open("w", encoding="utf-8")

    @pytest.fixture(autouse=True)
    def _record(self, request, monkeypatch):
        try:
            import variants
        except ImportError:
            yield
            return
        original = variants.fails_with

        def fails_with(check, obj, *fragments):
            with pytest.raises(AssertionError) as info:
                check(obj)
            self.out.write(json.dumps({"test": request.node.nodeid, "id": getattr(info.value, "mistake_id", None),
                                       "message": str(info.value)}) + "\n")
            self.out.flush()
            return original(check, obj, *fragments)

        monkeypatch.setattr(variants, "fails_with", fails_with)
        yield


def main() -> int:
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "calls.jsonl"
        code = pytest.main(["-q", "-p", "no:cacheprovider", "-m", "not slow", str(ROOT / "tests/autograder/checks")],
                           plugins=[Recorder(path)])
        calls = [json.loads(line) for line in path.read_text().splitlines()]
    if code != 0:
        print("the check tests failed: the figure would mean nothing", file=sys.stderr)
        return int(code)
    named = [c for c in calls if c["id"]]
    unnamed = Counter(kind(c["message"]) for c in calls if not c["id"])
    mistakes = len(named) + unnamed["mistake"]
    print(f"\n{len(calls)} wrong answers tried; {len(named)} named by a catalogue id")
    print(f"unnamed: {dict(unnamed)}")
    print(f"typical mistakes (right form, wrong values): {mistakes}, named {len(named)} "
          f"= {len(named) / mistakes:.1%}")
    for call in calls:
        if not call["id"] and kind(call["message"]) == "mistake":
            print(f"  not named: {call['test'].split('::')[-1]}: {call['message'].splitlines()[0][:100]}")
    return 0


if __name__ == "__main__":
    os.chdir(ROOT)
    raise SystemExit(main())
