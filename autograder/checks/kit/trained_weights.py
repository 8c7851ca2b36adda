"""A trained model judged outside the jail: its weights come out of the kernel, the grader's own model runs them.

07's and 08's trained-model checks (`trained_classifier.py`, `trained_gpt.py`) do not ask the student's code for
predictions: that code could look its answers up instead of computing them. They take the trained weights out of
the kernel (`state_dict`, as data, bounded: `trained_state`), load them into the contract's own architecture (the
reference classes of `solutions/`, built with the sizes the weights have: `load_into`), and evaluate that model
here, on text the kernel cannot read. So the predictions scored are those of a network of the contract's shape
with the student's trained numbers in it, whatever the student's objects do when called.
"""
from __future__ import annotations

import math

import torch
from torch import nn

from autograder.checks.kit.remote import ProbeBroken, StudentError
from autograder.checks.kit.toolkit import expected_got, fail
from autograder.checks.kit.compare import describe

# numbers in the trained model's parameters and buffers: the course's models hold well under a million (07: about
# 0.2 M with the notebook's vocabulary, 08: about 0.1 M); 4 M float32 numbers are 16 MB, half of what one probe reply
# may carry (autograder/grade/judge.py MAX_PROBE_REPLY_BYTES)
MAX_TRAINED_NUMBERS = 4_000_000


def trained_state(model, label: str) -> dict[str, torch.Tensor]:
    """The handed-in module's `state_dict()`, on the CPU, after checking its size from its description."""
    described = describe(model, label)
    shapes = [shape for _, shape, *_ in described.get("parameters", [])] + \
             [shape for _, shape, *_ in described.get("buffers", [])]
    numbers = sum(math.prod(shape) for shape in shapes if isinstance(shape, list)
                  and all(isinstance(n, int) and n >= 0 for n in shape))
    if numbers > MAX_TRAINED_NUMBERS:
        fail(f"{label} is too large to be evaluated.",
             details=expected_got(f"at most {MAX_TRAINED_NUMBERS:,} numbers in its weights", f"{numbers:,}"),
             hint="keep the notebook's model sizes.")
    try:
        state = model.state()
    except StudentError as error:
        fail(f"{label}'s weights could not be read (state_dict() raised {error.type_name}).")
    except ProbeBroken as error:
        fail(f"{label}'s weights could not be read: {error}.")
    if not isinstance(state, dict) or not all(isinstance(k, str) and isinstance(v, torch.Tensor)
                                              for k, v in state.items()):
        fail(f"{label}'s state_dict() is not a dict of tensors.")
    return {name: value.detach().cpu() for name, value in state.items()}


def size_of(state: dict[str, torch.Tensor], name: str, dim: int, label: str) -> int:
    """Dimension `dim` of the weight `name` (the contract's name), or a failure saying which weight is missing."""
    value = state.get(name)
    if value is None or value.dim() <= dim:
        fail(f"{label}'s weights do not have the contract's names.",
             details=expected_got(f"a weight named {name!r}", "none" if value is None else
                                  f"shape {tuple(value.shape)}"),
             hint="build the model from the classes of this notebook with their attribute names (coursekit/api.py).")
    return int(value.shape[dim])


def count_layers(state: dict[str, torch.Tensor], prefix: str) -> int:
    """How many blocks `prefix.0.`, `prefix.1.`... the weights hold."""
    indices = {name[len(prefix):].split(".", 1)[0] for name in state if name.startswith(prefix)}
    return len([i for i in indices if i.isdigit()])


def load_into(reference: nn.Module, state: dict[str, torch.Tensor], label: str) -> nn.Module:
    """`reference` (the contract's architecture) holding the student's weights, in eval mode; fails readably when
    the weights' names or shapes do not fit, or hold NaN or inf."""
    expected = reference.state_dict()
    missing = sorted(set(expected) - set(state))
    unexpected = sorted(set(state) - set(expected))
    wrong = [f"{k}: {tuple(state[k].shape)} instead of {tuple(expected[k].shape)}" for k in expected
             if k in state and tuple(state[k].shape) != tuple(expected[k].shape)]
    if missing or unexpected or wrong:
        details = ([f"missing: {', '.join(missing[:4])}" + (" ..." if len(missing) > 4 else "")] if missing else []) \
            + ([f"not in the contract: {', '.join(unexpected[:4])}" + (" ..." if len(unexpected) > 4 else "")]
               if unexpected else []) + wrong[:3]
        fail(f"{label}'s weights do not fit the contract's architecture.", details=details,
             hint="build the model from the classes of this notebook with their attribute names (coursekit/api.py).")
    for name, value in state.items():
        if value.is_floating_point() and not bool(torch.isfinite(value).all()):
            fail(f"{label}'s weights hold NaN or inf (in {name}).",
                 hint="run the training cells again; a smaller learning rate may help.")
    reference.load_state_dict({k: state[k].to(expected[k].dtype) for k in expected})
    return reference.eval()


def heads_of(attention, d_model: int, default: int) -> int:
    """The `num_heads` attribute of a handed-in attention module (the contract's constructor argument), else the
    notebook's value: the weights alone do not say how they are split into heads."""
    try:
        value = attention.fetch()
    except (StudentError, ProbeBroken):
        return default
    if isinstance(value, int) and not isinstance(value, bool) and 0 < value <= d_model and d_model % value == 0:
        return value
    return default
