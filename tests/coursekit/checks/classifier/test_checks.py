"""Public self-checks of notebook 07's masked_mean_pool and TransformerClassifier: correct answers pass, typical
mistakes get their HINT (train_one_epoch and evaluate: `test_training.py`)."""
from __future__ import annotations

import pytest
import torch
import torch.nn as nn

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
