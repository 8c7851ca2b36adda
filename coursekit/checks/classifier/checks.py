"""Public self-checks of notebook 07 (the Yelp review classifier).

Small fixed examples whose answers are worked out here by simple means (hand-made numbers, a NumPy cross-entropy,
a toy model whose predictions are known), plus shape checks and a HINT for each likely mistake.
"""
from __future__ import annotations

import math

import numpy as np
import torch
import torch.nn as nn

from coursekit.checks.toolkit import (
    expect_shape, expect_type, fail, first_matching_hint, isclose, mistake_hint, passed, run,
)
from coursekit.checks.toolkit import uses_parts
from coursekit.criteria import argument

__all__ = ["check_masked_mean_pool", "check_transformer_classifier", "check_train_one_epoch", "check_evaluate"]


# ---------------------------------------------------------------------------------------------------- pooling
def check_masked_mean_pool(masked_mean_pool) -> None:
    # two reviews of 3 and 1 real tokens, padded to T = 4, with d = 2 features
    x = torch.tensor([[[1.0, 2.0], [3.0, 4.0], [5.0, 9.0], [100.0, 100.0]],
                      [[2.0, -2.0], [7.0, 7.0], [7.0, 7.0], [7.0, 7.0]]])  # (B=2, T=4, d=2)
    mask = torch.tensor([[True, True, True, False], [True, False, False, False]])  # (B, T)
    x_before = x.clone()
    out = run("masked_mean_pool", masked_mean_pool, x, mask)
    expect_type(out, torch.Tensor, "masked_mean_pool(x, mask)")
    expect_shape(out, (2, 2), "masked_mean_pool(x (2, 4, 2), mask (2, 4))",
                 "average over the time axis (dim=1), keeping the batch and feature axes.")
    if not torch.equal(x, x_before):
        fail("masked_mean_pool changed x in place.", "use out-of-place operations such as `x * m`.")
    expected = np.array([[3.0, 5.0], [2.0, -2.0]])  # (1+3+5)/3, (2+4+9)/3 ; the single real token
    if not np.allclose(out.detach().cpu().double().numpy(), expected, atol=1e-5):
        hint = first_matching_hint(out, [
            (x.mean(dim=1), mistake_hint("pool.includes_padding", "multiply by the mask before summing, then "
                                                                  "divide by the number of real tokens.")),
            ([[2.25, 3.75], [0.5, -0.5]], mistake_hint("pool.divides_by_T", "divide by mask.sum(dim=1).")),
            ([[9.0, 15.0], [2.0, -2.0]], mistake_hint("pool.no_division")),
            ([[100.0, 100.0], [7.0, 7.0]], mistake_hint("pool.mask_inverted")),
        ])
        fail(f"masked_mean_pool gives {out.detach().cpu().numpy().round(4).tolist()}, expected "
             f"{expected.tolist()} (mean over the real positions only).", hint)
    passed("masked_mean_pool")


# ---------------------------------------------------------------------------------------------------- model
def _padding_invariance(model, ids: torch.Tensor, pad_id: int, name: str) -> torch.Tensor:
    longer = torch.cat([ids, torch.full((ids.shape[0], 3), pad_id)], dim=1)  # 3 more padding columns
    with torch.no_grad():
        logits = run(name, model, ids)
        logits_longer = run(name, model, longer)
    expect_type(logits, torch.Tensor, f"{name}(ids)")
    if logits.shape != logits_longer.shape or not torch.allclose(logits, logits_longer, atol=1e-4, rtol=1e-4):
        fail(f"{name}: the logits change when more padding ({pad_id}) is appended to the same reviews.",
             mistake_hint("classifier.padding_not_excluded",
                          "padding must change nothing: give the encoder the padding mask (make_padding_mask(ids, "
                          "self.pad_id)) and pool with masked_mean_pool over the real positions only."))
    return logits


@uses_parts("TransformerClassifier")
def check_transformer_classifier(TransformerClassifier) -> None:
    if not (isinstance(TransformerClassifier, type) and issubclass(TransformerClassifier, nn.Module)):
        fail("TransformerClassifier should be a class that derives from nn.Module.")
    torch.manual_seed(0)
    config = dict(vocab_size=20, num_classes=5, d_model=8, num_heads=2, d_ff=16, num_layers=1, max_len=16)
    model = run("TransformerClassifier", TransformerClassifier, **config)
    for name in ("encoder", "classifier"):
        if not isinstance(getattr(model, name, None), nn.Module):
            fail(f"TransformerClassifier has no submodule `self.{name}`.",
                 "create `self.encoder = Encoder(...)` and `self.classifier = nn.Linear(d_model, num_classes)` in "
                 "__init__ (the names matter: grading copies weights by name).")
    if not isinstance(model.classifier, nn.Linear) or (model.classifier.in_features,
                                                       model.classifier.out_features) != (8, 5):
        fail(f"self.classifier should be nn.Linear(d_model=8, num_classes=5), got {model.classifier}.")
    model.eval()
    ids = torch.tensor([[5, 3, 9, 2, 7, 4], [6, 1, 8, 0, 0, 0], [11, 12, 0, 0, 0, 0]])  # (B=3, T=6), pad 0
    logits = _padding_invariance(model, ids, 0, "TransformerClassifier.forward")
    expect_shape(logits, (3, 5), "model(ids (3, 6))", "return one row of num_classes logits per review.")
    if not torch.isfinite(logits).all():
        fail("the logits contain NaN or inf.", "check the pooling: divide by the count of real tokens.")
    rows = logits.detach().double()
    if (rows >= 0).all() and torch.allclose(rows.sum(-1), torch.ones(3, dtype=rows.dtype), atol=1e-5):
        fail("forward returns probabilities.", mistake_hint("classifier.returns_probabilities",
                                                            "return the output of self.classifier as it is."))
    if (rows <= 0).all() and torch.allclose(rows.exp().sum(-1), torch.ones(3, dtype=rows.dtype), atol=1e-5):
        fail("forward returns log-probabilities.", mistake_hint("classifier.returns_log_probabilities",
                                                                "return the output of self.classifier as it is."))
    if torch.allclose(rows[0], rows[1], atol=1e-6):
        fail("two different reviews get identical logits.", "the logits must depend on the tokens of each review.")

    with argument("TransformerClassifier.pad_id"):
        torch.manual_seed(0)
        model7 = run("TransformerClassifier", TransformerClassifier, **config, pad_id=7).eval()
        ids7 = torch.tensor([[5, 3, 9, 0, 4], [6, 1, 7, 7, 7]])  # pad_id = 7 here; 0 is a real token
        _padding_invariance(model7, ids7, 7, "TransformerClassifier(..., pad_id=7).forward")

    with argument("TransformerClassifier.dropout"):  # the same weights in training mode
        for p in (0.0, 0.5):
            torch.manual_seed(0)
            dropped = run("TransformerClassifier", TransformerClassifier, **config, dropout=p)
            run("load_state_dict", dropped.load_state_dict, model.state_dict())
            dropped.train()
            with torch.no_grad():
                trained = run(f"TransformerClassifier(..., dropout={p}).forward", dropped, ids)
            same = isinstance(trained, torch.Tensor) and trained.shape == logits.shape and \
                torch.allclose(trained, logits, atol=1e-5, rtol=1e-5)
            if p == 0.0 and not same:
                fail("TransformerClassifier(..., dropout=0.0) in training mode gives other logits than in eval mode.",
                     "with dropout=0.0 nothing is dropped: pass dropout on to Encoder(..., dropout).")
            if p > 0.0 and same:
                fail("TransformerClassifier(..., dropout=0.5) in training mode gives the logits of eval mode.",
                     "dropout acts in training mode: pass dropout on to Encoder(..., dropout).")
    passed("TransformerClassifier")


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
        fail("the model ran in evaluation mode.",
             mistake_hint("training.no_train_mode", "call model.train() at the start of train_one_epoch."))
    if len(optimizer.seen) != 3:
        fail(f"optimizer.step() ran {len(optimizer.seen)} times for 3 batches.", "step once per batch.")
    if any(g is None or not torch.count_nonzero(g) for g in optimizer.seen):
        fail("optimizer.step() saw no gradient.", mistake_hint("training.no_step", "the order is: "
                                                               "optimizer.zero_grad(), loss.backward(), "
                                                               "optimizer.step()."))
    if not all(torch.allclose(g, optimizer.seen[0], atol=1e-6) for g in optimizer.seen):
        fail("the gradient grows from batch to batch although every batch is the same.",
             mistake_hint("training.no_zero_grad", "call optimizer.zero_grad() for every batch."))

    logits = torch.sin(torch.arange(30.0).reshape(6, 5)).numpy()[ids.numpy()].mean(axis=1)  # (B, C)
    expected = _numpy_cross_entropy(logits, labels.numpy())
    if not isclose(float(value), expected, tol=1e-4):
        probs = np.exp(logits) / np.exp(logits).sum(axis=1, keepdims=True)
        candidates = {
            mistake_hint("training.softmax_before_loss"):
                _numpy_cross_entropy(probs, labels.numpy()),
            mistake_hint("training.nll_on_logits"): float(-logits[np.arange(4), labels.numpy()].mean()),
            mistake_hint("training.loss_summed", "use the mean."): 4 * expected,
            mistake_hint("training.returns_sum", "return the MEAN of the batch losses."): 3 * expected,
        }
        hint = next((h for h, v in candidates.items() if isclose(float(value), v, tol=1e-4)), None)
        fail(f"train_one_epoch returned {float(value):.5f}; the mean cross-entropy of these batches is "
             f"{expected:.5f}.", hint)

    # with a real learning rate the loss must go down on a batch seen again and again
    model = _ToyModel()
    optimizer = torch.optim.SGD(model.parameters(), lr=1.0)
    losses = [float(run("train_one_epoch", train_one_epoch, model, [(ids, labels)], optimizer, "cpu"))
              for _ in range(5)]
    if not losses[-1] < losses[0] - 1e-3:
        fail(f"the loss does not go down over 5 epochs on one batch: {[round(v, 4) for v in losses]}.",
             mistake_hint("training.no_step", "call loss.backward() and optimizer.step() for every batch."))
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
        fail("the model ran in training mode.",
             mistake_hint("evaluate.no_eval_mode", "call model.eval() at the start of evaluate."))
    if any(grad for _, grad in model.modes):
        fail("gradients were recorded during evaluation.",
             mistake_hint("evaluate.grad_enabled", "wrap the loop in `with torch.no_grad():`."))
    if not math.isclose(float(value), 0.7, abs_tol=1e-6):
        hints = {70.0: mistake_hint("evaluate.percentage"),
                 7.0: mistake_hint("evaluate.count", "divide the number of correct predictions by the number of "
                                                     "examples."),
                 7 / 3: mistake_hint("evaluate.divides_by_batches", "add up labels.size(0) of each batch (10 here)."),
                 (1 + 0.5 + 0.5) / 3: mistake_hint("evaluate.mean_of_batches", "count correct predictions over "
                                                                               "ALL examples."),
                 0.3: mistake_hint("evaluate.error_rate", "return the fraction predicted RIGHT.")}
        hint = next((h for v, h in hints.items() if math.isclose(float(value), v, abs_tol=1e-6)), None)
        fail(f"evaluate returned {float(value):.4f}; the model is right on 7 of the 10 examples (0.7).", hint)
    passed("evaluate")
