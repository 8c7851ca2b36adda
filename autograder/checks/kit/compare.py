"""Comparing a student's results with the reference's: weights copied by contract names, tensors compared at the
course's tolerance (`tolerance.py`), known mistakes tried when they differ (a topic's table, `from_table`), dropout
that acts only in training mode, max_len's edge case."""
from __future__ import annotations

import functools
import numbers
from typing import Any, Callable, Iterable, Mapping

import numpy as np
import torch
from torch import nn

from autograder.checks.kit.remote import ProbeBroken, RemoteObject, StudentError
from autograder.checks.kit.tolerance import tolerance
from autograder.checks.kit.toolkit import error_text, call, expect_raises, fail, shape_of


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


def candidates(table: Table, run: Callable[[Callable[..., Any], Mapping[str, Any]], Any],
               ids: Iterable[str] | None = None,
               forms: Mapping[str, Iterable[Mapping[str, Any]]] | None = None) -> list[tuple[str, Callable[[], Any]]]:
    """[(mistake id, thunk)] for `diagnose`/`expect_tensor`: the rows of a topic's table (the rows `ids`, in that
    order) as `from_table` runs them, each followed right away by its mistake's other forms, `forms[id]`: other
    switches of the row's variant that make the same mistake (a tie broken the other way, another hard-coded id)."""
    forms = forms or {}
    out = []
    for mistake_id, produce in from_table(table, run, ids).items():
        variant = table[mistake_id][0]
        out.append((mistake_id, produce))
        out += [(mistake_id, functools.partial(run, variant, form)) for form in forms.get(mistake_id, ())]
    return out



# ----------------------------------------------------------------------------------------------- weight copying
def describe(module: RemoteObject, name: str, **what) -> dict:
    """`module.describe(...)` with a failure message when the kernel side cannot answer."""
    try:
        return module.describe(**what)
    except StudentError as error:
        fail(f"{name} could not be inspected: {error_text(error)}")
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
        fail(f"{name}: could not load the grader's weights into your module.", details=[error_text(error)])
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
