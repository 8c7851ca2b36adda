"""Public self-checks of notebook 07's train_one_epoch and evaluate: correct answers pass, typical mistakes get their
HINT."""
from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

import solutions
from coursekit.checks.classifier import training as public
from coursekit.checks.toolkit import CheckFailed
from coursekit.mistakes import MISTAKES


def hint_of(check, obj):
    with pytest.raises(CheckFailed) as info:
        check(obj)
    return str(info.value)


# ------------------------------------------------------------------------------------------ train_one_epoch
def trainer(*, softmax=False, zero=True, train=True, result="mean", reduction="mean", step=True):
    def train_one_epoch(model, loader, optimizer, device):
        if train:
            model.train()
        losses = []
        for ids, labels in loader:
            if zero:
                optimizer.zero_grad()
            logits = model(ids.to(device))
            loss = F.cross_entropy(logits.softmax(-1) if softmax else logits, labels.to(device), reduction=reduction)
            loss.backward()
            if step:
                optimizer.step()
            losses.append(loss.item())
        return {"mean": sum(losses) / len(losses), "sum": sum(losses), "tensor": torch.tensor(losses).mean()}[result]
    return train_one_epoch


@pytest.mark.parametrize("fn", [solutions.train_one_epoch, trainer()])
def test_train_passes(fn):
    public.check_train_one_epoch(fn)


@pytest.mark.parametrize("options, fragment", [
    (dict(softmax=True), MISTAKES["training.softmax_before_loss"].text),
    (dict(zero=False), "zero_grad() for every batch"),
    (dict(train=False), "model.train()"),
    (dict(result="sum"), "MEAN of the batch losses"),
    (dict(reduction="sum"), MISTAKES["training.loss_summed"].text),
    (dict(result="tensor"), "Python float"),
    (dict(step=False), "step once per batch"),
])
def test_train_hints(options, fragment):
    assert fragment in hint_of(public.check_train_one_epoch, trainer(**options))


# ------------------------------------------------------------------------------------------ evaluate
def evaluator(*, eval_mode=True, no_grad=True, result="fraction"):
    def evaluate(model, loader, device):
        if eval_mode:
            model.eval()
        correct, total, accuracies = 0, 0, []
        with torch.set_grad_enabled(not no_grad):
            for ids, labels in loader:
                hit = model(ids.to(device)).argmax(-1) == labels.to(device)
                correct, total = correct + int(hit.sum()), total + len(labels)
                accuracies.append(hit.float().mean().item())
        return {"fraction": correct / total, "percent": 100.0 * correct / total, "count": correct,
                "batch_mean": sum(accuracies) / len(accuracies), "per_batch": correct / len(accuracies),
                "error": 1 - correct / total}[result]
    return evaluate


@pytest.mark.parametrize("fn", [solutions.evaluate, evaluator()])
def test_evaluate_passes(fn):
    public.check_evaluate(fn)


@pytest.mark.parametrize("options, fragment", [
    (dict(eval_mode=False), "model.eval()"),
    (dict(no_grad=False), "torch.no_grad()"),
    (dict(result="percent"), MISTAKES["evaluate.percentage"].text),
    (dict(result="count"), "divide the number of correct"),
    (dict(result="batch_mean"), "ALL examples"),
    (dict(result="batch_mean"), MISTAKES["evaluate.mean_of_batches"].text),
    (dict(result="count"), MISTAKES["evaluate.count"].text),
    (dict(result="per_batch"), MISTAKES["evaluate.divides_by_batches"].text),
    (dict(result="error"), MISTAKES["evaluate.error_rate"].text),
    (dict(eval_mode=False), MISTAKES["evaluate.no_eval_mode"].text),
    (dict(no_grad=False), MISTAKES["evaluate.grad_enabled"].text),
])
def test_evaluate_hints(options, fragment):
    assert fragment in hint_of(public.check_evaluate, evaluator(**options))
