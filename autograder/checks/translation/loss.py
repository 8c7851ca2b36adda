"""Hidden checks of notebook 10's loss and schedule: label smoothing and the 2017 learning-rate schedule.

Everything is judged here, in the grader's process, against independent references where the contract names one:
`F.cross_entropy(..., label_smoothing=)` for the loss (its value and its gradient, back-propagated in the kernel as
a training loop does); the reference (`solutions.translation`) for the schedule.

Every probe input of a check is generated in one function from one seed (`*_SEED`) and is this submission's
(autograder/checks/kit/draws.py): the random tensors from `seed_for` / `generator`, and the scalar arguments (sizes,
smoothing values, ignore_index, d_model / warm-up / step / factor of the schedule, the edge cases' bad values) drawn
with `pick` from the spaces documented at each draw, whose first option is the value used with no salt.

The core of each check leaves every optional argument at its default (left out or passed); the probes of another
value of an argument with teeth (coursekit/criteria.py: smoothing, ignore_index, factor) run in its `argument` block,
and no probe tries two of them at once, so an answer wrong in one argument only fails that criterion alone and keeps
1 - 0.25 / (the exercise's arguments) of the points.
"""
from __future__ import annotations

import contextlib
import numbers
import random
from typing import NamedTuple

import torch
import torch.nn.functional as F

from autograder.checks.kit.compare import as_tensor, expect_tensor
from autograder.checks.kit.criteria import argument
from autograder.checks.kit.draws import generator, pick, seed_for
from autograder.checks.kit.inputs import reference
from autograder.checks.kit.remote import ProbeBroken, RemoteObject, StudentError, hidden_check
from autograder.checks.kit.toolkit import (
    call, expect_callable, expect_raises, expected_got, fail, randint, randn, shape_of, start_check,
)
from autograder.checks.translation.common import as_float, close64, first, known_mistakes

SMOOTHING_SEED, NOAM_SEED = 160, 165


# ------------------------------------------------------------------------------------------------ label smoothing
class SmoothingCase(NamedTuple):
    logits: torch.Tensor   # (N, V)
    targets: torch.Tensor  # (N,), some positions equal to ignore_index
    kwargs: dict           # smoothing / ignore_index as passed (left out: the defaults 0.1 / 0)


# the smoothing values drawn for the cases that pass one other than 0 and the default 0.1
SMOOTHING_VALUES = (0.25, 0.3, 0.6, 0.05, 0.15, 0.2, 0.35, 0.4, 0.45, 0.5, 0.7, 0.8, 0.9)


def smoothing_configs() -> list[tuple[int, int, float | None, int | None, int]]:
    """(N, V, smoothing, ignore_index, ignored positions) of the probes, None = left out of the call, this
    submission's: every case keeps what it was chosen for (both left out; smoothing alone; smoothing 0 with
    ignore_index 0 passed; ignore_index other than 0, where class 0 is then an ordinary target, with smoothing left
    out and with the default 0.1 passed; both defaults passed with no ignored position), the sizes and values drawn
    around it. No case passes both arguments at values other than their defaults: each argument with teeth is
    judged on its own (`_smoothing_block`)."""
    def size(label, value, low, high):
        return pick(f"translation.smoothing.{label}", first(value, range(low, high + 1)))

    def smoothing(label, value):
        return pick(f"translation.smoothing.{label}", first(value, SMOOTHING_VALUES))

    configs = []
    for k, (n, v, value, ignore_index, ignored) in enumerate((
            (12, 7, None, None, 4), (10, 5, 0.25, None, 3), (9, 6, 0.0, 0, 2), (11, 8, None, 5, 3),
            (8, 4, 0.1, 2, 1), (6, 9, 0.1, 0, 0))):
        n, v = size(f"{k}.N", n, 6, 14), size(f"{k}.V", v, 4, 10)
        if value not in (None, 0.0, 0.1):
            value = smoothing(f"{k}.smoothing", value)
        if ignore_index not in (None, 0):
            ignore_index = pick(f"translation.smoothing.{k}.ignore_index", first(ignore_index, range(1, v)))
            ignore_index = min(ignore_index, v - 1)                     # a class of this V, never 0
        if ignored:
            ignored = pick(f"translation.smoothing.{k}.ignored", first(ignored, range(1, n // 2 + 1)))
        configs.append((n, v, value, ignore_index, min(ignored, n - 2)))
    return configs


def bad_smoothings() -> list[float]:
    """The smoothing values outside [0, 1) tried: 1 (the boundary, always) and one below 0 and one above 1."""
    return [1.0, pick("translation.smoothing.below", (-0.1, -0.01, -0.05, -0.3, -0.5, -1.0)),
            pick("translation.smoothing.above", (1.5, 1.01, 1.1, 1.2, 2.0, 3.0))]


def smoothing_probes(seed: int, device) -> list[SmoothingCase]:
    """Logits and targets with ignored (padding) positions; ignore_index 0 (the default) and others, where class 0
    is then an ordinary target; smoothing 0 (plain cross-entropy), the default 0.1 and others."""
    cases = []
    for k, (n, v, smoothing, ignore_index, ignored) in enumerate(smoothing_configs()):
        pad = 0 if ignore_index is None else ignore_index
        logits = randn(n, v, seed=seed + k, device=device) * 2                       # (N, V)
        targets = randint(0, v - 1, (n,), seed=seed + 50 + k, device=device)         # (N,)
        targets = torch.where(targets >= pad, targets + 1, targets)                  # never pad, class 0 included
        if pad != 0:
            targets[0] = 0
        positions = torch.randperm(n, generator=generator(seed + 100 + k))[:ignored]
        targets[positions.to(device)] = pad
        if pad != 0 and not (targets == 0).any():                                   # class 0 stays a target
            targets[int((targets != pad).nonzero()[0])] = 0
        kwargs = {key: value for key, value in (("smoothing", smoothing), ("ignore_index", ignore_index))
                  if value is not None}
        cases.append(SmoothingCase(logits, targets, kwargs))
    return cases


def _smoothing_block(kwargs: dict):
    """The criterion block of one probe: the core (both arguments at their defaults, passed or left out), or the
    argument with teeth whose other value it passes."""
    if kwargs.get("smoothing", 0.1) != 0.1:
        return argument("label_smoothed_cross_entropy.smoothing")
    if kwargs.get("ignore_index", 0) != 0:
        return argument("label_smoothed_cross_entropy.ignore_index")
    return contextlib.nullcontext()


def _described(kwargs: dict) -> str:
    return "".join(f", {k}={v}" for k, v in kwargs.items())


@hidden_check
def check_label_smoothed_cross_entropy(label_smoothed_cross_entropy) -> None:
    """label_smoothed_cross_entropy(logits (N, V), targets (N,), smoothing=0.1, ignore_index=0) -> scalar tensor."""
    device = start_check()
    fn = label_smoothed_cross_entropy
    expect_callable(fn, "label_smoothed_cross_entropy")
    gradient = RemoteObject(fn.channel, {"new": "coursekit.probe.translation.loss_and_gradient"})

    def compare(logits, targets, kwargs):
        smoothing, ignore_index = kwargs.get("smoothing", 0.1), kwargs.get("ignore_index", 0)
        ignored = int((targets == ignore_index).sum())
        tested = (f"label_smoothed_cross_entropy(logits {shape_of(logits)}, targets {shape_of(targets)} with "
                  f"{ignored} ignored{_described(kwargs)})")
        got = call("label_smoothed_cross_entropy", fn, logits.clone(), targets.clone(), tested=tested, **kwargs)
        if isinstance(got, numbers.Real) and not isinstance(got, bool):
            fail("label_smoothed_cross_entropy must return a scalar tensor, not a Python number: the training loop "
                 "calls .backward() on it.", tested=tested, details=[f"got a {type(got).__name__}"],
                 mistake="smoothing.python_float")
        got = as_tensor(got, "label_smoothed_cross_entropy's result", tested)
        if got.dim() != 0:
            fail("label_smoothed_cross_entropy must return a scalar tensor (the mean over the kept positions).",
                 tested=tested, details=[f"got shape {tuple(got.shape)}"])
        leaf = logits.clone().requires_grad_(True)
        expected = F.cross_entropy(leaf, targets, ignore_index=ignore_index, label_smoothing=smoothing)
        expected.backward()

        def mistakes(logits=logits, targets=targets, smoothing=smoothing, ignore_index=ignore_index):
            return known_mistakes("smoothing.", lambda variant, switches: variant(logits, targets, smoothing,
                                                                                  ignore_index, **switches))

        expect_tensor(got.to(device), expected.detach(), "label_smoothed_cross_entropy", device, tested=tested,
                      mistakes=mistakes,
                      note="it equals F.cross_entropy(logits, targets, ignore_index=ignore_index, "
                           "label_smoothing=smoothing)")
        # training back-propagates through the loss: the gradient must reach the logits, and be the right one
        _value, grad = call("label_smoothed_cross_entropy", gradient, fn, logits.clone(), targets.clone(),
                            tested=tested + " then .backward()", **kwargs)
        if grad is None:
            fail("label_smoothed_cross_entropy's result is not connected to the logits: .backward() on it gives "
                 "them no gradient, so training would not learn.", tested=tested + " then .backward()",
                 mistake="smoothing.detached")
        expect_tensor(grad, leaf.grad, "the gradient of the loss with respect to the logits", device,
                      tested=tested + " then .backward()")

    for logits, targets, kwargs in smoothing_probes(SMOOTHING_SEED, device):
        with _smoothing_block(kwargs):
            compare(logits, targets, kwargs)
    logits, targets, _ = smoothing_probes(SMOOTHING_SEED, device)[0]
    for smoothing in bad_smoothings():
        expect_raises(ValueError, f"label_smoothed_cross_entropy(logits, targets, smoothing={smoothing})", fn,
                      logits.clone(), targets.clone(), smoothing=smoothing, why="when smoothing is outside [0, 1)",
                      criterion="label_smoothed_cross_entropy.bad_smoothing")


# ------------------------------------------------------------------------------------------------------- noam_lr
def noam_configs(seed: int) -> list[tuple[int, int, float | None]]:
    """(d_model, warmup_steps, factor or None = left out), this submission's: the paper's scale with factor left
    out, a short warm-up with a factor above 1, warmup_steps 1 (pure decay) with a factor below 1, factor 1.0
    passed, and one configuration drawn from the seed."""
    draw = random.Random(seed_for(seed))

    def drawn(label, value, options):
        return pick(f"translation.noam.{label}", first(value, options))

    return [(drawn("0.d_model", 512, (256, 384, 768, 1024, 128)),
             drawn("0.warmup", 4000, (500, 1000, 2000, 3000, 6000, 8000)), None),
            (drawn("1.d_model", 64, (48, 80, 96, 128, 160)), drawn("1.warmup", 10, range(3, 41)),
             drawn("1.factor", 2.0, (1.5, 2.5, 3.0, 4.0, 1.25))),
            (drawn("2.d_model", 256, (128, 192, 320, 512)), 1, drawn("2.factor", 0.5, (0.25, 0.3, 0.75, 0.1, 0.8))),
            (drawn("3.d_model", 32, (16, 24, 40, 48, 64)), drawn("3.warmup", 25, range(11, 61)), 1.0),
            (draw.choice((48, 96, 160)), draw.randint(3, 40), round(draw.uniform(0.3, 3.0), 3))]


def noam_probes(seed: int) -> list[tuple[int, int, int, float | None]]:
    """(step, d_model, warmup_steps, factor or None = left out) around and far beyond each warm-up; step 0 and 1
    first, and one step drawn from around the warm-up (this submission's)."""
    cases = []
    for k, (d_model, warmup, factor) in enumerate(noam_configs(seed)):
        around = [max(2, round(warmup * f)) for f in (0.3, 0.7, 1.3, 1.7, 3.5, 7.0, 25.0)]
        drawn = pick(f"translation.noam.{k}.step", first(warmup, around + [2, 3]))   # no salt: a step listed
        steps = sorted({0, 1, max(warmup // 2, 1), max(warmup - 1, 1), warmup, warmup + 1, 2 * warmup,
                        10 * warmup + 3, drawn})
        cases += [(step, d_model, warmup, factor) for step in steps]
    return cases


def bad_warmups() -> list[tuple[int, int, int]]:
    """(step, d_model, warmup_steps) with warmup_steps below 1: 0 (the boundary, always) and one below 0."""
    step = pick("translation.noam.bad.step", (10, 1, 5, 100, 4000))
    d_model = pick("translation.noam.bad.d_model", (512, 64, 128, 256))
    return [(step, d_model, 0), (step, d_model, pick("translation.noam.bad.warmup", (-5, -1, -2, -10, -4000)))]


def _noam_call(noam_lr, step, d_model, warmup, factor, tested):
    extra = () if factor is None else (factor,)
    try:
        return noam_lr(step, d_model, warmup, *extra)
    except StudentError as error:
        if step == 0 and error.is_a("ZeroDivisionError"):
            fail("noam_lr raised ZeroDivisionError at step 0.", tested=tested, mistake="noam.step_zero")
    except ProbeBroken:
        pass
    return call("noam_lr", noam_lr, step, d_model, warmup, *extra, tested=tested)   # the usual message


@hidden_check
def check_noam_lr(noam_lr) -> None:
    """noam_lr(step, d_model, warmup_steps, factor=1.0) -> factor * d_model**-0.5 * min(s**-0.5, s * w**-1.5)."""
    start_check()
    solution = reference("translation")
    expect_callable(noam_lr, "noam_lr")

    def compare(step, d_model, warmup, factor):
        tested = f"noam_lr({step}, d_model={d_model}, warmup_steps={warmup}" + \
                 ("" if factor is None else f", factor={factor}") + ")"
        got = as_float(_noam_call(noam_lr, step, d_model, warmup, factor, tested), "noam_lr", tested)
        expected = solution.noam_lr(step, d_model, warmup, 1.0 if factor is None else factor)
        if close64(got, expected):
            return
        rows = known_mistakes("noam.", lambda variant, switches: variant(step, d_model, warmup,
                                                                         1.0 if factor is None else factor, **switches))
        mistake = next((m for m, produce in rows if close64(got, produce())), None)
        fail("noam_lr: the learning rate differs from the reference solution.", tested=tested,
             details=expected_got(f"{expected:.6g}", f"{got:.6g}"), mistake=mistake,
             hint=None if mistake else "s = max(step, 1); factor * d_model ** -0.5 * min(s ** -0.5, "
                                       "s * warmup_steps ** -1.5)")

    for step, d_model, warmup, factor in noam_probes(NOAM_SEED):
        if factor in (None, 1.0):                      # the core: factor left out or its default passed
            compare(step, d_model, warmup, factor)
        else:
            with argument("noam_lr.factor"):
                compare(step, d_model, warmup, factor)
    for step, d_model, warmup in bad_warmups():
        expect_raises(ValueError, f"noam_lr({step}, {d_model}, warmup_steps={warmup})", noam_lr, step, d_model, warmup,
                      why="when warmup_steps < 1", criterion="noam_lr.bad_warmup")
