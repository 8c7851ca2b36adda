"""Hidden checks of notebook 07 (the Yelp review classifier).

Each `check_<name>(obj)` compares the student's object with the reference in `solutions` on the grading device,
names the most likely mistake when the values differ, and raises `AssertionError` with a message for the student.
Known-mistake variants of the reference for this notebook live at the end of this module (`_POOL_MISTAKES`, ...).
`check_trained_classifier(model, vocab, max_len)` grades the model the notebook trained, on the held-out synthetic
test set.
"""
from __future__ import annotations

import math
import numbers
from typing import Callable

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

from autograder.checks._tolerance import grading_device, tolerance

# The notebook's grading-mode run of the reference (bench/yelp.py budget "grading": all 8,000 synthetic training
# reviews, 6 epochs, d_model 64, 2 layers, dropout 0.1, AdamW 3e-3) reached 0.598, 0.6235 and 0.620 test accuracy
# for seeds 0, 1, 2 on the CPU; always guessing one class gets 0.20. The bar sits more than 0.12 below the worst
# measured seed, so an honest implementation with a different order of operations (or a GPU run) passes, while an
# untrained or badly broken model (about 0.2) does not.
TRAINED_MIN_ACCURACY = 0.47
MAJORITY_ACCURACY = 0.20


# ---------------------------------------------------------------------------------------------------- helpers
def _verify_integrity() -> None:
    from autograder.checks import _integrity

    _integrity.verify()


def _reference():
    import solutions.classifier as reference

    return reference


def _fail(what: str, expected: str, got: str, mistake: str | None = None, hint: str | None = None):
    """The student-facing AssertionError, in the format shared with notebooks 01-06 (`_common.fail`)."""
    from autograder.checks._common import fail

    fail(what, details=[f"expected: {expected}", f"got:      {got}"], mistake=mistake, hint=hint)


def _call(description: str, fn: Callable, *args, **kwargs):
    """Calls student code; an exception becomes an AssertionError naming the call."""
    try:
        return fn(*args, **kwargs)
    except NotImplementedError:
        raise AssertionError(f"{description} raised NotImplementedError: replace `raise NotImplementedError()` "
                             "with your implementation.") from None
    except AssertionError:
        raise
    except Exception as error:  # noqa: BLE001 -- any student error becomes a graded failure with its message
        hint = ""
        if "device" in str(error).lower():
            hint = "\nHint: move every tensor to the same device (e.g. `ids = ids.to(device)`)."
        raise AssertionError(f"{description} raised {type(error).__name__}: {str(error)[:300]}{hint}") from None


def _close(a: torch.Tensor, b: torch.Tensor, device, scale: float = 1.0) -> bool:
    tol = tolerance(device)
    return a.shape == b.shape and bool(torch.allclose(a.detach().to(b.device).float(), b.detach().float(),
                                                      atol=tol["atol"] * scale, rtol=tol["rtol"] * scale))


def _check_tensor(name: str, out, shape: tuple[int, ...]) -> torch.Tensor:
    if not isinstance(out, torch.Tensor):
        _fail(f"{name} must return a torch.Tensor.", f"a tensor of shape {shape}", type(out).__name__)
    if tuple(out.shape) != shape:
        _fail(f"{name} returned a tensor of the wrong shape.", str(shape), str(tuple(out.shape)))
    if not out.is_floating_point():
        _fail(f"{name} must return floating-point values.", "a float tensor", str(out.dtype))
    if not torch.isfinite(out).all():
        _fail(f"{name} returned NaN or inf values.", "finite values", "NaN/inf",
              hint="a division by a count of zero or a log of 0 gives NaN/inf.")
    return out


def _as_number(name: str, value) -> float:
    if isinstance(value, torch.Tensor) and value.numel() == 1:
        value = value.item()  # a tensor holding one number
    elif isinstance(value, np.ndarray) and value.size == 1:
        value = value.item()
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        _fail(f"{name} must return a Python float.", "a float (use `.item()` on a 0-d tensor)",
              type(value).__name__)
    value = float(value)
    if not math.isfinite(value):
        _fail(f"{name} returned a value that is not finite.", "a finite float", str(value))
    return value


def _lengths_mask(lengths: list[int], device) -> torch.Tensor:
    positions = torch.arange(max(lengths), device=device)  # (T,)
    return positions[None, :] < torch.tensor(lengths, device=device)[:, None]  # (B, T) bool


def _padded_ids(lengths: list[int], vocab_size: int, pad_id: int, generator: torch.Generator) -> torch.Tensor:
    """(B, max(lengths)) ids with post-padding; real tokens never equal pad_id."""
    ids = torch.randint(0, vocab_size - 1, (len(lengths), max(lengths)), generator=generator)
    ids = ids + (ids >= pad_id).long()  # skip pad_id
    if pad_id != 0:
        ids[0, 0] = 0  # a real token equal to 0 tells a hard-coded pad id apart
    mask = _lengths_mask(lengths, "cpu")
    return ids.masked_fill(~mask, pad_id)


def _diagnose(student_value, variants: dict[str, Callable], matches: Callable) -> str | None:
    for mistake, variant in variants.items():
        try:
            if matches(student_value, variant()):
                return mistake
        except Exception:  # noqa: BLE001 -- a variant that cannot run on these inputs just does not match
            continue
    return None


# ---------------------------------------------------------------------------------------------------- pooling
def _pool_mistakes(x: torch.Tensor, mask: torch.Tensor) -> dict[str, Callable]:
    keep = mask.unsqueeze(-1).to(x.dtype)  # (B, T, 1)
    real = keep.sum(dim=1)  # (B, 1)
    return {
        "pooling includes padding: you averaged over all T positions, padding too": lambda: x.mean(dim=1),
        "divided by T instead of by the number of real tokens in each row": lambda: (x * keep).sum(1) / x.shape[1],
        "mask polarity inverted: you averaged the padding positions (mask is True where a token is real)":
            lambda: (x * (1 - keep)).sum(1) / (1 - keep).sum(1).clamp(min=1),
        "summed the real positions but did not divide by their count": lambda: (x * keep).sum(1),
        "divided by the total number of real tokens in the batch, not per row": lambda: (x * keep).sum(1) / real.sum(),
    }


def check_masked_mean_pool(masked_mean_pool) -> None:
    """masked_mean_pool(x (B, T, d), mask (B, T) bool) -> (B, d): mean over the real positions only."""
    _verify_integrity()
    if not callable(masked_mean_pool):
        _fail("masked_mean_pool must be a function.", "a callable", type(masked_mean_pool).__name__)
    reference = _reference()
    device = grading_device()
    generator = torch.Generator().manual_seed(707)
    for lengths, d in (([9, 5, 2, 7], 6), ([3, 3, 1], 4)):
        x = torch.randn(len(lengths), max(lengths), d, generator=generator).to(device)  # (B, T, d)
        mask = _lengths_mask(lengths, device)  # (B, T)
        x_before, mask_before = x.clone(), mask.clone()
        shape = (len(lengths), d)
        out = _call(f"masked_mean_pool(x {tuple(x.shape)}, mask {tuple(mask.shape)} bool)",
                    masked_mean_pool, x, mask)
        out = _check_tensor("masked_mean_pool", out, shape)
        if not (torch.equal(x, x_before) and torch.equal(mask, mask_before)):
            _fail("masked_mean_pool changed its inputs in place.", "x and mask unchanged", "modified",
                  hint="use out-of-place operations (`x * m`, not `x.mul_(m)`).")
        expected = reference.masked_mean_pool(x, mask)
        if not _close(out, expected, device):
            mistake = _diagnose(out, _pool_mistakes(x, mask), lambda s, v: _close(s, v, device))
            _fail(f"masked_mean_pool(x {tuple(x.shape)}, mask {tuple(mask.shape)}) gives wrong values "
                  f"(real lengths per row: {lengths}).",
                  f"shape {shape}, the mean over the positions where mask is True",
                  f"values differ by up to {(out.detach().float() - expected).abs().max().item():.3g}", mistake)
    print("masked_mean_pool: ok")


# ---------------------------------------------------------------------------------------------------- model
class _PooledCapture:
    """Records the input of a model's `classifier` layer: the pooled representation (B, d_model)."""

    def __init__(self, module: nn.Module):
        self.value = None
        self.handle = module.register_forward_pre_hook(self)

    def __call__(self, module, args):
        self.value = args[0].detach() if args and isinstance(args[0], torch.Tensor) else None

    def remove(self):
        self.handle.remove()


def _classifier_mistakes(ref_model: nn.Module, ids: torch.Tensor, pad_id: int) -> dict[str, Callable]:
    reference = _reference()

    def encode(mask_pad_id: int | None):
        if mask_pad_id is None:
            return ref_model.encoder(ids)
        return ref_model.encoder(ids, (ids != mask_pad_id)[:, None, None, :])

    keep = ids != pad_id  # (B, T)
    with torch.no_grad():
        return {
            "pooling includes padding: average only the real positions (mask_mean_pool with the padding mask)":
                lambda: ref_model.classifier(encode(pad_id).mean(dim=1)),
            "the encoder got no padding mask: real tokens attend to padding":
                lambda: ref_model.classifier(reference.masked_mean_pool(encode(None), keep)),
            "the padding id is hard-coded as 0: use the model's `pad_id`":
                lambda: ref_model.classifier(reference.masked_mean_pool(encode(0), ids != 0)),
            "returns probabilities: forward must return raw logits (F.cross_entropy applies the softmax itself)":
                lambda: ref_model(ids).softmax(dim=-1),
            "returns log-probabilities: forward must return raw logits (F.cross_entropy applies log_softmax)":
                lambda: ref_model(ids).log_softmax(dim=-1),
            "classifies the first position instead of the mean over the real positions":
                lambda: ref_model.classifier(encode(pad_id)[:, 0]),
            "max-pooling instead of mean-pooling":
                lambda: ref_model.classifier(encode(pad_id).masked_fill(~keep[..., None], float("-inf")).amax(1)),
        }


def _build(cls, description: str, **kwargs) -> nn.Module:
    model = _call(f"{description}", cls, **kwargs)
    if not isinstance(model, nn.Module):
        _fail("TransformerClassifier must be an nn.Module.", "an nn.Module instance", type(model).__name__)
    return model


def check_transformer_classifier(TransformerClassifier) -> None:
    """Architecture equal to the reference (by weight copy), padding excluded, padding-invariant pooled vector."""
    _verify_integrity()
    if not (isinstance(TransformerClassifier, type) and issubclass(TransformerClassifier, nn.Module)):
        _fail("TransformerClassifier must be a class deriving from nn.Module.", "class TransformerClassifier(nn.Module)",
              repr(TransformerClassifier)[:80])
    reference = _reference()
    device = grading_device()

    # the contract's defaults: num_classes=5, d_model=64
    default = _build(TransformerClassifier, "TransformerClassifier(vocab_size=30)", vocab_size=30)
    if not isinstance(getattr(default, "classifier", None), nn.Linear) or default.classifier.out_features != 5 \
            or default.classifier.in_features != 64:
        _fail("TransformerClassifier(vocab_size=30) must use the defaults num_classes=5, d_model=64.",
              "classifier = nn.Linear(64, 5)", repr(getattr(default, "classifier", None))[:80])

    generator = torch.Generator().manual_seed(7007)
    cases = [
        dict(vocab_size=31, num_classes=5, d_model=12, num_heads=3, d_ff=20, num_layers=2, max_len=16, pad_id=0),
        dict(vocab_size=23, num_classes=4, d_model=10, num_heads=2, d_ff=14, num_layers=1, max_len=12, pad_id=3),
    ]
    for config in cases:
        signature = ", ".join(f"{k}={v}" for k, v in config.items())
        description = f"TransformerClassifier({signature}, dropout=0.0)"
        torch.manual_seed(11)
        ref_model = reference.TransformerClassifier(**config, dropout=0.0).to(device).eval()
        model = _build(TransformerClassifier, description, **config, dropout=0.0)
        for name, kind in (("encoder", nn.Module), ("classifier", nn.Linear)):
            if not isinstance(getattr(model, name, None), kind):
                _fail(f"{description} has no submodule `{name}` of type {kind.__name__}.",
                      f"self.{name} = {'Encoder(...)' if name == 'encoder' else 'nn.Linear(d_model, num_classes)'}",
                      repr(getattr(model, name, None))[:80])
        expected_keys, got_keys = set(ref_model.state_dict()), set(model.state_dict())
        if expected_keys != got_keys:
            missing, extra = sorted(expected_keys - got_keys)[:4], sorted(got_keys - expected_keys)[:4]
            _fail(f"{description}: the parameters do not match the contract's architecture.",
                  "encoder = Encoder(vocab_size, d_model, num_heads, d_ff, num_layers, max_len, dropout), "
                  "classifier = nn.Linear(d_model, num_classes)",
                  f"missing {missing}, unexpected {extra}")
        for key, value in ref_model.state_dict().items():
            if model.state_dict()[key].shape != value.shape:
                _fail(f"{description}: parameter `{key}` has the wrong shape.", str(tuple(value.shape)),
                      str(tuple(model.state_dict()[key].shape)))
        model.load_state_dict(ref_model.state_dict())
        model = model.to(device).eval()

        lengths = [8, 5, 3]
        ids = _padded_ids(lengths, config["vocab_size"], config["pad_id"], generator).to(device)  # (B, T)
        longer = torch.cat([ids, torch.full((len(lengths), 4), config["pad_id"], device=device)], dim=1)  # (B, T+4)
        shape = (len(lengths), config["num_classes"])
        capture = _PooledCapture(model.classifier)
        try:
            with torch.no_grad():
                logits = _check_tensor("TransformerClassifier.forward", _call(
                    f"{description}.forward(ids {tuple(ids.shape)})", model, ids), shape)
                pooled = capture.value
                logits_longer = _call(f"{description}.forward(ids {tuple(longer.shape)})", model, longer)
                pooled_longer = capture.value
                expected = ref_model(ids)
        finally:
            capture.remove()
        if not _close(logits, expected, device):
            with torch.no_grad():
                mistake = _diagnose(logits, _classifier_mistakes(ref_model, ids, config["pad_id"]),
                                    lambda s, v: _close(s, v, device))
            _fail(f"{description}: logits differ from the reference with the same weights "
                  f"(ids {tuple(ids.shape)} with real lengths {lengths}, pad_id={config['pad_id']}).",
                  f"logits of shape {shape}", "different values", mistake)
        if pooled is not None and pooled_longer is not None and pooled.shape == pooled_longer.shape:
            if not _close(pooled, pooled_longer, device):
                _fail(f"{description}: the pooled representation changes when more padding is appended.",
                      "the same pooled vector for ids and ids + extra padding", "different vectors",
                      "pooling includes padding")
        if not _close(logits_longer, logits, device):
            _fail(f"{description}: the logits change when more padding is appended.",
                  "padding to a longer length changes nothing", "different logits",
                  "padding positions are not excluded (padding mask in the encoder and in the pooling)")
    print("TransformerClassifier: ok")


# ---------------------------------------------------------------------------------------------------- training
class _ForwardRecorder:
    """Records (model.training, grad enabled) for every forward call of a model."""

    def __init__(self, model: nn.Module):
        self.calls: list[tuple[bool, bool]] = []
        self.handle = model.register_forward_pre_hook(self)

    def __call__(self, module, args):
        self.calls.append((module.training, torch.is_grad_enabled()))

    def remove(self):
        self.handle.remove()


def _train_variant(model, batches, optimizer, device, loss_fn=None, zero_grad=True, step=True,
                   result="mean"):
    """One epoch of training written with a switchable mistake; returns the float the variant would return."""
    model.train()
    losses = []
    for ids, labels in batches:
        ids, labels = ids.to(device), labels.to(device)
        if zero_grad:
            optimizer.zero_grad()
        logits = model(ids)
        loss = loss_fn(logits, labels) if loss_fn else F.cross_entropy(logits, labels)
        loss.backward()
        if step:
            optimizer.step()
        losses.append(loss.item())
    return {"mean": sum(losses) / len(losses), "sum": sum(losses), "last": losses[-1], "first": losses[0]}[result]


_TRAIN_MISTAKES = {
    "forgot optimizer.zero_grad(): gradients of earlier batches pile up": dict(zero_grad=False),
    "softmax before cross_entropy: F.cross_entropy takes raw logits (it applies log_softmax itself)":
        dict(loss_fn=lambda logits, y: F.cross_entropy(logits.softmax(-1), y)),
    "F.nll_loss on raw logits: it expects log-probabilities (use F.cross_entropy on the logits)":
        dict(loss_fn=lambda logits, y: F.nll_loss(logits, y)),
    "the loss is summed over the batch instead of averaged (reduction='mean' is the default)":
        dict(loss_fn=lambda logits, y: F.cross_entropy(logits, y, reduction="sum")),
    "the weights never change: optimizer.step() is missing, or optimizer.zero_grad() sits between backward() "
    "and step()": dict(step=False),
    "returns the sum of the batch losses, not their mean": dict(result="sum"),
    "returns the last batch's loss, not the mean over the epoch": dict(result="last"),
    "returns the first batch's loss, not the mean over the epoch": dict(result="first"),
}


def _small_model(seed: int, dropout: float, device) -> nn.Module:
    torch.manual_seed(seed)
    return _reference().TransformerClassifier(vocab_size=29, num_classes=5, d_model=16, num_heads=2, d_ff=24,
                                              num_layers=1, max_len=16, dropout=dropout).to(device)


def _batches(sizes_and_lengths, vocab_size: int, seed: int) -> list[tuple[torch.Tensor, torch.Tensor]]:
    generator = torch.Generator().manual_seed(seed)
    batches = []
    for lengths in sizes_and_lengths:
        ids = _padded_ids(lengths, vocab_size, 0, generator)  # (B, T)
        labels = torch.randint(0, 5, (len(lengths),), generator=generator)  # (B,)
        batches.append((ids, labels))
    return batches


def _parameters(model: nn.Module) -> list[torch.Tensor]:
    return [p.detach().clone() for p in model.parameters()]


def _same_parameters(a: list[torch.Tensor], b: list[torch.Tensor], device) -> bool:
    return all(_close(x, y, device, scale=10.0) for x, y in zip(a, b))


def check_train_one_epoch(train_one_epoch) -> None:
    """One epoch on fixed batches from identical weights and optimizer: same loss and weights as the reference."""
    _verify_integrity()
    if not callable(train_one_epoch):
        _fail("train_one_epoch must be a function.", "a callable", type(train_one_epoch).__name__)
    reference = _reference()
    device = grading_device()
    batches = _batches([[7, 4, 6, 2], [5, 5, 3, 1], [9, 8, 2, 6]], vocab_size=29, seed=17)
    description = "train_one_epoch(model, loader of 3 batches (ids (4, T), labels (4,)), SGD optimizer, device)"

    def fresh(seed=3, dropout=0.0):
        model = _small_model(seed, dropout, device).eval()  # given in eval mode on purpose
        return model, torch.optim.SGD(model.parameters(), lr=0.2, momentum=0.9)

    model, optimizer = fresh()
    ref_model, ref_optimizer = fresh()
    recorder = _ForwardRecorder(model)
    try:
        losses = []
        for epoch in range(2):
            torch.manual_seed(100 + epoch)
            losses.append(_as_number("train_one_epoch", _call(description, train_one_epoch, model, batches,
                                                              optimizer, device)))
    finally:
        recorder.remove()
    ref_losses = []
    for epoch in range(2):
        torch.manual_seed(100 + epoch)
        ref_losses.append(float(reference.train_one_epoch(ref_model, batches, ref_optimizer, device)))

    training_calls = [training for training, grad in recorder.calls if grad]  # forward passes that can learn
    if len(training_calls) < 2 * len(batches):
        _fail(f"{description}: the model must run on every batch with gradients enabled.",
              f"at least {len(batches)} forward calls per epoch outside torch.no_grad()",
              f"{len(training_calls) / 2:g} per epoch", "training must not run under torch.no_grad()"
              if len(recorder.calls) >= 2 * len(batches) else None)
    if not all(training_calls):
        _fail(f"{description}: the model ran in evaluation mode.", "model.train() before the loop",
              "model.training == False during the forward pass",
              "forgot model.train() (dropout stays off and the model does not learn as it should)")

    loss_ok = all(abs(a - b) <= 1e-4 + 1e-4 * abs(b) for a, b in zip(losses, ref_losses))
    params_ok = _same_parameters(_parameters(model), _parameters(ref_model), device)
    if not (loss_ok and params_ok):
        student_params = _parameters(model)

        def run_variant(options):
            def run():
                variant_model, variant_optimizer = fresh()
                results = []
                for epoch in range(2):
                    torch.manual_seed(100 + epoch)
                    results.append(_train_variant(variant_model, batches, variant_optimizer, device, **options))
                return results, _parameters(variant_model)
            return run

        def matches(student, variant):
            variant_losses, variant_params = variant
            same_losses = all(abs(a - b) <= 1e-4 + 1e-4 * abs(b) for a, b in zip(student[0], variant_losses))
            if loss_ok:  # the loss is right: only the weights can tell the mistake
                return _same_parameters(student[1], variant_params, device)
            if params_ok:  # the weights are right: only the returned value can tell
                return same_losses
            return same_losses and _same_parameters(student[1], variant_params, device)

        variants = {name: run_variant(options) for name, options in _TRAIN_MISTAKES.items()}
        mistake = _diagnose((losses, student_params), variants, matches)
        if not params_ok:
            _fail(f"{description}: after training, the weights differ from the reference's "
                  "(same initial weights, same optimizer, same batches, two epochs).",
                  "the same weights as the reference", "different weights", mistake)
        _fail(f"{description}: the returned loss differs from the reference's.",
              "the mean cross-entropy of the epoch's batches, " + ", ".join(f"{v:.4f}" for v in ref_losses),
              ", ".join(f"{v:.4f}" for v in losses), mistake)
    if not losses[1] < losses[0]:
        _fail(f"{description}: the loss did not decrease over two epochs on the same batches.",
              "epoch 2 loss < epoch 1 loss", f"{losses[0]:.4f} then {losses[1]:.4f}")
    print("train_one_epoch: ok")


# ---------------------------------------------------------------------------------------------------- evaluation
def check_evaluate(evaluate) -> None:
    """The fraction of all examples whose argmax logit equals the label, in eval mode, without gradients."""
    _verify_integrity()
    if not callable(evaluate):
        _fail("evaluate must be a function.", "a callable", type(evaluate).__name__)
    device = grading_device()
    model = _small_model(seed=5, dropout=0.3, device=device)
    sizes = [[6, 3, 5, 2, 6], [4, 4, 1], [7, 2, 3, 5, 1, 6, 4], [3]]  # batches of 5, 3, 7, 1 examples
    batches = _batches(sizes, vocab_size=29, seed=23)
    # labels: the model's own prediction for about half of the examples, another class for the rest
    generator = torch.Generator().manual_seed(31)
    model.eval()
    with torch.no_grad():
        relabelled = []
        for ids, _ in batches:
            predictions = model(ids.to(device)).argmax(dim=-1).cpu()  # (B,)
            hit = torch.rand(len(ids), generator=generator) < 0.5
            labels = torch.where(hit, predictions, (predictions + 1 + torch.randint(0, 4, predictions.shape,
                                                                                   generator=generator)) % 5)
            relabelled.append((ids, labels))
    correct = sum(int((model(ids.to(device)).argmax(-1).cpu() == y).sum()) for ids, y in relabelled)
    total = sum(len(y) for _, y in relabelled)
    batch_accuracies = [float((model(ids.to(device)).argmax(-1).cpu() == y).float().mean()) for ids, y in relabelled]
    expected = correct / total
    reference_value = float(_reference().evaluate(model, relabelled, device))
    assert abs(reference_value - expected) < 1e-9, "internal: reference evaluate disagrees with a direct count"

    model.train()  # given in training mode with dropout on purpose
    description = f"evaluate(model, loader of {len(sizes)} batches with {total} examples, device)"
    recorder = _ForwardRecorder(model)
    try:
        torch.manual_seed(0)
        value = _as_number("evaluate", _call(description, evaluate, model, relabelled, device))
    finally:
        recorder.remove()
    if recorder.calls and any(training for training, _ in recorder.calls):
        _fail(f"{description}: the model ran in training mode (dropout on).", "model.eval() before the loop",
              "model.training == True", "forgot model.eval()")
    if recorder.calls and any(grad for _, grad in recorder.calls):
        _fail(f"{description}: gradients were recorded during evaluation.", "with torch.no_grad(): ...",
              "gradients enabled", "forgot torch.no_grad() (evaluation builds no graph)")
    if abs(value - expected) > 1e-6:
        candidates = {
            "returns a percentage: return a fraction between 0 and 1": 100 * expected,
            "returns the number of correct examples, not the fraction": float(correct),
            "averages the per-batch accuracies: batches differ in size, count over all examples": (
                sum(batch_accuracies) / len(batch_accuracies)),
            "returns the error rate (1 - accuracy)": 1 - expected,
            "divides by the number of batches instead of the number of examples": correct / len(sizes),
        }
        mistake = next((name for name, v in candidates.items() if abs(value - v) <= 1e-6), None)
        _fail(f"{description}: wrong accuracy.", f"{expected:.4f} (fraction of all examples predicted right)",
              f"{value:.4f}", mistake)
    print("evaluate: ok")


# ---------------------------------------------------------------------------------------------------- trained model
def _model_max_len(model: nn.Module) -> int | None:
    pe = getattr(getattr(getattr(model, "encoder", None), "pos_encoding", None), "pe", None)
    return int(pe.shape[0]) if isinstance(pe, torch.Tensor) else None


def trained_accuracy(model: nn.Module, vocab: dict[str, int], max_len: int | None = None,
                     batch_size: int = 128, limit: int | None = None) -> float:
    """Accuracy of `model` on the shipped synthetic test split, tokenised with coursekit.tokenize and `vocab`."""
    from coursekit import load_yelp, tokenize

    texts, labels = load_yelp("synthetic", split="test", limit=limit)
    max_len = max_len or _model_max_len(model) or 256
    unk = vocab.get("<unk>", 1)
    pad = vocab.get("<pad>", 0)
    sequences = [[vocab.get(token, unk) for token in tokenize(text)][:max_len] or [unk] for text in texts]
    order = sorted(range(len(sequences)), key=lambda i: len(sequences[i]))  # similar lengths together: fast
    device = next(model.parameters()).device
    was_training = model.training
    model.eval()
    correct = 0
    try:
        with torch.no_grad():
            for start in range(0, len(order), batch_size):
                chunk = order[start:start + batch_size]
                width = max(len(sequences[i]) for i in chunk)
                ids = torch.full((len(chunk), width), pad, dtype=torch.long)
                for row, i in enumerate(chunk):
                    ids[row, :len(sequences[i])] = torch.tensor(sequences[i])
                logits = model(ids.to(device))  # (B, num_classes)
                truth = torch.tensor([labels[i] for i in chunk], device=logits.device)
                correct += int((logits.argmax(dim=-1) == truth).sum())
    finally:
        model.train(was_training)
    return correct / len(order)


def check_trained_classifier(model, vocab, max_len: int | None = None) -> None:
    """The notebook's trained model must beat the bar on the held-out synthetic test set."""
    _verify_integrity()
    if not isinstance(model, nn.Module):
        _fail("check_trained_classifier needs your trained model.", "an nn.Module", type(model).__name__)
    if not isinstance(vocab, dict) or vocab.get("<pad>") != 0 or "<unk>" not in vocab:
        _fail("check_trained_classifier needs the vocabulary the model was trained with.",
              "a dict token -> id with '<pad>': 0 and '<unk>'", type(vocab).__name__)
    if not any(True for _ in model.parameters()):
        _fail("The trained model has no parameters.", "a TransformerClassifier", type(model).__name__)
    accuracy = _call("evaluating your trained model on the synthetic test set", trained_accuracy, model, vocab,
                     max_len)
    if accuracy < TRAINED_MIN_ACCURACY:
        _fail("Your trained classifier is not accurate enough on the held-out synthetic test set.",
              f"accuracy >= {TRAINED_MIN_ACCURACY:.2f} (always guessing one class gives {MAJORITY_ACCURACY:.2f})",
              f"{accuracy:.3f}",
              hint="run the training cells again after the checks of the exercises above pass; "
                   "keep the notebook's settings (learning rate, epochs, MAX_LEN).")
    print(f"trained classifier: ok (test accuracy {accuracy:.3f})")
