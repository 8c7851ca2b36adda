"""Known-mistake variants of notebook 11's LoRA part (LoRALinear, add_lora) and their table (`TABLE`, at the end).

Each variant is written here from the contract (docs/course-api.md), not from `solutions`; with every switch off it
is the reference (tests/autograder/checks/pretrained/test_lora.py). `TABLE` = {mistake id: (variant, switches)}: the
variant run with those switches on a check's own inputs gives that mistake's answer (`kit.compare.from_table`), the
check trying the rows of its variant in the table's order. `LORA_FORMS` = {mistake id: [switches, ...]}: other
switches of its row's variant that make the same mistake, tried right after the row (`kit.compare.candidates`).

LoRALinear's mistakes of its start (lora_B random, lora_A not kaiming, base left trainable, scaling = alpha) show
in what the module holds and are named from it by the check directly; the rows here are those that show in values
(the forward, the merged weight). add_lora's variant changes a model in place, as the exercise does, and returns its
count: the check reads the same summary (`lora_layout`: where the adapters are, what is trainable, their ranks)
off the student's model and off each row's, and names the row whose summary matches in what differs.
"""
from __future__ import annotations

import math
import re

import torch
from torch import nn


# --------------------------------------------------------------------------------------------------- LoRALinear
def lora_forward(weight, bias, lora_A, lora_B, x, rank, alpha, *, scaling="ratio"):
    """LoRALinear's forward from its tensors: x W^T + b + s (x A^T) B^T, with s = alpha / rank ("ratio", correct) or
    s = alpha ("alpha"); x (..., in), W (out, in), A (rank, in), B (out, rank)."""
    s = {"ratio": alpha / rank, "alpha": alpha}[scaling]
    out = nn.functional.linear(x, weight, bias)                                          # (..., out)
    return out + s * (x @ lora_A.T) @ lora_B.T


def lora_merged_weight(weight, lora_A, lora_B, rank, alpha, *, scaled=True, update="BA"):
    """merged()'s weight W + s B A (out, in); `scaled=False`: the scaling left out; `update` "BA" (correct) |
    "ATBT" (lora_A.T @ lora_B.T, (in, out)) | "AB" (lora_A @ lora_B, (rank, rank)): the shape of W only where the
    layer is square (and, for "AB", rank equals its size)."""
    product = {"BA": lambda: lora_B @ lora_A, "ATBT": lambda: lora_A.T @ lora_B.T, "AB": lambda: lora_A @ lora_B}
    return weight + (alpha / rank if scaled else 1.0) * product[update]()


# ------------------------------------------------------------------------------------------------------ add_lora
class LoRAAdapter(nn.Module):
    """LoRALinear from the contract, the variants' own: base frozen, lora_A kaiming, lora_B zeros."""

    def __init__(self, base: nn.Linear, rank: int = 8, alpha: float = 16.0):
        super().__init__()
        self.base = base
        for parameter in base.parameters():
            parameter.requires_grad_(False)
        self.scaling = alpha / rank
        like = {"device": base.weight.device, "dtype": base.weight.dtype}
        self.lora_A = nn.Parameter(torch.empty(rank, base.in_features, **like))       # (r, in)
        nn.init.kaiming_uniform_(self.lora_A, a=math.sqrt(5))
        self.lora_B = nn.Parameter(torch.zeros(base.out_features, rank, **like))      # (out, r)

    def forward(self, x):
        return self.base(x) + self.scaling * (x @ self.lora_A.T) @ self.lora_B.T


def add_lora_variant(model, rank=8, alpha=16.0, targets=("w_q", "w_v"), blocks=None, *, freeze="first",
                     use_blocks=True, use_targets=True, pass_rank=True, pass_alpha=True, count="trainable"):
    """add_lora on `model` (changed in place) with switches:
    freeze      "first" (correct) | "none" (nothing frozen but the adapters' bases) | "after" (frozen once the
                adapters are in: the adapters too);
    use_blocks  False: every block, whatever `blocks` says;   use_targets  False: w_q and w_v, whatever `targets` says;
    pass_rank / pass_alpha  False: the adapters get LoRALinear's default rank 8 / alpha 16;
    count       "trainable" (correct: the trainable parameters afterwards) | "before" (counted before the adapters
                went in)."""
    def trainable():
        return sum(p.numel() for p in model.parameters() if p.requires_grad)

    names = tuple(targets) if use_targets else ("w_q", "w_v")
    indices = range(len(model.blocks)) if blocks is None or not use_blocks else list(blocks)
    if freeze == "first":
        model.requires_grad_(False)
    counted = trainable()
    for i in indices:
        attn = model.blocks[i].attn
        for name in names:
            adapter = LoRAAdapter(getattr(attn, name), rank if pass_rank else 8, alpha if pass_alpha else 16.0)
            setattr(attn, name, adapter)
    if freeze == "after":
        model.requires_grad_(False)
    return counted if count == "before" else trainable()


_LORA_A = re.compile(r"blocks\.(\d+)\.attn\.(w_[qkvo])\.lora_A")


def lora_layout(state: dict) -> dict:
    """What add_lora left in a model, from its `state_dict(keep_vars=True)` (parameters with their requires_grad):
    `adapted` {(block, name)} holding a lora_A, `parameters` the names of its parameters, `trainable` those that
    require gradients, `ranks` {(block, name): rank} (lora_A's rows)."""
    adapted, ranks = set(), {}
    for key, value in state.items():
        match = _LORA_A.fullmatch(key)
        if match:
            where = (int(match.group(1)), match.group(2))
            adapted.add(where)
            ranks[where] = int(value.shape[0]) if getattr(value, "dim", lambda: 0)() == 2 else -1
    parameters = {key for key, value in state.items() if isinstance(value, nn.Parameter)}
    trainable = {key for key in parameters if state[key].requires_grad}
    return {"adapted": frozenset(adapted), "parameters": frozenset(parameters), "trainable": frozenset(trainable),
            "ranks": ranks}


def adapted_logits(model, ids, adapters: dict):
    """`model`'s logits on `ids` once its adapters hold `adapters` ({state name: tensor}, the lora_A and lora_B)."""
    model.load_state_dict(adapters, strict=False)
    with torch.no_grad():
        return model(ids)


# ------------------------------------------------------------------------------------------------------- the table
TABLE = {
    # LoRALinear: lora_forward(base.weight, base.bias, lora_A, lora_B, x, rank, alpha, **switches)
    "lora.scaling_alpha": (lora_forward, {"scaling": "alpha"}),
    # LoRALinear.merged: lora_merged_weight(base.weight, lora_A, lora_B, rank, alpha, **switches)
    "lora.merged_wrong_order": (lora_merged_weight, {"update": "ATBT"}),
    # add_lora: add_lora_variant(a copy of the model, rank, alpha, targets, blocks, **switches), in the order tried
    "add_lora.not_frozen": (add_lora_variant, {"freeze": "none"}),
    "add_lora.adapters_frozen": (add_lora_variant, {"freeze": "after"}),
    "add_lora.blocks_ignored": (add_lora_variant, {"use_blocks": False}),
    "add_lora.targets_ignored": (add_lora_variant, {"use_targets": False}),
    "add_lora.rank_not_passed": (add_lora_variant, {"pass_rank": False}),
    "add_lora.alpha_not_passed": (add_lora_variant, {"pass_alpha": False}),
    "add_lora.wrong_count": (add_lora_variant, {"count": "before"}),
}
LORA_FORMS = {
    "lora.merged_wrong_order": [{"update": "AB"}, {"scaled": False}],   # A and B the other way; no scaling
}


def lora_ids_of(variant) -> tuple[str, ...]:
    """The ids of TABLE's rows that run `variant`, in table order."""
    return tuple(mistake_id for mistake_id, (row_variant, _switches) in TABLE.items() if row_variant is variant)
