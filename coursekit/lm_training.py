"""Notebook 08's training: the budgets, the AdamW loop built from the exercises, and the bigram baseline.

The loop takes the notebook's own `get_batch`, `train_step` (which computes the notebook's `lm_loss`), `estimate_loss`
and `lr_at` as arguments, so the notebook trains with what the student wrote, and `bench/gpt.py` (which sets the
hidden check's bar) trains with the reference through the very same code. The budgets live here once: the notebook,
the benchmark and the tests read them.

    budget = budget_for(device, grading=coursekit.grading_mode())
    history = train_language_model(model, train_ids, val_ids, budget, get_batch, train_step, estimate_loss, lr_at,
                                   device, generator=torch.Generator().manual_seed(0))
"""
from __future__ import annotations

import math
import time
from dataclasses import dataclass, replace

import torch

__all__ = ["Budget", "BUDGETS", "budget_for", "train_language_model", "bigram_loss", "model_config"]


@dataclass(frozen=True)
class Budget:
    """One training budget of notebook 08 (a GPT of the contract's sizes unless the fields say otherwise)."""

    name: str
    steps: int               # AdamW steps of the character model
    race_steps: int          # steps of each model in the character-vs-BPE race (same budget for both)
    block_size: int = 64
    batch_size: int = 12
    max_lr: float = 1e-3
    min_lr: float = 1e-4
    warmup_steps: int = 100
    weight_decay: float = 0.1
    d_model: int = 128
    num_heads: int = 4
    d_ff: int = 512
    num_layers: int = 4
    dropout: float = 0.0
    eval_every: int = 250    # validation loss every this many steps (on eval_tokens tokens of the validation split)
    eval_tokens: int = 20_000
    bpe_merges: int = 256
    bpe_train_chars: int = 200_000   # BPE merges are learned on the first characters of the training split
    race_train_chars: int = 300_000  # the race trains both models on this start of the training split ...
    race_val_chars: int = 111_540    # ... and compares them on this start of the validation split (all of it)
    modern_steps: int | None = None  # notebook 09's own ModernGPT run (None: `steps`); its recorded race uses `steps`


BUDGETS = {
    # the default student run: <= 3 minutes on 2 CPU cores with one torch thread (docs/benchmarks.md)
    # (09's own ModernGPT run is shorter: a ModernGPT step costs about 1.2 GPT steps on a CPU; bench/modern.py)
    "student": Budget("student", steps=1500, race_steps=200, bpe_train_chars=100_000, modern_steps=1000),
    # under coursekit.grading_mode(): the whole notebook in <= 45 s; sets the hidden check's bar (bench/gpt.py)
    "grading": Budget("grading", steps=600, race_steps=60, max_lr=3e-3, warmup_steps=30, d_model=64, d_ff=256,
                      num_layers=2, eval_every=100, eval_tokens=10_000, bpe_merges=64, bpe_train_chars=30_000,
                      race_train_chars=50_000, race_val_chars=10_000),
    # picked automatically on a GPU: nanoGPT's shakespeare-char recipe at a width that trains in a few minutes
    "gpu": Budget("gpu", steps=3000, race_steps=1000, block_size=256, batch_size=64, max_lr=1e-3, warmup_steps=200,
                  d_model=256, num_heads=8, d_ff=1024, num_layers=6, dropout=0.2, eval_every=500,
                  eval_tokens=111_540, race_train_chars=1_003_854),
}


def budget_for(device, grading: bool = False) -> Budget:
    """The budget of a run: grading mode first, then the GPU budget on CUDA, else the student's CPU budget."""
    if grading:
        return BUDGETS["grading"]
    return BUDGETS["gpu"] if torch.device(device).type == "cuda" else BUDGETS["student"]


def model_config(budget: Budget, max_len: int | None = None) -> dict:
    """The GPT keyword arguments of a budget (max_len defaults to its block size)."""
    return dict(d_model=budget.d_model, num_heads=budget.num_heads, d_ff=budget.d_ff, num_layers=budget.num_layers,
                max_len=max_len or budget.block_size, dropout=budget.dropout)


def train_language_model(model, train_ids, val_ids, budget: Budget, get_batch, train_step, estimate_loss, lr_at,
                         device, steps: int | None = None, generator=None, progress=None) -> dict:
    """Train `model` with AdamW for `steps` (default budget.steps) on random windows of `train_ids`.

    Each step: draw a batch with `get_batch`, take the learning rate from `lr_at` (warm-up then cosine to
    budget.min_lr) and call `train_step(model, optimizer, x, y, lr, grad_clip=1.0)`: it sets the rate, computes the
    loss, back-propagates, clips the gradient norm at 1 and steps, returning the loss. Every `budget.eval_every` steps
    and at the end, `estimate_loss` on the first `budget.eval_tokens` tokens of `val_ids`. Returns the history:
    {"step": [...], "train loss": [...], "val step": [...], "val loss": [...], "seconds": float}.
    """
    steps = budget.steps if steps is None else steps
    decay = [p for p in model.parameters() if p.dim() >= 2]             # matrices and embeddings
    no_decay = [p for p in model.parameters() if p.dim() < 2]           # biases and LayerNorm gains
    optimizer = torch.optim.AdamW([{"params": decay, "weight_decay": budget.weight_decay},
                                   {"params": no_decay, "weight_decay": 0.0}], lr=budget.max_lr)
    val_part = val_ids[:budget.eval_tokens]
    history = {"step": [], "train loss": [], "val step": [], "val loss": []}
    warmup = min(budget.warmup_steps, steps)
    start = time.perf_counter()
    model.train()
    for step in range(steps):
        lr = lr_at(step, budget.max_lr, warmup, steps, budget.min_lr)
        x, y = get_batch(train_ids, budget.block_size, budget.batch_size, generator)
        x, y = x.to(device), y.to(device)
        loss = train_step(model, optimizer, x, y, lr, grad_clip=1.0)
        history["step"].append(step)
        history["train loss"].append(float(loss))
        if (step + 1) % budget.eval_every == 0 or step + 1 == steps:
            history["val step"].append(step + 1)
            history["val loss"].append(estimate_loss(model, val_part, budget.block_size, device))
            if progress is not None:
                progress(step + 1, history["train loss"][-1], history["val loss"][-1])
    history["seconds"] = time.perf_counter() - start
    return history


def bigram_loss(train_ids, val_ids, vocab_size: int, alpha: float = 0.01) -> float:
    """Validation loss (nats per token) of the counted bigram model P(next | current), add-alpha smoothed."""
    train_ids, val_ids = torch.as_tensor(train_ids).cpu(), torch.as_tensor(val_ids).cpu()
    counts = torch.zeros(vocab_size, vocab_size, dtype=torch.float64)
    counts.index_put_((train_ids[:-1], train_ids[1:]), torch.ones(len(train_ids) - 1, dtype=torch.float64),
                      accumulate=True)
    log_probs = (counts + alpha).log() - (counts + alpha).sum(1, keepdim=True).log()     # (V, V)
    return float(-log_probs[val_ids[:-1], val_ids[1:]].mean())


def with_steps(budget: Budget, steps: int) -> Budget:
    return replace(budget, steps=steps)


def nats_to_bits(nats: float) -> float:
    return nats / math.log(2)
