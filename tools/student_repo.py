"""The student repository: what students clone or download, and nothing else.

    python -m tools.student_repo                        # -> dist/student-repo/ (a git repository, one commit)
    python -m tools.student_repo --out DIR [--no-git]   # (make student-repo)

It holds the released exercises (exercises/, without any provided.py: that is gated and handed out by the hub),
the `coursekit` sources, the data the notebooks read (the same files the student wheel carries), the build files
and the pins, a Makefile holding only the course Makefile's `student` target (copied verbatim, so both build the
same environment), and the student README of tools/student_repo_files/. Nothing of solutions/, autograder/,
course/, tests/, deploy/ or docs/ is copied: the tool lists what goes in, never what stays out, and
tests/course/test_leaks.py scans the result.
"""
from __future__ import annotations

import argparse
import re
import shutil
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
FILES = Path(__file__).resolve().parent / "student_repo_files"
DEFAULT_OUT = REPO / "dist" / "student-repo"

COPIED_FILES = ("pyproject.toml", "setup.py", "constraints.txt", "requirements-model.txt")
COPIED_FOLDERS = ("coursekit", "exercises")
SKIPPED = shutil.ignore_patterns("__pycache__", "*.pyc", ".ipynb_checkpoints", "provided.py", "_bundled_data")


def student_data() -> list[str]:
    """The data paths of the course Makefile's STUDENT_DATA (what the student wheel carries)."""
    match = re.search(r"^STUDENT_DATA\s*=\s*(.+)$", (REPO / "Makefile").read_text(), re.M)
    if not match:
        raise SystemExit("Makefile has no STUDENT_DATA line: the student repository would miss the notebooks' data")
    return match.group(1).split()


def student_makefile() -> str:
    """The course Makefile's student environment block (variables and the `student` recipe), verbatim."""
    lines = (REPO / "Makefile").read_text().splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("# The student environment of the README"))
    recipe = next(i for i, line in enumerate(lines) if line.startswith("student:"))
    end = recipe + 1
    while end < len(lines) and lines[end].startswith("\t"):
        end += 1
    header = ["# Built by the course's tools/student_repo.py from its Makefile: `make student` builds your environment.",
              "PYTHON ?= python3", ".PHONY: student", ""]
    return "\n".join(header + lines[start:end]) + "\n"


def build(out: Path, git: bool = True) -> Path:
    """Write the student repository to `out` (replaced when it exists); returns `out`."""
    out = Path(out).resolve()
    if REPO == out or REPO in out.parents and out.parent != REPO / "dist":
        raise SystemExit(f"{out} lies inside the course repository: choose a folder of dist/ or one outside it")
    if out.exists():
        shutil.rmtree(out)
    out.mkdir(parents=True)
    for name in COPIED_FILES:
        shutil.copy2(REPO / name, out / name)
    for name in COPIED_FOLDERS:
        shutil.copytree(REPO / name, out / name, ignore=SKIPPED)
    for rel in student_data():
        source = REPO / rel
        if source.is_dir():
            shutil.copytree(source, out / rel, ignore=SKIPPED)
        else:
            (out / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, out / rel)
    shutil.copy2(FILES / "README.md", out / "README.md")
    shutil.copy2(FILES / "gitignore", out / ".gitignore")
    (out / "Makefile").write_text(student_makefile())
    if git and shutil.which("git"):
        run = lambda *args: subprocess.run(["git", "-c", "user.name=transformers101", "-c",
                                            "user.email=course@localhost", *args],
                                           cwd=out, check=True, capture_output=True, timeout=120)
        run("init", "-q")
        run("add", "-A")
        run("commit", "-q", "-m", "transformers101: the exercises, coursekit and the course data")
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tools.student_repo", description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT, help="where to write it (default: dist/student-repo)")
    parser.add_argument("--no-git", action="store_true", help="a plain folder, no git repository")
    args = parser.parse_args(argv)
    out = build(args.out, git=not args.no_git)
    print(f"student repository ready: {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
