"""Known-mistake variants of notebook 07 (the Yelp review classifier), and the table of the mistakes they make.

`TABLE` = {mistake id: (variant, switches)}: the variant run with those switches on a check's own inputs gives that
mistake's answer (`kit.compare.from_table`); with every switch off, each variant is the reference. Each check tries
the rows of its variant (`ids_of(variant)`) in the table's order, the first match naming the mistake.
"""
from __future__ import annotations

import torch
import torch.nn as nn
import torch.nn.functional as F


# ---------------------------------------------------------------------------------------------------- pooling
def pool(x: torch.Tensor, mask: torch.Tensor, *, include_padding: bool = False, invert_mask: bool = False,
         divide_by: str = "row") -> torch.Tensor:
    """masked_mean_pool (B, T, d), (B, T) -> (B, d) with switches: the plain mean over all T positions
    (`include_padding`), the padding kept instead of the real tokens (`invert_mask`), and the count divided by:
    "row" (the real tokens of each row), "T", "batch" (all real tokens of the batch) or "none"."""
    if include_padding:
        return x.mean(dim=1)
    keep = mask.unsqueeze(-1).to(x.dtype)                                                    # (B, T, 1)
    if invert_mask:
        keep = 1 - keep
    total = (x * keep).sum(1)                                                                # (B, d)
    count = {"row": lambda: keep.sum(1).clamp(min=1), "T": lambda: x.shape[1], "batch": lambda: keep.sum(),
             "none": lambda: None}[divide_by]()
    return total if count is None else total / count


# ---------------------------------------------------------------------------------------------------- model
def classifier(model: nn.Module, ids: torch.Tensor, pad_id: int, *, encoder_mask: bool = True,
               hardcoded_pad: int | None = None, pooling: str = "mean", output: str = "logits") -> torch.Tensor:
    """The reference classifier `model`'s forward on ids (B, T) with switches: no padding mask for the encoder,
    a hard-coded padding id, the pooling ("mean" over the real positions, "all" positions, the "first" one, "max"
    over the real ones), and what is returned ("logits", "probabilities", "log_probabilities")."""
    keep = ids != (pad_id if hardcoded_pad is None else hardcoded_pad)                      # (B, T)
    hidden = model.encoder(ids, keep[:, None, None, :] if encoder_mask else None)           # (B, T, d_model)
    pooled = {"mean": lambda: pool(hidden, keep), "all": lambda: hidden.mean(dim=1), "first": lambda: hidden[:, 0],
              "max": lambda: hidden.masked_fill(~keep[..., None], float("-inf")).amax(1)}[pooling]()
    logits = model.classifier(pooled)                                                        # (B, num_classes)
    return {"logits": logits, "probabilities": logits.softmax(dim=-1),
            "log_probabilities": logits.log_softmax(dim=-1)}[output]


# ---------------------------------------------------------------------------------------------------- training
def train_variant(model, batches, optimizer, device, loss_fn=None, zero_grad=True, step=True,
                  result="mean", train=True):
    """One epoch of training written with a switchable mistake; returns the float the variant would return."""
    if train:
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


# ---------------------------------------------------------------------------------------------------- evaluation
def accuracy(correct: int, total: int, batch_accuracies: list[float], correct_training: int, *,
             result: str = "fraction") -> float:
    """What evaluate returns, from the counts of one run: `correct` of `total` examples right in eval mode,
    `batch_accuracies` each batch's fraction, `correct_training` right in training mode. `result`: "fraction" (the
    reference), "percentage", "count", "mean_of_batches", "error_rate", "per_batch" (divided by the number of
    batches), "training_mode" (the fraction right in training mode)."""
    fraction = correct / total
    return {"fraction": lambda: fraction, "percentage": lambda: 100 * fraction, "count": lambda: float(correct),
            "mean_of_batches": lambda: sum(batch_accuracies) / len(batch_accuracies),
            "error_rate": lambda: 1 - fraction, "per_batch": lambda: correct / len(batch_accuracies),
            "training_mode": lambda: correct_training / total}[result]()


# ---------------------------------------------------------------------------------------------------- the table
TABLE = {
    # masked_mean_pool: pool(x, mask, **switches)
    "pool.includes_padding": (pool, {"include_padding": True}),
    "pool.divides_by_T": (pool, {"divide_by": "T"}),
    "pool.mask_inverted": (pool, {"invert_mask": True}),
    "pool.no_division": (pool, {"divide_by": "none"}),
    "pool.divides_by_batch_count": (pool, {"divide_by": "batch"}),
    # TransformerClassifier: classifier(reference model, ids, pad_id, **switches)
    "classifier.pool_includes_padding": (classifier, {"pooling": "all"}),
    "classifier.encoder_no_mask": (classifier, {"encoder_mask": False}),
    "classifier.pad_id_hardcoded": (classifier, {"hardcoded_pad": 0}),
    "classifier.returns_probabilities": (classifier, {"output": "probabilities"}),
    "classifier.returns_log_probabilities": (classifier, {"output": "log_probabilities"}),
    "classifier.first_position": (classifier, {"pooling": "first"}),
    "classifier.max_pooling": (classifier, {"pooling": "max"}),
    # train_one_epoch: train_variant(model, batches, optimizer, device, **switches), two epochs from the same start
    "training.no_zero_grad": (train_variant, dict(zero_grad=False)),
    "training.softmax_before_loss": (train_variant,
                                     dict(loss_fn=lambda logits, y: F.cross_entropy(logits.softmax(-1), y))),
    "training.nll_on_logits": (train_variant, dict(loss_fn=lambda logits, y: F.nll_loss(logits, y))),
    "training.loss_summed": (train_variant,
                             dict(loss_fn=lambda logits, y: F.cross_entropy(logits, y, reduction="sum"))),
    "training.no_step": (train_variant, dict(step=False)),
    "training.returns_sum": (train_variant, dict(result="sum")),
    "training.returns_last": (train_variant, dict(result="last")),
    "training.returns_first": (train_variant, dict(result="first")),
    "training.no_train_mode": (train_variant, dict(train=False)),
    # evaluate: accuracy(correct, total, batch_accuracies, correct_training, **switches)
    "evaluate.percentage": (accuracy, {"result": "percentage"}),
    "evaluate.count": (accuracy, {"result": "count"}),
    "evaluate.mean_of_batches": (accuracy, {"result": "mean_of_batches"}),
    "evaluate.error_rate": (accuracy, {"result": "error_rate"}),
    "evaluate.divides_by_batches": (accuracy, {"result": "per_batch"}),
    "evaluate.no_eval_mode": (accuracy, {"result": "training_mode"}),
}


def ids_of(variant) -> tuple[str, ...]:
    """The ids of TABLE's rows that run `variant`, in table order."""
    return tuple(mistake_id for mistake_id, (row_variant, _switches) in TABLE.items() if row_variant is variant)
