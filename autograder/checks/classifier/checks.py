"""Hidden checks of notebook 07 (the Yelp review classifier).

Each `check_<name>(obj)` receives the student's object as a `RemoteObject` (it lives in the student's kernel, see
`remote.py`), runs it there on inputs chosen here, compares what comes back (data) with the reference in
`solutions` computed here, names the most likely mistake when the values differ, and raises `AssertionError` with a
message for the student. A passing check is silent.

- `train_one_epoch` and `evaluate` get a small public model (`coursekit.probe.models.BagOfEmbeddingsClassifier`)
  built in the kernel with weights generated here; the same model with the same weights is trained/evaluated here
  with the reference. The verdict comes from the returned loss/accuracy and the weights after training (read back
  with `.state()`); the model's record of its forward calls only explains a failure (or adds one), it never passes.
- The trained model's check (`check_trained_classifier`) has its own module, `trained_classifier.py`.

Failures come from `toolkit.fail`: a diagnosed mistake is named by its id in `coursekit.mistakes`.
"""
from __future__ import annotations

import math
import numbers

import numpy as np
import torch
import torch.nn as nn

from autograder.checks.kit.criteria import argument
from autograder.checks.kit.parts import given_working_parts
from autograder.checks.kit import remote as _remote
from autograder.checks.classifier import mistakes as M
from autograder.checks.kit.toolkit import (
    call, construct, expect_callable, expected_got, fail, grader_step, kind_of, lend_model, seeded, start_check,
    type_name,
)
from autograder.checks.kit.compare import (
    as_tensor, describe, diagnose, expect_dropout_acts, expect_shape, max_difference, values_close,
)
from autograder.checks.kit.remote import ProbeBroken, RemoteObject, StudentError, probed
from autograder.checks.kit.draws import generator as seeded_generator, pick

# The model the grader lends to train_one_epoch / evaluate (a public class, built in the kernel and here).
PROBE_MODEL = "coursekit.probe.models.BagOfEmbeddingsClassifier"
PROBE_CONFIG = dict(vocab_size=29, num_classes=5, d_model=16, dropout=0.5)


# ---------------------------------------------------------------------------------------------------- helpers
def _reference():
    import solutions.classifier as reference

    return reference


def _fail(what: str, expected: str, got: str, mistake: str | None = None, hint: str | None = None):
    """`toolkit.fail` with this notebook's `expected:` / `got:` lines; `mistake` is a catalogue id."""
    fail(what, details=expected_got(expected, got), mistake=mistake, hint=hint)


def _weights_close(a, b, device) -> bool:
    """Weights after training: the course tolerance, 10 times looser (two epochs of SGD accumulate rounding)."""
    if not (isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor)):
        return False
    return values_close(a, b, device, looser=10.0)


def _check_tensor(name: str, out, shape: tuple[int, ...]) -> torch.Tensor:
    """A float tensor of `shape` with finite values (the toolkit's type and shape checks, then these two)."""
    out = as_tensor(out, f"{name}'s result")
    expect_shape(out, shape, f"{name}'s result")
    if not out.is_floating_point():
        _fail(f"{name} must return floating-point values.", "a float tensor", str(out.dtype))
    if not bool(torch.isfinite(out).all()):
        _fail(f"{name} returned NaN or inf values.", "finite values", "NaN/inf",
              hint="a division by a count of zero or a log of 0 gives NaN/inf.")
    return out.detach()


def _as_number(name: str, value) -> float:
    if isinstance(value, torch.Tensor) and value.numel() == 1:
        value = value.item()  # a tensor holding one number
    elif isinstance(value, np.ndarray) and value.size == 1:
        value = value.item()
    elif isinstance(value, np.generic):
        value = value.item()
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        _fail(f"{name} must return a Python float.", "a float (use `.item()` on a 0-d tensor)", type_name(value))
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


# ---------------------------------------------------------------------------------------------------- pooling
def _unchanged(echoed, sent: torch.Tensor) -> bool:
    return isinstance(echoed, torch.Tensor) and echoed.shape == sent.shape and echoed.dtype == sent.dtype and \
        bool(torch.equal(echoed.to(sent.device), sent))


@probed
def check_masked_mean_pool(masked_mean_pool) -> None:
    """masked_mean_pool(x (B, T, d), mask (B, T) bool) -> (B, d): mean over the real positions only."""
    device = start_check()
    expect_callable(masked_mean_pool, "masked_mean_pool")
    reference = _reference()
    generator = seeded_generator(707)
    pool_cases = pick("classifier.pool_cases", [
        (([9, 5, 2, 7], 6), ([3, 3, 1], 4)), (([8, 3, 6, 1], 5), ([4, 2, 4], 3)), (([7, 7, 2, 4, 5], 4), ([2, 1], 6)),
        (([10, 4, 1], 7), ([5, 5, 2, 3], 5)), (([6, 2, 5, 3], 3), ([3, 1, 3], 8))])
    for lengths, d in pool_cases:
        x = torch.randn(len(lengths), max(lengths), d, generator=generator).to(device)  # (B, T, d)
        mask = _lengths_mask(lengths, device)  # (B, T)
        shape = (len(lengths), d)
        label = f"masked_mean_pool(x {tuple(x.shape)}, mask {tuple(mask.shape)} bool)"
        echoed = call(label, masked_mean_pool, x, mask, _echo_args=True)  # (out, args after the call, kwargs)
        if not (isinstance(echoed, tuple) and len(echoed) == 3 and isinstance(echoed[1], tuple)
                and len(echoed[1]) == 2):
            fail(f"{label} could not be checked: the kernel's reply was not understood.")
        out, (x_after, mask_after), _ = echoed
        out = _check_tensor("masked_mean_pool", out, shape)
        if not (_unchanged(x_after, x) and _unchanged(mask_after, mask)):
            _fail("masked_mean_pool changed its inputs in place.", "x and mask unchanged", "modified",
                  mistake="pool.in_place", hint="use out-of-place operations (`x * m`, not `x.mul_(m)`).")
        expected = reference.masked_mean_pool(x, mask)
        if not values_close(out, expected, device):
            mistake = diagnose(out, lambda: M.pool_mistakes(x, mask), device)
            _fail(f"masked_mean_pool(x {tuple(x.shape)}, mask {tuple(mask.shape)}) gives wrong values "
                  f"(real lengths per row: {lengths}).",
                  f"shape {shape}, the mean over the positions where mask is True",
                  f"values differ by up to {max_difference(out.float(), expected):.3g}", mistake)


# ---------------------------------------------------------------------------------------------------- model
def _linear_shape(info: dict, name: str) -> tuple[int, ...] | None:
    """The weight shape (out, in) of submodule `name` when it is an nn.Linear (by its type name), else None."""
    modules = {str(n): str(t) for n, t in info.get("modules", [])}
    parameters = {str(n): tuple(s) for n, s, _dtype in info.get("parameters", [])}
    if not modules.get(name, "").endswith("Linear") or f"{name}.weight" not in parameters:
        return None
    return parameters[f"{name}.weight"]


def _shown(info: dict, name: str) -> str:
    modules = {str(n): str(t) for n, t in info.get("modules", [])}
    if name not in modules:
        return "None"
    shape = _linear_shape(info, name)
    return f"{modules[name]}(in_features={shape[1]}, out_features={shape[0]})" if shape and len(shape) == 2 \
        else modules[name]


@probed
@given_working_parts("transformer_classifier")
def check_transformer_classifier(TransformerClassifier) -> None:
    """Architecture equal to the reference (by weight copy), padding excluded, padding-invariant logits."""
    device = start_check()
    info = kind_of(TransformerClassifier, "TransformerClassifier")
    if not info.get("module_class"):
        _fail("TransformerClassifier must be a class deriving from nn.Module.",
              "class TransformerClassifier(nn.Module)", str(info.get("type", "?"))[:80])
    reference = _reference()

    # the contract's defaults: num_classes=5, d_model=64
    default = construct(TransformerClassifier, "TransformerClassifier", vocab_size=30)
    described = describe(default, "TransformerClassifier(vocab_size=30)")
    if _linear_shape(described, "classifier") != (5, 64):
        _fail("TransformerClassifier(vocab_size=30) must use the defaults num_classes=5, d_model=64.",
              "classifier = nn.Linear(64, 5)", _shown(described, "classifier"))

    generator = seeded_generator(7007)
    cases = pick("classifier.model_cases", [   # the second case: pad_id != 0 (a hard-coded 0 shows)
        [dict(vocab_size=31, num_classes=5, d_model=12, num_heads=3, d_ff=20, num_layers=2, max_len=16, pad_id=0),
         dict(vocab_size=23, num_classes=4, d_model=10, num_heads=2, d_ff=14, num_layers=1, max_len=12, pad_id=3)],
        [dict(vocab_size=29, num_classes=3, d_model=8, num_heads=2, d_ff=24, num_layers=2, max_len=14, pad_id=0),
         dict(vocab_size=19, num_classes=6, d_model=12, num_heads=4, d_ff=16, num_layers=1, max_len=16, pad_id=2)],
        [dict(vocab_size=27, num_classes=4, d_model=18, num_heads=3, d_ff=12, num_layers=1, max_len=20, pad_id=0),
         dict(vocab_size=25, num_classes=5, d_model=8, num_heads=4, d_ff=20, num_layers=2, max_len=13, pad_id=5)],
        [dict(vocab_size=33, num_classes=5, d_model=16, num_heads=4, d_ff=28, num_layers=2, max_len=18, pad_id=0),
         dict(vocab_size=21, num_classes=3, d_model=14, num_heads=2, d_ff=10, num_layers=1, max_len=12, pad_id=1)]])
    lengths = pick("classifier.model_lengths", [[8, 5, 3], [7, 2, 5], [6, 4, 8, 3], [8, 6, 2]])  # max 8 <= max_len-4

    # the core: every optional argument at its default (pad_id 0, dropout 0.1 switched off by eval mode)
    for config in cases:
        _try_classifier(TransformerClassifier, reference, {**config, "pad_id": 0}, lengths, generator, device)
    # pad_id: the padding of the second case is another id (a real token 0 tells a hard-coded 0 apart)
    with argument("TransformerClassifier.pad_id"):
        for config in cases:
            if config["pad_id"] != 0:
                _try_classifier(TransformerClassifier, reference, config, lengths, generator, device)
    # dropout: dropout=0.0 in training mode drops nothing (the logits of eval mode), dropout=0.5 drops something
    with argument("TransformerClassifier.dropout"):
        config = {**cases[0], "pad_id": 0}
        for dropout in (0.0, 0.5):
            _try_classifier_dropout(TransformerClassifier, reference, config, lengths, generator, device, dropout)


def _try_classifier(TransformerClassifier, reference, config: dict, lengths: list[int], generator, device) -> None:
    """Build `TransformerClassifier(**config)`, load the reference's weights, run it on padded ids in eval mode and
    compare with the reference; more padding appended changes nothing."""
    model, ref_model, description = _build_classifier(TransformerClassifier, reference, config, device)
    call(f"{description}.eval()", model.attr("eval"))
    ids = _padded_ids(lengths, config["vocab_size"], config["pad_id"], generator).to(device)  # (B, T)
    shape = (len(lengths), config["num_classes"])
    with torch.no_grad():
        expected = ref_model(ids)  # eval mode
    logits = _check_tensor("TransformerClassifier.forward", call(
        f"{description}.forward(ids {tuple(ids.shape)})", model, ids, _no_grad=True, _seed=13), shape)
    longer = torch.cat([ids, torch.full((len(lengths), 4), config["pad_id"], device=device)], dim=1)  # (B, T+4)
    logits_longer = _check_tensor("TransformerClassifier.forward", call(
        f"{description}.forward(ids {tuple(longer.shape)})", model, longer, _no_grad=True), shape)
    if not values_close(logits, expected, device):
        mistake = diagnose(logits, lambda: M.classifier_mistakes(ref_model, ids, config["pad_id"],
                                                                 _reference().masked_mean_pool), device)
        _fail(f"{description}: logits differ from the reference with the same weights "
              f"(ids {tuple(ids.shape)} with real lengths {lengths}, pad_id={config['pad_id']}).",
              f"logits of shape {shape}", "different values", mistake)
    if not values_close(logits_longer, logits, device):
        _fail(f"{description}: the logits change when more padding is appended.",
              "padding to a longer length changes nothing", "different logits",
              "classifier.padding_not_excluded")


def _try_classifier_dropout(TransformerClassifier, reference, config: dict, lengths: list[int], generator, device,
                            dropout: float) -> None:
    """`TransformerClassifier(**config, dropout=dropout)` with the reference's weights on padded ids: in training
    mode the logits of eval mode for dropout=0.0 (nothing is dropped), other logits for dropout=0.5; back in eval
    mode the reference's (the toolkit's expect_dropout_acts, training mode first)."""
    model, ref_model, description = _build_classifier(TransformerClassifier, reference, config, device, dropout)
    ids = _padded_ids(lengths, config["vocab_size"], config["pad_id"], generator).to(device)  # (B, T)
    shape = (len(lengths), config["num_classes"])
    with torch.no_grad():
        expected = ref_model(ids)  # eval mode

    def forward(tested, seed):  # seeded in training mode only
        mode = "" if seed is None else " in training mode"
        return _check_tensor("TransformerClassifier.forward", call(
            f"{description}{mode}.forward(ids {tuple(ids.shape)})", model, ids, _no_grad=True, _seed=seed), shape)

    expect_dropout_acts(model, description, forward, expected, device, tested=f"ids {tuple(ids.shape)}",
                        hint="pass dropout on to Encoder(..., dropout) instead of a fixed value.", p=dropout,
                        eval_first=False, seed=13, what="logits")


def _build_classifier(TransformerClassifier, reference, config: dict, device, dropout: float | None = None):
    """`TransformerClassifier(**config)` (with `dropout` when given) with the contract's architecture, on `device`,
    holding the reference's weights (parameters and buffers): (model, the reference in eval mode, description)."""
    signature = ", ".join(f"{k}={v}" for k, v in config.items())
    extra = {} if dropout is None else {"dropout": dropout}
    description = f"TransformerClassifier({signature}{'' if dropout is None else f', dropout={dropout}'})"
    with seeded(11):
        ref_model = reference.TransformerClassifier(**config, **extra).to(device).eval()
    model = construct(TransformerClassifier, "TransformerClassifier", **config, **extra)
    described = describe(model, description)
    modules = {str(n): str(t) for n, t in described.get("modules", [])}
    if "encoder" not in modules:
        _fail(f"{description} has no submodule `encoder` of type Module.", "self.encoder = Encoder(...)", "None")
    if _linear_shape(described, "classifier") is None:
        _fail(f"{description} has no submodule `classifier` of type Linear.",
              "self.classifier = nn.Linear(d_model, num_classes)", _shown(described, "classifier"))
    theirs = {str(n): tuple(s) for n, s, *_ in [*described.get("parameters", []), *described.get("buffers", [])]}
    contract = {n: tuple(t.shape) for n, t in [*ref_model.named_parameters(), *ref_model.named_buffers()]}
    if set(contract) != set(theirs):
        missing, extra_names = sorted(set(contract) - set(theirs))[:4], sorted(set(theirs) - set(contract))[:4]
        _fail(f"{description}: the parameters do not match the contract's architecture.",
              "encoder = Encoder(vocab_size, d_model, num_heads, d_ff, num_layers, max_len, dropout), "
              "classifier = nn.Linear(d_model, num_classes)",
              f"missing {missing}, unexpected {extra_names}")
    for key, shape in contract.items():
        if theirs[key] != shape:
            _fail(f"{description}: parameter `{key}` has the wrong shape.", str(shape), str(theirs[key]))
    call(f"{description}.to(device)", model.attr("to"), device)
    state = {k: v.detach().clone() for k, v in ref_model.state_dict().items()}  # parameters and buffers
    try:
        model.load_state(state)
    except StudentError as error:
        fail(f"{description}: could not load the grader's weights into your module.",
             details=[f"{error.type_name}: {' '.join(error.message.split())[:200]}"])
    except ProbeBroken as error:
        fail(f"{description} could not be checked: {error}.")
    return model, ref_model, description


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
def _batches(sizes_and_lengths, vocab_size: int, seed: int) -> list[tuple[torch.Tensor, torch.Tensor]]:
    """Batches (ids, labels) drawn with this submission's seed for `seed`."""
    generator = seeded_generator(seed)
    batches = []
    for lengths in sizes_and_lengths:
        ids = _padded_ids(lengths, vocab_size, 0, generator)  # (B, T)
        labels = torch.randint(0, 5, (len(lengths),), generator=generator)  # (B,)
        batches.append((ids, labels))
    return batches


def _same_weights(got, expected: dict[str, torch.Tensor], device) -> bool:
    return isinstance(got, dict) and all(_weights_close(got.get(k), v, device) for k, v in expected.items())


def _loss_close(a: float, b: float) -> bool:
    return abs(a - b) <= 1e-4 + 1e-4 * abs(b)


@probed
def check_train_one_epoch(train_one_epoch) -> None:
    """One epoch on fixed batches from identical weights and optimizer: same loss and weights as the reference."""
    device = start_check()
    expect_callable(train_one_epoch, "train_one_epoch")
    reference = _reference()
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

    # the reference's run, here, on this submission's batches: the first (bounded search) on which its loss decreases
    for attempt in range(10):
        batches = _batches(sizes, vocab_size=PROBE_CONFIG["vocab_size"], seed=17 + 1000 * attempt)
        ref_model, ref_optimizer = fresh()
        ref_losses = []
        for epoch in range(2):
            with seeded(100 + epoch):
                ref_losses.append(float(reference.train_one_epoch(ref_model, batches, ref_optimizer, device)))
        if ref_losses[1] < ref_losses[0]:
            break
    ref_weights = {k: v.detach().clone() for k, v in ref_model.state_dict().items()}

    # the student's run, in the kernel
    model = _remote_probe(train_one_epoch.channel, state, device, description, training=False)
    optimizer = grader_step(description, lambda: _remote.new(
        train_one_epoch.channel, "torch.optim.SGD", model.attr("parameters")(), lr=lr, momentum=0.9))
    losses = [_as_number("train_one_epoch", call(description, train_one_epoch, model, batches, optimizer, device,
                                                 _seed=100 + epoch))
              for epoch in range(2)]
    weights = grader_step(description, model.state)
    records = _forward_calls(model)

    training_calls = [training for training, grad in records if grad]  # forward passes that can learn
    if len(training_calls) < 2 * len(batches):
        _fail(f"{description}: the model must run on every batch with gradients enabled.",
              f"at least {len(batches)} forward calls per epoch outside torch.no_grad()",
              f"{len(training_calls) / 2:g} per epoch", "training.under_no_grad"
              if len(records) >= 2 * len(batches) else None)
    if not all(training_calls):
        _fail(f"{description}: the model ran in evaluation mode.", "model.train() before the loop",
              "model.training == False during the forward pass", "training.no_train_mode")

    loss_ok = all(_loss_close(a, b) for a, b in zip(losses, ref_losses))
    params_ok = _same_weights(weights, ref_weights, device)
    if not (loss_ok and params_ok):
        def run_variant(options):
            def run():
                variant_model, variant_optimizer = fresh()
                results = []
                for epoch in range(2):
                    with seeded(100 + epoch):
                        results.append(M.train_variant(variant_model, batches, variant_optimizer, device, **options))
                return results, {k: v.detach().clone() for k, v in variant_model.state_dict().items()}
            return run

        def matches(variant_losses, variant_weights):
            same_losses = all(_loss_close(a, b) for a, b in zip(losses, variant_losses))
            if loss_ok:  # the loss is right: only the weights can tell the mistake
                return _same_weights(weights, variant_weights, device)
            if params_ok:  # the weights are right: only the returned value can tell
                return same_losses
            return same_losses and _same_weights(weights, variant_weights, device)

        mistake = None
        for name, options in M.TRAIN_MISTAKES.items():
            try:
                if matches(*run_variant(options)()):
                    mistake = name
                    break
            except Exception:  # noqa: BLE001 -- a variant that cannot run on these inputs just does not match
                continue
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


# ---------------------------------------------------------------------------------------------------- evaluation
def _wrong_values(correct: int, total: int, batch_accuracies: list[float], correct_training: int) -> dict:
    """Mistake id -> the value that mistake returns."""
    expected = correct / total
    return {"evaluate.percentage": 100 * expected,
            "evaluate.count": float(correct),
            "evaluate.mean_of_batches": sum(batch_accuracies) / len(batch_accuracies),
            "evaluate.error_rate": 1 - expected,
            "evaluate.divides_by_batches": correct / len(batch_accuracies),
            "evaluate.no_eval_mode": correct_training / total}


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
    values = [correct / total, *_wrong_values(correct, total, batch_accuracies, correct_training).values()]
    if disagreements == 0 or any(abs(a - b) <= 1e-6 for i, a in enumerate(values) for b in values[i + 1:]):
        return None
    return relabelled, correct, batch_accuracies, correct_training


@probed
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
    relabelled, correct, batch_accuracies, correct_training = found
    total = sum(len(y) for _, y in relabelled)
    expected = correct / total
    reference_value = float(_reference().evaluate(model, relabelled, device))
    assert abs(reference_value - expected) < 1e-9, "internal: reference evaluate disagrees with a direct count"

    description = f"evaluate(model, loader of {len(sizes)} batches with {total} examples, device)"
    # given in training mode with dropout on purpose
    remote = _remote_probe(evaluate.channel, state, device, description, training=True)
    value = _as_number("evaluate", call(description, evaluate, remote, relabelled, device, _seed=0))
    records = _forward_calls(remote)
    if records and any(training for training, _ in records):
        _fail(f"{description}: the model ran in training mode (dropout on).", "model.eval() before the loop",
              "model.training == True", "evaluate.no_eval_mode")
    if records and any(grad for _, grad in records):
        _fail(f"{description}: gradients were recorded during evaluation.", "with torch.no_grad(): ...",
              "gradients enabled", "evaluate.grad_enabled")
    if abs(value - expected) > 1e-6:
        candidates = _wrong_values(correct, total, batch_accuracies, correct_training)
        mistake = next((name for name, v in candidates.items() if abs(value - v) <= 1e-6), None)
        _fail(f"{description}: wrong accuracy.", f"{expected:.4f} (fraction of all examples predicted right)",
              f"{value:.4f}", mistake)

