"""Public self-checks of notebook 11's LoRA part: LoRALinear and add_lora.

LoRALinear is compared with the contract's formulas worked out in float64 NumPy from your module's own tensors
(base(x) + scaling * x A^T B^T, the merged weight W + scaling * B A). add_lora runs on the small model shaped like
ModernGPT of `features.py` (3 blocks; its w_k and w_v are narrower than w_q and w_o); what it must leave (where the
adapters are, what is trainable, the count rank * (in + out) per adapter, the logits) is worked out from the sizes
and from a copy of the model whose weights hold the merged update.
"""
from __future__ import annotations

import copy
import math

import numpy as np
import torch
from torch import nn

from coursekit.checks.pretrained.features import PROBE_CONFIG, probe_model
from coursekit.checks.toolkit import (
    close, expect_close, expect_shape, expect_type, expect_value_error, fail, isclose, mistake_hint, passed, run,
    uses_parts,
)
from coursekit.criteria import argument, edge_case

TARGETS = ("w_q", "w_k", "w_v", "w_o")


# ---------------------------------------------------------------------------------------------------- LoRALinear
def _linear(in_features: int, out_features: int, bias: bool, seed: int) -> nn.Linear:
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        return nn.Linear(in_features, out_features, bias=bias)


def _lora_start(lora, base: nn.Linear, rank: int, alpha: float, label: str) -> None:
    """What LoRALinear holds when made: base (the same module, frozen), scaling, lora_A kaiming, lora_B zeros."""
    expect_type(lora, nn.Module, label, "subclass nn.Module and call super().__init__().")
    if getattr(lora, "base", None) is not base:
        fail(f"{label}.base should be the nn.Linear it was given (the same module, not a copy).", "self.base = base")
    if any(p.requires_grad for p in base.parameters()):
        fail(f"{label} left base's parameters trainable.", mistake_hint("lora.base_trainable"))
    parameters = dict(lora.named_parameters())
    for name, shape in (("lora_A", (rank, base.in_features)), ("lora_B", (base.out_features, rank))):
        if not isinstance(getattr(lora, name, None), nn.Parameter) or name not in parameters:
            fail(f"{label} needs an nn.Parameter `{name}` of shape {shape}.",
                 f"self.{name} = nn.Parameter(...) inside __init__.")
        expect_shape(parameters[name], shape, f"{label}.{name}", "lora_A is (rank, in_features), lora_B is "
                                                                 "(out_features, rank).")
        if not parameters[name].requires_grad:
            fail(f"{label}.{name} should be trainable (requires_grad=True); only base is frozen.")
    scaling = getattr(lora, "scaling", None)
    if not isinstance(scaling, (int, float)) or not isclose(float(scaling), alpha / rank):
        hint = mistake_hint("lora.scaling_alpha") if isinstance(scaling, (int, float)) and isclose(scaling, alpha) \
            else "self.scaling = alpha / rank"
        fail(f"{label}.scaling should be alpha / rank = {alpha / rank:g}, got {scaling!r}.", hint)
    if bool((lora.lora_B.detach() != 0).any()):
        fail(f"{label}.lora_B should start as zeros.", mistake_hint("lora.b_random"))
    bound = 1.0 / math.sqrt(base.in_features)        # kaiming_uniform_(a=sqrt(5)): gain sqrt(1/3) * sqrt(3 / fan_in)
    largest = float(lora.lora_A.detach().abs().max())
    if not bound / 2 <= largest <= bound * (1 + 1e-6):
        fail(f"{label}.lora_A's largest |value| is {largest:.3g}; kaiming_uniform_(a=math.sqrt(5)) draws up to "
             f"1/sqrt(in_features) = {bound:.3g}.", mistake_hint("lora.a_not_kaiming"))


def _lora_values(lora, base: nn.Linear, rank: int, alpha: float, label: str) -> None:
    """The forward as made and with other values in lora_A and lora_B; merged()."""
    x = torch.randn(2, 3, base.in_features, generator=torch.Generator().manual_seed(rank + 7))   # (2, 3, in)
    xs = x.double().numpy()
    W = base.weight.detach().double().numpy()
    b = 0.0 if base.bias is None else base.bias.detach().double().numpy()
    with torch.no_grad():
        out = run(f"{label}.forward", lora, x.clone())
    expect_close(out, xs @ W.T + b, f"{label}(x) as made", "lora_B starts at zeros, so the adapter starts as base.")
    generator = torch.Generator().manual_seed(rank + 8)
    with torch.no_grad():
        lora.lora_A.copy_(0.5 * torch.randn(lora.lora_A.shape, generator=generator))
        lora.lora_B.copy_(0.5 * torch.randn(lora.lora_B.shape, generator=generator))
        out = run(f"{label}.forward", lora, x.clone())
    A, B = lora.lora_A.detach().double().numpy(), lora.lora_B.detach().double().numpy()
    expected = xs @ W.T + b + alpha / rank * (xs @ A.T) @ B.T
    hint = mistake_hint("lora.scaling_alpha") if close(out, xs @ W.T + b + alpha * (xs @ A.T) @ B.T) else \
        "forward(x) = base(x) + scaling * (x @ lora_A.T) @ lora_B.T"
    expect_close(out, expected, f"{label}(x) with other values in lora_A and lora_B", hint)
    try:
        merged = lora.merged()
    except NotImplementedError:
        fail(f"{label}.merged is not implemented yet (it still raises NotImplementedError).")
    except RuntimeError as error:
        fail(f"{label}.merged() raised RuntimeError: {error}",
             mistake_hint("lora.merged_wrong_order") if "cannot be multiplied" in str(error) or "must match the size"
             in str(error) else "build a new nn.Linear and copy base.weight + scaling * lora_B @ lora_A into it.",
             cause=error)
    expect_type(merged, nn.Linear, f"{label}.merged()", "return a new nn.Linear(in_features, out_features, bias=...).")
    if merged is base:
        fail(f"{label}.merged() returned base itself; build a new nn.Linear and leave the adapter as it is.")
    if not np.array_equal(base.weight.detach().double().numpy(), W):
        fail(f"{label}.merged() changed base.weight; leave the adapter as it is and return a new layer.")
    wrong = [W + B @ A] + [W + alpha / rank * update for update in (A.T @ B.T, *([A @ B] if A.shape == B.shape
                                                                                  else [])) if update.shape == W.shape]
    hint = mistake_hint("lora.merged_wrong_order") if any(close(merged.weight, w) for w in wrong) else None
    expect_close(merged.weight, W + alpha / rank * B @ A, f"{label}.merged().weight", hint)
    if (merged.bias is None) != (base.bias is None):
        fail(f"{label}.merged() should have a bias exactly when base has one.",
             "nn.Linear(..., bias=base.bias is not None), then copy base.bias.")
    if base.bias is not None:
        expect_close(merged.bias, b, f"{label}.merged().bias", "copy base.bias into the new layer.")
    with torch.no_grad():
        expect_close(merged(x), expected, f"{label}.merged()(x)", "the merged layer computes what the adapter does.")


def check_lora_linear(LoRALinear) -> None:
    def judge(in_features, out_features, bias, seed, **kwargs):
        rank, alpha = kwargs.get("rank", 8), kwargs.get("alpha", 16.0)
        base = _linear(in_features, out_features, bias, seed)
        shown = ", ".join(["base", *(f"{k}={v}" for k, v in kwargs.items())])
        label = f"LoRALinear({shown})"
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(seed + 1)
            lora = run("LoRALinear", LoRALinear, base, **kwargs)
        _lora_start(lora, base, rank, alpha, label)
        _lora_values(lora, base, rank, alpha, label)

    judge(6, 6, False, 120)                      # square, no bias: lora_A.T @ lora_B.T would fit
    judge(5, 3, True, 121)                       # the defaults rank=8, alpha=16 on a layer with a bias
    with argument("LoRALinear.rank"):
        judge(5, 3, True, 122, rank=2)
    with argument("LoRALinear.alpha"):
        judge(5, 4, False, 123, alpha=4.0)
    with edge_case("LoRALinear.bad_rank"):
        expect_value_error("LoRALinear(base, rank=0)", lambda: LoRALinear(_linear(5, 3, True, 124), rank=0),
                           "check rank at the start of __init__ and raise ValueError when it is below 1.")
    passed("LoRALinear", "(base frozen, kaiming lora_A, zero lora_B, forward, merged; rank=2, alpha=4 too)")


# ------------------------------------------------------------------------------------------------------ add_lora
def _widths() -> dict[str, tuple[int, int]]:
    d, kv = PROBE_CONFIG["d_model"], PROBE_CONFIG["d_kv"]
    return {"w_q": (d, d), "w_k": (d, kv), "w_v": (d, kv), "w_o": (d, d)}


def _adapters(model) -> dict[tuple[int, str], nn.Module]:
    """{(block, name): module} of the attention linears that hold an adapter (a lora_A and a lora_B)."""
    return {(i, name): getattr(block.attn, name) for i, block in enumerate(model.blocks) for name in TARGETS
            if isinstance(getattr(getattr(block.attn, name), "lora_A", None), torch.Tensor)
            and isinstance(getattr(getattr(block.attn, name), "lora_B", None), torch.Tensor)}


def _where(places) -> str:
    return ", ".join(f"blocks.{i}.attn.{name}" for i, name in sorted(places)) or "none"


def _judge_add_lora(add_lora, seed: int, **kwargs) -> None:
    rank, alpha = kwargs.get("rank", 8), kwargs.get("alpha", 16.0)
    targets, blocks = kwargs.get("targets", ("w_q", "w_v")), kwargs.get("blocks", None)
    label = "add_lora(model" + "".join(f", {k}={v!r}" for k, v in kwargs.items()) + ")"
    model = probe_model(seed, num_layers=3)
    plain = copy.deepcopy(model)
    ids = torch.tensor([[3, 7, 1, 12, 5, 9], [8, 8, 2, 0, 11, 4]])
    with torch.no_grad():
        before = plain(ids)
    count = run("add_lora", add_lora, model, **kwargs)
    every = range(len(model.blocks))
    wanted = {(i, name) for i in (every if blocks is None else blocks) for name in targets}
    adapters = _adapters(model)
    if set(adapters) != wanted:
        hint = None
        if blocks is not None and set(adapters) == {(i, n) for i in every for n in targets}:
            hint = mistake_hint("add_lora.blocks_ignored")
        elif set(adapters) == {(i, n) for i in (every if blocks is None else blocks) for n in ("w_q", "w_v")}:
            hint = mistake_hint("add_lora.targets_ignored")
        fail(f"{label} put adapters on {_where(adapters)}; expected {_where(wanted)}.",
             hint or "replace model.blocks[i].attn.<name> with LoRALinear(that linear, rank, alpha) for each block i "
                     "listed and each name in targets.")
    lora_names = {f"blocks.{i}.attn.{n}.{p}" for i, n in wanted for p in ("lora_A", "lora_B")}
    trainable = {name for name, p in model.named_parameters() if p.requires_grad}
    if trainable - lora_names:
        fail(f"{label} left {len(trainable - lora_names)} parameters trainable that must be frozen, e.g. "
             f"{sorted(trainable - lora_names)[0]}.", mistake_hint("add_lora.not_frozen"))
    if lora_names - trainable:
        fail(f"{label}: the adapters' parameters are frozen too, e.g. {sorted(lora_names - trainable)[0]}.",
             mistake_hint("add_lora.adapters_frozen"))
    ranks = {where: module.lora_A.shape[0] for where, module in adapters.items()}
    if set(ranks.values()) != {rank}:
        fail(f"{label} made adapters of rank {sorted(set(ranks.values()))}, expected {rank}.",
             mistake_hint("add_lora.rank_not_passed") if set(ranks.values()) == {8} else
             "pass rank on: LoRALinear(that linear, rank, alpha).")
    expected_count = sum(rank * sum(_widths()[name]) for _, name in wanted)
    if isinstance(count, bool) or not isinstance(count, int) or count != expected_count:
        fail(f"{label} returned {count!r}, expected {expected_count} (rank * (in_features + out_features) per "
             "adapter: the trainable parameters).", mistake_hint("add_lora.wrong_count"))
    with torch.no_grad():
        expect_close(model(ids), before, f"the model's logits right after {label}",
                     "every lora_B starts at zeros, so right after add_lora the model computes what it did before.")
    generator = torch.Generator().manual_seed(seed + 1)
    merged = copy.deepcopy(plain)
    with torch.no_grad():
        for (i, name), module in sorted(adapters.items()):
            module.lora_A.copy_(0.5 * torch.randn(module.lora_A.shape, generator=generator))
            module.lora_B.copy_(0.5 * torch.randn(module.lora_B.shape, generator=generator))
            linear = getattr(merged.blocks[i].attn, name)
            linear.weight += alpha / rank * module.lora_B @ module.lora_A
        got, expected = model(ids), merged(ids)
        default_alpha = copy.deepcopy(plain)
        for (i, name), module in sorted(adapters.items()):
            getattr(default_alpha.blocks[i].attn, name).weight += 16.0 / rank * module.lora_B @ module.lora_A
        hint = mistake_hint("add_lora.alpha_not_passed") if alpha != 16.0 and close(got, default_alpha(ids)) else \
            "each adapter is LoRALinear(that linear, rank, alpha): pass alpha on."
    # x W^T + (alpha / r) x A^T B^T against x (W + (alpha / r) B A)^T: equal up to float32 rounding, which scales with
    # the logits (up to ~30), not with each one: a small logit next to large ones may differ by more than 1e-5
    expect_close(got, expected, f"the logits after {label}, with other values in the adapters", hint,
                 atol=1e-5 * max(1.0, float(expected.abs().max())))


@uses_parts("add_lora")
def check_add_lora(add_lora) -> None:
    _judge_add_lora(add_lora, 130)
    with argument("add_lora.rank"):
        _judge_add_lora(add_lora, 131, rank=2)
    with argument("add_lora.alpha"):
        _judge_add_lora(add_lora, 132, alpha=4.0)
    with argument("add_lora.targets"):
        _judge_add_lora(add_lora, 133, targets=("w_k", "w_o"))
    with argument("add_lora.blocks"):
        _judge_add_lora(add_lora, 134, blocks=[0, 2])
    with edge_case("add_lora.unknown_target"):
        expect_value_error("add_lora(model, targets=('w_q', 'w_x'))",
                           lambda: add_lora(probe_model(135, num_layers=3), targets=("w_q", "w_x")),
                           "check every name of targets against ('w_q', 'w_k', 'w_v', 'w_o') and raise ValueError.")
    with edge_case("add_lora.bad_block"):
        expect_value_error("add_lora(model of 3 blocks, blocks=[0, 3])",
                           lambda: add_lora(probe_model(136, num_layers=3), blocks=[0, 3]),
                           "check every index of blocks against range(len(model.blocks)) and raise ValueError.")
    passed("add_lora", "(frozen model, adapters where asked, the count, unchanged logits; rank, alpha, targets and "
                       "blocks too)")
