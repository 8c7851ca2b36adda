"""Drift between the prose and the repository: every repository path that a `.py` or `.md` file names exists, and
the ranges and counts of notebooks that prose states follow the course API (coursekit/api.py), never a hand-kept
number."""
from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

from autograder.course.provided import FIRST_WITH_PROVIDED, provided_range
from coursekit import api

REPO = Path(__file__).resolve().parents[1]
TOP_FOLDERS = ("autograder", "coursekit", "solutions", "tests", "docs", "tools", "bench", "deploy", "course",
               "exercises", "data", ".ci")
# a path that starts at a top folder and names a file (with an extension) or a folder (with a trailing '/')
PATH = re.compile(r"(?<![\w./-])((?:" + "|".join(re.escape(t) for t in TOP_FOLDERS) + r")/[\w./-]*[\w/])")

# Paths that are named on purpose although the repository does not hold them, each with its reason.
NAMED_ON_PURPOSE = {
    "data/yelp_review_full_csv.tgz": "the real Yelp set, downloaded by the instructor (07), never shipped",
    "data/task1/raw/": "where Multi30k's original download unpacks (its README says how the shipped copy was made)",
    "coursekit/_bundled_data/": "made by `make student` inside the student wheel's build folder",
}
# Files whose paths are made up (a test's scratch tree) or dated (a record of an earlier layout).
NOT_SCANNED = {
    "docs/benchmarks.md": "a dated record: each measurement names the files of its day",
    "tests/test_architecture.py": "builds scratch trees with made-up paths to test the scanner",
    "tests/course/test_solution_sameness.py": "names a pattern (NN_x), not a file",
    "tests/test_drift.py": "this file's own examples",
}


def _tracked(*patterns: str) -> list[str]:
    return subprocess.check_output(["git", "ls-files", *patterns], cwd=REPO, text=True).split()


def _named_paths(text: str) -> set[str]:
    paths = set()
    for match in PATH.finditer(text):
        path = match.group(1).rstrip(".")
        if text[match.end():match.end() + 1] in ("<", "{", "*") or "..." in path:   # a template or an elision
            continue
        if re.search(r"\.\w+$|/$", path):
            paths.add(path)
    return paths


def _ignored(path: str) -> bool:
    """git ignores it: a file the code makes at run time (the gradebook, a release, a report)."""
    return subprocess.run(["git", "check-ignore", "-q", path], cwd=REPO).returncode == 0


def test_the_scanner_finds_paths_and_skips_templates():
    text = ("see `autograder/checks/kit/draws.py`, docs/architecture.md. and coursekit/checks/ but not "
            "autograder/checks/<topic>/mistakes.py, tests/{x}.py, exercises/08_.../ or my/autograder/x.py")
    assert _named_paths(text) == {"autograder/checks/kit/draws.py", "docs/architecture.md", "coursekit/checks/"}


def test_every_repository_path_named_in_the_code_and_docs_exists():
    missing = {}
    for name in _tracked("*.py", "*.md"):
        if name in NOT_SCANNED:
            continue
        for path in _named_paths((REPO / name).read_text(encoding="utf-8", errors="replace")):
            if not (REPO / path).exists() and path not in NAMED_ON_PURPOSE and not _ignored(path):
                missing.setdefault(path, []).append(name)
    assert missing == {}, "paths named but not in the repository: " + "; ".join(
        f"{path} (in {', '.join(sorted(names))})" for path, names in sorted(missing.items()))


def test_the_paths_named_on_purpose_are_still_absent():
    """Once one of them is in the repository, its entry is no longer needed."""
    assert [p for p in NAMED_ON_PURPOSE if (REPO / p).exists() and not _ignored(p)] == []


def test_the_provided_range_comes_from_the_course_api():
    assert provided_range() == f"{FIRST_WITH_PROVIDED:02d}-{len(api.NOTEBOOKS):02d}"


@pytest.mark.parametrize("name", _tracked("*.py", "*.md", "*.ipynb", "Makefile", "*.sh", "*.yml", "*.yaml"))
def test_prose_names_the_provided_range_of_the_course_api(name):
    """A range of the notebooks with a provided.py (one that starts at the first of them, "04-…", next to the word
    "provided") runs to the last notebook: "04-09" stood in eight places once the course had ten notebooks."""
    if name in NOT_SCANNED:
        return
    text = (REPO / name).read_text(encoding="utf-8", errors="replace")
    first = f"{FIRST_WITH_PROVIDED:02d}"
    stale = sorted({m.group(0) for m in re.finditer(rf"(?<![\d-]){first}[-–](\d\d)(?![\d-])", text)
                    if m.group(0).replace("–", "-") != provided_range()
                    and "provided" in text[max(0, m.start() - 160):m.end() + 160]})
    assert stale == [], f"{name} names {stale}; the notebooks with a provided.py are {provided_range()}"


NUMBER_WORDS = ("zero one two three four five six seven eight nine ten eleven twelve thirteen fourteen fifteen "
                "sixteen seventeen eighteen nineteen twenty").split()


@pytest.mark.parametrize("readme", ["README.md", "tools/student_repo_files/README.md"])
def test_the_readmes_count_the_notebooks_of_the_course_api(readme):
    text = (REPO / readme).read_text(encoding="utf-8")
    counts = re.findall(r"\b(" + "|".join(NUMBER_WORDS) + r") notebooks\b", text, flags=re.I)
    assert counts, f"{readme} no longer says how many notebooks there are"
    assert {c.lower() for c in counts} == {NUMBER_WORDS[len(api.NOTEBOOKS)]}, (readme, counts)
