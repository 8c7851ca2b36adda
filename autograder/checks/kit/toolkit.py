"""Shared helpers of the hidden checks: set-up, calling student code, failures and their messages (comparing and
copying weights: `compare.py`).

A typical check (see `multi_head.py`) reads:

    device = start_check()                                   # the grading device (CUDA when present)
    module = construct(cls, "MultiHeadAttention", 24, 3)     # clear message when the constructor fails
    reference = solutions.MultiHeadAttention(24, 3)
    prepare(module, reference, device)                       # copy weights by contract names, .eval(), .to(device)
    got = call("MultiHeadAttention.forward", module, q, k, v, mask)
    expect_tensor(got, expected, "output", device, tested="query (2, 5, 24) ...", mistakes=...)  # compare.py

Every failure raises `CheckFailed` (an AssertionError) with a short message for the student: what was tested
(shapes only, never input values or reference code), expected vs got, and the most likely mistake when one of the
known-mistake variants (`mistakes.py`) reproduces the student's numbers. The mistake is named by its id in the
catalogue `coursekit.mistakes`: the message shows its text, the failure carries the id (`.mistake_id`).

The checks run in the grader's process, never in the student's kernel: the student's objects are
`RemoteObject`s (`remote.py`), and what they return arrives as data. So nothing the student's code does to its
own process can change a comparison here.
"""
from __future__ import annotations

import contextlib
from typing import Callable, Iterable

import torch

from autograder.checks.kit.criteria import edge_case
from autograder.checks.kit.draws import generator, seed_for
from autograder.checks.kit.remote import ProbeBroken, RemoteObject, StudentError, new
from autograder.checks.kit.tolerance import grading_device
from coursekit.checks.toolkit import CheckFailed
from coursekit.mistakes import fix_of, text_of


MAX_MESSAGE_LINES = 14

# ------------------------------------------------------------------------------------------------------ set-up
def start_check() -> torch.device:
    """First line of every check: the grading device (TF32 off on CUDA)."""
    return grading_device()


@contextlib.contextmanager
def seeded(seed: int):
    """Run a block with torch's global RNG seeded, restoring the caller's RNG state afterwards."""
    devices = [torch.cuda.current_device()] if torch.cuda.is_available() else []
    with torch.random.fork_rng(devices=devices):
        torch.manual_seed(seed_for(seed))
        yield


def randn(*shape: int, seed: int, device, dtype=torch.float32) -> torch.Tensor:
    """Standard-normal tensor drawn on the CPU from its own generator (same numbers on every device)."""
    return torch.randn(*shape, generator=generator(seed), dtype=dtype).to(device)


def randint(low: int, high: int, shape, *, seed: int, device) -> torch.Tensor:
    """Integer tensor in [low, high) from its own CPU generator, moved to `device`."""
    return torch.randint(low, high, tuple(shape), generator=generator(seed)).to(device)


def shape_of(x) -> str:
    """`(2, 5, 24)` for tensors/arrays, the type name for anything else."""
    shape = getattr(x, "shape", None)
    if shape is not None:
        return str(tuple(int(s) for s in shape))
    return type(x).__name__


# ----------------------------------------------------------------------------------------------------- failures
def fail(problem: str, *, tested: str | None = None, details: Iterable[str] = (), mistake: str | None = None,
         hint: str | None = None):
    """Raise the student-facing CheckFailed (at most MAX_MESSAGE_LINES lines); `mistake` is a catalogue id."""
    lines = [problem]
    if tested:
        lines.append(f"  tested: {tested}")
    lines.extend(f"  {line}" for line in details)
    if mistake:
        lines.append(f"  likely mistake: {text_of(mistake)}")
    hint = (fix_of(mistake) if mistake else None) or hint   # a named mistake's advice is the catalogue's
    if hint:
        lines.append(f"  hint: {hint}")
    raise CheckFailed("\n".join(lines[:MAX_MESSAGE_LINES]), mistake or None)


def expected_got(expected: str, got: str) -> list[str]:
    """The two detail lines `expected: ...` / `got: ...` of a failure message."""
    return [f"expected: {expected}", f"got:      {got}"]


# Exception texts that point at a known cause.
_ERROR_HINTS = (
    ("view size is not compatible", "after transpose the tensor is not contiguous: use .reshape(...) or call "
                                    ".contiguous() before .view(...)"),
    ("must match the size of tensor", "two tensors do not line up: print the shapes at each step and compare them "
                                      "with the shapes in the docstring"),
    ("expected m1 and m2 to have the same dtype", "mixing float64 and float32: keep everything float32"),
    ("Expected all tensors to be on the same device", "create new tensors on the input's device "
                                                      "(device=x.device)"),
    ("masked_fill_ only supports boolean masks", "convert the mask with mask.bool() (or compare it with 0)"),
    ("Dimension out of range", "use negative dims (-2, -1) so that any number of leading axes works"),
    ("got an unexpected keyword argument", "keep the exact signature given in the exercise"),
    ("positional argument", "keep the exact signature given in the exercise"),
)


def _error_hint(error: BaseException) -> str | None:
    text = str(error)
    for needle, hint in _ERROR_HINTS:
        if needle in text:
            return hint
    return None


def error_text(error: BaseException) -> str:
    """`TypeName: message` of an error from the student's code (as the kernel reported it) or from the grader's side."""
    if isinstance(error, StudentError):
        name, text = error.type_name, error.message
    else:
        name, text = type(error).__name__, str(error)
    text = " ".join(text.split())
    return f"{name}: {text[:200]}"


def not_handed_in(label: str, error: StudentError, tested: str | None = None):
    fail(f"{label.split('(')[0].split('.')[0]} was not defined when the grade cell ran.", tested=tested,
         hint="run every cell from the top (Kernel > Restart and Run All) and keep the names of the exercise")


def call(label: str, fn: Callable, *args, tested: str | None = None, **kwargs):
    """Call student code; NotImplementedError or any other exception becomes a readable AssertionError.

    `fn` is a RemoteObject (the student's object in the kernel); the result arrives as data."""
    try:
        return fn(*args, **kwargs)
    except StudentError as error:
        if error.not_handed_in:
            not_handed_in(label, error, tested)
        if error.is_a("NotImplementedError"):
            fail(f"{label} is not implemented yet: replace `raise NotImplementedError()` with your code.",
                 tested=tested)
        fail(f"{label} raised an error.", tested=tested, details=[error_text(error), *error.where()[-2:]],
             hint=_error_hint(error))
    except ProbeBroken as error:
        fail(f"{label} could not be checked: {error}.", tested=tested)


def grader_step(label: str, action: Callable):
    """Set-up the grader does in the kernel (a lent model, an optimizer, reading weights back); when it cannot run
    there, the student's notebook broke something the grader relies on."""
    try:
        return action()
    except StudentError as error:
        fail(f"{label} could not be checked: the grader's test objects could not be used in your notebook "
             f"({error.type_name}: {' '.join(error.message.split())[:160]}).",
             hint="run every cell from the top (Kernel > Restart and Run All) without redefining torch or coursekit")
    except ProbeBroken as error:
        fail(f"{label} could not be checked: {error}.")


def lend_model(channel, class_path: str, config: dict, state: dict, device, training: bool,
               label: str) -> RemoteObject:
    """A public model (`coursekit.probe.models`) built in the student's kernel with the grader's weights `state`,
    on `device`, in training mode or not: what a check lends to a student's training or evaluation function."""
    def make():
        model = new(channel, class_path, **config)
        model.attr("to")(device)
        missing, unexpected = model.load_state(state)
        if missing or unexpected:
            raise ProbeBroken(f"the lent model did not take the grader's weights ({missing + unexpected})")
        model.attr("train")(training)
        return model

    return grader_step(label, make)


def fetch(value, label: str):
    """A handed-in value as data (a RemoteObject is fetched; anything else is already data)."""
    if not isinstance(value, RemoteObject):
        return value
    try:
        return value.fetch()
    except StudentError as error:
        fail(f"{label} could not be read: {error.type_name}: {' '.join(error.message.split())[:160]}")
    except ProbeBroken as error:
        fail(f"{label} could not be checked: {error}.")


def type_name(value) -> str:
    """The type of a returned value for a message (an object that stayed in the kernel: its type there)."""
    if isinstance(value, RemoteObject):
        try:
            return str(value.kind.get("type", "object"))
        except (StudentError, ProbeBroken):
            return "object"
    return type(value).__name__


def kind_of(obj, name: str) -> dict:
    """What the handed-in object is ({"type", "class", "callable", "module_class", "module"})."""
    try:
        return obj.kind
    except StudentError as error:
        if error.not_handed_in:
            not_handed_in(name, error)
        fail(f"{name} could not be inspected: {error_text(error)}")
    except ProbeBroken as error:
        fail(f"{name} could not be checked: {error}.")


def expect_callable(obj, name: str, kind: str = "function") -> None:
    """`obj` must be a function (kind="function") or an nn.Module subclass (kind="module")."""
    info = kind_of(obj, name)
    if kind == "module":
        if not info.get("module_class"):
            fail(f"{name} must be a class that inherits from nn.Module, got {info.get('type', '?')}.",
                 hint=f"define `class {name}(nn.Module):` and keep its name")
    elif not info.get("callable"):
        fail(f"{name} must be a function, got {info.get('type', '?')}.")


def construct(cls, name: str, *args, **kwargs) -> RemoteObject:
    """Instantiate a student nn.Module in the kernel with the contract's arguments (seeded, so repeatable)."""
    expect_callable(cls, name, "module")
    shown = ", ".join([*(repr(a) for a in args), *(f"{k}={v!r}" for k, v in kwargs.items())])
    module = call(f"{name}({shown})", cls, *args, _seed=0, **kwargs)
    if not isinstance(module, RemoteObject) or not module.kind.get("module"):
        fail(f"{name}({shown}) did not create an nn.Module.")
    return module


def expect_raises(error_type, label: str, fn: Callable, *args, why: str, criterion: str, names: tuple = (),
                  returned_mistake: Callable | None = None, **kwargs) -> None:
    """Student code must raise `error_type` (e.g. ValueError for a bad argument): a stated edge case, the
    `criterion` of the catalogue `coursekit.criteria` (failing it costs that criterion's share, see criteria.py).
    `names`: the error's message must contain one of them (the tensor or argument it is about);
    `returned_mistake(result)` names the mistake of an answer that returned instead (or None)."""
    with edge_case(criterion):
        _expect_raises(error_type, label, fn, *args, why=why, names=names, returned_mistake=returned_mistake,
                       **kwargs)


def _expect_raises(error_type, label: str, fn: Callable, *args, why: str, names: tuple = (),
                   returned_mistake: Callable | None = None, **kwargs) -> None:
    try:
        result = fn(*args, **kwargs)
    except StudentError as error:
        if error.is_a(error_type.__name__):
            if not names or any(name in error.message for name in names):
                return
            fail(f"{label} raised {error_type.__name__}, but its message does not name the tensor.",
                 details=expected_got(f"a message with {names[0]!r}", error_text(error)),
                 hint=f"put the name in the message: raise {error_type.__name__}(f\"... {{name}} ...\")")
        if error.not_handed_in:
            not_handed_in(label, error)
        if error.is_a("NotImplementedError"):
            fail(f"{label} is not implemented yet: replace `raise NotImplementedError()` with your code.")
        fail(f"{label} should raise {error_type.__name__} {why}.", details=[f"got {error_text(error)}"])
    except ProbeBroken as error:
        fail(f"{label} could not be checked: {error}.")
    if returned_mistake is None:
        fail(f"{label} should raise {error_type.__name__} {why}, but it raised nothing.")
    fail(f"{label} should raise {error_type.__name__} {why}, but it returned a {type_name(result)}.",
         mistake=returned_mistake(result))


