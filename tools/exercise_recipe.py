"""Adding an exercise: the recipe, as data, and the check that every exercise of the course follows it.

`STEPS` lists, in the order to do them, every place an exercise (an API name of `coursekit/api.py`) needs. Each
step says where and what, and carries a probe that finds the step done for a given exercise. `missing(entry)` runs
the probes and names each step not done; `tests/test_adding_an_exercise.py` runs it for every exercise, so a
forgotten step fails with its number and name. The recipe section of `docs/architecture.md` is printed from STEPS
by `tools/draw_architecture.py` (one home: this list).

Run `python tools/exercise_recipe.py` to see what any exercise still misses.
"""
from __future__ import annotations

import ast
import json
import re
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

REPO = Path(__file__).resolve().parents[1]


@dataclass(frozen=True)
class Step:
    name: str
    where: str  # path template: the keys of `places(entry)` ({topic}, {check_file}, ...), {name}, {snake}, {check}
    what: str   # what to write there (markdown)
    done: Callable[[object, Path], bool]  # (ApiEntry, repo) -> whether this exercise has it


def _text(repo: Path, relative: str) -> str:
    path = repo / relative
    return path.read_text(encoding="utf-8") if path.is_file() else ""


def _defines(source: str, name: str) -> bool:
    """A top-level `def name` or `class name` in Python source (False when it does not parse)."""
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return False
    return any(isinstance(node, (ast.FunctionDef, ast.ClassDef)) and node.name == name for node in tree.body)


def _cells(repo: Path, relative: str) -> list[dict]:
    text = _text(repo, relative)
    return json.loads(text).get("cells", []) if text else []


def _source(cell: dict) -> str:
    source = cell.get("source", "")
    return "".join(source) if isinstance(source, list) else source


def _nbgrader(cell: dict) -> dict:
    return cell.get("metadata", {}).get("nbgrader", {})


def _source_nb(entry) -> str:
    return f"course/source/{entry.notebook}/{entry.notebook}.ipynb"


def _solution_cell_defines(entry, repo: Path) -> bool:
    return any(_nbgrader(c).get("solution") and c.get("cell_type") == "code"
               and re.search(rf"^(def|class) {entry.name}\b", _source(c), re.M) and "### BEGIN SOLUTION" in _source(c)
               for c in _cells(repo, _source_nb(entry)))


def _hand_in(entry, repo: Path) -> bool:
    return any(_nbgrader(c).get("grade") and re.search(rf'hand_in\(\s*"{entry.snake_name}"', _source(c))
               for c in _cells(repo, _source_nb(entry)))


def _self_check_called(entry, repo: Path) -> bool:
    return any(re.search(rf"\b{entry.check_name}\(", _source(c)) for c in _cells(repo, _source_nb(entry))
               if c.get("cell_type") == "code")


def places(entry) -> dict[str, str]:
    """The path keys of the recipe's templates, for one exercise: its topic and notebook, its hidden check's file
    (`coursekit.api`'s `check_file`), the public check that mirrors it, and the two test files that mirror those."""
    def test_of(path: str) -> str:
        folder, _, name = path.rpartition("/")
        return f"tests/{folder}/test_{name}"
    return dict(topic=entry.topic, notebook=entry.notebook, check_file=entry.check_file,
                public_check_file=entry.public_check_file, hidden_test_file=test_of(entry.check_file),
                public_test_file=test_of(entry.public_check_file))


def where(step, entry) -> str:
    """The step's file for this exercise."""
    return step.where.format(**places(entry), name=entry.name, snake=entry.snake_name, check=entry.check_name)


def _released(entry, repo: Path) -> bool:
    cells = _cells(repo, f"exercises/{entry.notebook}/{entry.notebook}.ipynb")
    stub = any(re.search(rf"^(def|class) {entry.name}\b", _source(c), re.M) for c in cells)
    return stub and not any("### BEGIN SOLUTION" in _source(c) for c in cells)


def _mentions(relative: str, pattern: str) -> Callable[[object, Path], bool]:
    return lambda entry, repo: bool(re.search(pattern.format(name=entry.name, snake=entry.snake_name,
                                                             check=entry.check_name),
                                              _text(repo, relative.format(**places(entry)))))


def _reaches_check(relative: str) -> Callable[[object, Path], bool]:
    """The test file names the check (or the exercise), or dispatches over API names with `by_name(...)`."""
    def done(entry, repo: Path) -> bool:
        text = _text(repo, relative.format(**places(entry)))
        return bool(re.search(rf"\b({entry.check_name}|{entry.name})\b", text) or "by_name(" in text)
    return done


def _catalogue_ids_exist(entry, repo: Path) -> bool:
    """Every catalogue id the exercise's hidden and public checks name is in coursekit/mistakes.py."""
    catalogue = set(re.findall(r'^\s*\("([a-z_0-9]+\.[a-z_0-9]+)",', _text(repo, "coursekit/mistakes.py"), re.M))
    named = set()
    for relative in (entry.check_file, entry.public_check_file):
        named |= set(re.findall(r'mistake(?:_hint)?\s*[=(]\s*"([a-z_0-9]+\.[a-z_0-9]+)"', _text(repo, relative)))
    return named <= catalogue


STEPS: tuple[Step, ...] = (
    Step("contract", "coursekit/api.py", "an `ApiEntry` (`_function` / `_class`) under the notebook's `Notebook`; "
         "then `python -m coursekit.api --markdown > docs/course-api.md`",
         lambda e, repo: f"| `{e.name}` |" in _text(repo, "docs/course-api.md")),
    Step("reference", "solutions/{topic}.py", "the reference implementation, with the signature the entry states "
         "(`solutions/__init__.py` exports it from the API list)",
         lambda e, repo: _defines(_text(repo, f"solutions/{e.topic}.py"), e.name)),
    Step("stub and solution cell", "course/source/{notebook}/{notebook}.ipynb",
         "a solution cell (nbgrader `solution`) with `def`/`class {name}` and its body between `### BEGIN SOLUTION` "
         "and `### END SOLUTION`, the same answer as the reference (`tests/course/test_solution_sameness.py`)",
         _solution_cell_defines),
    Step("hand-in", "course/source/{notebook}/{notebook}.ipynb",
         "a hidden grade cell holding only `hand_in(\"{snake}\", {name})` between `### BEGIN HIDDEN TESTS` and "
         "`### END HIDDEN TESTS`", _hand_in),
    Step("public check", "{public_check_file}",
         "`{check}(obj)`, the mirror of the hidden check's module: small fixed examples; a failure names the "
         "likely mistake with `mistake_hint(id)` (the catalogue's text and fix)",
         lambda e, repo: _defines(_text(repo, e.public_check_file), e.check_name)),
    Step("self-check cell", "course/source/{notebook}/{notebook}.ipynb",
         "a code cell after the solution that calls `{check}({name})`", _self_check_called),
    Step("hidden check", "{check_file}",
         "`{check}(remote)`: probes the student's object through its `RemoteObject`, compares with the reference on "
         "the grading device, raises through `fail(..., mistake=id)`",
         lambda e, repo: _defines(_text(repo, e.check_file), e.check_name)),
    Step("catalogue", "coursekit/mistakes.py",
         "one line per typical mistake the checks name: its id (`<topic>.<what>`), the API name, what the "
         "student did and its `fix` (the advice both layers show); each id is diagnosed by a known-mistake "
         "variant (next step)", _catalogue_ids_exist),
    Step("known-mistake variants", "autograder/checks/{topic}/mistakes.py",
         "the reference recomputed with one mistake switched on (switches off: the reference exactly, "
         "`tests/autograder/checks/test_mistakes.py`), and the table `TABLE = {mistake id: (variant, switches)}`; "
         "the hidden check diagnoses with its rows (`from_table(M.TABLE, run, ids)`)",
         lambda e, repo: (repo / f"autograder/checks/{e.topic}/mistakes.py").is_file()),
    Step("reference tests", "tests/solutions/test_{topic}.py",
         "the reference against an independent implementation (a torch module, a formula, a hand-worked example)",
         _mentions("tests/solutions/test_{topic}.py", r"\b{name}\b")),
    Step("public check tests", "{public_test_file}",
         "the public check passes the reference and fails each catalogue mistake with its hint",
         _reaches_check("{public_test_file}")),
    Step("hidden check tests", "{hidden_test_file}",
         "the hidden check passes the reference and correct variants written differently, fails the mistaken "
         "variants (`tests/autograder/checks/variants.py`) naming each one",
         _reaches_check("{hidden_test_file}")),
    Step("sameness", "tests/course/test_solution_sameness.py",
         "`CHECKED_BY[\"{name}\"]` (`code` or `behaviour`) and, for behaviour, a scenario",
         _mentions("tests/course/test_solution_sameness.py", r'"{name}":')),
    Step("release", "exercises/{notebook}/{notebook}.ipynb",
         "`make release`: the stub is released without the solution", _released),
    Step("architecture page", "docs/architecture.md",
         "`python tools/draw_architecture.py`: the exercise's row in the table below",
         lambda e, repo: f"| `{e.name}` |" in _text(repo, "docs/architecture.md")),
)


def missing(entry, repo: Path = REPO) -> list[str]:
    """'step N (name): where' for every step of the recipe this exercise lacks, in recipe order."""
    out = []
    for number, step in enumerate(STEPS, 1):
        if not step.done(entry, repo):
            out.append(f"step {number} ({step.name}): {where(step, entry)}")
    return out


def markdown() -> str:
    """The recipe as a numbered list (docs/architecture.md)."""
    lines = []
    for number, step in enumerate(STEPS, 1):
        where = step.where.replace("{", "<").replace("}", ">")
        what = step.what.replace("{name}", "<Name>").replace("{snake}", "<snake_name>").replace("{check}",
                                                                                              "check_<snake_name>")
        lines.append(f"{number}. **{step.name}** — `{where}`: {what}.")
    return "\n".join(lines)


def main() -> int:
    sys.path.insert(0, str(REPO))
    from coursekit import api

    gaps = {entry.name: missing(entry) for entry in api.API}
    for name, steps in gaps.items():
        for step in steps:
            print(f"{name}: {step}")
    return 1 if any(gaps.values()) else 0


if __name__ == "__main__":
    raise SystemExit(main())
