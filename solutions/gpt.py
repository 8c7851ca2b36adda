"""08 - A GPT language model: byte-level BPE, a decoder-only Transformer built from 05's blocks, training, sampling.

Shapes: B = batch, T = context length (<= max_len), V = vocabulary size, d_model = model width.
"""
from __future__ import annotations

import math
from collections import Counter

import torch
import torch.nn.functional as F
from torch import nn

from solutions.attention import make_causal_mask
from solutions.embeddings import TokenEmbedding
from solutions.encoder import EncoderBlock
from solutions.positional import LearnedPositionalEmbedding


# ------------------------------------------------------------------------------------------- byte-level BPE

def merge_pair(ids: list[int], pair: tuple[int, int], new_id: int) -> list[int]:
    """Replace every occurrence of `pair` in `ids`, left to right without overlap, by `new_id`."""
    out, i = [], 0
    while i < len(ids):
        if i + 1 < len(ids) and ids[i] == pair[0] and ids[i + 1] == pair[1]:
            out.append(new_id)
            i += 2
        else:
            out.append(ids[i])
            i += 1
    return out


def train_bpe(text: str, num_merges: int) -> list[tuple[int, int]]:
    """The merges byte-level BPE learns on `text`, in order: merge k makes token 256 + k."""
    ids = list(text.encode("utf-8"))
    merges = []
    for k in range(num_merges):
        counts = Counter(zip(ids, ids[1:]))      # insertion order = order of first occurrence
        if not counts:
            break
        pair = max(counts, key=counts.__getitem__)  # max keeps the first of equal counts: the earliest pair
        if counts[pair] < 2:
            break
        ids = merge_pair(ids, pair, 256 + k)
        merges.append(pair)
    return merges


def bpe_encode(text: str, merges: list[tuple[int, int]]) -> list[int]:
    """UTF-8 bytes of `text`, then every merge in the order learned."""
    ids = list(text.encode("utf-8"))
    for k, pair in enumerate(merges):
        ids = merge_pair(ids, tuple(pair), 256 + k)
    return ids


def bpe_decode(ids: list[int], merges: list[tuple[int, int]]) -> str:
    """Expand every id to its bytes, then decode UTF-8 (invalid sequences become U+FFFD)."""
    pieces = [bytes([b]) for b in range(256)]
    for first, second in merges:
        pieces.append(pieces[first] + pieces[second])
    return b"".join(pieces[int(i)] for i in ids).decode("utf-8", errors="replace")


# ------------------------------------------------------------------------------------------------------ GPT

class GPT(nn.Module):
    """Tokens + learned positions, a stack of pre-norm EncoderBlocks under a causal mask, LayerNorm, tied head."""

    def __init__(self, vocab_size: int, d_model: int = 128, num_heads: int = 4, d_ff: int = 512,
                 num_layers: int = 4, max_len: int = 256, dropout: float = 0.0):
        super().__init__()
        self.max_len = max_len
        self.token_embedding = TokenEmbedding(vocab_size, d_model)                # N(0, d_model**-0.5)
        self.position_embedding = LearnedPositionalEmbedding(max_len, d_model)
        nn.init.normal_(self.position_embedding.embedding.weight, std=d_model ** -0.5)  # the tokens' scale
        self.drop = nn.Dropout(dropout)
        self.blocks = nn.ModuleList(
            [EncoderBlock(d_model, num_heads, d_ff, dropout, norm_first=True) for _ in range(num_layers)])
        self.norm = nn.LayerNorm(d_model)
        self.lm_head = nn.Linear(d_model, vocab_size, bias=False)
        self.lm_head.weight = self.token_embedding.weight                         # weight tying: one Parameter

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        # ids: (B, T) -> logits (B, T, V)
        T = ids.size(1)
        if T > self.max_len:
            raise ValueError(f"sequence length {T} is longer than max_len {self.max_len}")
        x = self.drop(self.position_embedding(self.token_embedding(ids)))          # (B, T, d_model)
        mask = make_causal_mask(T, ids.device)                                     # (T, T), True = may attend
        for block in self.blocks:
            x = block(x, mask)
        return self.lm_head(self.norm(x))                                          # (B, T, V)


# ------------------------------------------------------------------------------------------------- training

def get_batch(data: torch.Tensor, block_size: int, batch_size: int, generator=None):
    """`batch_size` random windows of `block_size` tokens and the same windows shifted by one (the targets)."""
    starts = torch.randint(len(data) - block_size, (batch_size,), generator=generator)   # (B,), on the CPU
    offsets = torch.arange(block_size)                                                  # (T,)
    index = (starts[:, None] + offsets[None, :]).to(data.device)                        # (B, T)
    return data[index], data[index + 1]


def lm_loss(logits: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
    """Mean cross-entropy of the next token over all B * T positions."""
    V = logits.size(-1)
    return F.cross_entropy(logits.reshape(-1, V), targets.reshape(-1))


def estimate_loss(model: nn.Module, data: torch.Tensor, block_size: int, device) -> float:
    """Mean next-token loss over the non-overlapping windows of `data`, in eval mode, without gradients."""
    N = len(data)
    starts = list(range(0, N - block_size, block_size))       # start + block_size + 1 <= N
    if not starts:
        raise ValueError(f"no window of {block_size} + 1 tokens fits in {N} tokens")
    was_training = model.training
    model.eval()
    total, count = 0.0, 0
    try:
        with torch.no_grad():
            for i in range(0, len(starts), 64):                 # 64 windows per forward pass
                chunk = torch.tensor(starts[i:i + 64], device=data.device)
                index = chunk[:, None] + torch.arange(block_size, device=data.device)[None, :]   # (b, T)
                x, y = data[index].to(device), data[index + 1].to(device)
                logits = model(x)                                                  # (b, T, V)
                total += F.cross_entropy(logits.reshape(-1, logits.size(-1)), y.reshape(-1),
                                         reduction="sum").item()
                count += y.numel()
    finally:
        model.train(was_training)
    return total / count


def lr_at(step: int, max_lr: float, warmup_steps: int, max_steps: int, min_lr: float = 0.0) -> float:
    """Linear warm-up to max_lr, cosine decay to min_lr at max_steps, then min_lr."""
    if not 0 <= warmup_steps <= max_steps:
        raise ValueError(f"need 0 <= warmup_steps <= max_steps, got {warmup_steps} and {max_steps}")
    if step < warmup_steps:
        return max_lr * (step + 1) / warmup_steps
    if step >= max_steps:
        return min_lr
    progress = (step - warmup_steps) / (max_steps - warmup_steps)
    return min_lr + 0.5 * (max_lr - min_lr) * (1 + math.cos(math.pi * progress))


def train_step(model: nn.Module, optimizer: torch.optim.Optimizer, x: torch.Tensor, y: torch.Tensor, lr: float,
               grad_clip: float | None = 1.0) -> float:
    """One optimisation step on the batch (x, y), both (B, T): returns the loss before the step, as a float."""
    for group in optimizer.param_groups:
        group["lr"] = lr
    optimizer.zero_grad(set_to_none=True)
    loss = lm_loss(model(x), y)                                # scalar tensor
    loss.backward()
    if grad_clip is not None:
        torch.nn.utils.clip_grad_norm_(model.parameters(), grad_clip)
    optimizer.step()
    return loss.item()


# ----------------------------------------------------------------------------------------------- generation

def sample_next_token(logits: torch.Tensor, temperature: float = 1.0, top_k: int | None = None,
                      generator=None) -> torch.Tensor:
    """(B, V) logits -> (B,) token ids: argmax at temperature 0, else a draw from softmax(logits / temperature)."""
    if temperature == 0:
        return logits.argmax(dim=-1)
    logits = logits / temperature
    if top_k is not None and top_k < logits.size(-1):
        kth = torch.topk(logits, top_k, dim=-1).values[:, -1:]                    # (B, 1)
        logits = logits.masked_fill(logits < kth, float("-inf"))
    probs = torch.softmax(logits, dim=-1)                                         # (B, V)
    return torch.multinomial(probs, 1, generator=generator).squeeze(-1)


def generate(model: nn.Module, ids: torch.Tensor, max_new_tokens: int, temperature: float = 1.0,
             top_k: int | None = None, generator=None) -> torch.Tensor:
    """Append `max_new_tokens` sampled tokens to the prompt `ids` (B, T0), one at a time."""
    was_training = model.training
    model.eval()
    try:
        with torch.no_grad():
            for _ in range(max_new_tokens):
                context = ids[:, -model.max_len:]                                 # (B, <= max_len)
                logits = model(context)[:, -1, :]                                 # (B, V)
                next_id = sample_next_token(logits, temperature, top_k, generator)
                ids = torch.cat([ids, next_id[:, None].to(ids.dtype)], dim=1)
    finally:
        model.train(was_training)
    return ids
