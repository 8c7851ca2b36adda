"""Hidden checks of notebook 07's training loop: train_one_epoch and evaluate.

Both get a small public model (`coursekit.probe.models.BagOfEmbeddingsClassifier`) built in the kernel with weights
generated here; the same model with the same weights is trained/evaluated here with the reference. The verdict comes
from the returned loss/accuracy and the weights after training (read back with `.state()`); the model's record of
its forward calls only explains a failure (or adds one), it never passes. A wrong answer is diagnosed by running the
known mistakes of `mistakes.py` (`train_variant`, `accuracy`) on the same model, batches and counts.
"""
from __future__ import annotations

import math
import numbers

import numpy as np
import torch
import torch.nn as nn

from autograder.checks.classifier import mistakes as M
from autograder.checks.classifier.checks import fail_expected, padded_review_ids
from autograder.checks.kit import remote as _remote
from autograder.checks.kit.compare import from_table, values_close
from autograder.checks.kit.draws import generator as seeded_generator, pick
from autograder.checks.kit.inputs import reference
from autograder.checks.kit.remote import ProbeBroken, RemoteObject, StudentError, hidden_check
from autograder.checks.kit.toolkit import (
    call, expect_callable, grader_step, lend_model, seeded, start_check, type_name,
)
from coursekit.tolerance import ACCURACY_ATOL, EPOCH_LOSS, FLOAT64, TRAINING_RUN_LOOSER

# The model the grader lends to train_one_epoch / evaluate (a public class, built in the kernel and here).
PROBE_MODEL = "coursekit.probe.models.BagOfEmbeddingsClassifier"
PROBE_CONFIG = dict(vocab_size=29, num_classes=5, d_model=16, dropout=0.5)


# ---------------------------------------------------------------------------------------------------- helpers
def _as_number(name: str, value) -> float:
    if isinstance(value, torch.Tensor) and value.numel() == 1:
        value = value.item()  # a tensor holding one number
    elif isinstance(value, np.ndarray) and value.size == 1:
        value = value.item()
    elif isinstance(value, np.generic):
        value = value.item()
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        fail_expected(f"{name} must return a Python float.", "a float (use `.item()` on a 0-d tensor)",
                      type_name(value))
    value = float(value)
    if not math.isfinite(value):
        fail_expected(f"{name} returned a value that is not finite.", "a finite float", str(value))
    return value


def _batches(sizes_and_lengths, vocab_size: int, seed: int) -> list[tuple[torch.Tensor, torch.Tensor]]:
    """Batches (ids, labels) drawn with this submission's seed for `seed`."""
    generator = seeded_generator(seed)
    batches = []
    for lengths in sizes_and_lengths:
        ids = padded_review_ids(lengths, vocab_size, 0, generator)  # (B, T)
        labels = torch.randint(0, 5, (len(lengths),), generator=generator)  # (B,)
        batches.append((ids, labels))
    return batches


# ---------------------------------------------------------------------------------------------------- lent model
def _probe_state(seed: int) -> dict[str, torch.Tensor]:
    """Weights of the lent model, generated here."""
    from coursekit.probe.models import BagOfEmbeddingsClassifier

    with seeded(seed):
        return {k: v.detach().clone() for k, v in BagOfEmbeddingsClassifier(**PROBE_CONFIG).state_dict().items()}


def _local_probe(state: dict, device) -> nn.Module:
    """The lent model in the grader's process (for the reference's numbers)."""
    from coursekit.probe.models import BagOfEmbeddingsClassifier

    model = BagOfEmbeddingsClassifier(**PROBE_CONFIG)
    model.load_state_dict(state)
    return model.to(device)


def _remote_probe(channel, state: dict, device, label: str, training: bool) -> RemoteObject:
    """The lent model, built in the kernel with the grader's weights."""
    return lend_model(channel, PROBE_MODEL, PROBE_CONFIG, state, device, training, label)


def _forward_calls(model: RemoteObject) -> list[tuple[bool, bool]]:
    """The lent model's record of its forward calls: (training, grad enabled). Only ever used to add a failure or
    to explain one; something that is not a list of pairs of bools counts as no calls."""
    try:
        records = model.attr("calls").fetch()
    except (StudentError, ProbeBroken):
        return []
    if not isinstance(records, (list, tuple)):
        return []
    return [(record[0], record[1]) for record in records
            if isinstance(record, (list, tuple)) and len(record) == 2 and all(isinstance(v, bool) for v in record)]


# ---------------------------------------------------------------------------------------------------- training
def _weights_close(a, b, device) -> bool:
    """Weights after training: the course tolerance, TRAINING_RUN_LOOSER times looser (two epochs of SGD
    accumulate rounding)."""
    if not (isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor)):
        return False
    return values_close(a, b, device, looser=TRAINING_RUN_LOOSER)


def _same_weights(got, expected: dict[str, torch.Tensor], device) -> bool:
    return isinstance(got, dict) and all(_weights_close(got.get(k), v, device) for k, v in expected.items())


def _loss_close(a: float, b: float) -> bool:
    return abs(a - b) <= EPOCH_LOSS["atol"] + EPOCH_LOSS["rtol"] * abs(b)


def _two_epochs(train, fresh, batches, device):
    """(the two epochs' returned values, the weights after them) of `train(model, batches, optimizer, device)`
    from the same start (`fresh()`), each epoch's RNG seeded as the student's."""
    model, optimizer = fresh()
    results = []
    for epoch in range(2):
        with seeded(100 + epoch):
            results.append(train(model, batches, optimizer, device))
    return results, {k: v.detach().clone() for k, v in model.state_dict().items()}


def _reference_run(sizes, fresh, device):
    """The reference's run, here, on this submission's batches: the first (bounded search) on which its loss
    decreases. Returns (batches, the two losses, the weights after them)."""
    for attempt in range(10):
        batches = _batches(sizes, vocab_size=PROBE_CONFIG["vocab_size"], seed=17 + 1000 * attempt)
        losses, weights = _two_epochs(lambda *args: float(reference("classifier").train_one_epoch(*args)), fresh,
                                      batches, device)
        if losses[1] < losses[0]:
            break
    return batches, losses, weights


def _expect_training_calls(description: str, records, batches) -> None:
    """The lent model's record: a forward pass with gradients per batch and epoch, in training mode."""
    training_calls = [training for training, grad in records if grad]  # forward passes that can learn
    if len(training_calls) < 2 * len(batches):
        fail_expected(f"{description}: the model must run on every batch with gradients enabled.",
                      f"at least {len(batches)} forward calls per epoch outside torch.no_grad()",
                      f"{len(training_calls) / 2:g} per epoch", "training.under_no_grad"
                      if len(records) >= 2 * len(batches) else None)
    if not all(training_calls):
        fail_expected(f"{description}: the model ran in evaluation mode.", "model.train() before the loop",
                      "model.training == False during the forward pass", "training.no_train_mode")


def _training_mistake(losses, weights, loss_ok: bool, params_ok: bool, fresh, batches, device) -> str | None:
    """The first known mistake (TABLE's train_variant rows) whose two epochs give what the student's gave: where
    only the weights are wrong, the weights tell; where only the returned loss is, the loss tells; else both."""
    def matches(variant_losses, variant_weights):
        same_losses = all(_loss_close(a, b) for a, b in zip(losses, variant_losses))
        if loss_ok:
            return _same_weights(weights, variant_weights, device)
        if params_ok:
            return same_losses
        return same_losses and _same_weights(weights, variant_weights, device)

    def run(variant, switches):
        return _two_epochs(lambda *args: variant(*args, **switches), fresh, batches, device)

    for mistake_id, produce in from_table(M.TABLE, run, M.ids_of(M.train_variant)).items():
        try:
            if matches(*produce()):
                return mistake_id
        except Exception:  # noqa: BLE001 -- a variant that cannot run on these inputs just does not match
            continue
    return None


@hidden_check
def check_train_one_epoch(train_one_epoch) -> None:
    """One epoch on fixed batches from identical weights and optimizer: same loss and weights as the reference."""
    device = start_check()
    expect_callable(train_one_epoch, "train_one_epoch")
    sizes = pick("classifier.train_batches", [[[7, 4, 6, 2], [5, 5, 3, 1], [9, 8, 2, 6]],
                                              [[6, 2, 8, 5], [4, 7, 7, 1], [3, 9, 5, 6]],
                                              [[8, 3, 3, 6], [9, 5, 2, 4], [1, 6, 7, 5]],
                                              [[5, 6, 2, 9], [7, 1, 4, 8], [6, 6, 3, 2]]])
    lr = pick("classifier.train_lr", [0.2, 0.15, 0.25])
    description = "train_one_epoch(model, loader of 3 batches (ids (4, T), labels (4,)), SGD optimizer, device)"
    state = _probe_state(seed=3)

    def fresh():
        model = _local_probe(state, device).eval()  # given in eval mode on purpose
        return model, torch.optim.SGD(model.parameters(), lr=lr, momentum=0.9)

    batches, ref_losses, ref_weights = _reference_run(sizes, fresh, device)
    # the student's run, in the kernel
    model = _remote_probe(train_one_epoch.channel, state, device, description, training=False)
    optimizer = grader_step(description, lambda: _remote.new(
        train_one_epoch.channel, "torch.optim.SGD", model.attr("parameters")(), lr=lr, momentum=0.9))
    losses = [_as_number("train_one_epoch", call(description, train_one_epoch, model, batches, optimizer, device,
                                                 _seed=100 + epoch))
              for epoch in range(2)]
    weights = grader_step(description, model.state)
    _expect_training_calls(description, _forward_calls(model), batches)

    loss_ok = all(_loss_close(a, b) for a, b in zip(losses, ref_losses))
    params_ok = _same_weights(weights, ref_weights, device)
    if not (loss_ok and params_ok):
        mistake = _training_mistake(losses, weights, loss_ok, params_ok, fresh, batches, device)
        if not params_ok:
            fail_expected(f"{description}: after training, the weights differ from the reference's "
                          "(same initial weights, same optimizer, same batches, two epochs).",
                          "the same weights as the reference", "different weights", mistake)
        fail_expected(f"{description}: the returned loss differs from the reference's.",
                      "the mean cross-entropy of the epoch's batches, " + ", ".join(f"{v:.4f}" for v in ref_losses),
                      ", ".join(f"{v:.4f}" for v in losses), mistake)
    if not losses[1] < losses[0]:
        fail_expected(f"{description}: the loss did not decrease over two epochs on the same batches.",
                      "epoch 2 loss < epoch 1 loss", f"{losses[0]:.4f} then {losses[1]:.4f}")


# ---------------------------------------------------------------------------------------------------- evaluation
def _wrong_values(counts) -> dict:
    """Mistake id -> the value that mistake returns (TABLE's accuracy rows, on `counts`)."""
    return {mistake_id: produce() for mistake_id, produce in from_table(
        M.TABLE, lambda variant, switches: variant(*counts, **switches), M.ids_of(M.accuracy)).items()}


def _evaluation_inputs(model, sizes, attempt: int, device):
    """This submission's batches for `evaluate` (attempt 0 first), relabelled: the model's own prediction for about
    half of the examples, another class for the rest; where training mode (dropout on) predicts differently, the
    label is the eval-mode prediction, so that forgetting model.eval() always lowers the count. None when these
    inputs do not tell every known wrong value (`_wrong_values`) from the right one and from each other."""
    batches = _batches(sizes, vocab_size=PROBE_CONFIG["vocab_size"], seed=23 + 1000 * attempt)

    def predict(ids, training: bool) -> torch.Tensor:
        model.train(training)
        with torch.no_grad():
            return model(ids.to(device)).argmax(dim=-1).cpu()  # (B,)

    generator = seeded_generator(31 + 1000 * attempt)
    relabelled, disagreements = [], 0
    with seeded(31 + 1000 * attempt):  # dropout in training mode: this submission's draw
        for ids, _ in batches:
            predictions, in_training = predict(ids, False), predict(ids, True)
            hit = torch.rand(len(ids), generator=generator) < 0.5
            labels = torch.where(hit, predictions, (predictions + 1 + torch.randint(0, 4, predictions.shape,
                                                                                   generator=generator)) % 5)
            differ = in_training != predictions
            disagreements += int(differ.sum())
            relabelled.append((ids, torch.where(differ, predictions, labels)))

        def count(training: bool):
            hits = [(predict(ids, training) == y) for ids, y in relabelled]
            return sum(int(h.sum()) for h in hits), [float(h.float().mean()) for h in hits]

        correct, batch_accuracies = count(False)
        correct_training, _ = count(True)
    total = sum(len(y) for _, y in relabelled)
    counts = (correct, total, batch_accuracies, correct_training)
    values = [M.accuracy(*counts), *_wrong_values(counts).values()]
    if disagreements == 0 or any(abs(a - b) <= ACCURACY_ATOL for i, a in enumerate(values) for b in values[i + 1:]):
        return None
    return relabelled, counts


@hidden_check
def check_evaluate(evaluate) -> None:
    """The fraction of all examples whose argmax logit equals the label, in eval mode, without gradients."""
    device = start_check()
    expect_callable(evaluate, "evaluate")
    state = _probe_state(seed=5)
    model = _local_probe(state, device)
    sizes = pick("classifier.evaluate_batches", [
        [[6, 3, 5, 2, 6], [4, 4, 1], [7, 2, 3, 5, 1, 6, 4], [3]],      # batches of 5, 3, 7, 1 examples
        [[5, 2, 7], [3, 6, 4, 4, 1, 2], [2, 2], [6, 5, 3, 1, 7]],
        [[4, 7, 1, 3, 5, 2], [6], [3, 5, 2, 4], [7, 1, 6]],
        [[2, 6, 3], [5, 5, 1, 7, 4], [4, 2, 6, 3, 1, 5, 2, 7], [6, 3]]])
    for attempt in range(20):  # bounded search: inputs where every known wrong value differs from the right one
        found = _evaluation_inputs(model, sizes, attempt, device)
        if found is not None:
            break
    assert found is not None, "internal: no evaluation inputs tell the known mistakes apart"
    relabelled, counts = found
    correct, total = counts[:2]
    expected = correct / total
    reference_value = float(reference("classifier").evaluate(model, relabelled, device))
    assert abs(reference_value - expected) < FLOAT64["atol"], \
        "internal: reference evaluate disagrees with a direct count"

    description = f"evaluate(model, loader of {len(sizes)} batches with {total} examples, device)"
    # given in training mode with dropout on purpose
    remote = _remote_probe(evaluate.channel, state, device, description, training=True)
    value = _as_number("evaluate", call(description, evaluate, remote, relabelled, device, _seed=0))
    records = _forward_calls(remote)
    if records and any(training for training, _ in records):
        fail_expected(f"{description}: the model ran in training mode (dropout on).", "model.eval() before the loop",
                      "model.training == True", "evaluate.no_eval_mode")
    if records and any(grad for _, grad in records):
        fail_expected(f"{description}: gradients were recorded during evaluation.", "with torch.no_grad(): ...",
                      "gradients enabled", "evaluate.grad_enabled")
    if abs(value - expected) > ACCURACY_ATOL:
        mistake = next((name for name, v in _wrong_values(counts).items() if abs(value - v) <= ACCURACY_ATOL), None)
        fail_expected(f"{description}: wrong accuracy.", f"{expected:.4f} (fraction of all examples predicted right)",
                      f"{value:.4f}", mistake)
