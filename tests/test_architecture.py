"""The architecture page and picture (tools/draw_architecture.py): the imports point one way, the scanner would
see an arrow that does not, and docs/architecture.md's generated parts are current."""
from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
_spec = importlib.util.spec_from_file_location("draw_architecture", REPO / "tools" / "draw_architecture.py")
draw_architecture = importlib.util.module_from_spec(_spec)
sys.modules.setdefault("draw_architecture", draw_architecture)  # dataclasses look their module up
_spec.loader.exec_module(draw_architecture)


@pytest.fixture(scope="module")
def edges():
    return draw_architecture.scan(REPO)


def _targets(edges, source, kinds=("imports", "provided.py", "packs")):
    return {edge.target for edge in edges if edge.source == source and edge.kind in kinds}


def test_every_arrow_goes_the_allowed_way(edges):
    assert draw_architecture.layering_errors(edges) == []


def test_the_student_side_never_reaches_the_reference_or_the_grader(edges):
    assert not _targets(edges, "coursekit") & {"solutions", "autograder", "notebooks"}
    assert "autograder" not in _targets(edges, "solutions")
    assert not _targets(edges, "notebooks", kinds=("imports",)) & {"solutions", "autograder"}
    assert not _targets(edges, "student image") & {"solutions", "autograder"}
    # and the arrows that must be there are found (the scanner is looking at the real code)
    assert {"coursekit", "solutions"} <= _targets(edges, "autograder")
    assert "coursekit" in _targets(edges, "notebooks")
    assert {"coursekit", "solutions", "autograder"} <= _targets(edges, "instructor image")


def test_no_two_packages_import_each_other(edges):
    pairs = {(edge.source, edge.target) for edge in edges}
    assert not {(a, b) for a, b in pairs if (b, a) in pairs}


def _notebook(cells):
    return json.dumps({"cells": [{"cell_type": "code", "source": source, "metadata": {}, "outputs": [],
                                  "execution_count": None} for source in cells],
                       "metadata": {}, "nbformat": 4, "nbformat_minor": 5})


def test_the_scanner_reports_arrows_against_the_layering(tmp_path):
    files = {
        "coursekit/__init__.py": "",
        "coursekit/leak.py": "def f():\n    import solutions.attention\n",
        "solutions/__init__.py": "from coursekit import api\n",
        "solutions/late.py": "import importlib\nchecks = importlib.import_module(f'autograder.checks.{1}')\n",
        "autograder/__init__.py": "import solutions\n",
        "course/source/01_x/01_x.ipynb": _notebook(["%matplotlib inline\nimport coursekit", "from provided import X"]),
        "exercises/01_x/01_x.ipynb": _notebook(["from autograder.checks import check_x\n# YOUR CODE HERE\nraise"]),
        "deploy/docker/Dockerfile.student": "FROM python\nCOPY coursekit/ coursekit/\nCOPY autograder/ autograder/\n",
        "deploy/docker/Dockerfile.instructor": "FROM python\nCOPY solutions/ solutions/\n",
    }
    for name, text in files.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(text)
    errors = draw_architecture.layering_errors(draw_architecture.scan(tmp_path))
    assert [error.split(" at ")[0] for error in errors] == [
        "coursekit -> solutions (imports)",
        "notebooks -> autograder (imports)",
        "solutions -> autograder (imports)",
        "student image -> autograder (packs)",
    ]
    assert "coursekit/leak.py:2" in errors[0] and "exercises/01_x/01_x.ipynb#cell0" in errors[1]


def test_the_page_is_current():
    page = (REPO / "docs" / "architecture.md").read_text(encoding="utf-8")
    assert draw_architecture.render_page(page, REPO) == page, (
        "docs/architecture.md is out of date: run python tools/draw_architecture.py")


def test_the_table_has_a_row_per_exercise_from_the_course_api():
    from coursekit import api

    table = draw_architecture.exercise_table(REPO)
    rows = [line for line in table.splitlines()[2:]]
    assert len(rows) == len(api.API) + len(api.GRADED_RESULTS)
    for entry, row in zip(api.API, rows):
        assert row.startswith(f"| `{entry.name}` | `{entry.notebook}` |")
        assert f"`{entry.check_file}` `{entry.check_name}`" in row
    assert "`autograder/checks/transformer/kv_cache.py` `check_cached_greedy_decode`" in table


def test_the_picture_is_drawn(tmp_path, edges):
    path = draw_architecture.draw(edges, tmp_path / "architecture.png")
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert (REPO / "docs" / "architecture.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


# ------------------------------------------------------------------------------------------------ autograder's rooms

def test_the_rooms_of_autograder_import_only_rooms_before_them():
    """course < submissions, sandbox, checks, gradebook < grade < publish < demo < cli; checks never import grade or
    publish; publish never imports checks or grade."""
    assert draw_architecture.room_errors(draw_architecture.room_edges(REPO)) == []


def test_the_root_of_autograder_holds_only_the_door_and_the_errors():
    root = REPO / "autograder"
    assert sorted(p.name for p in root.glob("*.py")) == ["__init__.py", "__main__.py", "cli.py", "errors.py"]
    assert sorted(p.name for p in root.iterdir() if p.is_dir() and p.name != "__pycache__") == sorted(
        room for room in draw_architecture.ROOMS if room != "cli")


def test_the_room_scanner_reports_imports_against_the_order(tmp_path):
    files = {
        "autograder/__init__.py": "",
        "autograder/cli.py": "from autograder.demo import run\n",
        "autograder/course/cells.py": "def f():\n    from autograder.grade import engine\n",
        "autograder/checks/kit/parts.py": "from autograder.publish.report import x\n",
        "autograder/publish/report.py": "import autograder.checks.kit.parts\nfrom autograder.gradebook import queries\n",
        "autograder/sandbox/jail.py": "from autograder.submissions import files\nfrom autograder import errors\n",
        "autograder/grade/engine.py": "from autograder.sandbox import kernel\n",
    }
    for name, text in files.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(text)
    errors = draw_architecture.room_errors(draw_architecture.room_edges(tmp_path))
    assert [error.split(" at ")[0] for error in errors] == [
        "autograder/checks -> autograder/publish",
        "autograder/course -> autograder/grade",
        "autograder/publish -> autograder/checks",
        "autograder/sandbox -> autograder/submissions",
    ]
    assert errors[1].endswith("autograder/course/cells.py:2")


def _mapped_modules(package: Path) -> set[str]:
    import ast
    import re

    doc = ast.get_docstring(ast.parse((package / "__init__.py").read_text(encoding="utf-8"))) or ""
    return set(re.findall(r"^- `(\w+)\.py`", doc, flags=re.M)) | set(re.findall(r"^- `(\w+)/`", doc, flags=re.M))


@pytest.mark.parametrize("room", [r for r in draw_architecture.ROOMS if r not in ("cli",)])
def test_each_room_s_module_map_names_every_module_it_holds(room):
    """The map at the top of each room (its __init__.py) names every module there and nothing else; the checks'
    topic folders are named by the course API instead (coursekit.api.TOPICS)."""
    from coursekit import api

    package = REPO / "autograder" / room
    present = {p.stem for p in package.glob("*.py") if p.stem != "__init__"} | {
        p.name for p in package.iterdir() if p.is_dir() and (p / "__init__.py").is_file()}
    if room == "checks":
        present -= set(api.TOPICS)
    assert _mapped_modules(package) == present


# ------------------------------------------------------------------------------------------- the checks' topics

def _imports(path: Path) -> list[tuple[int, str]]:
    """(line, dotted module) of every import in a file, relative ones resolved (`from . import x` in a package)."""
    import ast

    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                package = path.relative_to(REPO).with_suffix("").parts[:-node.level]
                base = ".".join(package + ((base,) if base else ()))
            found += [(node.lineno, f"{base}.{alias.name}") for alias in node.names]
    return found


def topic_import_errors(repo: Path, layer: str = "autograder") -> list[str]:
    """A topic folder of a check layer imports only the framework (hidden: `kit`, `stand_ins`; public: `toolkit`),
    `solutions` (hidden layer only), `coursekit`, its own modules and the `mistakes` of its own or earlier topics;
    never another topic's checks (the topics, in course order, from the course API)."""
    from coursekit.api import TOPICS

    errors = []
    for rank, topic in enumerate(TOPICS):
        for path in sorted((repo / layer / "checks" / topic).glob("*.py")):
            for line, module in _imports(path):
                parts = module.split(".")
                if parts[:2] != [layer, "checks"] or len(parts) < 3:
                    continue
                other = parts[2]
                if other in ("kit", "stand_ins", "toolkit", "CheckFailed", "passed") or other == topic:
                    continue
                if other in TOPICS and TOPICS.index(other) < rank and parts[3:4] == ["mistakes"]:
                    continue
                errors.append(f"{path.relative_to(repo)}:{line} imports {module}")
    return errors


@pytest.mark.parametrize("layer", ["autograder", "coursekit"])
def test_a_topic_folder_imports_only_the_kit_and_the_mistakes_of_its_own_or_earlier_topics(layer):
    assert topic_import_errors(REPO, layer) == []


def test_the_topic_rule_has_teeth(tmp_path):
    for topic in ("attention", "encoder", "transformer"):
        (tmp_path / "autograder" / "checks" / topic).mkdir(parents=True)
    (tmp_path / "autograder" / "checks" / "encoder" / "checks.py").write_text(
        "from autograder.checks.kit.compare import expect_tensor\n"
        "from autograder.checks.attention import mistakes as attention_mistakes\n"
        "from autograder.checks.encoder.mistakes import TABLE\n")
    (tmp_path / "autograder" / "checks" / "attention" / "checks.py").write_text(
        "from autograder.checks.encoder.mistakes import TABLE\n")                # a later topic's mistakes
    (tmp_path / "autograder" / "checks" / "transformer" / "checks.py").write_text(
        "from autograder.checks.encoder.checks import sizes\n")                  # another topic's checks
    assert topic_import_errors(tmp_path) == [
        "autograder/checks/attention/checks.py:1 imports autograder.checks.encoder.mistakes.TABLE",
        "autograder/checks/transformer/checks.py:1 imports autograder.checks.encoder.checks.sizes"]


def _check_modules(layer: str) -> dict[str, set[str]]:
    """topic -> the modules of that topic's folder that define a `check_*` function."""
    import re

    from coursekit.api import TOPICS

    return {topic: {p.stem for p in (REPO / layer / "checks" / topic).glob("*.py")
                    if re.search(r"^def check_\w+", p.read_text(encoding="utf-8"), re.M)} for topic in TOPICS}


def test_the_public_and_hidden_checks_mirror_each_other_file_by_file():
    """Each exercise's public check sits in the namesake of its hidden check's module (the graded results, which
    have no public check, aside)."""
    from coursekit import api

    results = {result.check_module.split(".")[1] for result in api.GRADED_RESULTS}
    hidden = {t: modules - results for t, modules in _check_modules("autograder").items()}
    assert hidden == _check_modules("coursekit")
    for entry in api.API:
        assert (REPO / entry.check_file).is_file() and (REPO / entry.public_check_file).is_file(), entry.name


MAX_MODULE_LINES = 400
ONE_TEXT = {"autograder/checks/stand_ins.py": "the kernel receives the stand-ins as one text (one module)"}


@pytest.mark.parametrize("layer", ["autograder", "coursekit"])
def test_no_check_module_is_over_400_lines(layer):
    long = {str(p.relative_to(REPO)): n for p in sorted((REPO / layer / "checks").rglob("*.py"))
            if (n := len(p.read_text(encoding="utf-8").splitlines())) > MAX_MODULE_LINES
            and str(p.relative_to(REPO)) not in ONE_TEXT}
    assert long == {}


MAX_FUNCTION_LINES = 60


def long_functions(folder: Path) -> dict[str, int]:
    """'path:line name' -> length, for every function longer than MAX_FUNCTION_LINES (def line to last line)."""
    import ast

    out = {}
    for path in sorted(folder.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                length = node.end_lineno - node.lineno + 1
                if length > MAX_FUNCTION_LINES:
                    out[f"{path.relative_to(REPO)}:{node.lineno} {node.name}"] = length
    return out


@pytest.mark.parametrize("package", ["autograder", "coursekit", "solutions"])
def test_no_function_is_over_60_lines(package):
    assert long_functions(REPO / package) == {}


def private_imports(folder: Path) -> list[str]:
    """`from module import _name`: a module reaching into another's private name (aliases `as _x` are fine)."""
    import ast

    found = []
    for path in sorted(folder.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and node.module != "__future__":
                found += [f"{path.relative_to(REPO)}:{node.lineno} {node.module}.{alias.name}" for alias in node.names
                          if alias.name.startswith("_")]
    return found


@pytest.mark.parametrize("package", ["autograder", "coursekit", "solutions"])
def test_no_module_imports_another_modules_private_name(package):
    assert private_imports(REPO / package) == []
