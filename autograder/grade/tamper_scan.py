"""Static scan of a submission for tampering, before anything of it runs.

Kinds of findings (`Flag.severity`; the grading run adds a third, "hold", for a time limit reached twice, see
`HOLD`):
- "tamper": code that could change what the checks see -- monkeypatching a module (torch, torch.testing,
  numpy, builtins, the checks...), importing `solutions`/`autograder`/`nbgrader`, editing `sys.modules` or
  `sys.meta_path`, redefining a `check_*` name, touching the parts the grader lends (the `course_stand_ins`
  module, its `LENT` switch, the probe's `ProbeState`: see autograder/checks/stand_ins.py). The engine holds such
  a submission: its grades get a manual score of 0 and "needs manual grade" in nbgrader, so an instructor reviews
  it (and can lift the hold in formgrader); the automatic score is kept.
- "review": worth a look, harmless for the grade -- a locked/grade cell edited or deleted (nbgrader restores
  them before running), nbgrader metadata changed, reading files outside the submission folder, `sys.path`
  edits, `ctypes`, `os._exit`.
Locked cells are compared with the gradebook's source cells (hidden-test blocks removed, as in the release).
"""
from __future__ import annotations

import ast
import dataclasses
import re

from autograder.course.cells import nbgrader_metadata

FORBIDDEN_IMPORTS = {"solutions", "autograder", "nbgrader"}
WATCHED_CALL_PATHS = {"open", "io.open", "os.open", "os.listdir", "os.scandir", "os.walk", "glob.glob",
                      "pathlib.Path", "Path", "np.load", "numpy.load", "torch.load", "shutil.copy",
                      "shutil.copyfile", "os.remove", "os.unlink", "os.chdir", "os.rename", "shutil.rmtree"}
# Module settings students legitimately change: not monkeypatching.
ALLOWED_SETTINGS = ("torch.backends.", "pandas.options.", "matplotlib.", "seaborn.", "warnings.", "logging.",
                    "os.environ", "numpy.random.seed", "tqdm.")
# What the grader lends a composite's check (autograder/checks/stand_ins.py, coursekit.probe): a submission never needs them.
STAND_IN_NAMES = {"course_stand_ins", "LENT", "ProbeState"}
HIDDEN_BLOCK = re.compile(r"^[ \t]*### BEGIN HIDDEN TESTS.*?^[ \t]*### END HIDDEN TESTS[ \t]*\n?", re.S | re.M)


TAMPER, REVIEW = "tamper", "review"
# held for review with its scores as graded (a time limit reached even when graded alone: its cell keeps its 0,
# marked for a grader; the run's other cells keep their scores), unlike TAMPER, which holds every grade at 0
HOLD = "hold"


@dataclasses.dataclass(frozen=True)
class Flag:
    code: str
    severity: str  # TAMPER | REVIEW | HOLD
    cell: str  # grade_id or "cell <index>"
    message: str

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)


def released_source(source: str) -> str:
    """What the student received for a locked cell: its source with the hidden-test blocks cut out."""
    return HIDDEN_BLOCK.sub("", source).strip()


def _strip_magics(source: str) -> str:
    return "\n".join("" if line.lstrip().startswith(("%", "!")) else line for line in source.splitlines())


def _dotted(node: ast.AST) -> str | None:
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name):
        parts.append(node.id)
        return ".".join(reversed(parts))
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "__import__":
        parts.append("__import__()")
        return ".".join(reversed(parts))
    return None


class _CodeScanner(ast.NodeVisitor):
    def __init__(self, where: str, module_aliases: dict[str, str]):
        self.where = where
        self.aliases = module_aliases  # local name -> module it names (grows as imports are seen)
        self.flags: list[Flag] = []

    def flag(self, code, severity, message):
        self.flags.append(Flag(code, severity, self.where, message))

    # imports
    def visit_Import(self, node):
        for alias in node.names:
            root = alias.name.split(".")[0]
            self.aliases[alias.asname or root] = alias.name if alias.asname else root
            self._check_module(alias.name)
        self.generic_visit(node)

    def visit_ImportFrom(self, node):
        module = node.module or ""
        self._check_module(module)
        for alias in node.names:
            self.aliases[alias.asname or alias.name] = f"{module}.{alias.name}"
            if alias.name == "ctypes" or module == "ctypes":
                self.flag("ctypes", "review", "uses ctypes (can crash the interpreter)")
        self.generic_visit(node)

    def _check_module(self, module: str):
        root = module.split(".")[0]
        if root in FORBIDDEN_IMPORTS:
            self.flag("imports-reference", "tamper", f"imports `{module}` (the reference or the grader)")
        if root == "ctypes":
            self.flag("ctypes", "review", "uses ctypes (can crash the interpreter)")

    # assignments to attributes of modules, sys.modules, check_* names
    def _check_target(self, target):
        if isinstance(target, (ast.Tuple, ast.List)):
            for element in target.elts:
                self._check_target(element)
            return
        if isinstance(target, ast.Name) and target.id.startswith("check_"):
            self.flag("redefines-check", "tamper", f"assigns to `{target.id}`, the name of a check")
            return
        dotted = _dotted(target.value if isinstance(target, ast.Subscript) else target)
        if dotted is None:
            return
        head = dotted.split(".")[0]
        module = self.aliases.get(head)
        if isinstance(target, ast.Subscript):
            if dotted in ("sys.modules", "sys.meta_path", "builtins.__dict__", "__builtins__") or \
                    (module and dotted.endswith("__dict__")):
                self.flag("monkeypatch", "tamper", f"edits `{dotted}[...]`")
            return
        resolved = self._resolve(dotted)
        if resolved.startswith(ALLOWED_SETTINGS):
            return
        if head in ("__builtins__", "builtins") or (module is not None and "." in dotted) or \
                dotted.startswith("__import__()"):
            self.flag("monkeypatch", "tamper", f"replaces `{dotted}` (a module attribute)")

    def visit_Assign(self, node):
        for target in node.targets:
            self._check_target(target)
        self.generic_visit(node)

    def visit_AugAssign(self, node):
        self._check_target(node.target)
        self.generic_visit(node)

    def visit_AnnAssign(self, node):
        self._check_target(node.target)
        self.generic_visit(node)

    def visit_Delete(self, node):
        for target in node.targets:
            self._check_target(target)
        self.generic_visit(node)

    def visit_FunctionDef(self, node):
        if node.name.startswith("check_"):
            self.flag("redefines-check", "tamper", f"defines `{node.name}`, the name of a check")
        self.generic_visit(node)

    visit_AsyncFunctionDef = visit_FunctionDef

    # the stand-ins the grader lends (and the probe's record of them)
    def _stand_in(self, name: str):
        self.flag("stand-in", "tamper", f"touches `{name}`, what the grader lends a check (autograder/checks/stand_ins.py)")

    def visit_Name(self, node):
        if node.id in STAND_IN_NAMES:
            self._stand_in(node.id)
        self.generic_visit(node)

    def visit_Attribute(self, node):
        if node.attr in STAND_IN_NAMES:
            self._stand_in(node.attr)
        self.generic_visit(node)

    def visit_Constant(self, node):
        if isinstance(node.value, str) and (node.value in STAND_IN_NAMES or "course_stand_ins" in node.value):
            self._stand_in(node.value[:40])

    def visit_Call(self, node):
        name = _dotted(node.func) or ""
        resolved = self._resolve(name)
        args = node.args
        if name in ("setattr", "delattr", "object.__setattr__") and args:
            target = _dotted(args[0]) or ""
            head = target.split(".")[0]
            if head in self.aliases or head in ("builtins", "__builtins__"):
                self.flag("monkeypatch", "tamper", f"`{name}` on `{target}`")
        if name == "__import__" or resolved in ("importlib.import_module", "importlib.__import__"):
            if args and isinstance(args[0], ast.Constant) and isinstance(args[0].value, str):
                self._check_module(args[0].value)
        if resolved in ("os._exit", "os.kill", "signal.pthread_kill", "os.abort"):
            self.flag("kills-process", "review", f"calls `{resolved}`")
        if resolved.startswith("sys.path.") or resolved.startswith("sys.meta_path."):
            severity = "tamper" if "meta_path" in resolved else "review"
            self.flag("import-path", severity, f"changes the import path (`{resolved}`)")
        if resolved.startswith("sys.modules."):
            self.flag("monkeypatch", "tamper", f"edits `sys.modules` (`{resolved}`)")
        if name in WATCHED_CALL_PATHS or resolved in WATCHED_CALL_PATHS:
            for arg in args[:1]:
                if isinstance(arg, ast.Constant) and isinstance(arg.value, str) and _outside(arg.value):
                    self.flag("outside-files", "review", f"`{name}` on a path outside the submission: {arg.value!r}")
        self.generic_visit(node)

    def _resolve(self, dotted: str) -> str:
        head, _, rest = dotted.partition(".")
        module = self.aliases.get(head)
        return f"{module}.{rest}".strip(".") if module else dotted


def _outside(path: str) -> bool:
    return path.startswith(("/", "~", "\\")) or ".." in path.replace("\\", "/").split("/")


def scan_code(source: str, where: str, module_aliases: dict[str, str]) -> list[Flag]:
    """Findings in one code cell; `module_aliases` carries imports from earlier cells."""
    text = _strip_magics(source)
    try:
        tree = ast.parse(text)
    except SyntaxError:
        return _scan_text(text, where)
    scanner = _CodeScanner(where, module_aliases)
    scanner.visit(tree)
    return scanner.flags


def _scan_text(text: str, where: str) -> list[Flag]:
    """Fallback for cells that do not parse: look for the worst patterns by text."""
    flags = []
    if re.search(r"^\s*(from|import)\s+(solutions|autograder|nbgrader)\b", text, re.M):
        flags.append(Flag("imports-reference", "tamper", where, "imports the reference or the grader"))
    if re.search(r"\b(torch|np|numpy|builtins|autograder)(\.\w+)+\s*=[^=]", text):
        flags.append(Flag("monkeypatch", "tamper", where, "replaces a module attribute"))
    return flags


def scan(nb, source_cells: list[dict], grade_cells: list[dict]) -> list[Flag]:
    """All findings for a submitted notebook (nbformat v4 node or dict).

    `source_cells`: the gradebook's source cells of this notebook ({name, source, locked, cell_type});
    `grade_cells`: its grade cells ({name, max_score}).
    """
    flags: list[Flag] = []
    sources = {c["name"]: c for c in source_cells}
    expected_grades = {c["name"]: c for c in grade_cells}
    seen: dict[str, int] = {}
    aliases: dict[str, str] = {}
    for index, cell in enumerate(nb["cells"]):
        meta = nbgrader_metadata(cell)
        grade_id = meta.get("grade_id")
        where = grade_id or f"cell {index}"
        text = cell.get("source", "")
        text = "".join(text) if isinstance(text, list) else text
        original = sources.get(grade_id) if grade_id else None
        if grade_id:
            seen[grade_id] = seen.get(grade_id, 0) + 1
        if original is not None and original.get("locked"):
            if text.strip() not in (released_source(original["source"]), original["source"].strip()):
                hidden = "### BEGIN HIDDEN TESTS" in original["source"]
                flags.append(Flag("edited-locked-cell", "review", where,
                                  "a locked cell was edited" + (" (it holds hidden tests)" if hidden else "")
                                  + "; the original was restored before grading"))
            if grade_id in expected_grades and not meta.get("grade"):
                flags.append(Flag("edited-metadata", "review", where, "nbgrader metadata of a grade cell changed"))
            elif grade_id in expected_grades and meta.get("points") != expected_grades[grade_id]["max_score"] \
                    and meta.get("points") is not None:
                flags.append(Flag("edited-metadata", "review", where,
                                  f"points changed to {meta.get('points')} (restored)"))
            continue  # the original replaces this cell before it runs: its content cannot act
        if cell.get("cell_type") == "code":
            flags.extend(scan_code(text, where, aliases))
    for grade_id in expected_grades:
        if grade_id not in seen:
            flags.append(Flag("deleted-grade-cell", "review", grade_id, "grade cell missing; restored before grading"))
    for grade_id, count in seen.items():
        if count > 1:
            flags.append(Flag("duplicate-cell-id", "review", grade_id, f"grade_id appears {count} times"))
    return flags
