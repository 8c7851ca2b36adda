"""Public self-checks of notebook 07: correct answers pass, typical mistakes get their HINT."""
from __future__ import annotations

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

import solutions
from coursekit.checks.classifier import checks as public
from coursekit.checks.toolkit import CheckFailed
from coursekit.mistakes import MISTAKES
from solutions.encoder import Encoder


def hint_of(check, obj):
    with pytest.raises(CheckFailed) as info:
        check(obj)
    return str(info.value)


# ------------------------------------------------------------------------------------------ masked_mean_pool
def pool_loop(x, mask):
    return torch.stack([x[b][mask[b]].mean(0) for b in range(len(x))])


@pytest.mark.parametrize("pool", [solutions.masked_mean_pool, pool_loop])
def test_pool_passes(pool, capsys):
    public.check_masked_mean_pool(pool)
    assert "masked_mean_pool" in capsys.readouterr().out


@pytest.mark.parametrize("pool, fragment", [
    (lambda x, m: x.mean(1), MISTAKES["pool.includes_padding"].text),
    (lambda x, m: (x * m[..., None]).sum(1) / x.shape[1], MISTAKES["pool.divides_by_T"].text),
    (lambda x, m: (x * m[..., None]).sum(1), MISTAKES["pool.no_division"].text),
    (lambda x, m: (x * (~m)[..., None]).sum(1) / (~m).sum(1, keepdim=True), MISTAKES["pool.mask_inverted"].text),
    (lambda x, m: x.mean(2), "shape (2, 2)"),
])
def test_pool_hints(pool, fragment):
    assert fragment in hint_of(public.check_masked_mean_pool, pool)


def test_pool_stub():
    def stub(x, mask):
        raise NotImplementedError()
    assert "not implemented" in hint_of(public.check_masked_mean_pool, stub)


# ------------------------------------------------------------------------------------------ TransformerClassifier
class Classifier(nn.Module):
    def __init__(self, vocab_size, num_classes=5, d_model=64, num_heads=4, d_ff=128, num_layers=2, max_len=256,
                 dropout=0.1, pad_id=0):
        super().__init__()
        self.pad_id = pad_id
        self.encoder = Encoder(vocab_size, d_model, num_heads, d_ff, num_layers, max_len, dropout)
        self.classifier = nn.Linear(d_model, num_classes)

    def encode(self, ids):
        return self.encoder(ids, (ids != self.pad_id)[:, None, None, :])

    def forward(self, ids):
        return self.classifier(solutions.masked_mean_pool(self.encode(ids), ids != self.pad_id))


class Probabilities(Classifier):
    def forward(self, ids):
        return super().forward(ids).softmax(-1)


class LogProbabilities(Classifier):
    def forward(self, ids):
        return super().forward(ids).log_softmax(-1)


class PlainMean(Classifier):
    def forward(self, ids):
        return self.classifier(self.encode(ids).mean(1))


class HardCodedPad(Classifier):
    def forward(self, ids):
        x = self.encoder(ids, (ids != 0)[:, None, None, :])
        return self.classifier(solutions.masked_mean_pool(x, ids != 0))


class FixedDropout(Classifier):
    """Ignores its dropout argument: the encoder always gets 0.1."""

    def __init__(self, vocab_size, num_classes=5, d_model=64, num_heads=4, d_ff=128, num_layers=2, max_len=256,
                 dropout=0.1, pad_id=0):
        super().__init__(vocab_size, num_classes, d_model, num_heads, d_ff, num_layers, max_len, 0.1, pad_id)


class NoDropout(Classifier):
    """Ignores its dropout argument: the encoder always gets 0.0."""

    def __init__(self, vocab_size, num_classes=5, d_model=64, num_heads=4, d_ff=128, num_layers=2, max_len=256,
                 dropout=0.1, pad_id=0):
        super().__init__(vocab_size, num_classes, d_model, num_heads, d_ff, num_layers, max_len, 0.0, pad_id)


class Renamed(Classifier):
    def __init__(self, vocab_size, **kwargs):
        super().__init__(vocab_size, **kwargs)
        self.head = self.classifier
        del self.classifier

    def forward(self, ids):
        return self.head(solutions.masked_mean_pool(self.encode(ids), ids != self.pad_id))


@pytest.mark.parametrize("cls", [solutions.TransformerClassifier, Classifier])
def test_classifier_passes(cls):
    public.check_transformer_classifier(cls)


@pytest.mark.parametrize("cls, fragment", [
    (Probabilities, "probabilities"),
    (LogProbabilities, "log-probabilities"),
    (PlainMean, "padding must change nothing"),
    (HardCodedPad, "pad_id=7"),
    (HardCodedPad, "an argument the exercise states"),
    (FixedDropout, "dropout=0.0"),
    (FixedDropout, "an argument the exercise states"),
    (NoDropout, "dropout=0.5"),
    (Renamed, "self.classifier"),
])
def test_classifier_hints(cls, fragment):
    assert fragment in hint_of(public.check_transformer_classifier, cls)


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
