"""The public checks of notebook 10's loss and schedule pass the reference and answers written differently, and name
the likely mistake for wrong answers built here from the reference with one change each."""
from __future__ import annotations

import math

import torch
import torch.nn.functional as F

import solutions
import variants_translation as X
from coursekit.checks.translation import loss as checks
from part_suite import public_suite

APIS = ("label_smoothed_cross_entropy", "noam_lr")


# ------------------------------------------------------------------------------------------------- the loss

def loss(logits, targets, smoothing=0.1, ignore_index=0, mistake=None):
    """The reference's computation with one mistake switched on."""
    if not 0.0 <= smoothing < 1.0 and mistake != "no_value_error":
        raise ValueError(smoothing)
    if mistake == "ignore_zero":
        ignore_index = 0
    log_p = F.log_softmax(logits, dim=-1)                                     # (N, V)
    keep = targets != ignore_index                                            # (N,)
    nll = -log_p.gather(-1, targets.masked_fill(~keep, 0)[:, None]).squeeze(-1)
    uniform = -log_p.mean(dim=-1)
    if mistake == "over_other_classes":
        uniform = (-log_p.sum(-1) - nll) / (log_p.size(-1) - 1)
    if mistake == "pad_column_excluded":                                     # The Annotated Transformer's
        uniform = (-log_p.sum(-1) - nll + log_p[:, ignore_index]) / (log_p.size(-1) - 2)
    if mistake == "weights_swapped":
        per_position = smoothing * nll + (1 - smoothing) * uniform
    elif mistake == "target_not_discounted":
        per_position = nll + smoothing * uniform
    else:
        per_position = (1.0 - smoothing) * nll + smoothing * uniform
    if mistake == "ignored_positions_counted":
        return per_position.mean()
    if mistake == "mean_over_all_positions":
        return per_position[keep].sum() / len(targets)
    if mistake == "sum_not_mean":
        return per_position[keep].sum()
    if mistake == "python_float":
        return per_position[keep].mean().item()
    if mistake == "detached":
        return per_position[keep].mean().detach()
    return per_position[keep].mean()


def loss_with_torch(logits, targets, smoothing=0.1, ignore_index=0):
    if not 0 <= smoothing < 1:
        raise ValueError("smoothing must lie in [0, 1)")
    return F.cross_entropy(logits, targets, ignore_index=ignore_index, label_smoothing=smoothing)


def loss_with_a_target_distribution(logits, targets, smoothing=0.1, ignore_index=0):
    """Written differently: the smoothed target distribution made explicit, masked rows weighted 0."""
    if smoothing < 0 or smoothing >= 1:
        raise ValueError("smoothing must lie in [0, 1)")
    V = logits.size(-1)
    keep = (targets != ignore_index).float()
    q = torch.full_like(logits, smoothing / V)
    q.scatter_add_(1, targets.clamp(0, V - 1)[:, None], torch.full_like(logits[:, :1], 1 - smoothing))
    return -((q * logits.log_softmax(-1)).sum(-1) * keep).sum() / keep.sum()


# --------------------------------------------------------------------------------------------- the schedule

def noam(step, d_model, warmup_steps, factor=1.0, mistake=None):
    if warmup_steps < 1 and mistake != "no_value_error":
        raise ValueError(warmup_steps)
    s = step if mistake == "step_zero" else max(step, 1)
    pick = max if mistake == "min_max_swapped" else min
    scale = 1.0 if mistake == "no_d_model_scale" else d_model ** -0.5
    factor = 1.0 if mistake == "factor_ignored" else factor
    return factor * scale * pick(s ** -0.5, s * warmup_steps ** -1.5)


def noam_as_two_phases(step, d_model, warmup_steps, factor=1.0):
    """Written differently: the rise and the decay as two branches."""
    if warmup_steps < 1:
        raise ValueError("warmup_steps must be >= 1")
    step = max(step, 1)
    peak = factor * (d_model * warmup_steps) ** -0.5
    return peak * step / warmup_steps if step < warmup_steps else peak * math.sqrt(warmup_steps / step)


# ---------------------------------------------------------------------------------------------- the cases

CORRECT = {
    "label_smoothed_cross_entropy": [solutions.label_smoothed_cross_entropy, loss, loss_with_torch,
                                     loss_with_a_target_distribution],
    "noam_lr": [solutions.noam_lr, noam, noam_as_two_phases],
}


# (api name, wrong answer, catalogue id named in the hint, or None where the failure names no catalogue mistake)
WRONG = [
    ("label_smoothed_cross_entropy", X.variant(loss, "over_other_classes"), "smoothing.over_other_classes"),
    ("label_smoothed_cross_entropy", X.variant(loss, "ignored_positions_counted"),
     "smoothing.ignored_positions_counted"),
    ("label_smoothed_cross_entropy", X.variant(loss, "mean_over_all_positions"), "smoothing.mean_over_all_positions"),
    ("label_smoothed_cross_entropy", X.variant(loss, "sum_not_mean"), "smoothing.sum_not_mean"),
    ("label_smoothed_cross_entropy", X.variant(loss, "weights_swapped"), "smoothing.weights_swapped"),
    ("label_smoothed_cross_entropy", X.variant(loss, "pad_column_excluded"), "smoothing.pad_column_excluded"),
    ("label_smoothed_cross_entropy", X.variant(loss, "target_not_discounted"), "smoothing.target_not_discounted"),
    ("label_smoothed_cross_entropy", X.variant(loss, "ignore_zero"), "smoothing.ignore_index_hardcoded"),
    ("label_smoothed_cross_entropy", X.variant(loss, "python_float"), "smoothing.python_float"),
    ("label_smoothed_cross_entropy", X.variant(loss, "detached"), "smoothing.detached"),
    ("label_smoothed_cross_entropy", X.variant(loss, "no_value_error"), None),
    ("noam_lr", X.variant(noam, "step_zero"), "noam.step_zero"),
    ("noam_lr", X.variant(noam, "min_max_swapped"), "noam.min_max_swapped"),
    ("noam_lr", X.variant(noam, "no_d_model_scale"), "noam.no_d_model_scale"),
    ("noam_lr", X.variant(noam, "factor_ignored"), "noam.factor_ignored"),
    ("noam_lr", X.variant(noam, "no_value_error"), None),
]

EDGE_ONLY = [  # (api name, an answer right but for this stated edge case, criterion)
    ("label_smoothed_cross_entropy", X.variant(loss, "no_value_error"), "label_smoothed_cross_entropy.bad_smoothing"),
    ("noam_lr", X.variant(noam, "no_value_error"), "noam_lr.bad_warmup"),
]
ARGUMENT_ONLY = [  # (api name, an answer that ignores only this argument, criterion)
    ("label_smoothed_cross_entropy", X.ignoring(loss, smoothing=0.1), "label_smoothed_cross_entropy.smoothing"),
    ("label_smoothed_cross_entropy", X.ignoring(loss, ignore_index=0), "label_smoothed_cross_entropy.ignore_index"),
    ("noam_lr", X.ignoring(noam, factor=1.0), "noam_lr.factor"),
]

# the tests every part runs (tests/autograder/checks/part_suite.py), with this part's data
globals().update(public_suite(checks, APIS, correct=CORRECT, wrong=WRONG,
                              edge_only=EDGE_ONLY, edge_says=("should raise ValueError",), argument_only=ARGUMENT_ONLY))


def test_the_switches_off_are_the_reference():
    generator = torch.Generator().manual_seed(0)
    logits, targets = torch.randn(9, 6, generator=generator), torch.tensor([1, 0, 5, 2, 0, 3, 4, 0, 5])
    expected = solutions.label_smoothed_cross_entropy(logits, targets, 0.2, 5)
    assert torch.allclose(loss(logits, targets, 0.2, 5), expected)
    assert all(noam(s, 32, 7, 1.5) == solutions.noam_lr(s, 32, 7, 1.5) for s in range(40))
