"""Known-mistake variants of notebook 07 (the Yelp review classifier): see the package doc."""
from __future__ import annotations

from typing import Callable

import torch
import torch.nn as nn
import torch.nn.functional as F


# ---------------------------------------------------------------------------------------------------- pooling
def pool_mistakes(x: torch.Tensor, mask: torch.Tensor) -> dict[str, Callable]:
    keep = mask.unsqueeze(-1).to(x.dtype)  # (B, T, 1)
    real = keep.sum(dim=1)  # (B, 1)
    return {
        "pool.includes_padding": lambda: x.mean(dim=1),
        "pool.divides_by_T": lambda: (x * keep).sum(1) / x.shape[1],
        "pool.mask_inverted": lambda: (x * (1 - keep)).sum(1) / (1 - keep).sum(1).clamp(min=1),
        "pool.no_division": lambda: (x * keep).sum(1),
        "pool.divides_by_batch_count": lambda: (x * keep).sum(1) / real.sum(),
    }


# ---------------------------------------------------------------------------------------------------- model
def classifier_mistakes(ref_model: nn.Module, ids: torch.Tensor, pad_id: int, masked_mean_pool) -> dict[str, Callable]:
    """The reference classifier's logits with one mistake each; `masked_mean_pool` is the reference's."""

    def encode(mask_pad_id: int | None):
        if mask_pad_id is None:
            return ref_model.encoder(ids)
        return ref_model.encoder(ids, (ids != mask_pad_id)[:, None, None, :])

    keep = ids != pad_id  # (B, T)
    return {
        "classifier.pool_includes_padding": lambda: ref_model.classifier(encode(pad_id).mean(dim=1)),
        "classifier.encoder_no_mask": lambda: ref_model.classifier(masked_mean_pool(encode(None), keep)),
        "classifier.pad_id_hardcoded": lambda: ref_model.classifier(masked_mean_pool(encode(0), ids != 0)),
        "classifier.returns_probabilities": lambda: ref_model(ids).softmax(dim=-1),
        "classifier.returns_log_probabilities": lambda: ref_model(ids).log_softmax(dim=-1),
        "classifier.first_position": lambda: ref_model.classifier(encode(pad_id)[:, 0]),
        "classifier.max_pooling":
            lambda: ref_model.classifier(encode(pad_id).masked_fill(~keep[..., None], float("-inf")).amax(1)),
    }


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


TRAIN_MISTAKES = {  # mistake id -> the switches of `train_variant` that make it
    "training.no_zero_grad": dict(zero_grad=False),
    "training.softmax_before_loss": dict(loss_fn=lambda logits, y: F.cross_entropy(logits.softmax(-1), y)),
    "training.nll_on_logits": dict(loss_fn=lambda logits, y: F.nll_loss(logits, y)),
    "training.loss_summed": dict(loss_fn=lambda logits, y: F.cross_entropy(logits, y, reduction="sum")),
    "training.no_step": dict(step=False),
    "training.returns_sum": dict(result="sum"),
    "training.returns_last": dict(result="last"),
    "training.returns_first": dict(result="first"),
    "training.no_train_mode": dict(train=False),
}
