"""Draw the course's architecture from the code itself, and write the generated parts of docs/architecture.md.

    python tools/draw_architecture.py           # docs/architecture.png + the generated blocks of the page
    python tools/draw_architecture.py --check   # exit 1 when the page's generated blocks are out of date

The picture's arrows are not drawn by hand: `scan` reads every import of the packages (and of the notebooks'
code cells) and every `COPY` of the Dockerfiles, and the picture shows what it found. The exercise table comes from
the course API (coursekit/api.py), the mistake catalogue (coursekit/mistakes.py) and the sameness test's record of
how each exercise's two texts are compared (tests/course/test_solution_sameness.py). tests/test_architecture.py
checks that the page is current and that the arrows point one way only.
"""
from __future__ import annotations

import argparse
import ast
import json
import re
import sys
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:  # run as a script from anywhere: coursekit comes from this checkout
    sys.path.insert(0, str(REPO))

PAGE = Path("docs") / "architecture.md"
PICTURE = Path("docs") / "architecture.png"

# The boxes of the picture: name -> (what it is, where its code is).
PACKAGES = {
    "coursekit": "student-side helpers, public checks, the course API",
    "solutions": "the reference, one module per topic",
    "autograder": "hidden checks, release, grading pipeline",
    "notebooks": "course/source/ and exercises/",
    "student image": "deploy/docker/Dockerfile.student",
    "instructor image": "deploy/docker/Dockerfile.instructor",
}
IMPORTABLE = ("coursekit", "solutions", "autograder")
IMAGES = {"student image": "deploy/docker/Dockerfile.student",
          "instructor image": "deploy/docker/Dockerfile.instructor"}
COPIED = {"coursekit/": "coursekit", "solutions/": "solutions", "autograder/": "autograder",
          "course/": "notebooks", "exercises/": "notebooks"}

# The allowed direction of every arrow: an edge (source, target, kind) outside this set is a layering error.
ALLOWED = {
    ("solutions", "coursekit", "imports"),
    ("autograder", "coursekit", "imports"),
    ("autograder", "solutions", "imports"),
    ("notebooks", "coursekit", "imports"),
    ("notebooks", "solutions", "provided.py"),   # `from provided import ...`: generated from solutions/
    ("student image", "coursekit", "packs"),
    ("student image", "notebooks", "packs"),
    ("instructor image", "coursekit", "packs"),
    ("instructor image", "solutions", "packs"),
    ("instructor image", "autograder", "packs"),
    ("instructor image", "notebooks", "packs"),
}


# The rooms of autograder/, in the order a submission walks through them. A room imports only rooms of a lower
# rank (siblings of one rank never import each other); errors.py is everybody's; cli.py and __main__.py are the door.
# The gradebook comes right after the course: collect records the roster in it, before anything is graded.
ROOMS = {"course": 0, "gradebook": 1, "submissions": 2, "sandbox": 2, "checks": 2, "grade": 3, "publish": 4,
         "demo": 5, "cli": 6}
ROOM_OF_MODULE = {"cli": "cli", "__main__": "cli", "errors": None}  # modules at autograder/'s root
# Besides the order: what a check decides never depends on how a run or a page is made, and a page only formats
# what the gradebook and autograded/ hold (never a check's own data).
ROOMS_NEVER = {("checks", "grade"), ("checks", "publish"), ("publish", "checks"), ("publish", "grade")}
ROOM_WORDS = {
    "course": "what the instructor authored (no submission and no gradebook is read here)",
    "submissions": "every read of a student's files; who submitted what, and when",
    "sandbox": "one untrusted kernel: limits, jail, cgroup, execution",
    "checks": "the hidden checks, judged in the grader's process",
    "gradebook": "the one store of scores: one writer, every read",
    "grade": "one grading run: plan, Dask cluster, worker, judge",
    "publish": "release, feedback, exports, reports, similarity: what leaves the grader",
    "demo": "make demo: a sample class end to end",
    "cli": "the instructor's command line",
}


@dataclass(frozen=True)
class Edge:
    source: str
    target: str
    kind: str  # "imports" | "provided.py" | "packs"


# ------------------------------------------------------------------------------------------------ scanning

def _imported_modules(tree: ast.AST) -> list[tuple[str, int]]:
    """Every module a tree imports (statements anywhere, and importlib.import_module("...") with a literal or an
    f-string whose first part is a literal), with its line."""
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [(alias.name, node.lineno) for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            found.append((node.module, node.lineno))
        elif (isinstance(node, ast.Call) and getattr(node.func, "attr", getattr(node.func, "id", None))
              in ("import_module", "__import__") and node.args):
            first = node.args[0]
            if isinstance(first, ast.JoinedStr) and first.values and isinstance(first.values[0], ast.Constant):
                first = first.values[0]
            if isinstance(first, ast.Constant) and isinstance(first.value, str):
                found.append((first.value, node.lineno))
    return found


def _code_cells(notebook: Path) -> list[str]:
    cells = json.loads(notebook.read_text(encoding="utf-8")).get("cells", [])
    sources = []
    for cell in cells:
        if cell.get("cell_type") == "code":
            text = "".join(cell["source"]) if isinstance(cell["source"], list) else cell["source"]
            # IPython magics and shell lines are not Python
            sources.append("\n".join("" if line.lstrip().startswith(("%", "!")) else line
                                     for line in text.splitlines()))
    return sources


def _package_of(module: str) -> str | None:
    top = module.split(".")[0]
    return top if top in IMPORTABLE else None


def scan(repo: Path = REPO) -> dict[Edge, list[str]]:
    """Every arrow between the boxes, with the places (path:line) that make it."""
    edges: dict[Edge, list[str]] = defaultdict(list)

    def add(source: str, module: str, where: str):
        if module.split(".")[0] == "provided":
            edges[Edge(source, "solutions", "provided.py")].append(where)
            return
        target = _package_of(module)
        if target and target != source:
            edges[Edge(source, target, "imports")].append(where)

    for package in IMPORTABLE:
        for path in sorted((repo / package).rglob("*.py")):
            tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
            for module, line in _imported_modules(tree):
                add(package, module, f"{path.relative_to(repo)}:{line}")
    notebooks = sorted((repo / "course" / "source").glob("*/*.ipynb")) + sorted((repo / "exercises").glob("*/*.ipynb"))
    for path in notebooks:
        for number, source in enumerate(_code_cells(path)):
            try:
                tree = ast.parse(source)
            except SyntaxError:  # a stub cell may not parse; its import lines still count
                tree = ast.parse("\n".join(line.strip() for line in source.splitlines()
                                           if re.match(r"\s*(import|from)\s+\w", line) and
                                           not line.rstrip().endswith(("(", "\\"))))
            for module, _ in _imported_modules(tree):
                add("notebooks", module, f"{path.relative_to(repo)}#cell{number}")
    for path in sorted((repo / "deploy").rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        image = "student image" if "student" in path.parts else "instructor image"
        for module, line in _imported_modules(tree):
            add(image, module, f"{path.relative_to(repo)}:{line}")
    for image, dockerfile in IMAGES.items():
        for number, line in enumerate((repo / dockerfile).read_text(encoding="utf-8").splitlines(), start=1):
            words = line.split()
            if words[:1] == ["COPY"] and not any(word.startswith("--from") for word in words):
                for source in words[1:-1]:
                    if source in COPIED:
                        edges[Edge(image, COPIED[source], "packs")].append(f"{dockerfile}:{number}")
    return dict(edges)


def layering_errors(edges: dict[Edge, list[str]]) -> list[str]:
    """One line per arrow that goes against the allowed direction (empty: the layering holds)."""
    return [f"{edge.source} -> {edge.target} ({edge.kind}) at {', '.join(places[:5])}"
            for edge, places in sorted(edges.items(), key=lambda item: (item[0].source, item[0].target))
            if (edge.source, edge.target, edge.kind) not in ALLOWED]


def _room(module: str) -> str | None:
    """The room of a dotted module of autograder (None: errors.py, or not autograder)."""
    parts = module.split(".")
    if parts[0] != "autograder" or len(parts) < 2:
        return None
    return ROOM_OF_MODULE.get(parts[1], parts[1]) if parts[1] not in ROOMS else parts[1]


def room_edges(repo: Path = REPO) -> dict[tuple[str, str], list[str]]:
    """Every import of one room of autograder/ by another, with the places (path:line) that make it."""
    edges: dict[tuple[str, str], list[str]] = defaultdict(list)
    root = repo / "autograder"
    for path in sorted(root.rglob("*.py")):
        relative = path.relative_to(root)
        source = relative.parts[0] if len(relative.parts) > 1 else ROOM_OF_MODULE.get(path.stem)
        if source is None:
            continue
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        for module, line in _imported_modules(tree):
            target = _room(module)
            if target and target != source:
                edges[(source, target)].append(f"{path.relative_to(repo)}:{line}")
    return dict(edges)


def room_errors(edges: dict[tuple[str, str], list[str]]) -> list[str]:
    """One line per import that goes against the rooms' order (empty: the order holds)."""
    return [f"autograder/{source} -> autograder/{target} at {', '.join(places[:5])}"
            for (source, target), places in sorted(edges.items())
            if source not in ROOMS or target not in ROOMS or ROOMS[target] >= ROOMS[source]
            or (source, target) in ROOMS_NEVER]


def room_list(repo: Path = REPO) -> str:
    """The rooms in order, each with what it imports (scanned)."""
    edges = room_edges(repo)
    lines = []
    for room in ROOMS:
        uses = sorted((target for source, target in edges if source == room), key=lambda r: (ROOMS[r], r))
        where = "`autograder/cli.py`" if room == "cli" else f"`autograder/{room}/`"
        lines.append(f"- {where}: {ROOM_WORDS[room]}; imports {', '.join(uses) if uses else 'no other room'}")
    return "\n".join(lines)


# ------------------------------------------------------------------------------------------------ the page

def _checked_by(repo: Path) -> dict[str, str]:
    """CHECKED_BY of the sameness test, read as a literal (the test is not imported)."""
    path = repo / "tests" / "course" / "test_solution_sameness.py"
    if not path.is_file():
        return {}
    for node in ast.parse(path.read_text(encoding="utf-8")).body:
        if isinstance(node, ast.Assign) and any(getattr(t, "id", None) == "CHECKED_BY" for t in node.targets):
            return ast.literal_eval(node.value)
    return {}


def _mistake_ids(name: str) -> str:
    try:
        from coursekit.mistakes import mistakes_for
    except ImportError:
        return "see `autograder/checks/<topic>/mistakes.py`"
    ids = [mistake.id for mistake in mistakes_for(name)]
    return ", ".join(f"`{mistake_id}`" for mistake_id in ids) if ids else "-"


def exercise_table(repo: Path = REPO) -> str:
    from coursekit import api

    checked_by = _checked_by(repo)
    lines = ["| exercise | stub (notebook) | public check | hidden check | reference | same as notebook by | "
             "mistake ids |",
             "|---|---|---|---|---|---|---|"]
    for entry in api.API:
        lines.append(
            f"| `{entry.name}` | `{entry.notebook}` | `{entry.public_check_file}` `{entry.check_name}` "
            f"| `{entry.check_file}` `{entry.check_name}` | `solutions/{entry.topic}.py` "
            f"| {checked_by.get(entry.name, '?')} | {_mistake_ids(entry.name)} |")
    for result in api.GRADED_RESULTS:
        lines.append(f"| {result.name} (a result: {result.summary}) | `{result.notebook}` | - "
                     f"| `{result.check_file}` `{result.check_name}` | - | - | - |")
    return "\n".join(lines)


def arrow_list(edges: dict[Edge, list[str]]) -> str:
    verbs = {"imports": "imports", "provided.py": "imports `provided.py`, generated from", "packs": "packs"}
    order = list(PACKAGES)
    return "\n".join(f"- {edge.source} {verbs[edge.kind]} {edge.target}"
                     for edge in sorted(edges, key=lambda e: (order.index(e.source), order.index(e.target))))


def recipe(repo: Path = REPO) -> str:
    """The steps of tools/exercise_recipe.py, numbered."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("exercise_recipe", repo / "tools" / "exercise_recipe.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules.setdefault("exercise_recipe", module)  # dataclasses look their module up
    spec.loader.exec_module(module)
    return module.markdown()


BLOCKS = {"exercises": exercise_table, "arrows": lambda repo: arrow_list(scan(repo)), "recipe": recipe,
          "rooms": room_list}


def _marker(name: str, end: bool = False) -> str:
    return f"<!-- {'END' if end else 'BEGIN'} GENERATED {name}: python tools/draw_architecture.py -->"


def render_page(text: str, repo: Path = REPO) -> str:
    """`text` with every generated block replaced by its current content."""
    for name, build in BLOCKS.items():
        begin, end = _marker(name), _marker(name, end=True)
        if begin not in text or end not in text:
            raise ValueError(f"{PAGE} has no {begin!r} ... {end!r} block")
        head, rest = text.split(begin, 1)
        _, tail = rest.split(end, 1)
        text = f"{head}{begin}\n{build(repo)}\n{end}{tail}"
    return text


# ------------------------------------------------------------------------------------------------ the picture

_PLACES = {  # box centres in axes coordinates: packages bottom-up in the middle, what the images pack on the left
    "instructor image": (0.13, 0.84),
    "autograder": (0.50, 0.84),
    "notebooks": (0.13, 0.50),
    "solutions": (0.80, 0.50),
    "student image": (0.13, 0.16),
    "coursekit": (0.50, 0.16),
}
_STYLE = {"imports": dict(color="#1f4e79", linestyle="-", linewidth=2.0),
          "provided.py": dict(color="#b35806", linestyle="--", linewidth=1.8),
          "packs": dict(color="#7f7f7f", linestyle=":", linewidth=1.6)}


def draw(edges: dict[Edge, list[str]], path: Path) -> Path:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.lines import Line2D
    from matplotlib.patches import FancyArrowPatch, FancyBboxPatch

    fig, ax = plt.subplots(figsize=(11, 6.2), dpi=100)
    ax.set_xlim(0, 1)
    ax.set_ylim(0, 1)
    ax.axis("off")
    width, height = 0.21, 0.13
    boxes = {}
    for name, (x, y) in _PLACES.items():
        student_side = name in ("coursekit", "student image")
        box = FancyBboxPatch((x - width / 2, y - height / 2), width, height, boxstyle="round,pad=0.01",
                             facecolor="#e8f3e8" if student_side else "#f3ece0", edgecolor="#333333")
        ax.add_patch(box)
        boxes[name] = box
        ax.text(x, y + 0.025, name, ha="center", va="center", fontsize=12, fontweight="bold")
        ax.text(x, y - 0.03, PACKAGES[name], ha="center", va="center", fontsize=7.5, wrap=True)
    for edge in sorted(edges, key=lambda e: (e.source, e.target, e.kind)):
        (x0, y0), (x1, y1) = _PLACES[edge.source], _PLACES[edge.target]
        arrow = FancyArrowPatch((x0, y0), (x1, y1), patchA=boxes[edge.source], patchB=boxes[edge.target],
                                arrowstyle="-|>", mutation_scale=16, shrinkA=4, shrinkB=4,
                                connectionstyle="arc3,rad=0.05", **_STYLE[edge.kind])
        ax.add_patch(arrow)
    ax.legend(handles=[Line2D([], [], **_STYLE["imports"], label="imports"),
                       Line2D([], [], **_STYLE["provided.py"], label="imports provided.py, generated from"),
                       Line2D([], [], **_STYLE["packs"], label="Docker image packs (COPY)")],
              loc="lower right", fontsize=8, frameon=False)
    ax.set_title("transformers101: every arrow points one way (scanned from the code by tools/draw_architecture.py)",
                 fontsize=11)
    ax.text(0.32, 0.01, "green: the student side", ha="center", fontsize=8, color="#2e6b2e")
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, metadata={"Software": None})  # no version stamp: the file changes only when the picture does
    plt.close(fig)
    return path


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="only check that the page's generated blocks are current")
    args = parser.parse_args(argv)
    edges = scan(REPO)
    errors = layering_errors(edges) + room_errors(room_edges(REPO))
    if errors:
        print("arrows against the layering:\n  " + "\n  ".join(errors), file=sys.stderr)
        return 1
    page = REPO / PAGE
    current = page.read_text(encoding="utf-8")
    wanted = render_page(current)
    if args.check:
        if wanted != current:
            print(f"{PAGE} is out of date: run python tools/draw_architecture.py", file=sys.stderr)
            return 1
        return 0
    page.write_text(wanted, encoding="utf-8")
    draw(edges, REPO / PICTURE)
    print(f"wrote {PAGE} and {PICTURE}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
