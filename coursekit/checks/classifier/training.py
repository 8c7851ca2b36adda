"""Public self-checks of notebook 07's training loop: train_one_epoch and evaluate.

Small fixed examples whose answers are worked out here by simple means (a NumPy cross-entropy, a toy model whose
predictions are known), plus a HINT for each likely mistake.
"""
from __future__ import annotations

import math

import numpy as np
import torch
import torch.nn as nn

from coursekit.checks.toolkit import expect_type, fail, mistake_hint, passed, run
from coursekit.tolerance import ACCURACY_ATOL, CPU_FLOAT32, EPOCH_LOSS, LOSS_DECREASE

__all__ = ["check_train_one_epoch", "check_evaluate"]


# ---------------------------------------------------------------------------------------------------- training
class _ToyModel(nn.Module):
    """logits = mean over positions of a learnable table row per token id: (B, T) -> (B, 5)."""

    def __init__(self):
        super().__init__()
        table = torch.arange(6 * 5, dtype=torch.float32).reshape(6, 5)
        self.table = nn.Parameter(torch.sin(table))  # (V=6, C=5), fixed non-trivial values
        self.modes: list[tuple[bool, bool]] = []

    def forward(self, ids):
        self.modes.append((self.training, torch.is_grad_enabled()))
        return self.table[ids].mean(dim=1)  # (B, T, C) -> (B, C)


class _SpySGD(torch.optim.SGD):
    """SGD that remembers the gradient it saw at each step."""

    def __init__(self, params, lr):
        super().__init__(params, lr=lr)
        self.seen: list[torch.Tensor | None] = []

    def step(self, closure=None):
        grad = self.param_groups[0]["params"][0].grad
        self.seen.append(None if grad is None else grad.detach().clone())
        return super().step(closure)


def _loss_close(a: float, b: float) -> bool:
    """An epoch's mean loss: float32 batch losses, added up in another order than here."""
    return math.isclose(a, b, rel_tol=EPOCH_LOSS["rtol"], abs_tol=EPOCH_LOSS["atol"])


def _numpy_cross_entropy(logits: np.ndarray, labels: np.ndarray) -> float:
    shifted = logits - logits.max(axis=1, keepdims=True)
    log_probs = shifted - np.log(np.exp(shifted).sum(axis=1, keepdims=True))
    return float(-log_probs[np.arange(len(labels)), labels].mean())


def check_train_one_epoch(train_one_epoch) -> None:
    ids = torch.tensor([[1, 2, 3], [4, 5, 0], [2, 2, 1], [5, 3, 4]])  # (B=4, T=3)
    labels = torch.tensor([0, 3, 1, 4])  # (B,)
    loader = [(ids, labels)] * 3  # the same batch three times
    model = _ToyModel().eval()  # handed over in eval mode: your function must switch to training mode
    optimizer = _SpySGD(model.parameters(), lr=0.0)  # lr 0: the weights stay put, every batch has the same loss
    value = run("train_one_epoch", train_one_epoch, model, loader, optimizer, torch.device("cpu"))
    if isinstance(value, torch.Tensor) and value.numel() == 1:
        fail("train_one_epoch returned a tensor.", "return a Python float: collect `loss.item()` for each batch.")
    expect_type(value, (float, int), "train_one_epoch(...)", "return the mean of the batch losses as a float.")
    if len(model.modes) != 3:
        fail(f"the model ran {len(model.modes)} times for a loader of 3 batches.", "call the model once per batch.")
    if not all(training for training, _ in model.modes):
        fail("the model ran in evaluation mode.", mistake_hint("training.no_train_mode"))
    if len(optimizer.seen) != 3:
        fail(f"optimizer.step() ran {len(optimizer.seen)} times for 3 batches.", "step once per batch.")
    if any(g is None or not torch.count_nonzero(g) for g in optimizer.seen):
        fail("optimizer.step() saw no gradient.", mistake_hint("training.no_step"))
    if not all(torch.allclose(g, optimizer.seen[0], **CPU_FLOAT32) for g in optimizer.seen):
        fail("the gradient grows from batch to batch although every batch is the same.",
             mistake_hint("training.no_zero_grad"))

    logits = torch.sin(torch.arange(30.0).reshape(6, 5)).numpy()[ids.numpy()].mean(axis=1)  # (B, C)
    expected = _numpy_cross_entropy(logits, labels.numpy())
    if not _loss_close(float(value), expected):
        probs = np.exp(logits) / np.exp(logits).sum(axis=1, keepdims=True)
        candidates = {
            mistake_hint("training.softmax_before_loss"):
                _numpy_cross_entropy(probs, labels.numpy()),
            mistake_hint("training.nll_on_logits"): float(-logits[np.arange(4), labels.numpy()].mean()),
            mistake_hint("training.loss_summed"): 4 * expected,
            mistake_hint("training.returns_sum"): 3 * expected,
        }
        hint = next((h for h, v in candidates.items() if _loss_close(float(value), v)), None)
        fail(f"train_one_epoch returned {float(value):.5f}; the mean cross-entropy of these batches is "
             f"{expected:.5f}.", hint)

    # with a real learning rate the loss must go down on a batch seen again and again
    model = _ToyModel()
    optimizer = torch.optim.SGD(model.parameters(), lr=1.0)
    losses = [float(run("train_one_epoch", train_one_epoch, model, [(ids, labels)], optimizer, "cpu"))
              for _ in range(5)]
    if not losses[-1] < losses[0] - LOSS_DECREASE:
        fail(f"the loss does not go down over 5 epochs on one batch: {[round(v, 4) for v in losses]}.",
             mistake_hint("training.no_step"))
    passed("train_one_epoch")


# ---------------------------------------------------------------------------------------------------- evaluation
class _KnownModel(nn.Module):
    """Predicts class (first token id) % 5 in eval mode; in training mode it predicts the next class instead."""

    def __init__(self):
        super().__init__()
        self.dummy = nn.Parameter(torch.zeros(1))
        self.modes: list[tuple[bool, bool]] = []

    def forward(self, ids):
        self.modes.append((self.training, torch.is_grad_enabled()))
        classes = (ids[:, 0] + int(self.training)) % 5  # (B,)
        return 3.0 * nn.functional.one_hot(classes, 5).float() + self.dummy  # (B, 5)


def check_evaluate(evaluate) -> None:
    model = _KnownModel().train()  # handed over in training mode: your function must switch to eval mode
    # batches of 4, 4 and 2 reviews; the model is right on 4, 2 and 1 of them: 7 of 10 overall
    loader = [
        (torch.tensor([[0, 9], [1, 9], [2, 9], [3, 9]]), torch.tensor([0, 1, 2, 3])),
        (torch.tensor([[4, 9], [0, 9], [1, 9], [2, 9]]), torch.tensor([4, 0, 0, 0])),
        (torch.tensor([[3, 9], [4, 9]]), torch.tensor([3, 1])),
    ]
    value = run("evaluate", evaluate, model, loader, torch.device("cpu"))
    if isinstance(value, torch.Tensor) and value.numel() == 1:
        fail("evaluate returned a tensor.", "return a Python float (e.g. correct / total).")
    expect_type(value, (float, int), "evaluate(...)", "return the accuracy as a float between 0 and 1.")
    if any(training for training, _ in model.modes):
        fail("the model ran in training mode.", mistake_hint("evaluate.no_eval_mode"))
    if any(grad for _, grad in model.modes):
        fail("gradients were recorded during evaluation.", mistake_hint("evaluate.grad_enabled"))
    if not math.isclose(float(value), 0.7, abs_tol=ACCURACY_ATOL):
        hints = {70.0: mistake_hint("evaluate.percentage"),
                 7.0: mistake_hint("evaluate.count"),
                 7 / 3: mistake_hint("evaluate.divides_by_batches"),
                 (1 + 0.5 + 0.5) / 3: mistake_hint("evaluate.mean_of_batches"),
                 0.3: mistake_hint("evaluate.error_rate")}
        hint = next((h for v, h in hints.items() if math.isclose(float(value), v, abs_tol=ACCURACY_ATOL)), None)
        fail(f"evaluate returned {float(value):.4f}; the model is right on 7 of the 10 examples (0.7).", hint)
    passed("evaluate")
