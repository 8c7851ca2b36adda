"""Inputs the checks of several topics share: the reference module of a topic, padded id batches, drawn lengths,
and reference modules built under this submission's seed. Drawn with this submission's salt (`draws`)."""
from __future__ import annotations

import importlib

import torch

from autograder.checks.kit.draws import current_salt, generator, pick, rng, seed_for


def reference(topic: str):
    """The reference implementation of a topic of the course API: `solutions.<topic>` (imported on first use)."""
    return importlib.import_module(f"solutions.{topic}")


def padded_ids(lengths, T: int, *, pad_id: int = 0, vocab: int = 20, seed: int = 0, device="cpu") -> torch.Tensor:
    """(B, T) random ids, never pad_id, post-padded with pad_id to the given lengths (each >= 1), drawn with this
    submission's seed for `seed` (draws.generator).

    With pad_id != 0, every row has the ordinary token 0 at position 1, so code that hard-codes 0 as padding shows
    (position 1, not 0, so that no causal row becomes fully blocked).
    """
    ids = torch.randint(1, vocab, (len(lengths), T), generator=generator(seed))
    ids = torch.where(ids == pad_id, torch.full_like(ids, 1 if pad_id != 1 else 2), ids)
    if pad_id != 0:
        ids[:, 1] = 0
    for row, length in enumerate(lengths):
        ids[row, length:] = pad_id
    return ids.to(device)


def draw_lengths(label: str, first: list[int], T: int, B: int) -> list[int]:
    """B sequence lengths in 1..T, one of them T (a full row) and one shorter (a padded row); `first` with no salt."""
    if not current_salt():
        return list(first)
    draw = rng(label)
    lengths = [draw.randint(1, T) for _ in range(B)]
    full, short = draw.sample(range(B), 2)
    lengths[full], lengths[short] = T, draw.randint(1, T - 1)
    return lengths


def short_length(label: str, first: int, T: int) -> int:
    """A padded row's real length, T/3 < length < T (`first` with no salt): padding to mask, and enough real
    positions left that an output with NaN rows (a fully blocked row) can still be diagnosed."""
    return pick(label, [first, *(n for n in range(2, T) if n != first and 3 * n > T)])


def reference_module(factory, seed: int, *args, **kwargs):
    """Build a reference module under this submission's seed for `seed`, then randomise its LayerNorms so that they matter."""
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed_for(seed))
        module = factory(*args, **kwargs)
        for sub in module.modules():
            if isinstance(sub, torch.nn.LayerNorm):
                torch.nn.init.normal_(sub.weight, 1.0, 0.3)
                torch.nn.init.normal_(sub.bias, 0.0, 0.3)
    return module
