"""Student answers of notebook 11's LoRA part (LoRALinear, add_lora) for testing its checks (see variants.py for the
conventions).

CORRECT answers are written differently from the reference (F.linear and einsum, the update merged as (x A^T) B^T or
as one matrix, the base frozen with requires_grad_ on the module, add_lora walking named_modules, a count by the
formula, the blocks as a set) and must pass. WRONG answers switch on one mistake (`MISTAKE` or `mistake=`), written
the way a student would, and must fail with it named. add_lora's answers build their adapters from this module's
global `LoRALinear` (a correct one): the name the grader lends its stand-in under when the student's fails.
"""
from __future__ import annotations

import copy
import math

import torch
import torch.nn.functional as F
from torch import nn



# ---------------------------------------------------------------------------------------------------- LoRALinear
class LoRAEinsum(nn.Module):
    """F.linear for the base, einsum for the update, the base frozen through the module."""

    def __init__(self, base, rank=8, alpha=16.0):
        super().__init__()
        if rank < 1:
            raise ValueError(f"rank must be at least 1, got {rank}")
        self.base = base.requires_grad_(False)
        self.scaling = alpha / rank
        self.lora_A = nn.Parameter(torch.empty(rank, base.in_features, device=base.weight.device))
        nn.init.kaiming_uniform_(self.lora_A, a=math.sqrt(5))
        self.lora_B = nn.Parameter(torch.zeros(base.out_features, rank, device=base.weight.device))

    def forward(self, x):
        low = torch.einsum("...i,ri->...r", x, self.lora_A)
        return F.linear(x, self.base.weight, self.base.bias) + self.scaling * torch.einsum("...r,or->...o", low,
                                                                                           self.lora_B)

    @torch.no_grad()
    def merged(self):
        layer = nn.Linear(self.base.in_features, self.base.out_features, bias=self.base.bias is not None)
        layer.weight.copy_(self.base.weight + self.scaling * torch.einsum("or,ri->oi", self.lora_B, self.lora_A))
        if self.base.bias is not None:
            layer.bias.copy_(self.base.bias)
        return layer.to(self.base.weight.device)


class LoRAStudent(nn.Module):
    """One matrix for the update (scaling * B A), applied as x (B A)^T; configurable mistakes."""
    MISTAKE = None

    def __init__(self, base, rank=8, alpha=16.0):
        super().__init__()
        if rank < 1 and self.MISTAKE != "no_rank_check":
            raise ValueError("rank < 1")
        if self.MISTAKE == "rank_ignored":
            rank = 8
        if self.MISTAKE == "alpha_ignored":
            alpha = 16.0
        self.base = copy.deepcopy(base) if self.MISTAKE == "copies_base" else base
        if self.MISTAKE != "base_trainable":
            for p in self.base.parameters():
                p.requires_grad = False
        self.scaling = alpha if self.MISTAKE == "scaling_alpha" else alpha / rank
        self.lora_A = nn.Parameter(torch.zeros(rank, base.in_features))
        if self.MISTAKE == "a_randn":
            nn.init.normal_(self.lora_A)
        elif self.MISTAKE != "a_zeros":
            nn.init.kaiming_uniform_(self.lora_A, a=math.sqrt(5))
        self.lora_B = nn.Parameter(torch.zeros(base.out_features, rank))
        if self.MISTAKE == "b_random":
            nn.init.normal_(self.lora_B, std=0.02)

    def update(self):
        return self.scaling * self.lora_B @ self.lora_A                                  # (out, in)

    def forward(self, x):
        return self.base(x) + x @ self.update().T

    def merged(self):
        base = self.base
        if self.MISTAKE == "merged_returns_base":
            with torch.no_grad():
                base.weight += self.update()
            return base
        layer = nn.Linear(base.in_features, base.out_features, bias=base.bias is not None)
        with torch.no_grad():
            if self.MISTAKE == "merged_unscaled":
                weight = base.weight + self.lora_B @ self.lora_A
            elif self.MISTAKE == "merged_transposed":
                weight = base.weight + self.scaling * self.lora_A.T @ self.lora_B.T
            elif self.MISTAKE == "merged_ab":
                weight = base.weight + self.scaling * self.lora_A @ self.lora_B
            else:
                weight = base.weight + self.update()
            layer.weight.copy_(weight)
            if base.bias is not None:
                layer.bias.copy_(base.bias)
        return layer.to(base.weight.device)


def lora_mistake(name: str):
    return type("LoRALinear", (LoRAStudent,), {"MISTAKE": name})


LoRALinear = LoRAEinsum   # the LoRALinear the add_lora answers below build their adapters from


# ------------------------------------------------------------------------------------------------------ add_lora
def add_lora_by_names(model, rank=8, alpha=16.0, targets=("w_q", "w_v"), blocks=None):
    """named_modules, a set of blocks, the count by the formula."""
    allowed = {"w_q", "w_k", "w_v", "w_o"}
    if not set(targets) <= allowed:
        raise ValueError(f"unknown targets {set(targets) - allowed}")
    chosen = set(range(len(model.blocks))) if blocks is None else set(blocks)
    if not chosen <= set(range(len(model.blocks))):
        raise ValueError(f"no such blocks: {sorted(chosen - set(range(len(model.blocks))))}")
    model.requires_grad_(False)
    total = 0
    for name, module in list(model.named_modules()):
        parts = name.split(".")
        if len(parts) == 3 and parts[0] == "blocks" and parts[2] == "attn" and int(parts[1]) in chosen:
            for target in targets:
                linear = getattr(module, target)
                setattr(module, target, LoRALinear(linear, rank, alpha))
                total += rank * (linear.in_features + linear.out_features)
    return total


def make_add_lora(mistake=None):
    def add_lora(model, rank=8, alpha=16.0, targets=("w_q", "w_v"), blocks=None):
        blocks = range(len(model.blocks)) if blocks is None else blocks
        for name in targets:
            if name not in ("w_q", "w_k", "w_v", "w_o") and mistake != "no_target_check":
                raise ValueError(f"unknown target {name}")
        for i in blocks:
            if not 0 <= i < len(model.blocks) and mistake != "no_block_check":
                raise ValueError(f"no block {i}")
        if mistake == "blocks_ignored":               # checked, then every block all the same
            blocks = range(len(model.blocks))
        if mistake == "targets_ignored":
            targets = ("w_q", "w_v")
        if mistake not in ("not_frozen", "freeze_after"):
            for p in model.parameters():
                p.requires_grad_(False)
        before = sum(p.numel() for p in model.parameters() if p.requires_grad)
        for i in blocks:
            attn = model.blocks[i].attn
            for name in targets:
                linear = getattr(attn, name, None)
                if linear is None:               # no_target_check: an unknown name is skipped
                    continue
                if mistake == "rank_not_passed":
                    adapter = LoRALinear(linear, alpha=alpha)
                elif mistake == "alpha_not_passed":
                    adapter = LoRALinear(linear, rank)
                else:
                    adapter = LoRALinear(linear, rank, alpha)
                setattr(attn, name, adapter)
        if mistake == "freeze_after":
            model.requires_grad_(False)
        if mistake == "count_before":
            return before
        if mistake == "count_d_model":                # every adapter taken as d_model -> d_model
            d_model = model.token_embedding.weight.size(1)
            return rank * 2 * d_model * len(list(blocks)) * len(targets)
        return sum(p.numel() for p in model.parameters() if p.requires_grad)

    add_lora.__name__ = f"add_lora_{mistake}" if mistake else "add_lora_loop"
    return add_lora


# ----------------------------------------------------------------------------------------------------- the lists
CORRECT = {
    "LoRALinear": [LoRAEinsum, LoRAStudent],
    "add_lora": [add_lora_by_names, make_add_lora()],
}

WRONG = [  # (api name, wrong answer, catalogue id its hidden check must name)
    ("LoRALinear", lora_mistake("b_random"), "lora.b_random"),
    ("LoRALinear", lora_mistake("scaling_alpha"), "lora.scaling_alpha"),
    ("LoRALinear", lora_mistake("base_trainable"), "lora.base_trainable"),
    ("LoRALinear", lora_mistake("merged_transposed"), "lora.merged_wrong_order"),
    ("LoRALinear", lora_mistake("merged_unscaled"), "lora.merged_wrong_order"),
    ("LoRALinear", lora_mistake("merged_ab"), "lora.merged_wrong_order"),
    ("LoRALinear", lora_mistake("a_zeros"), "lora.a_not_kaiming"),
    ("LoRALinear", lora_mistake("a_randn"), "lora.a_not_kaiming"),
    ("add_lora", make_add_lora("not_frozen"), "add_lora.not_frozen"),
    ("add_lora", make_add_lora("freeze_after"), "add_lora.adapters_frozen"),
    ("add_lora", make_add_lora("blocks_ignored"), "add_lora.blocks_ignored"),
    ("add_lora", make_add_lora("targets_ignored"), "add_lora.targets_ignored"),
    ("add_lora", make_add_lora("rank_not_passed"), "add_lora.rank_not_passed"),
    ("add_lora", make_add_lora("alpha_not_passed"), "add_lora.alpha_not_passed"),
    ("add_lora", make_add_lora("count_before"), "add_lora.wrong_count"),
    ("add_lora", make_add_lora("count_d_model"), "add_lora.wrong_count"),
]

UNNAMED = [  # (api name, wrong answer without a catalogue id, words its failure must say)
    ("LoRALinear", lora_mistake("copies_base"), "be the nn.Linear it was given"),
    ("LoRALinear", lora_mistake("merged_returns_base"), "returned base itself"),
]


def correct(api_names) -> list[tuple[str, object]]:
    """(API name, answer): the reference and the CORRECT answers of the exercises `api_names`."""
    import solutions

    return [(name, answer) for name, answers in CORRECT.items() if name in api_names
            for answer in [getattr(solutions, name), *answers]]


def of(api_names, rows):
    """The rows of WRONG or UNNAMED whose API name is one of `api_names`."""
    return [row for row in rows if row[0] in api_names]
