"""Shared helpers of the hidden checks: set-up, calling student code, copying weights, comparing, messages.

A typical check (see `multi_head.py`) reads:

    device = start_check()                                   # the grading device (CUDA when present)
    module = construct(cls, "MultiHeadAttention", 24, 3)     # clear message when the constructor fails
    reference = solutions.MultiHeadAttention(24, 3)
    prepare(module, reference, device)                       # copy weights by contract names, .eval(), .to(device)
    got = call("MultiHeadAttention.forward", module, q, k, v, mask)
    expect_tensor(got, expected, "output", device, tested="query (2, 5, 24) ...", mistakes=lambda: {...})

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
import numbers
from typing import Any, Callable, Iterable, Mapping

import numpy as np
import torch
from torch import nn

from autograder.checks.kit.criteria import edge_case
from autograder.checks.kit.draws import generator, seed_for
from autograder.checks.kit.remote import ProbeBroken, RemoteObject, StudentError, new
from autograder.checks.kit.tolerance import grading_device, tolerance
from coursekit.checks.toolkit import CheckFailed
from coursekit.mistakes import fix_of, text_of


MAX_MESSAGE_LINES = 14

# {mistake id: thunk} or [(mistake id, thunk), ...]: each thunk computes one known mistake's output.
Mistakes = Mapping[str, Callable[[], Any]] | Iterable[tuple[str, Callable[[], Any]]]
# A topic's table (its mistakes.py): {mistake id: (variant, switches)}, the variant being a function of that
# mistakes.py and the switches the keyword arguments that turn the mistake on.
Table = Mapping[str, tuple[Callable[..., Any], Mapping[str, Any]]]


def from_table(table: Table, run: Callable[[Callable[..., Any], Mapping[str, Any]], Any],
               ids: Iterable[str] | None = None) -> dict[str, Callable[[], Any]]:
    """{mistake id: thunk} for `diagnose`/`expect_tensor`: each row of a topic's table (or the rows `ids`, in that
    order), run as `run(variant, switches)` on the check's own inputs."""
    rows = table if ids is None else {mistake_id: table[mistake_id] for mistake_id in ids}
    return {mistake_id: (lambda variant=variant, switches=switches: run(variant, switches))
            for mistake_id, (variant, switches) in rows.items()}


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
    hint = hint or (fix_of(mistake) if mistake else None)   # the catalogue's advice, unless the check has its own
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


def _short(error: BaseException) -> str:
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
        fail(f"{label} raised an error.", tested=tested, details=[_short(error), *error.where()[-2:]],
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
        fail(f"{name} could not be inspected: {_short(error)}")
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


def expect_raises(error_type, label: str, fn: Callable, *args, why: str, criterion: str, **kwargs) -> None:
    """Student code must raise `error_type` (e.g. ValueError for a bad argument): a stated edge case, the
    `criterion` of the catalogue `coursekit.criteria` (failing it costs that criterion's share, see criteria.py)."""
    with edge_case(criterion):
        _expect_raises(error_type, label, fn, *args, why=why, **kwargs)


def _expect_raises(error_type, label: str, fn: Callable, *args, why: str, **kwargs) -> None:
    try:
        fn(*args, **kwargs)
    except StudentError as error:
        if error.is_a(error_type.__name__):
            return
        if error.not_handed_in:
            not_handed_in(label, error)
        if error.is_a("NotImplementedError"):
            fail(f"{label} is not implemented yet: replace `raise NotImplementedError()` with your code.")
        fail(f"{label} should raise {error_type.__name__} {why}.", details=[f"got {_short(error)}"])
    except ProbeBroken as error:
        fail(f"{label} could not be checked: {error}.")
    fail(f"{label} should raise {error_type.__name__} {why}, but it raised nothing.")


# ----------------------------------------------------------------------------------------------- weight copying
def describe(module: RemoteObject, name: str, **what) -> dict:
    """`module.describe(...)` with a failure message when the kernel side cannot answer."""
    try:
        return module.describe(**what)
    except StudentError as error:
        fail(f"{name} could not be inspected: {_short(error)}")
    except ProbeBroken as error:
        fail(f"{name} could not be checked: {error}.")


def copy_parameters(student: RemoteObject, reference: nn.Module, name: str) -> None:
    """Copy every parameter of `reference` into `student` under the same contract name (e.g. `self_attn.w_q.weight`).

    A missing or renamed submodule or a wrong shape fails with a message naming what the contract expects.
    """
    contract = dict(reference.named_parameters())
    theirs = {n: tuple(shape) for n, shape, _dtype in describe(student, name).get("parameters", [])}
    for key, value in contract.items():
        owner = key.rsplit(".", 1)[0] if "." in key else None
        if key not in theirs:
            where = f"submodule `{owner}`" if owner else f"parameter `{key}`"
            fail(f"{name}: expected {where} (parameter `{key}` of shape {tuple(value.shape)}) as named in the "
                 "exercise, but your module has none.",
                 details=[f"your parameters: {', '.join(theirs)[:300] or 'none'}"],
                 hint="use exactly the attribute names given in the exercise (self.<name> = ...)")
        if theirs[key] != tuple(value.shape):
            fail(f"{name}: parameter `{key}` has the wrong shape.",
                 details=[f"expected shape {tuple(value.shape)}, got {theirs[key]}"])
    # load_state_dict on exactly the contract keys (it copies in place, so aliased parameters follow)
    state = {key: value.detach().clone() for key, value in contract.items()}
    try:
        _missing, unexpected = student.load_state(state)
    except StudentError as error:
        fail(f"{name}: could not load the grader's weights into your module.", details=[_short(error)])
    except ProbeBroken as error:
        fail(f"{name} could not be checked: {error}.")
    if unexpected:
        fail(f"{name}: could not load parameters {', '.join(unexpected)}.")


def prepare(student: RemoteObject, reference: nn.Module, device, name: str, copy: bool = True) -> None:
    """Copy weights (by contract names), move both modules to `device`, switch both to eval mode."""
    reference.to(device).eval()
    call(f"{name}.to(device)", student.attr("to"), device)
    if copy:
        copy_parameters(student, reference, name)
    call(f"{name}.eval()", student.attr("eval"))


# -------------------------------------------------------------------------------------------------- comparison
def as_tensor(got, label: str, tested: str | None = None) -> torch.Tensor:
    """The student's output as a plain torch.Tensor (nn.Parameter accepted), or a clear failure."""
    if isinstance(got, nn.Parameter):
        got = got.data
    if not isinstance(got, torch.Tensor):
        fail(f"{label} must be a torch.Tensor, got {type(got).__name__}.", tested=tested)
    return got


def expect_shape(got: torch.Tensor, shape, label: str, tested: str | None = None, hint: str | None = None) -> None:
    if tuple(got.shape) != tuple(shape):
        fail(f"{label} has the wrong shape.", tested=tested,
             details=[f"expected shape {tuple(shape)}, got {tuple(got.shape)}"], hint=hint)


def _select(x: torch.Tensor, where: torch.Tensor | None) -> torch.Tensor:
    """Keep the positions where `where` (a bool tensor over leading dims) is True."""
    if where is None:
        return x
    return x[where.to(x.device)]


def values_close(got: torch.Tensor, expected: torch.Tensor, device, where=None, exact: bool = False,
                 looser: float = 1.0) -> bool:
    """allclose with the course tolerance (`looser` times it), or exact equality, through torch's C functions."""
    got, expected = _select(got, where), _select(expected, where)
    if tuple(got.shape) != tuple(expected.shape):
        return False
    if exact:
        return bool(torch.equal(got, expected.to(got.dtype)))
    if got.is_floating_point() or expected.is_floating_point():
        tol = tolerance(device, torch.float32)
        got64, expected64 = got.detach().double(), expected.detach().double().to(got.device)
        return bool(torch.allclose(got64, expected64, rtol=tol["rtol"] * looser, atol=tol["atol"] * looser))
    return bool(torch.equal(got, expected.to(got.dtype).to(got.device)))


def max_difference(got: torch.Tensor, expected: torch.Tensor, where=None) -> float:
    got, expected = _select(got, where), _select(expected, where)
    if got.numel() == 0:
        return 0.0
    difference = torch.abs(torch.sub(got.detach().double(), expected.detach().double().to(got.device)))
    return float(torch.max(difference))


def _finite_close(got, expected, device, where=None) -> bool:
    """Close at the positions where `got` is finite (used to diagnose outputs that contain NaN)."""
    got, expected = _select(got, where), _select(expected, where)
    finite = torch.isfinite(got)
    if int(finite.sum()) * 4 < finite.numel():  # too little left to compare: no diagnosis
        return False
    return values_close(got[finite], expected.to(got.device)[finite], device)


def diagnose(got: torch.Tensor, mistakes: Callable[[], Mistakes] | None, device,
             where=None, exact: bool = False, finite_only: bool = False) -> str | None:
    """Id of the first known mistake whose output equals `got` (variants that fail to run are skipped)."""
    if mistakes is None:
        return None
    candidates = mistakes()
    for name, produce in (candidates.items() if hasattr(candidates, "items") else candidates):
        try:
            with torch.no_grad():
                candidate = produce()
        except Exception:  # noqa: BLE001 -- a variant that cannot run on these inputs simply does not match
            continue
        if not isinstance(candidate, torch.Tensor) or tuple(candidate.shape) != tuple(got.shape):
            continue
        candidate = candidate.to(got.device)
        matched = _finite_close(got, candidate, device, where) if finite_only else \
            values_close(got, candidate, device, where, exact)
        if matched:
            return name
    return None


def expect_tensor(got, expected: torch.Tensor, label: str, device, *, tested: str | None = None,
                  mistakes: Callable[[], Mistakes] | None = None, where=None,
                  exact: bool = False, dtype: torch.dtype | None = None, shape_hint: str | None = None,
                  note: str | None = None, looser: float = 1.0) -> torch.Tensor:
    """The whole comparison of one output: type, shape, dtype, NaN/inf, values, then diagnosis.

    `where` (bool over the leading dims, e.g. (B, T) True at real tokens) restricts the value comparison;
    `mistakes` returns {mistake id: thunk producing that mistake's output}, evaluated only on a mismatch;
    `exact` compares with torch.equal (ids, masks); `dtype` additionally requires that dtype; `looser` multiplies
    the course tolerance (rotary angles: tables in float32 or float64 differ slightly, the contract allows 1e-4).
    """
    got = as_tensor(got, label, tested)
    expect_shape(got, expected.shape, label, tested, hint=shape_hint)
    if dtype is not None and got.dtype != dtype:
        fail(f"{label} has dtype {got.dtype}, expected {dtype}.", tested=tested)
    if got.device != expected.device:
        got = got.to(expected.device)
    got = got.detach()
    if got.is_floating_point() and not bool(torch.all(torch.isfinite(_select(got, where)))):
        mistake = diagnose(got, mistakes, device, where, finite_only=True)
        fail(f"{label}: found NaN or inf values.", tested=tested, mistake=mistake,
             hint=None if mistake else "NaN often comes from -inf in a row where every score is blocked, or from "
                                       "dividing by zero; print intermediate tensors to find where it starts")
    if values_close(got, expected, device, where, exact, looser):
        return got
    mistake = diagnose(got, mistakes, device, where, exact)
    details = []
    if not exact and got.is_floating_point():
        tol = tolerance(device)
        details.append(f"largest difference {max_difference(got, expected, where):.3g} "
                       f"(allowed: atol={tol['atol'] * looser:g}, rtol={tol['rtol'] * looser:g})")
    else:
        mismatched = int((_select(got, where) != _select(expected.to(got.dtype), where)).sum())
        details.append(f"{mismatched} of {_select(expected, where).numel()} entries differ")
    if where is not None:
        details.append("(compared at non-padded positions only)")
    fail(f"{label}: values differ from the reference solution.", tested=tested, details=details, mistake=mistake,
         hint=note)
    return got


# ------------------------------------------------------------------------------------------------------ dropout
# The dropout probes (04-08, an argument with teeth): a module made with dropout p > 0 does the reference's
# computation in eval mode and something else in training mode; with p = 0 training mode drops nothing. Which
# entries are dropped is the student's RNG's affair: any dropout passes. (Where the dropout goes inside, and 02's
# exact distribution, are judged at the sites.)
DROPOUT_P = 0.5
EVAL_NOTE = "dropout must do nothing in eval mode: use nn.Dropout, or F.dropout(..., training=self.training)"


def expect_dropout_acts(module: RemoteObject, name: str, forward, expected: torch.Tensor, device, *, tested: str,
                        hint: str, p: float = DROPOUT_P, eval_first: bool = True, seed: int | None = 1, where=None,
                        output: Callable = lambda got: got, what: str = "output"):
    """`module` (the student's, made with dropout=p, prepared: the reference's weights, eval mode) against `expected`
    (the reference's output in eval mode), `name` naming it in calls and messages:
      1. eval mode, when `eval_first`: `expected` (dropout does nothing there);
      2. training mode (the student's RNG seeded with `seed`): for p > 0 something else (dropout acts), for p = 0
         `expected` (nothing is dropped); then back to eval mode;
      3. eval mode again, when not `eval_first` and p > 0: `expected` (dropout switched off).
    `forward` is the inputs (a tuple: `name.forward` on copies of them, without grad) or `forward(tested, seed)`
    running the student's forward; `output(got)` picks the tensor to compare; `where` the positions compared (e.g.
    the non-padded ones). Returns what training mode returned."""
    if isinstance(forward, tuple):
        inputs = forward
        forward = lambda shown, seed: call(f"{name}.forward", module,  # noqa: E731
                                           *[None if x is None else x.clone() for x in inputs], tested=shown,
                                           _seed=seed, _no_grad=True)

    def in_eval_mode():
        shown = f"{tested}, eval mode"
        expect_tensor(output(forward(shown, None)), expected, f"{name} {what} in eval mode", device, tested=shown,
                      where=where, note=EVAL_NOTE)

    if eval_first:
        in_eval_mode()
    shown = f"{tested}, training mode"
    call(f"{name}.train()", module.attr("train"))
    noisy = forward(shown, seed)
    call(f"{name}.eval()", module.attr("eval"))
    got = as_tensor(output(noisy), f"{name} {what} in training mode", shown)
    expect_shape(got, expected.shape, f"{name} {what} in training mode", shown)
    same = values_close(got, expected, device, where=where)
    if p == 0.0 and not same:
        fail(f"{name} in training mode: with dropout=0.0 nothing is dropped, so training mode must give the {what} "
             "of eval mode (the reference's, same weights).", tested=shown, hint=hint)
    if p > 0.0 and same:
        fail(f"{name} in training mode gives the same {what} as in eval mode: its dropout does not act.",
             tested=shown, hint=hint)
    if p > 0.0 and not eval_first:
        in_eval_mode()
    return noisy


def is_integer(x) -> bool:
    return isinstance(x, numbers.Integral) and not isinstance(x, bool)


def to_numpy(got, label: str, length_shape, tested: str | None = None) -> np.ndarray:
    """A 1-D/2-D numpy array output, checked for type and shape."""
    if not isinstance(got, np.ndarray):
        fail(f"{label} must be a numpy array, got {type(got).__name__}.", tested=tested,
             hint="convert a tensor with .detach().cpu().numpy()" if isinstance(got, torch.Tensor) else None)
    if tuple(got.shape) != tuple(length_shape):
        fail(f"{label} has the wrong shape.", tested=tested,
             details=[f"expected shape {tuple(length_shape)}, got {tuple(got.shape)}"])
    return got


def expect_max_len(module, name: str, max_len: int, make_inputs, criterion: str) -> None:
    """max_len must reach the positional encoding: a sequence of max_len tokens works, a longer one raises
    ValueError there (the stated edge case `criterion`). `make_inputs(T)` gives the module's arguments for sequences
    of length T."""
    inputs = make_inputs(max_len)
    call(f"{name}.forward", module, *inputs, _no_grad=True,
         tested=f"{name} on ids {shape_of(inputs[0])} (exactly max_len tokens)")
    inputs = make_inputs(max_len + 1)
    expect_raises(ValueError, f"{name} on ids {shape_of(inputs[0])}", module, *inputs,
                  why=f"when the sequence is longer than max_len={max_len} (pass max_len on to "
                      "PositionalEncoding(d_model, max_len, dropout), which raises it)", criterion=criterion)
