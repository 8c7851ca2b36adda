"""Public self-checks for notebook 10's loss and schedule: label smoothing and the 2017 learning-rate schedule.

The loss is recomputed row by row from its formula; the schedule is checked at steps worked out by hand. Shapes: N
positions, V classes (target vocabulary).
"""
from __future__ import annotations

import math

import torch
import torch.nn.functional as F

from coursekit.checks.toolkit import (expect_close, expect_type, fail, first_matching_hint, isclose, mistake_hint,
                                     passed, run)
from coursekit.checks.translation.common import expect_value_error
from coursekit.criteria import argument, edge_case
from coursekit.tolerance import FORMULA_FLOAT64


def _smoothed(logits, targets, smoothing, ignore_index, spread="all", kept_only=True, divide_by="kept",
              target_weight=None, uniform_weight=None):
    """The loss written out row by row in float64; the keyword switches give the known wrong answers (spread "all",
    "others" or "no_pad": the smoothing mass over all V classes, the V - 1 other than the target, or the V - 2
    other than the target and the ignore_index column; the weights of the target's and the uniform term, by default
    1 - smoothing and what is left of 1)."""
    log_p = logits.double().log_softmax(-1)                                    # (N, V)
    V = log_p.size(1)
    rows, kept = [], 0
    for row, target in zip(log_p, targets.tolist()):
        if target == ignore_index:
            if kept_only:
                continue
            target = 0 if target >= V or target < 0 else target
        else:
            kept += 1
        nll = -row[target]
        if spread == "all":
            uniform = -row.mean()
        elif spread == "others":
            uniform = -(row.sum() - row[target]) / (V - 1)
        else:
            uniform = -(row.sum() - row[target] - row[ignore_index]) / (V - 2)
        weight = 1 - smoothing if target_weight is None else target_weight
        rows.append(weight * nll + (1 - weight if uniform_weight is None else uniform_weight) * uniform)
    total = torch.stack(rows).sum()
    return {"kept": total / kept, "all": total / len(targets), "none": total}[divide_by]


def _loss_case(fn, logits, targets, smoothing, ignore_index, what):
    got = run("label_smoothed_cross_entropy", fn, logits, targets, smoothing, ignore_index)
    if isinstance(got, (int, float)):
        fail(f"label_smoothed_cross_entropy should return a scalar tensor, got a Python {type(got).__name__}.",
             mistake_hint("smoothing.python_float"))
    expect_type(got, torch.Tensor, "label_smoothed_cross_entropy's result")
    if got.dim() != 0:
        fail(f"label_smoothed_cross_entropy should return a scalar (shape ()), got shape {tuple(got.shape)}.",
             "average over the kept positions: the result is one number.")
    expected = _smoothed(logits, targets, smoothing, ignore_index)
    wrong = [
        (_smoothed(logits, targets, smoothing, ignore_index, spread="others"),
         mistake_hint("smoothing.over_other_classes")),
        (_smoothed(logits, targets, smoothing, ignore_index, spread="no_pad"),
         mistake_hint("smoothing.pad_column_excluded")),
        (_smoothed(logits, targets, smoothing, ignore_index, target_weight=smoothing),
         mistake_hint("smoothing.weights_swapped")),
        (_smoothed(logits, targets, smoothing, ignore_index, target_weight=1.0, uniform_weight=smoothing),
         mistake_hint("smoothing.target_not_discounted")),
        (_smoothed(logits, targets, smoothing, ignore_index, divide_by="none"),
         mistake_hint("smoothing.sum_not_mean")),
        (_smoothed(logits, targets, smoothing, ignore_index, divide_by="all"),
         mistake_hint("smoothing.mean_over_all_positions")),
        (_smoothed(logits, targets, smoothing, ignore_index, kept_only=False, divide_by="all"),
         mistake_hint("smoothing.ignored_positions_counted")),
        (_smoothed(logits, targets, smoothing, ignore_index, kept_only=False, divide_by="none"),
         mistake_hint("smoothing.ignored_positions_counted")),
    ]
    if ignore_index != 0:
        wrong.append((_smoothed(logits, targets, smoothing, 0), mistake_hint("smoothing.ignore_index_hardcoded")))
    expect_close(got, expected, f"label_smoothed_cross_entropy ({what})", first_matching_hint(got, wrong))


def check_label_smoothed_cross_entropy(label_smoothed_cross_entropy) -> None:
    fn = label_smoothed_cross_entropy
    generator = torch.Generator().manual_seed(10)
    logits = torch.randn(6, 5, generator=generator) * 2                       # (N=6, V=5)
    targets = torch.tensor([2, 0, 4, 1, 0, 3])                                # positions 1 and 4 are padding
    _loss_case(fn, logits, targets, 0.1, 0, "smoothing=0.1, targets 0 ignored")
    got = run("label_smoothed_cross_entropy", fn, logits, targets)
    expect_type(got, torch.Tensor, "label_smoothed_cross_entropy(logits, targets)")
    expect_close(got, _smoothed(logits, targets, 0.1, 0), "label_smoothed_cross_entropy(logits, targets) with "
                 "the defaults", "the defaults are smoothing=0.1, ignore_index=0.")
    with argument("label_smoothed_cross_entropy.smoothing"):
        _loss_case(fn, logits, targets, 0.3, 0, "smoothing=0.3, targets 0 ignored")
        got = run("label_smoothed_cross_entropy", fn, logits, targets, 0.0, 0)
        expect_close(got, F.cross_entropy(logits, targets, ignore_index=0), "label_smoothed_cross_entropy with "
                     "smoothing=0 (plain cross-entropy)", "with smoothing=0 only the -log p[target] term is left.")
    with argument("label_smoothed_cross_entropy.ignore_index"):
        # ignore_index 4: target 0 is now a real class and the two positions whose target is 4 are left out
        _loss_case(fn, logits, targets, 0.1, 4, "smoothing=0.1, ignore_index=4")
    # the gradient reaches the logits (the training loop calls backward on the loss)
    leaf = logits.clone().requires_grad_(True)
    loss = run("label_smoothed_cross_entropy", fn, leaf, targets, 0.1, 0)
    if not isinstance(loss, torch.Tensor) or not loss.requires_grad:
        fail("label_smoothed_cross_entropy's result carries no gradient back to the logits.",
             mistake_hint("smoothing.detached"))
    loss.backward()
    if leaf.grad is None or leaf.grad[1].abs().max() > 0 or leaf.grad[4].abs().max() > 0:
        fail("the gradient of the loss reaches the logits of padded positions (targets 1 and 4 are 0).",
             mistake_hint("smoothing.ignored_positions_counted"))
    with edge_case("label_smoothed_cross_entropy.bad_smoothing"):
        for smoothing in (-0.1, 1.0, 1.5):
            expect_value_error("label_smoothed_cross_entropy", lambda: fn(logits, targets, smoothing, 0),
                               f"label_smoothed_cross_entropy with smoothing={smoothing} should raise ValueError "
                               f"(smoothing lies in [0, 1))",
                               "check `0 <= smoothing < 1` first and raise ValueError otherwise.")
    passed("label_smoothed_cross_entropy", "(mass over all V classes, padding left out, ignore_index other "
                                           "than 0, smoothing=0, smoothing outside [0, 1))")


# ---------------------------------------------------------------------------------------------- the schedule

def check_noam_lr(noam_lr) -> None:
    # d_model 256 (256 ** -0.5 = 1/16), warm-up 4 (4 ** -1.5 = 1/8): lr(s) = factor / 16 * min(1 / sqrt(s), s / 8)
    try:
        at_zero = noam_lr(0, 256, 4)
    except NotImplementedError:
        run("noam_lr", noam_lr, 0, 256, 4)
    except ZeroDivisionError as error:
        fail("noam_lr(0, d_model=256, warmup_steps=4) divided by zero.",
             mistake_hint("noam.step_zero"), cause=error)
    else:
        if isinstance(at_zero, (int, float)) and (at_zero == 0 or math.isinf(at_zero) or math.isnan(at_zero)):
            fail(f"noam_lr(0, d_model=256, warmup_steps=4) should equal noam_lr(1, ...) = 1/128, got {at_zero}.",
                 mistake_hint("noam.step_zero"))
    cases = [  # (step, d_model, warmup_steps, factor, expected)
        (0, 256, 4, 1.0, 1 / 16 * 1 / 8),               # step 0 counts as step 1: min(1, 1/8) = 1/8
        (1, 256, 4, 1.0, 1 / 16 * 1 / 8),
        (2, 256, 4, 1.0, 1 / 16 * 2 / 8),               # linear rise: min(0.707, 1/4)
        (4, 256, 4, 1.0, 1 / 16 * 1 / 2),               # the peak at s = warmup_steps: both terms are 1/2
        (16, 256, 4, 1.0, 1 / 16 * 1 / 4),              # decay as 1 / sqrt(s): 4 times the step, half the rate
        (64, 256, 4, 1.0, 1 / 16 * 1 / 8),
        (4, 256, 4, 2.5, 2.5 / 16 * 1 / 2),             # factor multiplies everything
        (100, 16, 1, 1.0, 1 / 4 * 1 / 10),              # warmup_steps = 1: pure 1 / sqrt(s) from the start
        (3, 16, 100, 1.0, 1 / 4 * 3 / 1000),            # deep in the warm-up: s / warmup ** 1.5
    ]
    for step, d_model, warmup, factor, expected in cases:
        if factor == 1.0:
            _noam_case(noam_lr, step, d_model, warmup, factor, expected)
        else:
            with argument("noam_lr.factor"):
                _noam_case(noam_lr, step, d_model, warmup, factor, expected)
    # the peak sits at warmup_steps
    rates = [run("noam_lr", noam_lr, step, 64, 10) for step in range(0, 41)]
    if max(range(41), key=lambda step: rates[step]) != 10:
        fail("with warmup_steps=10 the rate should peak at step 10.",
             mistake_hint("noam.min_max_swapped"))
    with edge_case("noam_lr.bad_warmup"):
        for warmup in (0, -3):
            expect_value_error("noam_lr", lambda: noam_lr(5, 64, warmup),
                               f"noam_lr with warmup_steps={warmup} should raise ValueError",
                               "check `warmup_steps >= 1` first and raise ValueError otherwise.")
    passed("noam_lr", "(step 0, linear rise, peak at warmup_steps, 1/sqrt decay, factor, warmup_steps < 1)")


def _noam_case(noam_lr, step, d_model, warmup, factor, expected) -> None:
    got = run("noam_lr", noam_lr, step, d_model, warmup, factor)
    if not isinstance(got, (int, float)) or isinstance(got, bool):
        fail(f"noam_lr should return a float, got {type(got).__name__}.",
             "compute with Python numbers (or return float(...)).")
    if isclose(got, expected, FORMULA_FLOAT64):
        return
    s = max(step, 1)
    raw = min(s ** -0.5, s * warmup ** -1.5)
    hint = None
    if isclose(got, factor * d_model ** -0.5 * max(s ** -0.5, s * warmup ** -1.5), FORMULA_FLOAT64):
        hint = mistake_hint("noam.min_max_swapped")
    elif isclose(got, factor * raw, FORMULA_FLOAT64):
        hint = mistake_hint("noam.no_d_model_scale")
    elif factor != 1 and isclose(got, d_model ** -0.5 * raw, FORMULA_FLOAT64):
        hint = mistake_hint("noam.factor_ignored")
    fail(f"noam_lr({step}, d_model={d_model}, warmup_steps={warmup}, factor={factor}) should be "
         f"{expected:.6g}, got {got}.", hint)

