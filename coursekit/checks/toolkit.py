"""The toolkit of the public checks: running the student's code, comparing, and phrasing hints, and the helpers
that the checks of several topics share (modules and Encoder/Decoder stacks: 05 and 06).

Every failure is a `CheckFailed` (an AssertionError), whose message reads
    <what is wrong>
    HINT: <the likely mistake>          (when one can be told)

A known mistake is named by its id in the catalogue `coursekit.mistakes` (`mistake_hint`): the hint shows the
catalogue's text, the same words as the grader's "likely mistake", then what to do about it.

In Jupyter a failed check shows only that message and the student's own line(s), never the frames of this
library: IPython renders an exception that has a `_render_traceback_` method with the lines it returns.
"""
from __future__ import annotations

import contextlib
import functools
import importlib
import io
import linecache
import math
import os
import textwrap
import traceback
from typing import Any, Callable, Sequence

import numpy as np
import torch

from coursekit.api import snake_case  # noqa: F401  (the checks' names: check_<snake_case(api name)>)
from coursekit.mistakes import MISTAKES

_PACKAGE_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))  # .../coursekit
_RED, _BOLD, _RESET = "\x1b[31m", "\x1b[1m", "\x1b[0m"
_MAX_STUDENT_FRAMES = 3
_WIDTH = 100  # characters of a JupyterLab output line at 1280 px: longer lines wrap mid-word there


class CheckFailed(AssertionError):
    """A public check did not pass; the message is written for the student.

    In IPython/Jupyter it renders as the message, then the line of the student's cell that ran the check and, when
    the student's code crashed, the student's own lines where it crashed: no frames of coursekit or other libraries,
    no "During handling of the above exception" chains.

    The hidden checks (autograder) raise it too: there `mistake_id` carries the catalogue id of the diagnosed
    mistake (`coursekit.mistakes`), which the judge hands on to the gradebook as data.
    """

    def __init__(self, message: str = "", mistake_id: str | None = None):
        super().__init__(message)
        self.mistake_id = mistake_id

    def _render_traceback_(self) -> list[str]:
        lines = []
        for i, line in enumerate(str(self).splitlines() or [""]):
            prefix = "Self-check failed: " if i == 0 else ""
            wrapped = textwrap.wrap(prefix + line, _WIDTH, subsequent_indent="  ", break_long_words=False,
                                    break_on_hyphens=False) or [""]
            if i == 0:
                lines += [f"{_RED}{_BOLD}Self-check failed:{_RESET} {_RED}{wrapped[0][len(prefix):]}{_RESET}",
                          *(f"{_RED}{part}{_RESET}" for part in wrapped[1:])]
            elif line.startswith("HINT:"):
                lines += [f"{_BOLD}{part}{_RESET}" for part in wrapped]
            else:
                lines += wrapped
        for filename, lineno, function, text in _student_frames(self.__traceback__)[:1]:
            lines += _located("  ", f"checked at {_where(filename, lineno, function, 'this cell')}", text)
        cause = self.__cause__
        if cause is not None and not isinstance(cause, CheckFailed):
            frames = _student_frames(cause.__traceback__)
            if frames:
                lines.append(f"  your code raised {type(cause).__name__} here:")
                for filename, lineno, function, text in frames[-_MAX_STUDENT_FRAMES:]:
                    lines += _located("    ", _where(filename, lineno, function, "its cell"), text)
        return lines


def _located(indent: str, where: str, code: str) -> list[str]:
    """`where: code` on one line when it fits the output width, else the code on a line of its own below (cut
    with an ellipsis only if even that line is too long): a line of code is never broken mid-word."""
    if len(indent + where + ": " + code) <= _WIDTH:
        return [f"{indent}{where}: {code}"]
    code_indent = indent + "  "
    if len(code_indent + code) > _WIDTH:
        code = code[: _WIDTH - len(code_indent) - 1] + "…"
    return [f"{indent}{where}:", f"{code_indent}{code}"]


def _is_library(filename: str) -> bool:
    """Frames of coursekit, of installed packages and of Python itself are not the student's."""
    path = os.path.abspath(filename) if not filename.startswith("<") else filename
    return (path.startswith(_PACKAGE_DIR + os.sep) or "site-packages" in path or "dist-packages" in path
            or path.startswith("<frozen") or path.startswith(os.path.dirname(os.__file__) + os.sep))


def _student_frames(tb) -> list[tuple[str, int, str, str]]:
    """(filename, line number, function name, source line) of the frames of `tb` that belong to the student's code."""
    frames = []
    for frame, lineno in traceback.walk_tb(tb):
        filename = frame.f_code.co_filename
        if _is_library(filename):
            continue
        frames.append((filename, lineno, frame.f_code.co_name,
                       linecache.getline(filename, lineno, frame.f_globals).strip()))
    return frames


def _where(filename: str, lineno: int, function: str, cell: str) -> str:
    """'line 3 of this cell' or 'f, line 3 of its cell' (IPython names cells like /tmp/ipykernel_12/123.py)."""
    place = (f"line {lineno} of {cell}"
             if "ipykernel_" in filename or filename.startswith(("<ipython-input", "<cell"))
             else f"line {lineno} of {os.path.basename(filename)}")
    return place if function == "<module>" else f"{function}, {place}"


def fail(problem: str, hint: str | None = None, cause: BaseException | None = None) -> None:
    """Raise CheckFailed with `problem` and, if given, a HINT line.

    `cause`: the student's exception that made the check fail (its student frames are shown); the exception being
    handled when `fail` is called is otherwise dropped, so no "During handling of the above exception" chain.
    """
    message = problem if hint is None else f"{problem}\nHINT: {hint}"
    raise CheckFailed(message) from cause


def mistake_hint(mistake_id: str) -> str:
    """The HINT of a known mistake: its text and its fix, both from the catalogue (`coursekit.mistakes`)."""
    mistake = MISTAKES[mistake_id]
    return f"{mistake.text}; {mistake.fix}"


def passed(name: str, detail: str = "") -> None:
    """Print the friendly success line of a check."""
    extra = f" {detail}" if detail else ""
    print(f"\u2705 {name}: all public checks passed.{extra} (Grading runs more cases.)")


def run(name: str, fn: Callable, *args, **kwargs) -> Any:
    """Call the student's `fn`, turning a missing implementation or a crash into a readable failure."""
    try:
        return fn(*args, **kwargs)
    except NotImplementedError:
        fail(f"{name} is not implemented yet (it still raises NotImplementedError).",
             "replace `raise NotImplementedError()` with your code, then run the cell that defines it again.")
    except CheckFailed:
        raise
    except Exception as error:  # the student's code crashed on a small valid example
        args_text = ", ".join(_short(a) for a in args)
        fail(f"{name}({args_text}) raised {type(error).__name__}: {error}",
             "look at the line of your code shown below; run the example by hand in a new cell to see it.",
             cause=error)


def _short(value: Any) -> str:
    if isinstance(value, torch.Tensor):
        return f"<tensor shape={tuple(value.shape)} dtype={value.dtype}>"
    if isinstance(value, np.ndarray):
        return f"<array shape={value.shape}>"
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def to_tensor(value: Any, name: str) -> torch.Tensor:
    """Accept tensors (any device) and array-likes; return a float64 CPU tensor for comparison."""
    if isinstance(value, torch.Tensor):
        return value.detach().to("cpu", torch.float64)
    try:
        return torch.as_tensor(np.asarray(value, dtype=np.float64))
    except (TypeError, ValueError):
        fail(f"{name} should be a tensor or an array of numbers, got {type(value).__name__}.")


def expect_value_error(label: str, action, hint: str) -> None:
    """`action()` raises ValueError; otherwise a failure naming `label` with `hint`."""
    try:
        action()
    except ValueError:
        return
    except NotImplementedError:
        fail(f"{label.split('(')[0]} is not implemented yet (it still raises NotImplementedError).")
    except Exception as error:  # noqa: BLE001
        fail(f"{label} raised {type(error).__name__}: {error}; expected ValueError.", hint)
    fail(f"{label} should raise ValueError.", hint)


def expect_type(value: Any, types: type | tuple[type, ...], name: str, hint: str | None = None) -> None:
    if not isinstance(value, types):
        expected = types.__name__ if isinstance(types, type) else " or ".join(t.__name__ for t in types)
        fail(f"{name} should be a {expected}, got {type(value).__name__}.", hint)


def expect_shape(value: Any, shape: Sequence[int], name: str, hint: str | None = None) -> None:
    actual = tuple(value.shape) if hasattr(value, "shape") else None
    if actual != tuple(shape):
        fail(f"{name} should have shape {tuple(shape)}, got {actual}.", hint)


def expect_dtype(value: torch.Tensor, dtype: torch.dtype, name: str, hint: str | None = None) -> None:
    if value.dtype != dtype:
        fail(f"{name} should have dtype {dtype}, got {value.dtype}.", hint)


def close(actual: Any, expected: Any, atol: float = 1e-5, rtol: float = 1e-4) -> bool:
    """True when the two have the same shape and equal values within tolerance (NaN never matches)."""
    a, e = to_tensor(actual, "value"), to_tensor(expected, "expected")
    return a.shape == e.shape and bool(torch.allclose(a, e, atol=atol, rtol=rtol))


def expect_close(actual: Any, expected: Any, name: str, hint: str | None = None,
                 atol: float = 1e-5, rtol: float = 1e-4) -> None:
    a, e = to_tensor(actual, name), to_tensor(expected, "expected")
    if a.shape != e.shape:
        fail(f"{name} should have shape {tuple(e.shape)}, got {tuple(a.shape)}.", hint)
    if torch.isnan(a).any():
        fail(f"{name} contains NaN.", hint or "look for a division by zero or a softmax over only -inf.")
    if not torch.allclose(a, e, atol=atol, rtol=rtol):
        worst = (a - e).abs().max().item()
        fail(f"{name} has the right shape but wrong values (largest difference {worst:.3g}).\n"
             f"expected (first values): {_preview(e)}\ngot      (first values): {_preview(a)}", hint)


def _preview(t: torch.Tensor, n: int = 6) -> str:
    flat = t.flatten()[:n].tolist()
    return "[" + ", ".join(f"{x:.4g}" for x in flat) + (", ...]" if t.numel() > n else "]")


def first_matching_hint(actual: Any, candidates: Sequence[tuple[Any, str]], atol: float = 1e-5) -> str | None:
    """The hint of the first known wrong answer that `actual` matches, else None."""
    for wrong, hint in candidates:
        try:
            if close(actual, wrong, atol=atol):
                return hint
        except Exception:  # a candidate that cannot be compared says nothing
            continue
    return None


def softmax_rows(scores: np.ndarray) -> np.ndarray:
    """Row-wise softmax in float64 numpy (an independent way to compute expected weights)."""
    shifted = scores - scores.max(axis=-1, keepdims=True)
    exp = np.exp(shifted)
    return exp / exp.sum(axis=-1, keepdims=True)


def isclose(a: float, b: float, tol: float = 1e-6) -> bool:
    return math.isclose(a, b, rel_tol=tol, abs_tol=tol)


# ------------------------------------------------------------------------ modules and stacks (checks of 05 and 06)
def randomize(module: torch.nn.Module, seed: int) -> None:
    """Fixed random values for every parameter (LayerNorms included, so norm1 and norm2 differ)."""
    generator = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for _, parameter in sorted(module.named_parameters()):
            parameter.copy_(torch.randn(parameter.shape, generator=generator) * 0.5)


def require_submodule(module: torch.nn.Module, owner: str, name: str, kind: type | tuple[type, ...] = torch.nn.Module,
                      hint: str | None = None) -> torch.nn.Module:
    sub = getattr(module, name, None)
    if not isinstance(sub, kind):
        expected = kind.__name__ if isinstance(kind, type) else " or ".join(k.__name__ for k in kind)
        fail(f"{owner} needs a submodule `{name}` ({expected}), got {type(sub).__name__}.", hint)
    return sub


def padding_mask(ids: torch.Tensor, pad_id: int = 0) -> torch.Tensor:
    """(B, T) -> (B, 1, 1, T), True where a real token is (may be attended to)."""
    return (ids != pad_id)[:, None, None, :]


def norm_swapped_hint(norm_first: bool) -> str:
    """The hint of a block (EncoderBlock, DecoderBlock) arranged the other way than norm_first asks."""
    wrote, asked = ("post", "pre") if norm_first else ("pre", "post")
    return f"you wrote the {wrote}-norm block, but norm_first={norm_first} asks for {asked}-norm: " \
           + mistake_hint("encoder.norm_swapped")


def stack_variants(stack: torch.nn.Module, ids, run_layers, d_model: int) -> dict:
    """Right and wrong ways to embed, add positions, run the layers and normalise (Encoder and Decoder alike):
    {"right": output, hint: wrong output}. run_layers(x, use_mask) runs every layer on x, with or without masks."""
    emb = stack.embedding(ids)                                                        # (B, T, d_model)
    scale = math.sqrt(d_model)
    return {
        "right": stack.norm(run_layers(stack.pos_encoding(emb * scale), True)),
        mistake_hint("encoder.no_embedding_scale"): stack.norm(run_layers(stack.pos_encoding(emb), True)),
        "scale the embeddings by sqrt(d_model) BEFORE adding the positional encoding, not after.":
            stack.norm(run_layers(stack.pos_encoding(emb) * scale, True)),
        mistake_hint("encoder.no_positions"): stack.norm(run_layers(emb * scale, True)),
        "the mask is not handed to the layers: every layer needs it.":
            stack.norm(run_layers(stack.pos_encoding(emb * scale), False)),
        mistake_hint("encoder.final_norm"): run_layers(stack.pos_encoding(emb * scale), True),
    }


def expect_stack_submodules(stack: torch.nn.Module, owner: str, num_layers: int, block_name: str,
                            norm_first: bool) -> None:
    for sub in ("embedding", "pos_encoding"):
        require_submodule(stack, owner, sub)
    layers = require_submodule(stack, owner, "layers", torch.nn.ModuleList,
                               f"self.layers = nn.ModuleList([{block_name}(...) for _ in range(num_layers)])")
    if len(layers) != num_layers:
        fail(f"{owner}(num_layers={num_layers}) should hold {num_layers} layers, got {len(layers)}.")
    if len({id(layer) for layer in layers}) != num_layers:
        fail(f"{owner}.layers holds the same block several times; each layer needs its own weights.",
             f"create a new {block_name} inside the loop of the list comprehension.")
    require_submodule(stack, owner, "norm", torch.nn.LayerNorm if norm_first else torch.nn.Identity,
                      "pre-norm stacks (norm_first=True) end with nn.LayerNorm(d_model); post-norm ones with "
                      "nn.Identity().")


def expect_too_long(module: torch.nn.Module, name: str, max_len: int, make_inputs, criterion: str,
                    hint: str = "pass max_len on to PositionalEncoding(d_model, max_len, dropout), which raises it.") \
        -> None:
    """The stated edge case `criterion`: a sequence of max_len tokens works, a longer one raises ValueError (max_len
    reaches the positional encoding). `make_inputs(T)` gives the forward arguments for sequences of length T."""
    from coursekit.criteria import edge_case

    with edge_case(criterion):
        with torch.no_grad():
            run(f"{name} on exactly max_len={max_len} tokens", module, *make_inputs(max_len))
            try:
                module(*make_inputs(max_len + 1))
            except ValueError:
                return
            except NotImplementedError:
                raise
            except Exception as error:  # noqa: BLE001 -- any other error is reported as the wrong one
                fail(f"{name} on {max_len + 1} tokens (max_len={max_len}) should raise ValueError, got "
                     f"{type(error).__name__}: {error}", hint)
        fail(f"{name} on {max_len + 1} tokens (max_len={max_len}) should raise ValueError, but it raised nothing.",
             hint)


# ---------------------------------------------------------------------------------------- exercises built of parts
def _failing_parts(composite: Any, parts: dict[str, str]) -> list[str]:
    """The names among `parts` ({global name: "module:check function"}) that the composite's code reads and whose
    own public check fails (run silently)."""
    from coursekit.probe import globals_of

    namespace = globals_of(composite) or {}
    failing = []
    for name, where in parts.items():
        part = namespace.get(name)
        if part is None:
            continue
        module, function = where.split(":")
        check = getattr(importlib.import_module(module), function)
        check = getattr(check, "__wrapped__", check)  # pass or fail is the check's own: skip its parts' diagnosis
        try:
            with contextlib.redirect_stdout(io.StringIO()):
                check(part)
        except Exception:  # noqa: BLE001 -- any failure of the part's own check
            failing.append(name)
    return failing


def uses_parts(owner: str):
    """Decorator of the public check of the exercise `owner` (an API name), whose object uses other exercises of
    its notebook by name: the parts graph of `coursekit.api` (`public_parts`) says which, and each part's own
    public check is `coursekit.checks.<topic>:check_<name>`.

    When the check fails and a part fails its own check, the student is told to fix that part first (the grader
    judges `owner` with a working part in place of theirs). When the check passes although a part fails its own
    check, it says that `owner` is right given working parts."""
    from coursekit import api

    parts = {name: f"coursekit.checks.{api.by_name(part).topic}:{api.by_name(part).check_name}"
             for name, part in api.public_parts(owner).items()}
    if not parts:
        raise ValueError(f"{owner} has no parts in coursekit.api.PARTS: its check needs no @uses_parts")

    def decorate(check):
        @functools.wraps(check)
        def wrapper(composite, *args, **kwargs):
            try:
                result = check(composite, *args, **kwargs)
            except CheckFailed as failure:
                failing = _failing_parts(composite, parts)
                if not failing:
                    raise
                names = " and ".join(f"your {name}" for name in failing)
                verb = "fails" if len(failing) == 1 else "fail"
                raise CheckFailed(
                    f"your {owner} uses {names}, which {verb} its own check: fix that first.\n"
                    f"HINT: run the self-check of {failing[0]} above and make it pass. (When your notebook is "
                    f"graded, {owner} is judged with a working {failing[0]} in place of yours, so it earns its "
                    f"points on its own.)\n"
                    f"What {owner}'s check saw: {str(failure).splitlines()[0]}") from None
            failing = _failing_parts(composite, parts)
            if failing:
                print(f"   {owner} is right given working parts, but your {', '.join(failing)} still "
                      f"fail{'s' if len(failing) == 1 else ''} its own check: fix it before you build on it.")
            return result

        wrapper.parts = dict(parts)
        return wrapper

    return decorate
