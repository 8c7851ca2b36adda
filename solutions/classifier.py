"""07 - A Transformer encoder that reads a review and predicts its star rating (labels 0..4).

Shapes: B = batch, T = review length, d_model = model width, C = number of classes.
"""
from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from solutions.attention import make_padding_mask
from solutions.encoder import Encoder


def masked_mean_pool(x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Average of x over the positions where mask is True: (B, T, d), (B, T) -> (B, d)."""
    if mask.shape != x.shape[:2]:
        raise ValueError(f"mask shape {tuple(mask.shape)} does not match x's (B, T) = {tuple(x.shape[:2])}")
    keep = mask.to(x.dtype).unsqueeze(-1)                  # (B, T, 1)
    total = (x * keep).sum(dim=1)                          # (B, d)
    count = keep.sum(dim=1).clamp(min=1.0)                 # (B, 1); an all-padding row gives zeros, not NaN
    return total / count


class TransformerClassifier(nn.Module):
    """Encoder -> mean of the real (non-padding) positions -> linear layer to class logits."""

    def __init__(self, vocab_size: int, num_classes: int = 5, d_model: int = 64, num_heads: int = 4,
                 d_ff: int = 128, num_layers: int = 2, max_len: int = 256, dropout: float = 0.1, pad_id: int = 0):
        super().__init__()
        self.pad_id = pad_id
        self.encoder = Encoder(vocab_size, d_model, num_heads, d_ff, num_layers, max_len, dropout)
        self.classifier = nn.Linear(d_model, num_classes)

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        # ids: (B, T) -> logits (B, C)
        mask = make_padding_mask(ids, self.pad_id)         # (B, 1, 1, T)
        hidden = self.encoder(ids, mask)                   # (B, T, d_model)
        pooled = masked_mean_pool(hidden, mask[:, 0, 0])   # (B, d_model)
        return self.classifier(pooled)


def train_one_epoch(model: nn.Module, loader, optimizer, device) -> float:
    """One pass over `loader` of (ids, labels) batches; returns the mean of the batch losses."""
    model.train()
    losses = []
    for ids, labels in loader:
        ids, labels = ids.to(device), labels.to(device)
        loss = F.cross_entropy(model(ids), labels)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
    if not losses:
        raise ValueError("the loader produced no batches")
    return sum(losses) / len(losses)


@torch.no_grad()
def evaluate(model: nn.Module, loader, device) -> float:
    """Fraction of all examples whose highest logit is the label."""
    model.eval()
    correct, total = 0, 0
    for ids, labels in loader:
        ids, labels = ids.to(device), labels.to(device)
        correct += (model(ids).argmax(dim=-1) == labels).sum().item()
        total += labels.numel()
    if total == 0:
        raise ValueError("the loader produced no examples")
    return correct / total
