"""A small public sequence-to-sequence model that the grader builds in a student's kernel to probe greedy decoding.

It has the decoding interface of the course's `Transformer` (`pad_id`, `encode`, `decode`, `forward`) but none
of its internals: it is not an answer to any exercise. The next-token logits depend on the whole target prefix
(a causal running mean of token + position embeddings, padding ignored) and on the source in order (a masked mean
of the encoded source tokens and their positions), so a decoder loop that feeds only the last token, forgets the
source mask, drops the prefix or reorders the source produces different tokens. The grader gives it its weights (`load_state_dict`) and builds the same model on its
own side to compute the expected tokens.
"""
from __future__ import annotations

import torch
from torch import nn


class DecodingProbe(nn.Module):
    def __init__(self, src_vocab_size: int, tgt_vocab_size: int, d_model: int = 12, max_len: int = 32,
                 pad_id: int = 0):
        super().__init__()
        self.pad_id = pad_id
        self.max_len = max_len
        self.src_embedding = nn.Embedding(src_vocab_size, d_model)
        self.src_positions = nn.Embedding(max_len, d_model)
        self.tgt_embedding = nn.Embedding(tgt_vocab_size, d_model)
        self.positions = nn.Embedding(max_len, d_model)
        self.mix = nn.Linear(2 * d_model, d_model)
        self.generator = nn.Linear(d_model, tgt_vocab_size)

    def encode(self, src_ids: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """(B, S) ids -> memory (B, S, d_model), src_mask (B, 1, 1, S) True at real tokens."""
        return encode_source(self, src_ids)

    def decode(self, tgt_ids: torch.Tensor, memory: torch.Tensor, src_mask: torch.Tensor) -> torch.Tensor:
        """(B, T) target ids -> logits (B, T, tgt_vocab_size); position t sees target positions <= t."""
        T = tgt_ids.size(1)
        if T > self.max_len:
            raise ValueError(f"target length {T} is longer than max_len {self.max_len}")
        source = pooled_source(memory, src_mask)                                    # (B, d)
        keep = (tgt_ids != self.pad_id).to(memory.dtype)[..., None]                 # (B, T, 1)
        positions = torch.arange(T, device=tgt_ids.device)
        x = (self.tgt_embedding(tgt_ids) + self.positions(positions)) * keep        # (B, T, d)
        prefix = x.cumsum(1) / keep.cumsum(1).clamp(min=1)                          # (B, T, d) causal mean
        h = torch.tanh(self.mix(torch.cat([prefix, source[:, None].expand_as(prefix)], dim=-1)))
        return self.generator(h)                                                    # (B, T, V)

    def forward(self, src_ids: torch.Tensor, tgt_ids: torch.Tensor) -> torch.Tensor:
        memory, src_mask = self.encode(src_ids)
        return self.decode(tgt_ids, memory, src_mask)


def encode_source(probe: nn.Module, src_ids: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """A probe's encoder (its `src_embedding`, `src_positions` and `pad_id`): (B, S) ids -> memory (B, S, d_model),
    src_mask (B, 1, 1, S) True at real tokens; the source in order, so a decoder that reorders it is seen."""
    positions = torch.arange(src_ids.size(1), device=src_ids.device)
    memory = torch.tanh(probe.src_embedding(src_ids) + probe.src_positions(positions))   # (B, S, d)
    return memory, (src_ids != probe.pad_id)[:, None, None, :]


def pooled_source(memory: torch.Tensor, src_mask: torch.Tensor) -> torch.Tensor:
    """The mean of the memory over the real source tokens: (B, S, d), (B, 1, 1, S) -> (B, d)."""
    keep = src_mask.reshape(src_mask.size(0), -1).to(memory.dtype)                      # (B, S)
    return (memory * keep[..., None]).sum(1) / keep.sum(1, keepdim=True).clamp(min=1)
