"""The structure of a student's code, for copy detection: what the code does, not how its text looks.

`normalised(code)` parses the code with Python's `ast` and prints it back after removing what a copier can add or
change without changing the program:

* statements without effect: docstrings and other expression statements without a call (`17`, `x`, `x.shape`,
  `"text"`), `pass`, and assignments of such call-free values to names that nothing reads (`_v17 = 17`; repeated
  until none is left, so a chain of unread names goes too). An unread name assigned a call keeps the call;
* names: every argument and every name a function (or the module) assigns becomes `v0`, `v1`, ... in the order it
  first appears in its scope. Names only read (`torch`, `F`, `range`), attributes (`self.w_q`, `x.view`), function
  and class names stay: they are the course API and the libraries' API;
* comments, blank lines and the layout of the text (`ast.unparse` prints one canonical form).

Cells that are not Python (an IPython magic, a cell that does not parse) are left out, and code nested too deeply
to walk gives "": the text comparison still sees them. `autograder.publish.similarity` fingerprints this form with the same winnowing as the text and reports,
for each pair, the higher of the two similarities.
"""
from __future__ import annotations

import ast
import re

MAGIC = re.compile(r"^[ \t]*[%!].*$", re.M)  # IPython line and cell magics, shell escapes
_EFFECTS = (ast.Call, ast.Await, ast.Yield, ast.YieldFrom, ast.NamedExpr)
_SCOPES = (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)


def _pure(node: ast.AST | None) -> bool:
    """True when evaluating `node` calls nothing (no call, await, yield or walrus anywhere in it)."""
    return node is None or not any(isinstance(n, _EFFECTS) for n in ast.walk(node))


def _read_names(tree: ast.AST) -> set[str]:
    names = {n.id for n in ast.walk(tree) if isinstance(n, ast.Name) and not isinstance(n.ctx, ast.Store)}
    for n in ast.walk(tree):  # `global x` / `nonlocal x`: another scope may read it
        if isinstance(n, (ast.Global, ast.Nonlocal)):
            names.update(n.names)
    return names


def _unread_target(target: ast.AST, read: set[str]) -> bool:
    if isinstance(target, ast.Name):
        return target.id not in read
    if isinstance(target, (ast.Tuple, ast.List)):
        return all(_unread_target(t, read) for t in target.elts)
    return False  # an attribute or subscript is an effect on an object


class _DropNoEffect(ast.NodeTransformer):
    """Removes the statements without effect (see the module doc); `read`: the names read anywhere."""

    def __init__(self, read: set[str]):
        self.read = read
        self.changed = False

    def _body(self, statements: list[ast.stmt], in_class: bool = False) -> list[ast.stmt]:
        kept = []
        for statement in statements:
            statement = self.visit(statement)
            if statement is None or self._no_effect(statement, in_class):
                self.changed = True
                continue
            kept.append(statement)
        return kept

    def _no_effect(self, statement: ast.stmt, in_class: bool) -> bool:
        if isinstance(statement, ast.Pass):
            return True
        if isinstance(statement, ast.Expr):
            return _pure(statement.value)
        if in_class:  # a class body's names are its attributes: read as attributes, never as names
            return False
        if isinstance(statement, ast.Assign):
            return _pure(statement.value) and all(_unread_target(t, self.read) for t in statement.targets)
        if isinstance(statement, (ast.AugAssign, ast.AnnAssign)):
            return _pure(statement.value) and _unread_target(statement.target, self.read)
        return False

    def generic_visit(self, node):
        for field in ("body", "orelse", "finalbody"):
            statements = getattr(node, field, None)
            if isinstance(statements, list) and statements and isinstance(statements[0], ast.stmt):
                kept = self._body(statements, in_class=isinstance(node, ast.ClassDef) and field == "body")
                setattr(node, field, kept or [ast.Pass()])  # a block stays a block (printed as `pass`)
        for field, value in ast.iter_fields(node):
            if field in ("body", "orelse", "finalbody") and isinstance(value, list) and value \
                    and isinstance(value[0], ast.stmt):
                continue
            if isinstance(value, list):
                setattr(node, field, [self.visit(v) if isinstance(v, ast.AST) else v for v in value])
            elif isinstance(value, ast.AST):
                setattr(node, field, self.visit(value))
        return node


def _assigned(scope: ast.AST) -> list[str]:
    """The names `scope` binds itself (its arguments, then assignments, loop and with targets, in order of
    appearance), not those of the functions inside it."""
    found: list[str] = []
    if isinstance(scope, _SCOPES):
        args = scope.args
        for arg in [*args.posonlyargs, *args.args, args.vararg, *args.kwonlyargs, args.kwarg]:
            if arg is not None:
                found.append(arg.arg)
    stack = list(ast.iter_child_nodes(scope))[::-1]
    while stack:
        node = stack.pop()
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            found.append(node.id)
        if isinstance(node, (*_SCOPES, ast.ClassDef)):
            continue  # their own scope (a class body's names are attributes: kept)
        stack.extend(list(ast.iter_child_nodes(node))[::-1])
    return list(dict.fromkeys(found))


class _Canonical(ast.NodeTransformer):
    """Renames each scope's own names to v0, v1, ... (module: the same, for names it assigns)."""

    def __init__(self):
        self.scopes: list[dict[str, str]] = []

    def _enter(self, node):
        self.scopes.append({name: f"v{i}" for i, name in enumerate(_assigned(node))})
        try:
            if isinstance(node, _SCOPES):
                for arg in ast.walk(node.args):
                    if isinstance(arg, ast.arg):
                        arg.arg = self.scopes[-1].get(arg.arg, arg.arg)
                node.args.defaults = [self.visit(d) for d in node.args.defaults]
                node.args.kw_defaults = [self.visit(d) if d is not None else None for d in node.args.kw_defaults]
                if isinstance(node, ast.Lambda):
                    node.body = self.visit(node.body)
                else:
                    node.body = [self.visit(s) for s in node.body]
                    node.decorator_list = [self.visit(d) for d in node.decorator_list]
            else:
                self.generic_visit(node)
        finally:
            self.scopes.pop()
        return node

    visit_Module = visit_FunctionDef = visit_AsyncFunctionDef = visit_Lambda = _enter

    def visit_Name(self, node):
        for scope in reversed(self.scopes):
            if node.id in scope:
                node.id = scope[node.id]
                break
        return node


def _parsed(code: str) -> ast.Module:
    """The code's syntax tree; a top-level block that does not parse is left out (each one, until it parses, 50 at
    most: then nothing is)."""
    lines = MAGIC.sub("", code).splitlines()
    for _ in range(50):  # each try drops at least one line; a broken cell costs one or two
        try:
            return ast.parse("\n".join(lines))
        except SyntaxError as exc:
            bad = min(max((exc.lineno or 1) - 1, 0), max(len(lines) - 1, 0))
            if not lines:
                break
            start = bad
            while start > 0 and not (lines[start][:1].strip() and lines[start][:1] != "#"):
                start -= 1
            end = bad + 1
            while end < len(lines) and not (lines[end][:1].strip() and lines[end][:1] not in "#)]}"):
                end += 1
            del lines[start:end]
    return ast.Module(body=[], type_ignores=[])


def normalised(code: str) -> str:
    """The canonical text of `code`'s structure (see the module doc); "" when nothing of it parses, or when it is
    nested too deeply to walk (the text comparison still sees it)."""
    try:
        return _normalised(code)
    except (RecursionError, MemoryError, ValueError):
        return ""


def _normalised(code: str) -> str:
    tree = _parsed(code)
    for _ in range(20):  # until no statement without effect is left (an unread chain goes one link per pass)
        dropper = _DropNoEffect(_read_names(tree))
        tree.body = dropper._body(tree.body)
        if not dropper.changed:
            break
    tree = _Canonical().visit(tree)
    ast.fix_missing_locations(tree)
    return ast.unparse(tree)
