"""What several public checks of notebook 08 share: a tiny causal language model that records how it is called
(`estimate_loss` and `generate` run on it)."""
from __future__ import annotations

import torch
from torch import nn


class CountingModel(nn.Module):
    """A tiny causal language model with dropout: it records (training, grad enabled) of every call."""

    def __init__(self):
        super().__init__()
        generator = torch.Generator().manual_seed(3)
        self.table = nn.Parameter(torch.randn(7, 7, generator=generator))
        self.drop = nn.Dropout(0.5)
        self.max_len = 8
        self.calls = []

    def forward(self, ids):
        self.calls.append((self.training, torch.is_grad_enabled()))
        x = self.table[ids].cumsum(1) / torch.arange(1, ids.size(1) + 1, device=ids.device)[None, :, None]
        return self.drop(x)
