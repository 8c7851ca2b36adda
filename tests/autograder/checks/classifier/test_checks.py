"""The hidden checks of notebook 07's masked_mean_pool and TransformerClassifier: the reference and differently
written correct answers pass; every diagnosed mistake fails with its diagnosis named; the known-mistake variants with
every switch off are the reference.

The checks run on `RemoteObject`s: called with ordinary objects here, `@hidden_check` hands them in to the in-process
kernel side, so every call goes through the same JSON round trip as in grading. (train_one_epoch and evaluate:
`test_training.py`; the trained model: `test_trained.py`.)
"""
from __future__ import annotations

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

import solutions
import variants as V
from autograder.checks.classifier import checks as checks
from autograder.checks.classifier import mistakes as M
from coursekit.criteria import CRITERIA
from solutions.attention import make_padding_mask
from solutions.encoder import Encoder


fails_with = V.fails_with  # the shared helper: it also records each wrong answer for naming.py


# ------------------------------------------------------------------------------------------ masked_mean_pool
def pool_where(x, mask):
    kept = torch.where(mask[..., None], x, torch.zeros_like(x))
    return kept.sum(1) / mask.sum(1, keepdim=True).to(x.dtype)


def pool_loop(x, mask):
    return torch.stack([x[b][mask[b]].mean(0) for b in range(x.shape[0])])


def pool_einsum(x, mask):
    weights = mask.float() / mask.float().sum(-1, keepdim=True)
    return torch.einsum("bt,btd->bd", weights, x)


@pytest.mark.parametrize("pool", [solutions.masked_mean_pool, pool_where, pool_loop, pool_einsum])
def test_masked_mean_pool_accepts_correct_answers(pool):
    checks.check_masked_mean_pool(pool)


@pytest.mark.parametrize("pool, diagnosis", [
    (lambda x, m: x.mean(1), "pool.includes_padding"),
    (lambda x, m: (x * m[..., None]).sum(1) / x.shape[1], "pool.divides_by_T"),
    (lambda x, m: (x * (~m)[..., None]).sum(1) / (~m).sum(1, keepdim=True).clamp(min=1), "pool.mask_inverted"),
    (lambda x, m: (x * m[..., None]).sum(1), "pool.no_division"),
    (lambda x, m: (x * m[..., None]).sum(1) / m.sum(), "pool.divides_by_batch_count"),
])
def test_masked_mean_pool_names_the_mistake(pool, diagnosis):
    fails_with(checks.check_masked_mean_pool, pool, "likely mistake", diagnosis)


def test_masked_mean_pool_shape_nan_inplace_and_stub():
    fails_with(checks.check_masked_mean_pool, lambda x, m: x.mean(2), "wrong shape", "expected shape (")
    fails_with(checks.check_masked_mean_pool, lambda x, m: x.sum(1) / 0 * 0, "NaN")
    fails_with(checks.check_masked_mean_pool, lambda x, m: x.mul_(m[..., None]).sum(1) / m.sum(1, keepdim=True),
               "in place", "pool.in_place")

    def stub(x, mask):
        raise NotImplementedError()
    fails_with(checks.check_masked_mean_pool, stub, "NotImplementedError")
    fails_with(checks.check_masked_mean_pool, 3, "must be a function")


# ------------------------------------------------------------------------------------------ TransformerClassifier
class Classifier(nn.Module):
    """A correct answer written differently: loop pooling, mask built by hand; `pool` and `head` swappable."""

    def __init__(self, vocab_size, num_classes=5, d_model=64, num_heads=4, d_ff=128, num_layers=2, max_len=256,
                 dropout=0.1, pad_id=0):
        super().__init__()
        self.pad_id = pad_id
        self.encoder = Encoder(vocab_size, d_model, num_heads, d_ff, num_layers, max_len, dropout)
        self.classifier = nn.Linear(d_model, num_classes)

    def mask(self, ids):
        return ids.ne(self.pad_id).unsqueeze(1).unsqueeze(2)  # (B, 1, 1, T)

    def pool(self, x, ids):
        keep = ids.ne(self.pad_id)
        return torch.stack([x[b, keep[b]].sum(0) / keep[b].sum() for b in range(len(ids))])

    def head(self, pooled):
        return self.classifier(pooled)

    def forward(self, ids):
        return self.head(self.pool(self.encoder(ids, self.mask(ids)), ids))


class IncludesPadding(Classifier):
    def pool(self, x, ids):
        return x.mean(1)


class NoEncoderMask(Classifier):
    def mask(self, ids):
        return None


class HardCodedPad(Classifier):
    def mask(self, ids):
        return make_padding_mask(ids, 0)

    def pool(self, x, ids):
        return solutions.masked_mean_pool(x, ids != 0)


class Softmaxed(Classifier):
    def head(self, pooled):
        return self.classifier(pooled).softmax(-1)


class LogSoftmaxed(Classifier):
    def head(self, pooled):
        return F.log_softmax(self.classifier(pooled), dim=-1)


class FirstToken(Classifier):
    def pool(self, x, ids):
        return x[:, 0]


class MaxPool(Classifier):
    def pool(self, x, ids):
        return x.masked_fill(~ids.ne(self.pad_id)[..., None], float("-inf")).max(1).values


class RenamedHead(Classifier):
    def __init__(self, vocab_size, num_classes=5, d_model=64, **kwargs):
        super().__init__(vocab_size, num_classes, d_model, **kwargs)
        del self.classifier
        self.fc = nn.Linear(d_model, num_classes)

    def head(self, pooled):
        return self.fc(pooled)


@pytest.mark.parametrize("cls", [solutions.TransformerClassifier, Classifier])
def test_transformer_classifier_accepts_correct_answers(cls):
    checks.check_transformer_classifier(cls)


@pytest.mark.parametrize("cls, diagnosis", [
    (IncludesPadding, "classifier.pool_includes_padding"),
    (NoEncoderMask, "classifier.encoder_no_mask"),
    (Softmaxed, "classifier.returns_probabilities"),
    (LogSoftmaxed, "classifier.returns_log_probabilities"),
    (FirstToken, "classifier.first_position"),
    (MaxPool, "classifier.max_pooling"),
])
def test_transformer_classifier_names_the_mistake(cls, diagnosis):
    fails_with(checks.check_transformer_classifier, cls, "likely mistake", diagnosis)


class FixedDropout(Classifier):
    """Ignores its dropout argument: the encoder always gets the default 0.1."""

    def __init__(self, vocab_size, num_classes=5, d_model=64, num_heads=4, d_ff=128, num_layers=2, max_len=256,
                 dropout=0.1, pad_id=0):
        super().__init__(vocab_size, num_classes, d_model, num_heads, d_ff, num_layers, max_len, 0.1, pad_id)


class NoDropout(Classifier):
    """Ignores its dropout argument: the encoder never drops anything."""

    def __init__(self, vocab_size, num_classes=5, d_model=64, num_heads=4, d_ff=128, num_layers=2, max_len=256,
                 dropout=0.1, pad_id=0):
        super().__init__(vocab_size, num_classes, d_model, num_heads, d_ff, num_layers, max_len, 0.0, pad_id)


class FixedMaxLen(Classifier):
    """Ignores its max_len argument: the core's shapes (the positional table of max_len rows) tell it."""

    def __init__(self, vocab_size, num_classes=5, d_model=64, num_heads=4, d_ff=128, num_layers=2, max_len=256,
                 dropout=0.1, pad_id=0):
        super().__init__(vocab_size, num_classes, d_model, num_heads, d_ff, num_layers, 256, dropout, pad_id)


def test_a_hard_coded_pad_id_keeps_most_of_the_points():
    message = V.fails_partially(checks.check_transformer_classifier, HardCodedPad, "TransformerClassifier.pad_id",
                                "pad_id=")
    assert "✓ " + CRITERIA["TransformerClassifier.dropout"].text in message
    with pytest.raises(AssertionError) as info:
        checks.check_transformer_classifier(HardCodedPad)
    assert info.value.mistake_id == "classifier.pad_id_hardcoded"
    assert info.value.fraction == pytest.approx(1 - 0.25 / 2)


@pytest.mark.parametrize("cls, fragment", [(FixedDropout, "dropout=0.0"), (NoDropout, "dropout=0.5")])
def test_an_ignored_dropout_keeps_most_of_the_points(cls, fragment):
    V.fails_partially(checks.check_transformer_classifier, cls, "TransformerClassifier.dropout", fragment)


def test_an_ignored_max_len_fails_the_core():
    V.fails_plainly(checks.check_transformer_classifier, FixedMaxLen, "wrong shape")


def test_transformer_classifier_structure_messages():
    fails_with(checks.check_transformer_classifier, RenamedHead, "classifier")
    fails_with(checks.check_transformer_classifier, lambda **kw: None, "class deriving from nn.Module")

    class Stub(nn.Module):
        def __init__(self, vocab_size, num_classes=5, d_model=64, num_heads=4, d_ff=128, num_layers=2,
                     max_len=256, dropout=0.1, pad_id=0):
            raise NotImplementedError()
    fails_with(checks.check_transformer_classifier, Stub, "NotImplementedError")


# ------------------------------------------------------------------------------------- the variants themselves
def test_the_variants_with_every_switch_off_are_the_reference():
    torch.manual_seed(0)
    x = torch.randn(3, 6, 4)
    mask = torch.tensor([[True] * 6, [True] * 2 + [False] * 4, [True] * 5 + [False]])
    assert torch.equal(M.pool(x, mask), solutions.masked_mean_pool(x, mask))
    for pad_id in (0, 3):
        model = solutions.TransformerClassifier(17, num_classes=4, d_model=8, num_heads=2, d_ff=12, num_layers=2,
                                                max_len=16, pad_id=pad_id).eval()
        ids = torch.randint(0, 17, (3, 7))
        ids[1, 4:] = pad_id
        with torch.no_grad():
            assert torch.equal(M.classifier(model, ids, pad_id), model(ids))
    counts = (7, 10, [1.0, 0.5, 0.5], 5)
    assert M.accuracy(*counts) == 0.7
    assert M.ids_of(M.pool) == ("pool.includes_padding", "pool.divides_by_T", "pool.mask_inverted",
                                "pool.no_division", "pool.divides_by_batch_count")
