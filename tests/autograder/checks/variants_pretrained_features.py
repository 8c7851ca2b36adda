"""Student answers of notebook 11's features part (final_hidden) for testing its checks (see variants.py for the
conventions).

CORRECT answers are written differently from the reference (a forward hook on model.norm around model(ids), the
causal mask as a (1, 1, T, T) tensor, the blocks run through a functools.reduce) and must pass. WRONG answers switch
on one mistake (`mistake=`), written the way a student would, and must fail with it named; UNNAMED ones fail with the
words given.
"""
from __future__ import annotations

import functools

import torch

from solutions.attention import make_causal_mask


def final_hidden_hooked(model, ids):
    """What model(ids) hands to lm_head, caught by a forward hook on model.norm."""
    caught = []
    handle = model.norm.register_forward_hook(lambda module, inputs, output: caught.append(output))
    try:
        model(ids)
    finally:
        handle.remove()
    return caught[-1]


def final_hidden_reduce(model, ids):
    T = ids.shape[1]
    mask = torch.tril(torch.ones(1, 1, T, T, device=ids.device)).bool()                 # (1, 1, T, T)
    x = functools.reduce(lambda h, block: block(h, mask), model.blocks, model.token_embedding(ids))
    return model.norm(x)


def make_final_hidden(mistake=None):
    def final_hidden(model, ids):
        if mistake == "sets_mode":
            model.eval()
        T = ids.size(1)
        mask = make_causal_mask(T, ids.device)
        if mistake == "no_causal_mask":
            mask = None
        elif mistake == "future_mask":                # the triangle the wrong way round: each position sees after it
            mask = mask.T
        x = model.token_embedding(ids)
        for block in model.blocks:
            x = block(x, mask)
        if mistake == "returns_logits":
            return model.lm_head(model.norm(x))
        out = x if mistake == "no_final_norm" else model.norm(x)
        return out.detach() if mistake == "detached" else out

    final_hidden.__name__ = f"final_hidden_{mistake}" if mistake else "final_hidden_loop"
    return final_hidden


@torch.no_grad()
def final_hidden_no_grad(model, ids):
    return make_final_hidden()(model, ids)


CORRECT = {"final_hidden": [final_hidden_hooked, final_hidden_reduce, make_final_hidden()]}

WRONG = [  # (api name, wrong answer, catalogue id its hidden check must name)
    ("final_hidden", make_final_hidden("no_final_norm"), "final_hidden.no_final_norm"),
    ("final_hidden", make_final_hidden("no_causal_mask"), "final_hidden.no_causal_mask"),
    ("final_hidden", make_final_hidden("future_mask"), "final_hidden.no_causal_mask"),
    ("final_hidden", final_hidden_no_grad, "final_hidden.no_grad"),
    ("final_hidden", make_final_hidden("detached"), "final_hidden.no_grad"),
    ("final_hidden", make_final_hidden("sets_mode"), "final_hidden.sets_mode"),
]

UNNAMED = [  # (api name, wrong answer without a catalogue id, words its failure must say)
    ("final_hidden", make_final_hidden("returns_logits"), "wrong shape"),
]


def correct(api_names) -> list[tuple[str, object]]:
    """(API name, answer): the reference and the CORRECT answers of the exercises `api_names`."""
    import solutions

    return [(name, answer) for name, answers in CORRECT.items() if name in api_names
            for answer in [getattr(solutions, name), *answers]]


def of(api_names, rows):
    """The rows of WRONG or UNNAMED whose API name is one of `api_names`."""
    return [row for row in rows if row[0] in api_names]
