"""The "provided module" of an assignment: earlier notebooks' components, generated from `solutions/`.

A notebook that builds on earlier ones (04 needs the attention of 03, 05 needs 01-04, ...) imports those pieces
from `provided.py` in its own assignment folder, so a student who struggled with 03 can still do 04. The file is
generated here from the reference modules of the EARLIER topics only: it never contains the assignment's own
exercises or later ones. The sources are copied verbatim, except that
  * `from solutions.<topic> import ...` lines are dropped (those names are defined higher up in the same file),
  * each module's docstring becomes a one-line section comment,
  * `from __future__ import annotations` appears once, at the top.

The module is never committed (.gitignore): `autograder release` regenerates it in course/source/<assignment>/ (the
instructor's side) and hands it to students only once every assignment it covers (`covered_assignments`) is past
its due date (see autograder.publish.release); the grader regenerates it for every grading run
(autograder.grade.plan.assignment_files); tests call `write_provided_module` where they need it.
"""
from __future__ import annotations

import ast
import re
from pathlib import Path

from autograder.course.coursedir import REPO_ROOT
from coursekit import api as _api

# All three come from the course API (coursekit/api.py), the one list of notebooks, topics and names.
# Topic of each assignment, in course order: assignment NN_... has topic TOPICS[NN - 1].
TOPICS = _api.TOPICS

# The course's assignment (folder) names, in course order.
COURSE_ASSIGNMENTS = _api.ASSIGNMENTS

# The names each topic's notebook asks students to write.
API_NAMES = {topic: tuple(entry.name for entry in _api.for_notebook(topic)) for topic in TOPICS}

# Notebooks 01-03 are self-contained; from 04 on a notebook gets every earlier topic, or the earlier topics its
# `Notebook.builds_on` names (10: 01-06).
FIRST_WITH_PROVIDED = 4


def provided_range() -> str:
    """The assignments that have a provided.py, e.g. "04-11" (from the course API, never written by hand; the prose
    that names the range is held to it by tests/test_drift.py)."""
    return f"{FIRST_WITH_PROVIDED:02d}-{len(TOPICS):02d}"


PROVIDED_FILENAME = "provided.py"
SOLUTIONS_DIR = REPO_ROOT / "solutions"

_ASSIGNMENT = re.compile(r"^(\d{2})_[A-Za-z0-9_]+$")


def topic_of(assignment: str) -> str:
    """`"04_multi_head_attention"` -> `"multi_head"`; a name outside the course raises ValueError."""
    match = _ASSIGNMENT.match(assignment)
    if not match or not 1 <= int(match.group(1)) <= len(TOPICS):
        raise ValueError(
            f"{assignment!r} is not a course assignment: expected 'NN_name' with NN in 01..{len(TOPICS):02d}")
    return TOPICS[int(match.group(1)) - 1]


def provided_topics(assignment: str) -> tuple[str, ...]:
    """The earlier topics whose reference code goes into this assignment's provided.py (maybe none)."""
    index = TOPICS.index(topic_of(assignment))
    if index + 1 < FIRST_WITH_PROVIDED:
        return ()
    builds_on = _api.notebook(TOPICS[index]).builds_on   # the topics it needs, where the course API narrows them
    return TOPICS[:index] if builds_on is None else tuple(t for t in TOPICS[:index] if t in builds_on)


def covered_assignments(assignment: str, candidates=()) -> list[str]:
    """The assignments whose reference this assignment's provided.py holds, in course order (maybe none).

    Each is named as in `candidates` (e.g. the folders of course/source, the gradebook's assignments) when one of
    them has the topic's number, else as in the course (COURSE_ASSIGNMENTS):
    `covered_assignments("04_multi_head_attention")` -> `["01_tokens_and_embeddings", "02_positional_encoding",
    "03_attention"]`.
    """
    by_number = {}
    for name in candidates:
        match = _ASSIGNMENT.match(name)
        if match:
            by_number.setdefault(int(match.group(1)), name)
    return [by_number.get(TOPICS.index(topic) + 1, COURSE_ASSIGNMENTS[TOPICS.index(topic)])
            for topic in provided_topics(assignment)]


def withheld_names(assignment: str) -> set[str]:
    """API names that must never appear in this assignment's provided.py: its own topic and every later one."""
    index = TOPICS.index(topic_of(assignment))
    return {name for topic in TOPICS[index:] for name in API_NAMES[topic]}


def _module_body(topic: str, source: str, allowed: tuple[str, ...]) -> str:
    """The module's source without its docstring, `__future__` import and imports from `solutions`."""
    tree = ast.parse(source, filename=f"solutions/{topic}.py")
    drop_lines: set[int] = set()
    for node in tree.body:
        is_docstring = (node is tree.body[0] and isinstance(node, ast.Expr)
                        and isinstance(node.value, ast.Constant) and isinstance(node.value.value, str))
        is_future = isinstance(node, ast.ImportFrom) and node.module == "__future__"
        from_solutions = isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] == "solutions"
        import_solutions = isinstance(node, ast.Import) and any(
            alias.name.split(".")[0] == "solutions" for alias in node.names)
        if import_solutions:
            raise ValueError(f"solutions/{topic}.py uses `import solutions...`; use `from solutions.<topic> import`")
        if from_solutions:
            source_topic = (node.module or "").split(".")[1] if "." in (node.module or "") else ""
            if source_topic not in allowed:
                raise ValueError(f"solutions/{topic}.py imports from {node.module!r}, which is not an earlier topic")
        if is_docstring or is_future or from_solutions:
            drop_lines.update(range(node.lineno, node.end_lineno + 1))
    # Nothing inside a function or class may reach into `solutions` either (it is not installed for students).
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("solutions") and node.col_offset > 0:
            raise ValueError(f"solutions/{topic}.py imports {node.module!r} inside a function; not supported")
    lines = source.splitlines()
    kept = [line for number, line in enumerate(lines, start=1) if number not in drop_lines]
    return "\n".join(kept).strip("\n") + "\n"


def _docstring_title(source: str) -> str:
    doc = ast.get_docstring(ast.parse(source)) or ""
    return doc.strip().splitlines()[0] if doc.strip() else ""


def build_provided_source(assignment: str, solutions_dir: Path | str | None = None) -> str | None:
    """The text of provided.py for `assignment`, or None when the assignment needs none."""
    topics = provided_topics(assignment)
    if not topics:
        return None
    solutions_dir = Path(solutions_dir) if solutions_dir is not None else SOLUTIONS_DIR
    header = [
        f'"""Provided components for {assignment}: GENERATED from the reference, do not edit.',
        "",
        "Written by autograder.course.provided.write_provided_module; sources: "
        + ", ".join(f"solutions/{topic}.py" for topic in topics) + ".",
        "These are the pieces you built in the earlier notebooks; import what you need, e.g.",
        f"    from provided import {API_NAMES[topics[-1]][-1]}",
        '"""',
        "from __future__ import annotations",
        "",
    ]
    sections = []
    for position, topic in enumerate(topics):
        path = solutions_dir / f"{topic}.py"
        if not path.is_file():
            raise FileNotFoundError(f"cannot build provided.py for {assignment}: {path} does not exist")
        source = path.read_text(encoding="utf-8")
        title = _docstring_title(source)
        body = _module_body(topic, source, allowed=topics[:position])
        sections.append(f"# {'=' * 100}\n# source: solutions/{topic}.py{': ' + title if title else ''}\n"
                        f"# {'=' * 100}\n{body}")
    text = "\n".join(header) + "\n" + "\n\n".join(sections)
    leaked = _defined_names(text) & withheld_names(assignment)
    if leaked:
        raise ValueError(f"provided.py for {assignment} would define its own or later exercises: {sorted(leaked)}")
    compile(text, PROVIDED_FILENAME, "exec")
    return text


def _defined_names(source: str) -> set[str]:
    """Top-level names a module defines (functions, classes, assignments, imports)."""
    names: set[str] = set()
    for node in ast.parse(source).body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            for target in targets:
                names.update(n.id for n in ast.walk(target) if isinstance(n, ast.Name))
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            names.update((alias.asname or alias.name).split(".")[0] for alias in node.names)
    return names


def write_provided_module(assignment: str, dest_dir: Path | str,
                          solutions_dir: Path | str | None = None) -> Path | None:
    """Write `dest_dir/provided.py` for `assignment` and return its path.

    For an assignment that needs no provided module (01-03) nothing is written, a stale provided.py left in
    `dest_dir` is removed, and None is returned.
    """
    dest_dir = Path(dest_dir)
    if not dest_dir.is_dir():
        raise FileNotFoundError(f"assignment folder {dest_dir} does not exist")
    target = dest_dir / PROVIDED_FILENAME
    text = build_provided_source(assignment, solutions_dir)
    if text is None:
        if target.exists():
            target.unlink()
        return None
    tmp = target.with_suffix(".py.tmp")
    tmp.write_text(text, encoding="utf-8")
    tmp.replace(target)  # atomic: a half-written provided.py is never seen
    return target


def reference_fingerprints(solutions_dir: Path | str | None = None, topics=TOPICS) -> dict[str, set[str]]:
    """"solutions/<topic>.py:<name>" -> the significant lines of that API function's or class's body (stripped,
    at least 20 characters, no comments or docstrings): what any copy of the reference would contain.

    Used by the leak tests (exercises/, the student image's build context, a student's home on the hub)."""
    solutions_dir = Path(solutions_dir) if solutions_dir is not None else SOLUTIONS_DIR
    prints: dict[str, set[str]] = {}
    for topic in topics:
        path = solutions_dir / f"{topic}.py"
        if not path.is_file():
            continue
        source = path.read_text(encoding="utf-8")
        lines = source.splitlines()
        docstrings = set()
        for node in ast.walk(ast.parse(source)):
            if isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant) and isinstance(node.value.value, str):
                docstrings.update(range(node.lineno, node.end_lineno + 1))
        for node in ast.parse(source).body:
            if isinstance(node, (ast.FunctionDef, ast.ClassDef)) and node.name in API_NAMES[topic]:
                body = {lines[n - 1].strip() for n in range(node.body[0].lineno, node.end_lineno + 1)
                        if n not in docstrings}
                significant = {line for line in body if len(line) >= 20 and not line.startswith("#")}
                if len(significant) >= 3:
                    prints[f"solutions/{topic}.py:{node.name}"] = significant
    return prints


def reference_found_in(text: str, fingerprints: dict[str, set[str]] | None = None, share: float = 0.6) -> list[str]:
    """The reference functions/classes most of whose body lines (`share`, at least 3) appear in `text`."""
    fingerprints = reference_fingerprints() if fingerprints is None else fingerprints
    present = {line.strip() for line in text.splitlines()}
    return sorted(name for name, lines in fingerprints.items()
                  if len(lines & present) >= max(3, share * len(lines)))
