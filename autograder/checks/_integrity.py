"""Self-verification of the grading machinery, run at the start of every hidden check.

A hidden check runs inside the student's kernel, after the student's own cells. A student cell could replace a
function the checks rely on (`torch.allclose = lambda *a, **k: True`), the reference (`solutions...`), or the checks
themselves. `verify()` detects such replacements by comparing what is reachable now with originals obtained without
going through anything a Python-level patch can change:

- torch's C functions (`torch.allclose`, ...) must be the very objects held by `torch._C._VariableFunctions`, an
  instance of a C (non-heap) type whose attributes are read-only; `torch._C.TensorBase` is an immutable C type.
- builtins (`isinstance`, `abs`, `print`, ...) must be C builtin functions bound to the `builtins` module under
  their own name (pure Python cannot create such an object).
- every function and class defined in the source files of `solutions`, `autograder.checks` and the torch modules
  the checks use must carry the code object compiled from the file on disk (same qualified name, same bytecode),
  and no foreign function may have been added to those classes.
- no torch function mode, dispatch mode or global nn.Module hook may be active (they would rewrite results of
  every torch call or module), and IPython must not swallow exceptions (a custom exception handler).

On any finding it raises `AssertionError("integrity check failed: ...")`, so the grade cell scores 0.
"""
from __future__ import annotations

import ast
import builtins as _builtins_module
import os
import sys
import types

import torch

_HEAPTYPE = 1 << 9  # Py_TPFLAGS_HEAPTYPE: set on every class created by Python code
_type = object.__class__  # the real `type`, reached without the builtins namespace (which may be patched)

# Builtins the checks (and Python itself when formatting messages) rely on.
BUILTIN_NAMES = (
    "isinstance", "issubclass", "abs", "print", "len", "getattr", "setattr", "hasattr", "callable", "repr",
    "max", "min", "sum", "sorted", "iter", "next", "id", "hash", "round", "any", "all",
)
BUILTIN_TYPES = ("int", "float", "bool", "str", "dict", "list", "tuple", "set", "type", "object", "range", "zip",
                 "enumerate", "super", "AssertionError", "Exception", "BaseException", "NotImplementedError",
                 "ValueError", "TypeError", "RuntimeError")
# torch's C functions the checks use for comparisons (torch.<name> is torch._C._VariableFunctions.<name>).
TORCH_C_FUNCTIONS = (
    "allclose", "isclose", "equal", "isnan", "isfinite", "isinf", "abs", "sub", "max", "amax", "all", "any",
    "where", "eq", "ne", "lt", "le", "gt", "ge", "logical_and", "logical_not", "logical_or", "zeros", "ones", "full",
    "randn", "rand", "randint", "arange", "tensor", "stack", "cat", "tril", "triu", "softmax", "matmul", "sum",
    "mean", "std", "sqrt", "exp", "sin", "cos", "sort", "argmax", "masked_fill", "broadcast_to", "clone",
)
# torch modules whose Python functions the checks, the reference and nn modules run through.
TORCH_MODULES = (
    "torch.functional", "torch._tensor", "torch.nn.functional", "torch.nn.modules.module",
    "torch.nn.modules.linear", "torch.nn.modules.normalization", "torch.nn.modules.sparse",
    "torch.nn.modules.dropout", "torch.nn.modules.container", "torch.nn.modules.activation",
    "torch.nn.parameter", "torch.testing._comparison", "torch.random", "torch.autograd.grad_mode",
    "torch.utils._contextlib",
)
# Our own packages: every module of these already imported is verified.
OWN_PACKAGES = ("solutions", "autograder.checks")

_TORCH_DIR = os.path.dirname(os.path.abspath(torch.__file__))


def _fail(what: str) -> None:
    raise AssertionError(
        f"integrity check failed: {what}\n"
        "The grading code or a library function it relies on was replaced in this kernel (monkeypatching). "
        "Remove that code from your notebook; this test scores 0 until then."
    )


# ----------------------------------------------------------------------------------------------- C-level objects
def _is_c_builtin(obj, name: str, owner) -> bool:
    return _type(obj) is types.BuiltinFunctionType and obj.__name__ == name and obj.__self__ is owner


def _verify_builtins() -> None:
    builtins_module = sys.modules.get("builtins")
    if builtins_module is not _builtins_module or _type(builtins_module) is not types.ModuleType:
        _fail("the `builtins` module was replaced")
    namespace = builtins_module.__dict__
    for name in BUILTIN_NAMES:
        if not _is_c_builtin(namespace.get(name), name, builtins_module):
            _fail(f"builtin `{name}` was replaced")
    for name in BUILTIN_TYPES:
        obj = namespace.get(name)
        if _type(obj) is not _type or obj.__flags__ & _HEAPTYPE or obj.__name__ != name:
            _fail(f"builtin type `{name}` was replaced")


def _variable_functions():
    vf = getattr(torch._C, "_VariableFunctions", None)
    if vf is None or type(vf).__flags__ & _HEAPTYPE or type(vf).__name__ != "_VariableFunctionsClass":
        _fail("torch._C._VariableFunctions was replaced")
    return vf


def _verify_torch_c() -> None:
    vf = _variable_functions()
    for name in TORCH_C_FUNCTIONS:
        original = getattr(vf, name, None)
        if original is None:
            continue  # not a C function in this torch version: covered by the module checks instead
        if type(original) is not types.BuiltinFunctionType or getattr(torch, name, None) is not original:
            _fail(f"torch.{name} was replaced")
    base = torch._C.TensorBase
    if type(base) is not type and base.__flags__ & _HEAPTYPE:
        _fail("torch._C.TensorBase was replaced")
    tensor = torch.Tensor
    if tensor is not sys.modules["torch._tensor"].Tensor or base not in tensor.__bases__ \
            or tensor.__module__ != "torch":
        _fail("torch.Tensor was replaced")
    if torch.nn.Parameter.__mro__[1] is not tensor:
        _fail("torch.nn.Parameter was replaced")


def _verify_no_global_interception() -> None:
    from torch.overrides import _get_current_function_mode_stack
    from torch.utils._python_dispatch import _get_current_dispatch_mode_stack

    if _get_current_function_mode_stack() or torch._C._is_torch_function_mode_enabled():
        _fail("a torch function mode is active (it intercepts every torch call)")
    if _get_current_dispatch_mode_stack():
        _fail("a torch dispatch mode is active (it intercepts every torch operation)")
    module = sys.modules["torch.nn.modules.module"]
    for name in dir(module):
        if name.startswith("_global_") and name.endswith("hooks"):
            hooks = getattr(module, name)
            if hooks:
                _fail(f"a global nn.Module hook is registered ({name})")


def _verify_ipython() -> None:
    """A custom exception handler or a replaced showtraceback could hide a failing test from the grader."""
    shell_module = sys.modules.get("IPython.core.interactiveshell")
    if shell_module is None:
        return
    shell_class = getattr(shell_module, "InteractiveShell", None)
    if shell_class is None or not shell_class.initialized():
        return
    shell = shell_class.instance()
    if getattr(shell, "custom_exceptions", ()):
        try:
            shell.set_custom_exc((), None)  # restore the default so this failure is shown
        except Exception:  # noqa: BLE001 -- best effort, the failure below is what matters
            pass
        _fail("a custom IPython exception handler was installed (set_custom_exc)")
    roots = _allowed_roots()
    for name in ("showtraceback", "_showtraceback", "showsyntaxerror", "run_cell", "run_code"):
        if name in vars(shell):  # ipykernel binds some of these itself; anything else is a replacement
            function = getattr(vars(shell)[name], "__func__", vars(shell)[name])
            code = getattr(function, "__code__", None)
            if code is None or not os.path.abspath(code.co_filename).startswith(roots):
                try:
                    delattr(shell, name)  # back to the class's method, so this failure is displayed
                except AttributeError:
                    pass
                _fail(f"IPython's `{name}` was replaced")
    for cls in _type(shell).__mro__:  # e.g. ipykernel's ZMQInteractiveShell, then IPython's InteractiveShell
        module = sys.modules.get(cls.__module__)
        if module is not None and cls.__module__.startswith(("IPython.", "ipykernel.")):
            _verify_module(module, only_classes=(cls.__name__,))


# ------------------------------------------------------------------------------------------- Python-level code
_SOURCE_CACHE: dict[str, tuple[tuple, dict]] = {}


class _Definition:
    """What the file on disk defines at one name: its code object (functions) or its methods (classes)."""

    def __init__(self, kind, code=None, members=None, defaults=None):
        self.kind = kind            # "function" or "class"
        self.code = code            # compiled code objects with this qualified name (function)
        self.members = members      # name -> _Definition (class body)
        self.defaults = defaults    # literal default values, or None when not all literal


def _literal_defaults(node):
    try:
        return tuple(ast.literal_eval(d) for d in node.args.defaults)
    except (ValueError, TypeError, SyntaxError, RecursionError):
        return None


def _index_codes(code, table):
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            table.setdefault((const.co_qualname, const.co_firstlineno), const)
            _index_codes(const, table)


def _definitions(path: str):
    """Parse and compile `path` once (cached on mtime and size): top-level defs/classes and internal imports."""
    stat = os.stat(path)
    key = (stat.st_mtime_ns, stat.st_size)
    cached = _SOURCE_CACHE.get(path)
    if cached is not None and cached[0] == key:
        return cached[1]
    with open(path, "rb") as handle:
        source = handle.read()
    tree = ast.parse(source, filename=path)
    codes: dict = {}
    _index_codes(compile(tree, path, "exec", dont_inherit=True), codes)
    by_qualname: dict = {}
    for (qualname, _), code in codes.items():
        by_qualname.setdefault(qualname, []).append(code)

    def definition(node, prefix):
        qualname = f"{prefix}{node.name}"
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            # every code object compiled under this qualified name (property getters and setters share one)
            return _Definition("function", code=by_qualname.get(qualname, ()), defaults=_literal_defaults(node))
        members = {}
        for child in node.body:
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                members[child.name] = definition(child, f"{qualname}.")
        return _Definition("class", members=members)

    top, imports, constants = {}, {}, {}
    for node in tree.body:
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            name = node.targets[0].id
            try:
                value = ast.literal_eval(node.value)
            except (ValueError, TypeError, SyntaxError, RecursionError):
                continue
            # immutable literals, and mutable ones named as constants (e.g. the tolerance dicts); a lower-case
            # mutable literal may be a cache that legitimately changes
            if isinstance(value, (int, float, complex, str, bytes, bool, tuple, frozenset, type(None))) \
                    or name.isupper():
                constants[name] = value
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            top[node.name] = definition(node, "")
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            for alias in node.names:
                imports[alias.asname or alias.name] = (node.module, alias.name)
    result = {"top": top, "imports": imports, "codes": codes, "constants": constants}
    _SOURCE_CACHE[path] = (key, result)
    return result


def _unwrap(obj):
    """staticmethod/classmethod/property -> functions; decorators made with functools.wraps -> the wrapped one."""
    if isinstance(obj, (staticmethod, classmethod)):
        return [obj.__func__]
    if isinstance(obj, property):
        return [f for f in (obj.fget, obj.fset, obj.fdel) if f is not None]
    if isinstance(obj, types.FunctionType):
        return [obj]
    return []


def _verify_function(function, expected: _Definition, path: str, label: str) -> None:
    """`function` carries the code compiled from `path`, possibly inside wrappers made by torch (functools.wraps)."""
    if not expected.code:
        _fail(f"`{label}` was replaced")
    for _ in range(6):
        if not isinstance(function, types.FunctionType):
            break
        code = function.__code__
        filename = os.path.abspath(code.co_filename)
        if filename == path and any(code == candidate for candidate in expected.code):
            if len(expected.code) == 1 and expected.defaults is not None and \
                    (function.__defaults__ or ()) != expected.defaults:
                _fail(f"the default arguments of `{label}` were changed")
            return
        if not hasattr(function, "__wrapped__") or not (filename == path or filename.startswith(_allowed_roots())):
            break
        function = function.__wrapped__
    _fail(f"`{label}` was replaced")


def _verify_class(cls, expected: _Definition, path: str, label: str, third_party: bool) -> None:
    if not isinstance(cls, type) or os.path.abspath(getattr(sys.modules.get(cls.__module__), "__file__", "") or "") \
            != path and not third_party:
        _fail(f"class `{label}` was replaced")
    namespace = vars(cls)
    for name, member in expected.members.items():
        if member.kind == "class":
            inner = namespace.get(name)
            if isinstance(inner, type):
                _verify_class(inner, member, path, f"{label}.{name}", third_party)
            continue
        if name not in namespace:
            _fail(f"`{label}.{name}` was removed")
        functions = _unwrap(namespace[name])
        if not functions:
            if third_party:
                continue  # a third-party decorator that returns a descriptor (e.g. traitlets' @default)
            _fail(f"`{label}.{name}` was replaced")
        _verify_function(functions[0], member, path, f"{label}.{name}")
    for name, value in namespace.items():
        if name in expected.members:
            continue
        for function in _unwrap(value):
            filename = os.path.abspath(function.__code__.co_filename)
            if filename == path or (third_party and filename.startswith(_allowed_roots())):
                continue
            _fail(f"`{label}.{name}` was added or replaced from outside its source file")


def _verify_module(module, only_classes=None) -> None:
    path = os.path.abspath(getattr(module, "__file__", "") or "")
    if not path.endswith(".py") or not os.path.exists(path):
        return
    third_party = not path.startswith(tuple(_own_roots()))  # third-party file (torch, IPython): be lenient
    info = _definitions(path)
    namespace = vars(module)
    for name, expected in info["top"].items():
        if only_classes is not None and name not in only_classes:
            continue
        label = f"{module.__name__}.{name}"
        if name not in namespace:
            if third_party:
                continue  # torch sometimes deletes helper definitions after use
            _fail(f"`{label}` was removed")
        obj = namespace[name]
        if expected.kind == "class":
            if isinstance(obj, type) and obj.__qualname__ == name:
                _verify_class(obj, expected, path, label, third_party)
            elif not third_party:
                _fail(f"class `{label}` was replaced")
        elif isinstance(obj, types.FunctionType) or not third_party:
            _verify_function(obj, expected, path, label)
    if only_classes is not None or third_party:
        return
    for name, value in info["constants"].items():  # e.g. the tolerances: literal module-level values
        current = namespace.get(name)
        if type(current) is not type(value) or current != value:
            _fail(f"`{module.__name__}.{name}` was changed")
    for name, (source_module, source_name) in info["imports"].items():
        if not source_module.startswith(OWN_PACKAGES):
            continue
        origin = sys.modules.get(source_module)
        if origin is not None and hasattr(origin, source_name) \
                and namespace.get(name) is not getattr(origin, source_name):
            _fail(f"`{module.__name__}.{name}` was replaced")


def _allowed_roots():
    import site

    places = [sys.prefix, sys.base_prefix, os.path.dirname(os.__file__), _TORCH_DIR]
    try:  # installed packages may also live outside the prefix; not the user site: students can write there
        places += site.getsitepackages()
    except AttributeError:
        pass
    roots = {os.path.abspath(p) + os.sep for p in places}
    roots.update(_own_roots())
    return tuple(roots)


def _verify_bound_functions(module) -> None:
    """Every function bound in one of our modules comes from an installed file, unchanged if it is one of ours."""
    roots = _allowed_roots()
    for name, value in list(vars(module).items()):
        if not isinstance(value, types.FunctionType):
            continue
        filename = os.path.abspath(value.__code__.co_filename)
        label = f"{module.__name__}.{name}"
        if not filename.startswith(roots):
            _fail(f"`{label}` was replaced by code from outside the grading package")
        origin_module = sys.modules.get(getattr(value, "__module__", "") or "")
        origin_file = os.path.abspath(getattr(origin_module, "__file__", "") or "")
        if filename == origin_file and any(filename.startswith(p) for p in _own_roots()):
            code = _definitions(filename)["codes"].get((value.__code__.co_qualname, value.__code__.co_firstlineno))
            if code is None or code != value.__code__:
                _fail(f"`{label}` was replaced")


def _own_roots():
    roots = []
    for package in ("solutions", "autograder"):
        module = sys.modules.get(package)
        if module is not None and getattr(module, "__file__", None):
            roots.append(os.path.dirname(os.path.abspath(module.__file__)) + os.sep)
    return roots


def _own_modules():
    for name, module in list(sys.modules.items()):
        if module is None:
            continue
        if any(name == package or name.startswith(package + ".") for package in OWN_PACKAGES):
            yield module


def verify() -> None:
    """Raise `AssertionError("integrity check failed: ...")` when grading code or torch was patched in this kernel."""
    _verify_builtins()
    _verify_torch_c()
    common = sys.modules.get("autograder.checks._common")
    if common is not None and getattr(common, "_VF", None) is not _variable_functions():
        _fail("the torch functions captured by the checks were replaced")
    _verify_no_global_interception()
    for name in TORCH_MODULES:
        module = sys.modules.get(name)
        if module is not None:
            _verify_module(module)
    for module in _own_modules():
        _verify_module(module)
        _verify_bound_functions(module)
        for name, value in list(vars(module).items()):  # a check exported under another check's name
            if name.startswith("check_") and getattr(value, "__name__", name) != name:
                _fail(f"`{module.__name__}.{name}` was replaced")
    _verify_ipython()
