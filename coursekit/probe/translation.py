"""Small public helpers that the grader builds in a student's kernel to probe notebook 10's functions.

Neither is an answer to an exercise:

- `BeamSearchProbe`: a tiny model with the decoding interface of the course's `Transformer` (`pad_id`, `encode`,
  `decode`, `forward`) and none of its internals, small enough that every output sequence of a few tokens can be
  scored. Its dropout (training mode only) drops logits chosen from each position's target prefix, not at random,
  so decoding in training mode gives the same (wrong) tokens however the hypotheses are batched, and forgetting
  `model.eval()` shows as a reproducible difference.
- `loss_and_gradient(loss_fn, logits, *args, **kwargs)`: calls a loss function on a copy of `logits` that requires
  gradients and back-propagates from the result, as a training loop does; returns the loss and the gradient that
  reached the logits (None when the result is not connected to them).
"""
from __future__ import annotations

import torch
from torch import nn

from .decoding import encode_source, pooled_source


class BeamSearchProbe(nn.Module):
    """A tiny sequence-to-sequence model for probing decoders: each target prefix gets its own random-looking
    next-token distribution (the prefix's state is the running SUM of embeddings of (token, position) pairs, so it
    never settles into repeating one token), which makes hypotheses of different lengths compete, as in a real
    translator. In training mode a share `dropout` of the logits is dropped (zeroed, the rest scaled by
    1 / (1 - dropout)) by a mask computed from the prefix, not drawn at random."""

    def __init__(self, src_vocab_size: int, tgt_vocab_size: int, d_model: int = 12, max_len: int = 16,
                 pad_id: int = 0, dropout: float = 0.5):
        super().__init__()
        if not 0.0 <= dropout < 1.0:
            raise ValueError(f"dropout must be in [0, 1), got {dropout}")
        self.pad_id, self.max_len, self.dropout = pad_id, max_len, float(dropout)
        self.tgt_vocab_size = tgt_vocab_size
        self.src_embedding = nn.Embedding(src_vocab_size, d_model)
        self.src_positions = nn.Embedding(max_len, d_model)
        self.tgt_embedding = nn.Embedding(max_len * tgt_vocab_size, d_model)   # one row per (position, token)
        self.hidden = nn.Linear(2 * d_model, d_model)
        self.generator = nn.Linear(d_model, tgt_vocab_size)
        self.position_bias = nn.Parameter(torch.zeros(max_len, tgt_vocab_size))   # e.g. <eos> likelier later

    def encode(self, src_ids: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """(B, S) ids -> memory (B, S, d_model), src_mask (B, 1, 1, S) True at real tokens."""
        return encode_source(self, src_ids)

    def decode(self, tgt_ids: torch.Tensor, memory: torch.Tensor, src_mask: torch.Tensor) -> torch.Tensor:
        """(B, T) target ids -> logits (B, T, tgt_vocab_size); position t sees target positions <= t."""
        T = tgt_ids.size(1)
        if T > self.max_len:
            raise ValueError(f"target length {T} is longer than max_len {self.max_len}")
        source = pooled_source(memory, src_mask)                                            # (B, d)
        keep = (tgt_ids != self.pad_id).to(memory.dtype)[..., None]                         # (B, T, 1)
        positions = torch.arange(T, device=tgt_ids.device)[None, :]                         # (1, T)
        x = self.tgt_embedding(positions * self.tgt_vocab_size + tgt_ids) * keep            # (B, T, d)
        state = torch.tanh(x.cumsum(1))                                                     # (B, T, d) causal
        h = torch.tanh(self.hidden(torch.cat([state, source[:, None].expand_as(state)], dim=-1)))
        logits = self.generator(h) + self.position_bias[:T]                                 # (B, T, V)
        if self.training and self.dropout > 0:
            logits = logits * self.drop_mask(tgt_ids, logits.size(-1)).to(logits.dtype)
        return logits

    def forward(self, src_ids: torch.Tensor, tgt_ids: torch.Tensor) -> torch.Tensor:
        memory, src_mask = self.encode(src_ids)
        return self.decode(tgt_ids, memory, src_mask)

    def drop_mask(self, tgt_ids: torch.Tensor, width: int) -> torch.Tensor:
        """(B, T, width): 0 for the dropped logits, 1 / (1 - dropout) for the kept ones; at position t a function
        of tgt_ids[:, :t + 1] and t only (causal, like the logits)."""
        prefix = tgt_ids.long().cumsum(dim=1) % 997                                         # (B, T)
        position = torch.arange(tgt_ids.size(1), device=tgt_ids.device)[None, :, None]      # (1, T, 1)
        feature = torch.arange(width, device=tgt_ids.device)[None, None, :]                 # (1, 1, width)
        score = (prefix[..., None] * 31 + feature * 17 + position * 13 + prefix[..., None] * feature * 7) % 100
        keep = (score >= round(100 * self.dropout)).to(torch.get_default_dtype())
        return keep / (1.0 - self.dropout)


def loss_and_gradient(loss_fn, logits: torch.Tensor, *args, **kwargs):
    """(loss, d loss / d logits or None) for loss_fn(logits, *args, **kwargs), back-propagated as in training."""
    leaf = logits.detach().clone().requires_grad_(True)
    with torch.enable_grad():
        loss = loss_fn(leaf, *args, **kwargs)
        if isinstance(loss, torch.Tensor) and loss.requires_grad and loss.numel() == 1:
            loss.backward()
    value = loss.detach() if isinstance(loss, torch.Tensor) else loss
    return value, leaf.grad
