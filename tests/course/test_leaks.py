"""Nothing of the reference or of the hidden tests reaches students through exercises/ or the student image; nor
does the model answer or the rubric of a written answer (graded by hand: only "YOUR ANSWER HERE" is released).

provided.py (the reference of every earlier notebook, 04-11) is never committed and never in the student image's
build context; a release holds it only once the notebooks it covers are past due (tests/autograder/publish/test_release.py),
so exercises/ as committed, and a fresh gated release, hold none.
"""
from __future__ import annotations

import ast
import re
import shlex
import subprocess
from pathlib import Path

import nbformat
import pytest

from autograder.course.provided import (PROVIDED_FILENAME, _defined_names, covered_assignments, reference_fingerprints,
                                 reference_found_in, withheld_names, write_provided_module)
from autograder.publish.release import find_assignments
from autograder.course.written import MODEL_HEADING, TEXT_STUB, answer_keys, is_written, sentences

REPO = Path(__file__).resolve().parents[2]
ASSIGNMENTS = find_assignments(REPO / "course")
EXERCISES = REPO / "exercises"
SOURCE = REPO / "course" / "source"
DOCKER = REPO / "deploy" / "docker"

FORBIDDEN_TEXT = ("### BEGIN SOLUTION", "### END SOLUTION", "### BEGIN HIDDEN TESTS", "### END HIDDEN TESTS",
                  "autograder.checks", "import autograder", "from autograder")
IMPORTS_SOLUTIONS = re.compile(r"^\s*(from\s+solutions(\.|\s)|import\s+solutions\b)", re.M)
SOLUTION_REGION = re.compile(r"### BEGIN SOLUTION\n(.*?)### END SOLUTION", re.S)


def _released_texts(assignment: str) -> dict[str, str]:
    """Every text a student gets for the assignment: code/markdown cells and plain files, by location."""
    folder = EXERCISES / assignment
    if not folder.is_dir():
        pytest.fail(f"exercises/{assignment} is missing: release it")
    texts = {}
    for path in sorted(folder.rglob("*")):
        if not path.is_file() or "__pycache__" in path.parts:
            continue
        if path.suffix == ".ipynb":
            notebook = nbformat.read(path, as_version=4)
            for index, cell in enumerate(notebook.cells):
                texts[f"{path.name} cell {index}"] = cell.source
        else:
            texts[path.name] = path.read_text(encoding="utf-8", errors="replace")
    return texts


def _source_cells(assignment: str) -> list[str]:
    notebook = nbformat.read(SOURCE / assignment / f"{assignment}.ipynb", as_version=4)
    return [cell.source for cell in notebook.cells]


def _significant_lines(code: str) -> set[str]:
    lines = {line.strip() for line in code.splitlines()}
    return {line for line in lines if len(line) >= 12 and not line.startswith("#")}


@pytest.mark.parametrize("assignment", ASSIGNMENTS)
def test_no_markers_or_hidden_test_text(assignment):
    for where, text in _released_texts(assignment).items():
        for marker in FORBIDDEN_TEXT:
            assert marker not in text, f"exercises/{assignment}: {where} contains {marker!r}"


@pytest.mark.parametrize("assignment", ASSIGNMENTS)
def test_no_import_of_solutions(assignment):
    for where, text in _released_texts(assignment).items():
        assert not IMPORTS_SOLUTIONS.search(text), f"exercises/{assignment}: {where} imports `solutions`"


@pytest.mark.parametrize("assignment", ASSIGNMENTS)
def test_no_solution_body_reaches_students(assignment):
    sources = _source_cells(assignment)
    solution_lines, elsewhere = set(), set()
    for source in sources:
        bodies = SOLUTION_REGION.findall(source)
        for body in bodies:
            solution_lines |= _significant_lines(body)
        elsewhere |= _significant_lines(SOLUTION_REGION.sub("", source))
    assert solution_lines, "the source notebook has no solution code"
    secret = solution_lines - elsewhere      # lines that only ever appear inside a solution
    released = "\n".join(text for where, text in _released_texts(assignment).items()
                         if where != PROVIDED_FILENAME)
    released_lines = {line.strip() for line in released.splitlines()}
    leaked = sorted(secret & released_lines)
    assert not leaked, f"exercises/{assignment} contains solution lines: {leaked[:5]}"


@pytest.mark.parametrize("assignment", ASSIGNMENTS)
def test_released_grade_cells_hold_no_test_code(assignment):
    path = EXERCISES / assignment / f"{assignment}.ipynb"
    if not path.is_file():
        pytest.fail(f"exercises/{assignment} is missing: release it")
    notebook = nbformat.read(path, as_version=4)
    grade_cells = [c for c in notebook.cells if c.metadata.get("nbgrader", {}).get("grade")]
    assert grade_cells, "the release has no grade cells"
    for cell in grade_cells:
        if is_written(cell):  # a written answer is the student's to write: test_no_answer_key_reaches_students
            continue
        code = [line for line in cell.source.splitlines() if line.strip() and not line.strip().startswith("#")]
        assert not code, f"grade cell {cell.metadata['nbgrader']['grade_id']} still holds code: {code}"


def _answer_key_passages(assignment: str) -> dict[str, list[str]]:
    """grade_id -> the passages of its model answer and rubric (sentences and rubric criteria of 30+ characters,
    whitespace flattened) for every written answer of the source notebook."""
    notebook = nbformat.read(SOURCE / assignment / f"{assignment}.ipynb", as_version=4)
    passages = {}
    for grade_id, key in answer_keys(notebook).items():
        pieces = sentences(key.model_answer) + sentences(key.rubric) + re.split(r"\s*\d+ points?:\s*", key.rubric)
        passages[grade_id] = sorted({" ".join(p.split()) for p in pieces if len(p.strip()) >= 30})
    return passages


def _released_notebooks(folder: Path) -> tuple[dict[str, str], dict[str, str]]:
    """(every cell's text by location, grade_id -> source of each written answer) of the notebooks in `folder`."""
    texts, answers = {}, {}
    for path in sorted(folder.glob("*.ipynb")):
        for index, cell in enumerate(nbformat.read(path, as_version=4).cells):
            texts[f"{path.name} cell {index}"] = cell.source
            if is_written(cell):
                answers[cell.metadata["nbgrader"]["grade_id"]] = cell.source
    return texts, answers


@pytest.mark.parametrize("assignment", ASSIGNMENTS)
def test_no_answer_key_reaches_students(assignment, course_copy):
    """Each written answer is released as "YOUR ANSWER HERE" only, in exercises/ and in a fresh release, and no
    sentence of its model answer or rubric appears anywhere a student can read."""
    passages = _answer_key_passages(assignment)
    if not passages:
        pytest.skip(f"{assignment} has no written answer")
    assert all(passages.values()), "every written answer has passages to look for"
    for place, folder in (("exercises", EXERCISES / assignment), ("a fresh release", course_copy / "release" / assignment)):
        texts, answers = _released_notebooks(folder)
        if place == "exercises":
            texts = _released_texts(assignment)  # the notebooks and every other file handed out
        assert answers == {grade_id: TEXT_STUB for grade_id in passages}, \
            f"{place}/{assignment}: every written answer is released as {TEXT_STUB!r} only"
        for where, text in texts.items():
            flat = " ".join(text.split())
            assert MODEL_HEADING not in flat and "**Rubric (" not in flat, f"{place}/{assignment}: {where}"
            for grade_id, found in passages.items():
                leaked = [p for p in found if p in flat]
                assert not leaked, f"{place}/{assignment}: {where} holds {grade_id}'s answer key: {leaked[:2]}"


@pytest.mark.parametrize("assignment", [a for a in ASSIGNMENTS if covered_assignments(a)])
def test_generated_provided_module_holds_only_earlier_components(assignment, tmp_path):
    text = write_provided_module(assignment, tmp_path).read_text(encoding="utf-8")
    ast.parse(text)
    defined = _defined_names(text)
    leaked = defined & withheld_names(assignment)
    assert not leaked, f"provided.py of {assignment} defines its own or later exercises: {sorted(leaked)}"
    for name in withheld_names(assignment):
        assert not re.search(rf"^\s*(def|class)\s+{name}\b", text, re.M), f"{name} is defined in provided.py"


# --- provided.py: never committed, never in the student image, withheld by a gated release ----------------------

def _git(*args) -> list[str] | None:
    try:
        out = subprocess.run(["git", *args], cwd=REPO, capture_output=True, text=True, check=True, timeout=60)
    except (OSError, subprocess.SubprocessError):
        return None
    return out.stdout.splitlines()


def test_no_provided_module_is_committed():
    tracked = _git("ls-files", "--", "exercises", "course")
    if tracked is None:
        pytest.skip("not a git checkout")
    assert not [f for f in tracked if Path(f).name == PROVIDED_FILENAME], "provided.py must never be committed"
    ignored = _git("check-ignore", "--no-index", *(f"{folder}/{a}/{PROVIDED_FILENAME}" for a in ASSIGNMENTS
                                                   for folder in ("exercises", "course/source")))
    assert ignored is not None and len(ignored) == 2 * len(ASSIGNMENTS), ".gitignore must cover every provided.py"


def test_fresh_gated_release_holds_no_provided_module(course_copy):
    """A release with no due date in the gradebook (every assignment open) hands out no provided.py."""
    for assignment in ASSIGNMENTS:
        for folder in (course_copy / "exercises" / assignment, course_copy / "release" / assignment):
            assert not (folder / PROVIDED_FILENAME).exists(), f"{folder} holds provided.py while gated"
        if covered_assignments(assignment):  # the instructor's side keeps it for running the source notebooks
            assert (course_copy / "source" / assignment / PROVIDED_FILENAME).is_file()


def _dockerignore_patterns(name: str) -> list[tuple[bool, re.Pattern]]:
    patterns = []
    for line in (DOCKER / f"{name}.dockerignore").read_text().splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        negate = line.startswith("!")
        glob = line.lstrip("!").strip("/")
        regex = ""
        i = 0
        while i < len(glob):
            if glob.startswith("**/", i):
                regex, i = regex + "(?:.*/)?", i + 3
            elif glob.startswith("**", i):
                regex, i = regex + ".*", i + 2
            elif glob[i] == "*":
                regex, i = regex + "[^/]*", i + 1
            elif glob[i] == "?":
                regex, i = regex + "[^/]", i + 1
            else:
                regex, i = regex + re.escape(glob[i]), i + 1
        patterns.append((negate, re.compile(regex + "(?:/.*)?$")))  # a matched folder excludes what it holds
    return patterns


def _docker_ignored(rel: str, patterns) -> bool:
    ignored = False
    for negate, pattern in patterns:
        if pattern.match(rel):
            ignored = not negate
    return ignored


def student_image_context() -> list[Path]:
    """Every file that deploy/docker/Dockerfile.student COPYs from the build context (its .dockerignore applied)."""
    patterns = _dockerignore_patterns("Dockerfile.student")
    sources = []
    for raw in (DOCKER / "Dockerfile.student").read_text().splitlines():
        if raw.strip().startswith("COPY "):
            *srcs, _ = shlex.split(raw.strip()[5:])
            sources += [src for src in srcs if not src.startswith("--")]
    assert "exercises/" in sources, "the student image copies exercises/"
    files = []
    for src in sources:
        base = REPO / src
        for path in ([base] if base.is_file() else sorted(base.rglob("*"))):
            rel = path.relative_to(REPO).as_posix()
            if path.is_file() and not _docker_ignored(rel, patterns):
                files.append(path)
    return files


def test_student_image_context_holds_no_provided_module_and_no_reference():
    patterns = _dockerignore_patterns("Dockerfile.student")
    for assignment in ASSIGNMENTS:  # even a local --provided force release stays out of the image
        assert _docker_ignored(f"exercises/{assignment}/{PROVIDED_FILENAME}", patterns)
    fingerprints = reference_fingerprints()
    assert len(fingerprints) >= 10
    files = student_image_context()
    assert not [p for p in files if p.name == PROVIDED_FILENAME]
    for path, text in _readable_texts(files):
        found = reference_found_in(text, fingerprints)
        assert not found, f"{path.relative_to(REPO)} holds reference code of {found}"


def _readable_texts(files):
    """(path, text) of each notebook (its cells' sources) and text file among `files`."""
    for path in files:
        if path.suffix == ".ipynb":
            yield path, "\n".join(cell.source for cell in nbformat.read(path, as_version=4).cells)
        elif path.suffix in {".py", ".md", ".txt", ".json", ".toml", ".cfg", ".yaml", ".yml", ".sh", ".csv", ""}:
            yield path, path.read_text(encoding="utf-8", errors="replace")


def test_reference_detector_finds_a_provided_module(tmp_path):
    """The scan above has teeth: the generated provided.py of 04 is found to hold 01-03's reference."""
    text = write_provided_module("04_multi_head_attention", tmp_path).read_text()
    found = reference_found_in(text)
    assert "solutions/attention.py:scaled_dot_product_attention" in found
    assert not [name for name in found if name.startswith("solutions/multi_head.py")]


# --- the student repository (make student-repo, tools/student_repo.py): what students clone ---------------------

STUDENT_REPO_TOP = {".git", ".gitignore", "README.md", "Makefile", "pyproject.toml", "setup.py", "constraints.txt",
                    "requirements-model.txt", "coursekit", "data", "exercises"}
INSTRUCTOR_PARTS = {"solutions", "autograder", "course", "source", "tests", "deploy", "docs", "bench", "tools",
                    "release", "submitted", "autograded", "feedback", "gradebook.db", PROVIDED_FILENAME}


@pytest.fixture(scope="module")
def student_repo(tmp_path_factory):
    import sys

    sys.path.insert(0, str(REPO))
    try:
        from tools.student_repo import build
    finally:
        sys.path.remove(str(REPO))
    return build(tmp_path_factory.mktemp("student-repo") / "transformers101")


def _student_repo_files(repo: Path) -> list[Path]:
    return sorted(p for p in repo.rglob("*") if p.is_file() and ".git" not in p.relative_to(repo).parts)


def test_student_repo_holds_only_student_files(student_repo):
    assert {p.name for p in student_repo.iterdir()} == STUDENT_REPO_TOP
    tracked = subprocess.run(["git", "ls-files"], cwd=student_repo, capture_output=True, text=True, check=True).stdout
    assert sorted(tracked.split()) == sorted(p.relative_to(student_repo).as_posix()
                                             for p in _student_repo_files(student_repo)), "one commit holds it all"
    for path in _student_repo_files(student_repo):
        rel = path.relative_to(student_repo)
        assert not INSTRUCTOR_PARTS & set(rel.parts), f"the student repository holds {rel}"
    released = sorted(p.name for p in (student_repo / "exercises").iterdir())
    assert released == ASSIGNMENTS
    for assignment in ASSIGNMENTS:  # the released notebook as exercises/ holds it, byte for byte
        name = f"{assignment}/{assignment}.ipynb"
        assert (student_repo / "exercises" / name).read_bytes() == (EXERCISES / name).read_bytes()
    assert _importable_from(student_repo) == "[]"


def _importable_from(folder: Path) -> str:
    """Which of solutions/autograder a Python started in `folder` imports (the system Python: no course install)."""
    import sys

    probe = "import importlib.util as u; print([n for n in ('solutions', 'autograder') if u.find_spec(n)])"
    python = getattr(sys, "_base_executable", sys.executable)
    return subprocess.run([python, "-c", probe], cwd=folder, env={"PATH": "/usr/bin:/bin", "HOME": str(folder)},
                          capture_output=True, text=True, check=True, timeout=60).stdout.strip()


def test_student_repo_holds_no_reference_and_no_hidden_check(student_repo):
    fingerprints = reference_fingerprints()
    keys = {a: [p for found in _answer_key_passages(a).values() for p in found] for a in ASSIGNMENTS}
    scanned = 0
    for path, text in _readable_texts(_student_repo_files(student_repo)):
        rel = path.relative_to(student_repo)
        scanned += 1
        found = reference_found_in(text, fingerprints)
        assert not found, f"student repository: {rel} holds reference code of {found}"
        if rel.parts[0] == "exercises":  # coursekit names the markers it strips; a released notebook never holds one
            for marker in FORBIDDEN_TEXT:
                assert marker not in text, f"student repository: {rel} contains {marker!r}"
        assert not IMPORTS_SOLUTIONS.search(text), f"student repository: {rel} imports `solutions`"
        flat = " ".join(text.split())
        assert MODEL_HEADING not in flat and "**Rubric (" not in flat, f"student repository: {rel}"
        leaked = [p for passages in keys.values() for p in passages if p in flat]
        assert not leaked, f"student repository: {rel} holds an answer key: {leaked[:2]}"
    assert scanned >= len(ASSIGNMENTS) + 20, scanned


def test_student_repo_scan_has_teeth(student_repo, tmp_path):
    """A reference module or a hidden-test marker planted in a copy of the student repository is found."""
    import shutil

    planted = tmp_path / "planted"
    shutil.copytree(student_repo, planted)
    (planted / "coursekit" / "attention_ref.py").write_text((REPO / "solutions" / "attention.py").read_text())
    found = [reference_found_in(text) for _, text in _readable_texts(_student_repo_files(planted))]
    assert any("solutions/attention.py:scaled_dot_product_attention" in f for f in found)
    shutil.copytree(REPO / "solutions", planted / "solutions", ignore=shutil.ignore_patterns("__pycache__"))
    assert _importable_from(planted) == "['solutions']"
