"""Known-mistake variants of notebook 11's features part (final_hidden) and their table (`TABLE`).

The variant is written here from the contract (docs/course-api.md), not from `solutions`; with every switch off it
is the reference (tests/autograder/checks/pretrained/test_features.py). `TABLE` = {mistake id: (variant, switches)}:
the variant run with those switches on the check's model and ids gives that mistake's answer
(`kit.compare.from_table`). final_hidden's other mistakes (running without gradients, changing the model's mode)
show in what the call does, not in its values, and are named by the check directly.
"""
from __future__ import annotations

import torch


def hidden_states(model, ids, *, causal=True, final_norm=True):
    """What ModernGPT's forward computes before lm_head, from the model's own pieces: the token embedding, every
    block with the causal mask (`causal=False`: no mask), then model.norm (`final_norm=False`: left out)."""
    T = ids.size(1)
    mask = torch.ones(T, T, dtype=torch.bool, device=ids.device).tril() if causal else None     # (T, T)
    x = model.token_embedding(ids)                                                               # (B, T, d_model)
    for block in model.blocks:
        x = block(x, mask)
    return model.norm(x) if final_norm else x


TABLE = {  # hidden_states(reference model, ids, **switches)
    "final_hidden.no_causal_mask": (hidden_states, {"causal": False}),
    "final_hidden.no_final_norm": (hidden_states, {"final_norm": False}),
}
