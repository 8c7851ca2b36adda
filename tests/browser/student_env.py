"""The student environment of the tests, built the way the student repository's README tells students (`make
student` in a copy of the student repository, outside the course repository), and the notebooks a student runs in it.

Used by tests/course/test_student_env.py (notebooks executed top to bottom by a kernel of the student environment)
and tests/browser/ (JupyterLab of the student environment in Chromium). Load it with `load_helpers()` of either.

* `student_repo()`: the student repository (tools/student_repo.py, what `make student-repo` writes), built once per
  test session into a temporary folder outside the course repository.
* `student_env()`: `make student` of that student repository into `.venv-student-test/<hash>/venv` (git-ignored),
  one venv per hash of what decides its packages (constraints.txt, the student requirements in pyproject.toml);
  `make student` runs again into it whenever the student repository's coursekit, data or build files changed (it
  then only rebuilds and reinstalls the coursekit wheel), so the tests always see the current coursekit. A file lock
  makes parallel sessions wait for one build.
* `prepare_assignment()`: copies the released exercise from the student repository into a folder of the student's
  own (no data/ beside or above it: the wheel carries the data), writes its provided.py with the instructor-side
  generator, and optionally fills every stub with the solution of the source notebook (course/source/<a>/<a>.ipynb)
  and shortens 07's training.
* `drawing_cells()`: the code cells that must show a figure.
"""
from __future__ import annotations

import atexit
import fcntl
import hashlib
import os
import re
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

import nbformat

REPO = Path(__file__).resolve().parents[2]
EXERCISES = REPO / "exercises"
SOURCE = REPO / "course" / "source"
CACHE = REPO / ".venv-student-test"
SCREENSHOTS = REPO / "build" / "browser-screenshots"  # git-ignored (build/): test artefacts, never committed
ASSIGNMENTS = sorted(p.name for p in SOURCE.iterdir() if (p / f"{p.name}.ipynb").is_file())

# 07, 08 and 09 train for minutes; the tests run them on less data or fewer steps (every cell still runs). Each
# replacement must match exactly once, so a change of the notebook that the tests no longer understand fails loudly.
_FEW_STEPS = '__import__("dataclasses").replace({}, steps=60, race_steps=10, eval_every=30)'
QUICK = {
    "07_yelp_classifier": [
        ("TRAIN_LIMIT = None ", "TRAIN_LIMIT = 1500 "),
        ("TEST_LIMIT = None\n", "TEST_LIMIT = 500\n"),
        ('DATA_SOURCE, TRAIN_LIMIT, TEST_LIMIT = "synthetic", None, None',
         'DATA_SOURCE, TRAIN_LIMIT, TEST_LIMIT = "synthetic", 1500, 500'),
        ("EPOCHS = 6 if GRADING else 20", "EPOCHS = 2"),
        ("COMPARE_EPOCHS = 2", "COMPARE_EPOCHS = 1"),
    ],
    # 08 and 09 train for minutes too: these runs check that every cell runs and shows what it should, not how well
    # the model learns (the hidden checks and tests/course do), so they train the grading budget's small model for
    # a few dozen steps (every cell still runs)
    "08_gpt_language_model": [
        ("BUDGET = budget_for(device, GRADING)", f"BUDGET = {_FEW_STEPS.format('budget_for(device, True)')}"),
    ],
    "09_modern_block": [
        ("budget = budget_for(device, grading=FAST)", f"budget = {_FEW_STEPS.format('budget_for(device, True)')}"),
        ("lengths = [64, 128, 256, 512] if FAST else", "lengths = [64, 128, 256, 512] if True else"),
    ],
    # 10 trains for minutes and decodes a thousand captions with a beam: the grading budget's model for a few dozen
    # steps, and the decoding subsets of grading mode (every cell still runs)
    "10_translation": [
        ("BUDGET = budget_for(device, GRADING)",
         'BUDGET = __import__("dataclasses").replace(budget_for(device, True), steps=60, eval_every=30)'),
        ("n_beam = 10 if GRADING else 100", "n_beam = 10 if True else 100"),
        ("n_test = 30 if GRADING else", "n_test = 30 if True else"),
    ],
    # 11 loads a 135M-parameter model and scores hundreds of reviews with it: grading mode's sizes (every cell still
    # runs, on the real model)
    "11_pretrained": [
        ("GRADING = coursekit.grading_mode()", "GRADING = True or coursekit.grading_mode()"),
    ],
}

# A cell "draws" when it shows with pyplot or calls a coursekit.plots function: it must then show a picture.
PLOT_FUNCTIONS = ("attention_heatmap", "positional_encoding_heatmap", "positional_encoding_curves",
                  "training_curves", "confusion_matrix")
_DRAWS = re.compile(r"plt\.show\(|\bplots\.\w+\(|(?<![\w.])(" + "|".join(PLOT_FUNCTIONS) + r")\(")


@dataclass(frozen=True)
class StudentEnv:
    venv: Path
    wheel: Path

    @property
    def python(self) -> Path:
        return self.venv / "bin" / "python"

    @property
    def bin(self) -> Path:
        return self.venv / "bin"


def _key() -> str:
    """What decides the venv's third-party packages: the pins and the student profile's requirements.

    (coursekit itself is reinstalled from a fresh wheel by every `make student`, so its changes need no new venv.)
    """
    import tomllib

    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    digest = hashlib.sha256((REPO / "constraints.txt").read_bytes() + (REPO / "requirements-model.txt").read_bytes())
    digest.update(repr((project.get("requires-python"), project.get("dependencies"),
                        project.get("optional-dependencies", {}).get("student"))).encode())
    return digest.hexdigest()[:16]


def _sources_digest(repo: Path) -> str:
    """What the wheel and the set-up are made of: every file of the student repository but its exercises."""
    digest = hashlib.sha256()
    files = sorted(p for p in repo.rglob("*") if p.is_file()
                   and not {"__pycache__", ".git", "exercises", "build", "dist"} & set(p.relative_to(repo).parts))
    for path in files:
        digest.update(str(path.relative_to(repo)).encode() + b"\0" + path.read_bytes())
    return digest.hexdigest()


_REPOS: list[Path] = []


def student_repo() -> Path:
    """The student repository, written by tools/student_repo.py into a temporary folder outside the course
    repository (once per test session; removed when the session ends)."""
    if not _REPOS:
        sys.path.insert(0, str(REPO))
        try:
            from tools.student_repo import build
        finally:
            sys.path.remove(str(REPO))
        scratch = Path(tempfile.mkdtemp(prefix="transformers101-student-"))
        atexit.register(shutil.rmtree, scratch, True)
        _REPOS.append(build(scratch / "transformers101"))
    return _REPOS[0]


def student_env() -> StudentEnv:
    """Build (or refresh) the cached student environment with the student README's `make student`."""
    repo = student_repo()
    root = CACHE / _key()
    root.mkdir(parents=True, exist_ok=True)
    with open(CACHE / "build.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        for stale in CACHE.iterdir():  # environments of older constraints/pyproject: gigabytes each
            if stale.is_dir() and stale != root:
                shutil.rmtree(stale, ignore_errors=True)
        stamp, sources = root / "sources.sha256", _sources_digest(repo)
        if not (stamp.is_file() and stamp.read_text() == sources and (root / "venv" / "bin" / "jupyter").exists()):
            # (re)build only when coursekit or the build changed: a rebuild reinstalls coursekit, which would pull it
            # from under a kernel or JupyterLab that another test session is running from this environment
            stamp.unlink(missing_ok=True)
            env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
            command = ["make", "-s", "student", f"STUDENT_VENV={root / 'venv'}", f"STUDENT_DIST={root / 'dist'}",
                       f"PYTHON={sys.base_prefix}/bin/python3"]
            result = subprocess.run(command, cwd=repo, env=env, capture_output=True, text=True, timeout=1500)
            if result.returncode != 0:
                raise RuntimeError(f"`{' '.join(command)}` failed:\n{result.stdout[-3000:]}\n{result.stderr[-3000:]}")
            stamp.write_text(sources)
    (wheel,) = (root / "dist").glob("transformers101-*.whl")
    return StudentEnv(root / "venv", wheel)


def student_process_env(home: Path | None = None) -> dict[str, str]:
    """The environment of processes run "as a student": nothing of the instructor's venv or the repository."""
    env = {k: v for k, v in os.environ.items()
           if k not in ("PYTHONPATH", "VIRTUAL_ENV", "JUPYTER_PATH", "JUPYTER_CONFIG_PATH", "JUPYTER_CONFIG_DIR",
                        "JUPYTER_DATA_DIR", "JUPYTER_RUNTIME_DIR", "NBGRADER_EXECUTION")
           and not k.startswith(("PYTEST", "COURSE_"))}
    if home is not None:  # a fresh home: no user-level Jupyter settings or config
        env["HOME"] = str(home)
        env["JUPYTER_CONFIG_DIR"] = str(home / ".jupyter")
        env["JUPYTER_DATA_DIR"] = str(home / ".local" / "share" / "jupyter")
        env["JUPYTER_RUNTIME_DIR"] = str(home / ".local" / "share" / "jupyter" / "runtime")
        env["IPYTHONDIR"] = str(home / ".ipython")
    return env


def _solution_code(source: str) -> str:
    """The source cell's text with the `### BEGIN/END SOLUTION` marker lines removed (the code kept)."""
    lines = [line for line in source.splitlines() if line.strip() not in ("### BEGIN SOLUTION", "### END SOLUTION")]
    return "\n".join(lines)


def filled_notebook(assignment: str, quick: bool = True) -> nbformat.NotebookNode:
    """The released notebook with every stub replaced by the source notebook's solution (as a student would)."""
    released = nbformat.read(student_repo() / "exercises" / assignment / f"{assignment}.ipynb", as_version=4)
    source = nbformat.read(SOURCE / assignment / f"{assignment}.ipynb", as_version=4)
    solutions = {c.metadata["nbgrader"]["grade_id"]: c.source for c in source.cells
                 if c.cell_type == "code" and c.metadata.get("nbgrader", {}).get("solution")}
    filled = 0
    for cell in released.cells:
        meta = cell.metadata.get("nbgrader", {})
        if meta.get("solution") and cell.cell_type == "code":
            cell.source = _solution_code(solutions[meta["grade_id"]])
            filled += 1
    assert filled == len(solutions) > 0, (assignment, filled, len(solutions))
    if quick:
        for old, new in QUICK.get(assignment, []):
            hits = [c for c in released.cells if old in c.source]
            assert len(hits) == 1 and hits[0].source.count(old) == 1, f"{assignment}: {old!r} not found exactly once"
            hits[0].source = hits[0].source.replace(old, new)
    return released


def prepare_assignment(assignment: str, dest: Path, filled: bool = True) -> Path:
    """dest/<assignment>/ with the released notebook of the student repository (stubs, or filled) and provided.py;
    returns it. No data is copied: the student wheel carries what the notebooks read."""
    from autograder.course.provided import write_provided_module  # instructor-side, test set-up only

    folder = dest / assignment
    shutil.copytree(student_repo() / "exercises" / assignment, folder,
                    ignore=shutil.ignore_patterns("provided.py", "__pycache__", ".ipynb_checkpoints"))
    write_provided_module(assignment, folder)  # nothing for 01-03
    if filled:
        nbformat.write(filled_notebook(assignment), folder / f"{assignment}.ipynb")
    return folder


# A cell that draws only when 07's download of the real Yelp set is there (never in the tests: nothing downloads)
_NEEDS_A_DOWNLOAD = re.compile(r"\bfind_real_yelp\(")


def drawing_cells(notebook: nbformat.NotebookNode) -> list[int]:
    """Indices of the code cells that must show at least one picture."""
    return [i for i, cell in enumerate(notebook.cells)
            if cell.cell_type == "code" and _DRAWS.search(cell.source) and not _NEEDS_A_DOWNLOAD.search(cell.source)]


_CACHED: list[StudentEnv] = []


def cached_student_env() -> StudentEnv:
    """student_env(), built once per test session (shared by tests/course and tests/browser)."""
    if not _CACHED:
        _CACHED.append(student_env())
    return _CACHED[0]
