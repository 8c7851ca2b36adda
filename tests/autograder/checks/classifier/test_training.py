"""The hidden checks of notebook 07's train_one_epoch and evaluate: the reference and differently written correct
answers pass; every diagnosed mistake fails with its diagnosis named; forged forward-call records never make a check
pass; only public objects are lent to the kernel.

The checks run on `RemoteObject`s: called with ordinary objects here, `@hidden_check` hands them in to the in-process
kernel side, so every call goes through the same JSON round trip as in grading.
"""
from __future__ import annotations

import json

import pytest
import torch
import torch.nn.functional as F

import solutions
import variants as V
from autograder.checks.classifier import training as training


fails_with = V.fails_with  # the shared helper: it also records each wrong answer for naming.py


# ------------------------------------------------------------------------------------------ train_one_epoch
def train_variant(model, loader, optimizer, device):
    """Correct, written differently: zero_grad after the step, log_softmax + nll_loss, a tensor running total."""
    model.train()
    total, count = torch.zeros(()), 0
    for ids, labels in loader:
        logits = model(ids.to(device))
        loss = F.nll_loss(F.log_softmax(logits, dim=-1), labels.to(device))
        loss.backward()
        optimizer.step()
        model.zero_grad(set_to_none=True)
        total += loss.detach().cpu()
        count += 1
    return (total / count).item()


def make_trainer(*, loss_fn=lambda logits, y: F.cross_entropy(logits, y), train=True, zero=True, step=True,
                 zero_late=False, result="mean", no_grad=False):
    def train_one_epoch(model, loader, optimizer, device):
        if train:
            model.train()
        losses = []
        for ids, labels in loader:
            if zero:
                optimizer.zero_grad()
            if no_grad:
                with torch.no_grad():
                    model(ids.to(device))
            loss = loss_fn(model(ids.to(device)), labels.to(device))
            loss.backward()
            if zero_late:
                optimizer.zero_grad()
            if step:
                optimizer.step()
            losses.append(loss.item())
        return {"mean": sum(losses) / len(losses), "sum": sum(losses), "last": losses[-1],
                "tensor": torch.tensor(losses).mean().numpy(), "string": "0.5"}[result]
    return train_one_epoch


@pytest.mark.parametrize("fn", [solutions.train_one_epoch, train_variant])
def test_train_one_epoch_accepts_correct_answers(fn):
    training.check_train_one_epoch(fn)


@pytest.mark.parametrize("options, diagnosis", [
    (dict(zero=False), "training.no_zero_grad"),
    (dict(loss_fn=lambda logits, y: F.cross_entropy(logits.softmax(-1), y)), "training.softmax_before_loss"),
    (dict(loss_fn=lambda logits, y: F.nll_loss(logits, y)), "training.nll_on_logits"),
    (dict(loss_fn=lambda logits, y: F.cross_entropy(logits, y, reduction="sum")), "training.loss_summed"),
    (dict(step=False), "training.no_step"),
    (dict(zero_late=True), "training.no_step"),
    (dict(result="sum"), "training.returns_sum"),
    (dict(result="last"), "training.returns_last"),
])
def test_train_one_epoch_names_the_mistake(options, diagnosis):
    fails_with(training.check_train_one_epoch, make_trainer(**options), "likely mistake", diagnosis)


def test_train_one_epoch_mode_and_type_messages():
    fails_with(training.check_train_one_epoch, make_trainer(train=False), "training.no_train_mode")
    training.check_train_one_epoch(make_trainer(no_grad=True))  # an extra forward pass under no_grad does no harm

    def no_grad_training(model, loader, optimizer, device):
        model.train()
        with torch.no_grad():
            losses = [F.cross_entropy(model(ids.to(device)), y.to(device)).item() for ids, y in loader]
        return sum(losses) / len(losses)
    fails_with(training.check_train_one_epoch, no_grad_training, "every batch with gradients enabled")
    fails_with(training.check_train_one_epoch, make_trainer(result="string"), "Python float")
    training.check_train_one_epoch(make_trainer(result="tensor"))  # a NumPy 0-d value is a number: accepted


def test_train_one_epoch_and_evaluate_stubs_and_non_functions():
    def train_stub(model, loader, optimizer, device):
        raise NotImplementedError()

    def evaluate_stub(model, loader, device):
        raise NotImplementedError()
    fails_with(training.check_train_one_epoch, train_stub, "not implemented yet", "NotImplementedError")
    fails_with(training.check_evaluate, evaluate_stub, "not implemented yet", "NotImplementedError")
    fails_with(training.check_train_one_epoch, 3, "must be a function")
    fails_with(training.check_evaluate, "evaluate", "must be a function")


# ------------------------------------------------------------------------------------------ evaluate
def evaluate_variant(model, loader, device):
    model.eval()
    hits = []
    with torch.inference_mode():
        for ids, labels in loader:
            hits.append(model(ids.to(device)).softmax(-1).argmax(-1).eq(labels.to(device)).cpu())
    return torch.cat(hits).float().mean().item()


def make_evaluator(*, eval_mode=True, no_grad=True, result="fraction"):
    def evaluate(model, loader, device):
        if eval_mode:
            model.eval()
        correct, total, accuracies = 0, 0, []
        with torch.set_grad_enabled(not no_grad):
            for ids, labels in loader:
                hit = (model(ids.to(device)).argmax(-1) == labels.to(device))
                correct, total = correct + int(hit.sum()), total + len(labels)
                accuracies.append(hit.float().mean().item())
        return {"fraction": correct / total, "percent": 100 * correct / total, "count": correct,
                "batch_mean": sum(accuracies) / len(accuracies), "error": 1 - correct / total,
                "per_batch_count": correct / len(accuracies)}[result]
    return evaluate


@pytest.mark.parametrize("fn", [solutions.evaluate, evaluate_variant])
def test_evaluate_accepts_correct_answers(fn):
    training.check_evaluate(fn)


@pytest.mark.parametrize("options, diagnosis", [
    (dict(eval_mode=False), "evaluate.no_eval_mode"),
    (dict(no_grad=False), "evaluate.grad_enabled"),
    (dict(result="percent"), "evaluate.percentage"),
    (dict(result="count"), "evaluate.count"),
    (dict(result="batch_mean"), "evaluate.mean_of_batches"),
    (dict(result="error"), "evaluate.error_rate"),
    (dict(result="per_batch_count"), "evaluate.divides_by_batches"),
])
def test_evaluate_names_the_mistake(options, diagnosis):
    fails_with(training.check_evaluate, make_evaluator(**options), diagnosis)


# ------------------------------------------------------------------------------------------ forged records
def train_in_eval_mode_forging_records(model, loader, optimizer, device):
    """Trains, but in eval mode (forgot model.train()), then rewrites the model's record of its forward calls."""
    losses = []
    for ids, labels in loader:
        loss = F.cross_entropy(model(ids.to(device)), labels.to(device))
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
    model.calls[:] = [(True, True)] * len(model.calls)
    return sum(losses) / len(losses)


def no_training_forging_records(model, loader, optimizer, device):
    """Does no work: forges a training record for every batch and returns a loss that decreases."""
    model.calls.extend([(True, True)] * len(loader))
    return 3.0 / len(model.calls)


def test_forged_forward_records_do_not_pass_train_one_epoch():
    fails_with(training.check_train_one_epoch, train_in_eval_mode_forging_records, "weights differ",
               "likely mistake", "training.no_train_mode")
    fails_with(training.check_train_one_epoch, no_training_forging_records, "weights differ")

    def cleared(model, loader, optimizer, device):  # correct training, record list emptied: still a failure
        value = solutions.train_one_epoch(model, loader, optimizer, device)
        model.calls.clear()
        return value
    fails_with(training.check_train_one_epoch, cleared, "every batch with gradients enabled")


def test_forged_forward_records_do_not_pass_evaluate():
    def train_mode_forging(model, loader, device):  # forgot model.eval(), hides it in the record
        correct, total = 0, 0
        with torch.no_grad():
            for ids, labels in loader:
                correct += int((model(ids.to(device)).argmax(-1) == labels.to(device)).sum())
                total += len(labels)
        model.calls[:] = [(False, False)] * len(model.calls)
        return correct / total
    fails_with(training.check_evaluate, train_mode_forging, "wrong accuracy", "likely mistake", "evaluate.no_eval_mode")


def test_train_and_evaluate_lend_only_public_objects(recorded):
    channel, (remote_fn,), _ = recorded(solutions.train_one_epoch)
    training.check_train_one_epoch(remote_fn)
    made = {r["target"]["new"] for r in channel.requests if "new" in r["target"]}
    assert made == {training.PROBE_MODEL, "torch.optim.SGD"}
    assert "solutions" not in json.dumps(channel.requests)

    channel, (remote_fn,), _ = recorded(solutions.evaluate)
    training.check_evaluate(remote_fn)
    assert {r["target"]["new"] for r in channel.requests if "new" in r["target"]} == {training.PROBE_MODEL}
    assert "solutions" not in json.dumps(channel.requests)
