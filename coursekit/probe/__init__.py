"""The grader's probe: the only grading code that runs inside a student's kernel.

A hidden grade cell of a course notebook contains one line, e.g.

    hand_in("multi_head_attention", MultiHeadAttention)

which records the student's object under the check's name. Nothing is judged here: there is no reference, no
expected value and no verdict in this process. After the cell has run, the grader (outside the kernel, see
`autograder/grade/judge.py`) sends requests, one small snippet at a time, that call `step(...)`:

    call      call a handed-in object (or an attribute of it, or an object made earlier) with inputs the grader chose
              (optionally seeded, under no_grad, or echoing the arguments as they are after the call)
    new       construct a public helper object (torch/numpy/gensim/coursekit classes, e.g. an optimizer or a loader)
    get       return a value as data
    describe  what an object is (class, module, parameter names and shapes)
    load      load grader-given weights into a module (`load_state_dict(strict=False)`)
    state     the module's state_dict as data
    define    run code the grader sends (compiled and marshalled: never its source text) in a new, unnamed module
              and return that module (the course's stand-ins for parts that failed their own check,
              `autograder/checks/stand_ins.py`)
    lend      bind objects to names in the globals that a handed-in object's code reads (its module's namespace),
              so that it uses them instead of the student's own parts
    unlend    undo every `lend`, and switch off every module `define` made (its `LENT = False`)

and compares the returned data with the reference itself. Whatever the student's code does to this process
(patching, hooks, exception handlers) can change only the data it hands back.

Data crosses as JSON: tensors and numpy arrays as raw little-endian bytes (base64) with dtype and shape; objects
that are not data stay here and are referred to by a handle. `encode`/`decode` are shared with the grader, which
decodes with strict limits (it treats every reply as hostile input).
"""
from __future__ import annotations

import base64
import importlib
import json
import math
import os
import sys
import traceback
from typing import Any

MIME = "application/vnd.transformers101.probe+json"
JUDGE_ENV = "COURSE_JUDGE"  # set to "1" in the grader's kernels

# dtypes that may cross the wire (torch name -> numpy name); bfloat16 travels as its raw 16 bits
_DTYPES = {"float16": "<f2", "float32": "<f4", "float64": "<f8", "int8": "|i1", "int16": "<i2", "int32": "<i4",
           "int64": "<i8", "uint8": "|u1", "bool": "|b1", "bfloat16": "<u2"}
# modules whose public classes the grader may construct in the kernel
NEW_ALLOWED = ("torch.", "numpy.", "gensim.", "coursekit.", "builtins.iter")

MAX_DEPTH = 12


class NotHandedIn(LookupError):
    """The grader asked for a subject that the hidden cell did not hand in (the cell failed before it)."""


class ProbeState:
    """What the kernel side keeps between the grader's requests: the subjects handed in, the handles of the objects
    the grader holds, and what the grader lent (to take back). A check called in-process (with ordinary objects,
    not through a kernel) hands its objects in and forgets them here too."""

    subjects: dict[str, tuple[tuple, dict]] = {}
    handles: dict[int, Any] = {}
    next_handle = 1
    lent: list[tuple[dict, str, Any]] = []   # (namespace, name, what was bound there before, or _UNBOUND)
    defined: list[Any] = []                  # modules made by `define`


_UNBOUND = object()


# ------------------------------------------------------------------------------------------------ the grade cell
def hand_in(check: str, *objects, **named) -> None:
    """Hand the student's `objects` to the grader's check `check` (a hidden grade cell's only line).

    In the course grader's kernel (COURSE_JUDGE=1) this only records them. Under a plain `nbgrader autograde`
    nothing could judge them, so the cell fails there: such a run never gives points without a check. Anywhere
    else (an instructor running the source notebook) it says where the check will happen.
    """
    ProbeState.subjects[check] = (objects, named)
    if os.environ.get(JUDGE_ENV) == "1":
        return
    if os.environ.get("NBGRADER_EXECUTION") == "autograde":
        raise RuntimeError(f"`{check}` is graded by the course grader (`autograder grade`), which checks the handed-in "
                           "objects from outside this notebook; a plain nbgrader autograde cannot grade this cell.")
    print(f"handed in for the check `{check}`: `autograder grade` runs it from outside the notebook")


# --------------------------------------------------------------------------------------------------- wire format
def encode(value, keep=None, depth: int = 0):
    """`value` as JSON-able data; objects that are not data go through `keep(obj) -> handle info` (or fail)."""
    if depth > MAX_DEPTH:
        raise ValueError("value nested too deeply")
    if value is None or isinstance(value, (bool, str)):
        return value
    if isinstance(value, int):
        return value if abs(value) < 2**53 else {"bigint": str(value)}
    if isinstance(value, float):
        return value if math.isfinite(value) else {"float": repr(value)}
    torch = sys.modules.get("torch")
    np = sys.modules.get("numpy")
    if torch is not None:
        if isinstance(value, torch.Tensor):
            return {"tensor": _tensor_data(value, torch)}
        if isinstance(value, torch.device):
            return {"device": str(value)}
        if isinstance(value, torch.dtype):
            return {"dtype": str(value).replace("torch.", "")}
        if isinstance(value, torch.Size):
            return {"tuple": [int(s) for s in value]}
    if np is not None:
        if isinstance(value, np.ndarray):
            return {"ndarray": _array_data(value, np)}
        if isinstance(value, np.generic):
            return {"npscalar": _array_data(np.asarray(value), np)}
    if isinstance(value, tuple):
        return {"tuple": [encode(v, keep, depth + 1) for v in value]}
    if isinstance(value, list):
        return {"list": [encode(v, keep, depth + 1) for v in value]}
    if isinstance(value, dict) and all(isinstance(k, (str, int)) and not isinstance(k, bool) for k in value):
        return {"dict": [[k, encode(v, keep, depth + 1)] for k, v in value.items()]}
    if keep is None:
        raise TypeError(f"cannot send a {type(value).__name__}")
    return {"object": keep(value)}


def _array_data(array, np) -> dict:
    name = array.dtype.name
    if name not in _DTYPES or name == "bfloat16":
        raise TypeError(f"cannot send a numpy array of dtype {array.dtype}")
    data = np.ascontiguousarray(array, dtype=np.dtype(_DTYPES[name])).tobytes()
    return {"dtype": name, "shape": list(array.shape), "data": base64.b64encode(data).decode("ascii")}


def _tensor_data(tensor, torch) -> dict:
    kind = "Parameter" if isinstance(tensor, torch.nn.Parameter) else type(tensor).__name__
    dtype = str(tensor.dtype).replace("torch.", "")
    if dtype not in _DTYPES:
        raise TypeError(f"cannot send a tensor of dtype {tensor.dtype}")
    flat = tensor.detach().to("cpu").contiguous()
    if dtype == "bfloat16":
        flat = flat.view(torch.int16)
    array = flat.numpy()
    return {"dtype": dtype, "shape": list(tensor.shape), "device": tensor.device.type, "kind": kind,
            "requires_grad": bool(tensor.requires_grad),
            "data": base64.b64encode(array.astype(_DTYPES[dtype], copy=False).tobytes()).decode("ascii")}


def decode(data, resolve=None, device_map=None, limits: dict | None = None, depth: int = 0):
    """The inverse of `encode`. `resolve(info)` turns {"object": info} back into an object (or a proxy);
    `device_map(name)` chooses where tensors land; `limits` ({"bytes": n}) bound what is accepted."""
    if depth > MAX_DEPTH:
        raise ValueError("value nested too deeply")
    if data is None or isinstance(data, (bool, int, float, str)):
        return data
    if isinstance(data, list):  # plain JSON lists are never produced by encode
        raise ValueError("malformed value")
    if not isinstance(data, dict) or len(data) != 1:
        raise ValueError("malformed value")
    (tag, body), = data.items()
    if tag in ("tuple", "list"):
        items = [decode(v, resolve, device_map, limits, depth + 1) for v in _checked_list(body)]
        return tuple(items) if tag == "tuple" else items
    if tag == "dict":
        out = {}
        for pair in _checked_list(body):
            if not isinstance(pair, list) or len(pair) != 2 or not isinstance(pair[0], (str, int)):
                raise ValueError("malformed dict")
            out[pair[0]] = decode(pair[1], resolve, device_map, limits, depth + 1)
        return out
    if tag == "bigint":
        return int(str(body)[:400])
    if tag == "float":
        return float(body) if body in ("nan", "inf", "-inf") else _bad("float")
    if tag == "tensor":
        return _decode_tensor(body, device_map, limits)
    if tag in ("ndarray", "npscalar"):
        array = _decode_array(body, limits)
        return array if tag == "ndarray" else array.reshape(()).copy()[()]
    if tag == "device":
        import torch

        name = str(body)
        return device_map(name) if device_map else torch.device(name.split(":")[0] if name != "cpu" else "cpu")
    if tag == "dtype":
        import torch

        dtype = getattr(torch, str(body), None)
        return dtype if isinstance(dtype, torch.dtype) else _bad("dtype")
    if tag == "object":
        if resolve is None:
            raise ValueError("objects cannot be decoded here")
        return resolve(body)
    return _bad(tag)


def _bad(what):
    raise ValueError(f"malformed {what}")


def _checked_list(body):
    if not isinstance(body, list):
        raise ValueError("malformed sequence")
    return body


def _raw(body, limits) -> tuple[bytes, str, tuple[int, ...]]:
    if not isinstance(body, dict) or body.get("dtype") not in _DTYPES:
        raise ValueError("malformed array")
    shape = body.get("shape")
    if not isinstance(shape, list) or len(shape) > 8 or not all(isinstance(s, int) and 0 <= s < 2**31 for s in shape):
        raise ValueError("malformed shape")
    raw = base64.b64decode(str(body.get("data", "")), validate=True)
    import numpy as np

    numel = math.prod(shape)
    if len(raw) != max(numel, 1 if not shape else numel) * np.dtype(_DTYPES[body["dtype"]]).itemsize:
        raise ValueError("array data does not match its shape")
    if limits and len(raw) > limits.get("bytes", float("inf")):
        raise ValueError("array too large")
    return raw, body["dtype"], tuple(shape)


def _decode_array(body, limits):
    import numpy as np

    raw, dtype, shape = _raw(body, limits)
    if dtype == "bfloat16":
        raise ValueError("bfloat16 numpy arrays do not exist")
    return np.frombuffer(raw, dtype=np.dtype(_DTYPES[dtype])).reshape(shape).copy()


def _decode_tensor(body, device_map, limits):
    import numpy as np
    import torch

    raw, dtype, shape = _raw(body, limits)
    array = np.frombuffer(raw, dtype=np.dtype(_DTYPES[dtype])).copy()
    tensor = torch.from_numpy(array)
    if dtype == "bfloat16":
        tensor = tensor.view(torch.int16).view(torch.bfloat16)
    tensor = tensor.reshape(shape)
    device = str(body.get("device", "cpu"))
    if device_map is not None:
        tensor = tensor.to(device_map(device))
    elif device != "cpu" and torch.cuda.is_available():
        tensor = tensor.to(device)
    if body.get("kind") == "Parameter":
        tensor = torch.nn.Parameter(tensor, requires_grad=bool(body.get("requires_grad")))
    return tensor


# ------------------------------------------------------------------------------------------------ the kernel side
def _keep(obj) -> dict:
    handle = ProbeState.next_handle
    ProbeState.next_handle += 1
    ProbeState.handles[handle] = obj
    return {"handle": handle, **_describe_kind(obj)}


def _describe_kind(obj) -> dict:
    torch = sys.modules.get("torch")
    module_base = torch.nn.Module if torch is not None else ()
    is_class = isinstance(obj, type)
    return {"type": type(obj).__name__ if not is_class else obj.__name__, "class": is_class,
            "callable": callable(obj),
            "module_class": bool(module_base) and is_class and issubclass(obj, module_base),
            "module": bool(module_base) and isinstance(obj, module_base)}


def _target(spec: dict):
    if "subject" in spec:
        name = spec["subject"]
        if name not in ProbeState.subjects:
            raise NotHandedIn(f"nothing was handed in for {name!r}")
        objects, named = ProbeState.subjects[name]
        if "key" in spec:
            if spec["key"] not in named:
                raise NotHandedIn(f"{spec['key']!r} was not handed in for {name!r}")
            obj = named[spec["key"]]
        else:
            index = int(spec.get("index", 0))
            if index >= len(objects):
                raise NotHandedIn(f"argument {index} was not handed in for {name!r}")
            obj = objects[index]
    elif "handle" in spec:
        obj = ProbeState.handles[int(spec["handle"])]
    elif "new" in spec:
        path = str(spec["new"])
        if not path.startswith(NEW_ALLOWED) or path.startswith("builtins.iter") and path != "builtins.iter":
            raise PermissionError(f"the grader may not construct {path}")
        module_name, _, attr = path.rpartition(".")
        obj = getattr(importlib.import_module(module_name), attr)
    else:
        raise ValueError("malformed target")
    for name in spec.get("attrs", []):
        obj = getattr(obj, str(name))
    return obj


def _resolve(info):
    return _target(info)


def _device_here(name: str):
    import torch

    if name.startswith("cuda") and not torch.cuda.is_available():
        return torch.device("cpu")
    return torch.device("cuda" if name.startswith("cuda") else "cpu")


def _student_frames(tb) -> list[list]:
    """Frames of the traceback that are the student's code (notebook cells, files in the notebook's folder)."""
    here = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))  # coursekit/
    library = tuple({sys.prefix, sys.base_prefix, sys.exec_prefix, here})
    frames = []
    for frame in traceback.extract_tb(tb):
        filename = frame.filename or ""
        if filename.startswith(library) or filename.startswith("<frozen"):
            continue
        cell = "ipykernel_" in filename or filename.startswith("<ipython-input")
        where = "your notebook" if cell else os.path.basename(filename)
        frames.append([where, frame.lineno or 0, (frame.line or "")[:200], frame.name[:80]])
    return frames[-4:]


def _error(error: BaseException) -> dict:
    return {"type": type(error).__name__, "mro": [c.__name__ for c in type(error).__mro__][:12],
            "message": str(error)[:2000], "frames": _student_frames(error.__traceback__),
            "not_handed_in": isinstance(error, NotHandedIn)}


def globals_of(obj) -> dict | None:
    """The namespace in which `obj`'s code looks up global names: a function's `__globals__`, a class's methods'
    (for a class defined in a notebook cell: the notebook's namespace); None when it has none."""
    import inspect

    obj = inspect.unwrap(obj) if callable(obj) else obj
    if isinstance(obj, type):
        for value in vars(obj).values():
            function = getattr(value, "__func__", value)
            if hasattr(function, "__globals__"):
                return function.__globals__
        module = sys.modules.get(getattr(obj, "__module__", None) or "")
        return vars(module) if module is not None else None
    return getattr(obj, "__globals__", None)


def _define(code: str):
    import marshal
    import types

    module = types.ModuleType("course_stand_ins")
    exec(marshal.loads(base64.b64decode(code)), module.__dict__)  # noqa: S102 -- the grader's code
    ProbeState.defined.append(module)
    return module


def _lend(target, names: dict) -> list[str]:
    namespace = globals_of(target)
    if namespace is None:
        return []
    for name, value in names.items():
        ProbeState.lent.append((namespace, str(name), namespace.get(str(name), _UNBOUND)))
        namespace[str(name)] = value
    return sorted(names)


def _unlend() -> None:
    while ProbeState.lent:
        namespace, name, before = ProbeState.lent.pop()
        if before is _UNBOUND:
            namespace.pop(name, None)
        else:
            namespace[name] = before
    while ProbeState.defined:
        ProbeState.defined.pop().__dict__["LENT"] = False


def _execute(request: dict):
    op = request.get("op")
    if op == "drop":
        ProbeState.handles.clear()
        return None
    if op == "define":
        return _define(request.get("code", ""))
    if op == "unlend":
        _unlend()
        return None
    target = _target(request["target"])
    if op == "get":
        return target
    if op == "describe":
        info = _describe_kind(target)
        torch = sys.modules.get("torch")
        if info["module"]:
            info["parameters"] = [[n, list(p.shape), str(p.dtype).replace("torch.", "")]
                                  for n, p in target.named_parameters()]
            info["buffers"] = [[n, list(b.shape)] for n, b in target.named_buffers()]
            info["modules"] = [[n, type(m).__name__] for n, m in target.named_modules() if n]
            info["module_bases"] = {n: [c.__name__ for c in type(m).__mro__][:16]
                                    for n, m in target.named_modules() if n}
            info["training"] = bool(target.training)
            info["has"] = {a: isinstance(getattr(target, a, None), torch.nn.Parameter) for a in request.get("attrs", [])}
        info["callables"] = {a: callable(getattr(target, a, None)) for a in request.get("callables", [])}
        return info
    args = [decode(a, _resolve, _device_here) for a in request.get("args", [])]
    kwargs = {k: decode(v, _resolve, _device_here) for k, v in request.get("kwargs", {}).items()}
    if op == "load":
        return tuple(target.load_state_dict(args[0], strict=False))
    if op == "lend":
        return _lend(target, kwargs)
    if op == "state":
        return {k: v for k, v in target.state_dict().items()}
    if op != "call":
        raise ValueError(f"unknown request {op!r}")
    import contextlib

    torch = sys.modules.get("torch")
    seed = request.get("seed")
    context = contextlib.ExitStack()
    if torch is not None and seed is not None:
        context.enter_context(torch.random.fork_rng(devices=[]))
        torch.manual_seed(int(seed))
    if torch is not None and request.get("no_grad"):
        context.enter_context(torch.no_grad())
    with context:
        result = target(*args, **kwargs)
    if request.get("echo_args"):  # the arguments as they are after the call (did it change them in place?)
        return result, tuple(args), dict(kwargs)
    return result


def run(request: dict) -> dict:
    """Execute one request; the reply is JSON-able data ({"value": ...} or {"error": ...})."""
    reply: dict = {"id": request.get("id")}
    try:
        value = _execute(request)
        reply["value"] = encode(value, _keep)
    except BaseException as error:  # noqa: BLE001 -- whatever the student's code raised is part of the answer
        if isinstance(error, KeyboardInterrupt):
            raise
        reply["error"] = _error(error)
    return reply


def step(payload: str) -> None:
    """Run one request (base64 JSON, from the grader) and publish the reply as one display output."""
    request = json.loads(base64.b64decode(payload))
    reply = run(request)
    from IPython.display import publish_display_data

    publish_display_data({MIME: reply})
