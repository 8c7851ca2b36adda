"""Small public models that the course grader builds inside a student's kernel to exercise the student's code.

They are not the course's models and nothing a student writes: the grader constructs one in the kernel
(`autograder.checks.kit.remote.new(channel, "coursekit.probe.models.<Class>", ...)`), loads weights it generated, hands
it to the student's function (e.g. `train_one_epoch(model, ...)`) and reads the outcome back as data (the returned
values, the weights after the call). It builds the same class with the same weights in its own process to compute
what the outcome should be. Each section below belongs to one notebook's checks and is self-contained.
"""
from __future__ import annotations

import torch
from torch import nn


# --- classifier probes (notebook 07: train_one_epoch, evaluate)
class BagOfEmbeddingsClassifier(nn.Module):
    """ids (B, T) -> logits (B, num_classes): mean of the real tokens' embeddings -> tanh layer -> linear layer.

    Two things make a check's outcome depend on how the model was used:

    - training mode changes the output: in training mode a fixed share `dropout` of the hidden features is dropped
      (the rest scaled by 1 / (1 - dropout)). The dropped features are chosen from the ids, not at random, so the
      same batch gives the same output every time (an extra forward pass or a different RNG state changes nothing),
      while forgetting `model.train()` / `model.eval()` changes the numbers.
    - `calls` records `(self.training, torch.is_grad_enabled())` for every forward call, in order. The grader reads
      it to explain a failure (e.g. "forgot model.train()"); the verdict itself comes from returned values and
      weights, which the list cannot change.
    """

    def __init__(self, vocab_size: int, num_classes: int = 5, d_model: int = 16, dropout: float = 0.5,
                 pad_id: int = 0):
        super().__init__()
        if not 0.0 <= dropout < 1.0:
            raise ValueError(f"dropout must be in [0, 1), got {dropout}")
        self.pad_id = pad_id
        self.dropout = float(dropout)
        self.embedding = nn.Embedding(vocab_size, d_model)
        self.hidden = nn.Linear(d_model, d_model)
        self.classifier = nn.Linear(d_model, num_classes)
        self.calls: list[tuple[bool, bool]] = []

    def drop_mask(self, ids: torch.Tensor, width: int) -> torch.Tensor:
        """(B, width) float: 0 for the dropped features, 1 / (1 - dropout) for the kept ones; a function of the ids."""
        per_row = ids.long().sum(dim=1, keepdim=True) % 997                          # (B, 1)
        feature = torch.arange(width, device=ids.device)[None, :]                     # (1, width)
        score = (per_row * 31 + feature * 17 + per_row * feature * 7) % 100          # (B, width) in 0..99
        keep = (score >= round(100 * self.dropout)).float()
        return keep / (1.0 - self.dropout)

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        self.calls.append((bool(self.training), bool(torch.is_grad_enabled())))
        keep = (ids != self.pad_id).unsqueeze(-1).float()                           # (B, T, 1)
        summed = (self.embedding(ids) * keep).sum(dim=1)                              # (B, d_model)
        pooled = summed / keep.sum(dim=1).clamp(min=1.0)                              # (B, d_model)
        hidden = torch.tanh(self.hidden(pooled))                                      # (B, d_model)
        if self.training and self.dropout > 0:
            hidden = hidden * self.drop_mask(ids, hidden.shape[-1])
        return self.classifier(hidden)                                                # (B, num_classes)


# --- language-model probes (notebook 08: estimate_loss, generate)
class LanguageModelProbe(nn.Module):
    """ids (B, T) -> next-token logits (B, T, vocab_size), causal: position t sees the window's tokens 0..t only.

    The logits at t come from a running mean of token + position embeddings over positions <= t of the window it is
    given, so they depend on where the window starts (a generator that does not crop to the last `max_len` tokens,
    or takes the wrong position's logits, gets other tokens); `T > max_len` raises ValueError as the course's GPT
    does. In training mode a share `dropout` of the hidden features is dropped, chosen from the ids (not at random),
    so train mode changes the numbers reproducibly. `calls` records `(self.training, torch.is_grad_enabled())` for
    every forward call, for the grader's explanations.
    """

    def __init__(self, vocab_size: int, d_model: int = 8, max_len: int = 16, dropout: float = 0.5):
        super().__init__()
        if not 0.0 <= dropout < 1.0:
            raise ValueError(f"dropout must be in [0, 1), got {dropout}")
        self.max_len = max_len
        self.dropout = float(dropout)
        self.token_embedding = nn.Embedding(vocab_size, d_model)
        self.position_embedding = nn.Embedding(max_len, d_model)
        self.hidden = nn.Linear(d_model, d_model)
        self.lm_head = nn.Linear(d_model, vocab_size)
        self.calls: list[tuple[bool, bool]] = []

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        self.calls.append((bool(self.training), bool(torch.is_grad_enabled())))
        T = ids.size(1)
        if T > self.max_len:
            raise ValueError(f"sequence length {T} is longer than max_len {self.max_len}")
        positions = torch.arange(T, device=ids.device)
        x = self.token_embedding(ids) + self.position_embedding(positions)            # (B, T, d)
        counts = torch.arange(1, T + 1, device=ids.device, dtype=x.dtype)[None, :, None]
        prefix = x.cumsum(dim=1) / counts                                             # (B, T, d) causal mean
        hidden = torch.tanh(self.hidden(prefix))                                      # (B, T, d)
        if self.training and self.dropout > 0:
            width = hidden.shape[-1]
            score = (ids.long()[..., None] * 31 + torch.arange(width, device=ids.device) * 17) % 100   # (B, T, d)
            hidden = hidden * (score >= round(100 * self.dropout)).to(hidden.dtype) / (1.0 - self.dropout)
        return self.lm_head(hidden)                                                   # (B, T, V)
