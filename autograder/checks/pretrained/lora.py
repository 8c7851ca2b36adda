"""Hidden checks of notebook 11's LoRA part: `LoRALinear(base, rank=8, alpha=16.0)` and `add_lora(model, rank=8,
alpha=16.0, targets=("w_q", "w_v"), blocks=None)`.

LoRALinear is built in the kernel around an `nn.Linear` the grader made there with its own weights (on the CPU, then
moved with the adapter to the grading device: where the adapter's parameters start is not the contract's business).
Each probe judges what the contract says of it: `base` is the linear given (the same module) and its parameters no
longer require gradients; `scaling` is alpha / rank; lora_A (rank, in_features) holds kaiming_uniform_(a=sqrt(5))
draws (within ±1/sqrt(in_features), the bound gain * sqrt(3 / fan_in) with gain sqrt(2 / (1 + 5)), and not all
small) and lora_B (out_features, rank) zeros, both trainable; the forward on a 3-D input equals base's at the start,
and base(x) + scaling * x A^T B^T once lora_A and lora_B hold values the grader drew; merged() is a new nn.Linear
(base left as it was) whose weight is base.weight + scaling * lora_B @ lora_A, whose bias is base's (None without
one) and whose output equals the forward. The core runs LoRALinear(base) with rank and alpha left out, on a layer
with a bias whose sizes differ (a wrong order of A and B cannot even multiply) and on a square one without a bias
(where lora_A.T @ lora_B.T has the right shape and the wrong values); the arguments with teeth rank and alpha are
each tried alone in their block, and rank < 1 is the stated edge case.

add_lora runs in the kernel on a small ModernGPT of this submission's sizes (3 blocks, 4 query heads over 2
key/value heads, so w_k and w_v are narrower than w_q and w_o), lent by `features.kernel_models`; its LoRALinear is
the student's own (or, when that failed its own check, the course's stand-in: `given_working_parts`). The grader
reads the model back (`state_dict(keep_vars=True)`: every parameter with its requires_grad) and compares it with the
reference's add_lora on its own copy: exactly the targets of exactly the listed blocks hold an adapter (lora_A,
lora_B and base) of the right rank, every other parameter is frozen and the adapters' are not, the returned number
is the count of trainable parameters (rank * (in + out) per adapter); the logits are those of the model before
(lora_B is zero), and, once the adapters hold values the grader drew, those of the reference's adapted model. A
difference is named by the known mistake whose summary matches it (`mistakes_lora.py`). The core leaves every
optional argument at its default; rank, alpha, targets and blocks are each tried alone in their block; an unknown
target and a block index the model does not have are the stated edge cases.
"""
from __future__ import annotations

import numbers

import torch
from torch import nn

from autograder.checks.kit.compare import as_tensor, describe, expect_tensor, from_table
from autograder.checks.kit.criteria import argument
from autograder.checks.kit.draws import pick
from autograder.checks.kit.parts import given_working_parts
from autograder.checks.kit.remote import ProbeBroken, RemoteObject, StudentError, hidden_check, new
from autograder.checks.kit.toolkit import (
    call, error_text, expect_callable, expect_raises, fail, fetch, grader_step, randint, randn, seeded,
    shape_of, start_check,
)
from autograder.checks.kit.compare import candidates as table_candidates
from autograder.checks.pretrained import mistakes_lora as M
from autograder.checks.pretrained.features import kernel_models, reference_model, shown_config, state_of
from autograder.checks.pretrained.lora_model import (ALPHAS, DEFAULT_RANK, RANKS, add_lora_arguments, add_lora_config,
                                                     judge_add_lora)

LORA_SEED, ADD_LORA_SEED = 170, 180
DEFAULT_ALPHA = 16.0
BOUND_SLACK = 1e-6   # kaiming's bound is computed in float64, its draws are float32: they may round past it by an ulp

# the spaces the checks draw from (first option: the input of salt 0)
BAD_RANKS = [-1, -3, -2]                   # besides 0, always tried


def _shown_call(rank, alpha) -> str:
    extra = ([] if rank is None else [f"rank={rank}"]) + ([] if alpha is None else [f"alpha={alpha:g}"])
    return "LoRALinear(" + ", ".join(["base", *extra]) + ")"


def _same_object(a, b, label: str) -> bool:
    """Whether the kernel objects `a` and `b` are one object (object.__eq__ answers True only for itself)."""
    try:
        return a.attr("__eq__")(b) is True
    except StudentError as error:
        if error.is_a("AttributeError"):
            return False
        fail(f"{label} could not be read: {error_text(error)}")
    except ProbeBroken as error:
        fail(f"{label} could not be checked: {error}.")


# ==================================================================================================== LoRALinear
class _Linear:
    """One nn.Linear probe: the grader's copy here and its twin in the kernel (same weights)."""

    def __init__(self, channel, in_features: int, out_features: int, bias: bool, seed: int):
        with seeded(seed):
            self.local = nn.Linear(in_features, out_features, bias=bias)
        self.shown = f"nn.Linear({in_features}, {out_features}{'' if bias else ', bias=False'})"

        def make():
            remote = new(channel, "torch.nn.Linear", in_features, out_features, bias=bias)
            missing, unexpected = remote.load_state({k: v.detach().clone() for k, v in self.local.state_dict().items()})
            if missing or unexpected:
                raise ProbeBroken(f"the grader's linear layer did not take its weights ({missing + unexpected})")
            return remote

        self.remote = grader_step(f"a {self.shown} lent to LoRALinear", make)


def _expect_parameters(lora, label: str, base: nn.Linear, rank: int, tested: str) -> None:
    """Exactly base's parameters (under `base.`), lora_A (rank, in) and lora_B (out, rank)."""
    theirs = {name: tuple(shape) for name, shape, _dtype in describe(lora, label).get("parameters", [])}
    expected = {f"base.{name}": tuple(p.shape) for name, p in base.named_parameters()}
    expected.update({"lora_A": (rank, base.in_features), "lora_B": (base.out_features, rank)})
    for name, shape in expected.items():
        if name not in theirs:
            fail(f"{label} needs the parameter `{name}` of shape {shape}.", tested=tested,
                 details=[f"its parameters: {', '.join(theirs)[:200] or 'none'}"],
                 hint="self.base = base (the given module), and self.lora_A, self.lora_B as nn.Parameter")
        if theirs[name] != shape:
            fail(f"{label}'s `{name}` has the wrong shape.", tested=tested, details=[f"expected {shape}, got "
                                                                                      f"{theirs[name]}"],
                 hint="lora_A is (rank, in_features) and lora_B is (out_features, rank)")
    extra = sorted(set(theirs) - set(expected))
    if extra:
        fail(f"{label} has parameters the exercise does not ask for: {', '.join(extra)[:200]}.", tested=tested)


def _number(value, label: str, tested: str) -> float:
    if isinstance(value, torch.Tensor) and value.numel() == 1:
        value = value.item()
    if not isinstance(value, numbers.Real) or isinstance(value, bool):
        fail(f"{label} must be a number, got {type(value).__name__}.", tested=tested)
    return float(value)


def _expect_start(lora, linear: _Linear, rank: int, alpha: float, tested: str) -> None:
    """What LoRALinear holds right after it is made: base, frozen; scaling; lora_A kaiming draws; lora_B zeros."""
    label = tested.split(" around")[0]
    _expect_parameters(lora, label, linear.local, rank, tested)
    if not _same_object(linear.remote, lora.attr("base"), f"{label}.base"):
        fail(f"{label}.base must be the nn.Linear it was given (the same module, not a copy or a new one).",
             tested=tested, hint="self.base = base")
    for name, _ in linear.local.named_parameters():
        if fetch(linear.remote.attr(name), f"base.{name}").requires_grad:
            fail(f"{label} left base.{name} trainable.", tested=tested, mistake="lora.base_trainable")
    scaling = _number(fetch(lora.attr("scaling"), f"{label}.scaling"), f"{label}.scaling", tested)
    if abs(scaling - alpha / rank) > 1e-6 * max(1.0, alpha / rank):      # float32 arithmetic is fine
        fail(f"{label}.scaling is {scaling:g}, expected alpha / rank = {alpha / rank:g}.", tested=tested,
             mistake="lora.scaling_alpha" if abs(scaling - alpha) < 1e-6 * alpha else None,
             hint="self.scaling = alpha / rank")
    held = {}
    for name in ("lora_A", "lora_B"):
        value = fetch(lora.attr(name), f"{label}.{name}")
        if not (isinstance(value, nn.Parameter) and value.requires_grad):
            fail(f"{label}.{name} must be a trainable nn.Parameter (requires_grad=True).", tested=tested,
                 hint=f"self.{name} = nn.Parameter(...): only base is frozen")
        held[name] = value.detach()
    lora_A, lora_B = held["lora_A"], held["lora_B"]
    if bool((lora_B != 0).any()):
        fail(f"{label}.lora_B does not start at zeros.", tested=tested, mistake="lora.b_random")
    bound = 1.0 / linear.local.in_features ** 0.5       # gain sqrt(2 / (1 + 5)) * sqrt(3 / fan_in), fan_in = in
    largest = float(lora_A.abs().max())
    if not bound / 2 <= largest <= bound * (1 + BOUND_SLACK):
        fail(f"{label}.lora_A's values do not look like kaiming_uniform_(a=math.sqrt(5)) draws.", tested=tested,
             details=[f"largest |value| {largest:.3g}, expected up to 1/sqrt(in_features) = {bound:.3g} "
                      "(and not all far below it)"], mistake="lora.a_not_kaiming")


def _wrong_order_errors(weight, A, B) -> list[str]:
    """The errors that lora_A @ lora_B raises here, alone or added to base.weight (either way round): a merged()
    that raises one of them multiplies A and B in the wrong order."""
    messages = []
    for attempt in (lambda: A @ B, lambda: weight + A @ B, lambda: A @ B + weight):
        try:
            with torch.no_grad():
                attempt()
        except RuntimeError as error:
            messages.append(str(error).splitlines()[0])
    return messages


def _expect_merged(lora, linear: _Linear, rank: int, alpha: float, A, B, x, forward, device, tested: str) -> None:
    """merged(): a new nn.Linear, base unchanged, weight W + s B A, base's bias, the forward's output."""
    label = tested.split(" around")[0]
    shown = f"{label}.merged()"
    try:
        merged = lora.attr("merged")()
    except StudentError as error:
        if error.is_a("NotImplementedError"):
            fail(f"{shown} is not implemented yet: replace `raise NotImplementedError()` with your code.",
                 tested=tested)
        named = error.is_a("RuntimeError") and any(message in error.message
                                                   for message in _wrong_order_errors(linear.local.weight, A, B))
        fail(f"{shown} raised an error.", tested=tested, details=[error_text(error), *error.where()[-2:]],
             mistake="lora.merged_wrong_order" if named else None)
    except ProbeBroken as error:
        fail(f"{shown} could not be checked: {error}.", tested=tested)
    if not isinstance(merged, RemoteObject) or merged.kind.get("type") != "Linear":
        got = merged.kind.get("type") if isinstance(merged, RemoteObject) else type(merged).__name__
        fail(f"{shown} must return an nn.Linear.", tested=tested, details=[f"got a {got}"])
    if _same_object(merged, linear.remote, shown):
        fail(f"{shown} returned base itself; it must build a new nn.Linear.", tested=tested,
             hint="nn.Linear(in_features, out_features, bias=base.bias is not None), then copy the merged weight")
    base = linear.local
    expected_weight = M.lora_merged_weight(base.weight.detach(), A, B, rank, alpha)
    weight = as_tensor(fetch(merged.attr("weight"), f"{shown}.weight"), f"{shown}.weight", tested)
    expect_tensor(weight.detach(), expected_weight, f"{shown}.weight", device, tested=tested,
                  shape_hint="(out_features, in_features), like base.weight",
                  mistakes=lambda: table_candidates(M.TABLE, lambda variant, switches: variant(
                      base.weight.detach(), A, B, rank, alpha, **switches), ["lora.merged_wrong_order"],
                      M.LORA_FORMS))
    bias = fetch(merged.attr("bias"), f"{shown}.bias")
    if base.bias is None:
        if bias is not None:
            fail(f"{shown} has a bias, but base has none.", tested=tested,
                 hint="nn.Linear(..., bias=base.bias is not None)")
    else:
        if not isinstance(bias, torch.Tensor):
            fail(f"{shown} has no bias, but base has one: copy it.", tested=tested)
        expect_tensor(bias.detach(), base.bias.detach(), f"{shown}.bias", device, tested=tested,
                      note="merged() copies base's bias")
    for name, value in base.named_parameters():
        now = as_tensor(fetch(linear.remote.attr(name), f"base.{name}"), f"base.{name}", tested)
        if not torch.equal(now.detach().cpu(), value.detach().cpu()):
            fail(f"{shown} changed base.{name}; it must leave the adapter as it is and return a new layer.",
                 tested=tested)
    got = call(f"{shown}.forward", merged, x.clone(), _no_grad=True, tested=f"{tested}, merged")
    expect_tensor(got, forward, f"{shown}(x)", device, tested=f"{tested}, merged",
                  note="the merged layer computes what the adapter computes")


def _judge_lora(LoRALinear, linear: _Linear, rank, alpha, seed: int, device) -> None:
    """LoRALinear(linear, [rank], [alpha]) (None: left out) from its start to merged()."""
    kwargs = {k: v for k, v in (("rank", rank), ("alpha", alpha)) if v is not None}
    rank, alpha = kwargs.get("rank", DEFAULT_RANK), kwargs.get("alpha", DEFAULT_ALPHA)
    label = _shown_call(kwargs.get("rank"), kwargs.get("alpha"))
    tested = f"{label} around {linear.shown}"
    lora = call(label, LoRALinear, linear.remote, _seed=seed, tested=tested, **kwargs)
    if not getattr(lora, "kind", {}).get("module"):
        fail(f"{label} did not create an nn.Module.", tested=tested)
    _expect_start(lora, linear, rank, alpha, tested)
    call(f"{label}.to(device)", lora.attr("to"), device)
    base = linear.local.to(device)
    x = randn(pick("lora.batch", [2, 3]), pick("lora.length", [5, 4, 6]), base.in_features, seed=seed + 1,
              device=device)                                                          # (B, T, in)
    shown_x = f"{tested} on x {shape_of(x)}"
    with torch.no_grad():
        expected = base(x)
    got = call(f"{label}.forward", lora, x.clone(), _no_grad=True, tested=f"{shown_x}, as made")
    expect_tensor(got, expected, f"{label}(x) as made", device, tested=f"{shown_x}, as made",
                  note="lora_B starts at zeros, so the adapter starts as base")
    # the grader's values in lora_A and lora_B
    A = randn(rank, base.in_features, seed=seed + 2, device=device) * 0.5                # (r, in)
    B = randn(base.out_features, rank, seed=seed + 3, device=device) * 0.5               # (out, r)
    grader_step("loading the grader's lora_A and lora_B", lambda: lora.load_state({"lora_A": A, "lora_B": B}))
    weight, bias = base.weight.detach(), None if base.bias is None else base.bias.detach()
    with torch.no_grad():
        expected = M.lora_forward(weight, bias, A, B, x, rank, alpha)
    tested_ab = f"{shown_x}, lora_A and lora_B set to other values"
    got = call(f"{label}.forward", lora, x.clone(), _no_grad=True, tested=tested_ab)
    expect_tensor(got, expected, f"{label}(x)", device, tested=tested_ab,
                  note="forward(x) = base(x) + scaling * (x @ lora_A.T) @ lora_B.T",
                  mistakes=lambda: from_table(M.TABLE, lambda variant, switches: variant(
                      weight, bias, A, B, x, rank, alpha, **switches), M.lora_ids_of(M.lora_forward)))
    _expect_merged(lora, linear, rank, alpha, A, B, x, expected, device, tested_ab)


def lora_cases():
    """(in, out, bias) of the two core probes, this submission's: a square layer without a bias (where
    lora_A.T @ lora_B.T has the shape of the weight), then sizes that differ, with a bias."""
    square = pick("lora.square", [8, 6, 10, 16])
    return [(square, square, False), (pick("lora.in", [12, 10, 14, 20]), pick("lora.out", [7, 9, 5, 11]), True)]


@hidden_check
def check_lora_linear(LoRALinear) -> None:
    """LoRALinear(base, rank=8, alpha=16.0): base frozen, scaling alpha / rank, lora_A (rank, in) kaiming, lora_B
    (out, rank) zeros; forward base(x) + scaling * x A^T B^T; merged() -> nn.Linear; rank < 1: ValueError."""
    device = start_check()
    expect_callable(LoRALinear, "LoRALinear", "module")
    channel = LoRALinear.channel
    (square, _, _), (in_f, out_f, _) = lora_cases()
    for k, (i, o, bias) in enumerate(lora_cases()):      # the core: rank and alpha left out
        _judge_lora(LoRALinear, _Linear(channel, i, o, bias, LORA_SEED + 10 * k), None, None, LORA_SEED + 5 + 10 * k,
                    device)
    with argument("LoRALinear.rank"):
        _judge_lora(LoRALinear, _Linear(channel, out_f, in_f, True, LORA_SEED + 30), pick("lora.rank", RANKS), None,
                    LORA_SEED + 35, device)
    with argument("LoRALinear.alpha"):
        _judge_lora(LoRALinear, _Linear(channel, in_f, square, False, LORA_SEED + 40), None,
                    pick("lora.alpha", ALPHAS), LORA_SEED + 45, device)
    linear = _Linear(channel, in_f, out_f, True, LORA_SEED + 50)
    for rank in (0, pick("lora.bad_rank", BAD_RANKS)):
        expect_raises(ValueError, f"LoRALinear(base, rank={rank})", LoRALinear, linear.remote, rank=rank,
                      why="for a rank below 1", criterion="LoRALinear.bad_rank")


# ====================================================================================================== add_lora
@hidden_check
@given_working_parts("add_lora")
def check_add_lora(add_lora) -> None:
    """add_lora(model, rank=8, alpha=16.0, targets=("w_q", "w_v"), blocks=None) -> the number of trainable
    parameters; the model frozen but for LoRALinear adapters on the targets of the listed blocks."""
    device = start_check()
    expect_callable(add_lora, "add_lora")
    config = add_lora_config()
    plain = reference_model(ADD_LORA_SEED, config).to(device)
    ids = randint(0, config["vocab_size"], (pick("add_lora.batch", [2, 3]), pick("add_lora.length", [7, 6, 8, 9])),
                  seed=ADD_LORA_SEED + 1, device=device)
    arguments = add_lora_arguments()
    with kernel_models(add_lora.channel) as kernel:
        def judge(kwargs: dict, seed: int) -> None:
            judge_add_lora(add_lora, kernel, plain, config, kwargs, ids, seed, device)

        judge({}, ADD_LORA_SEED + 100)                    # the core: every optional argument left out
        with argument("add_lora.rank"):
            judge(arguments["add_lora.rank"], ADD_LORA_SEED + 200)
        with argument("add_lora.alpha"):
            judge(arguments["add_lora.alpha"], ADD_LORA_SEED + 300)
        with argument("add_lora.targets"):
            judge(arguments["add_lora.targets"], ADD_LORA_SEED + 400)
        with argument("add_lora.blocks"):
            judge(arguments["add_lora.blocks"], ADD_LORA_SEED + 500)
        shown = shown_config(config)
        bad_target = pick("add_lora.bad_target", ["w_x", "w_gate", "q", "w_qkv"])
        expect_raises(ValueError, f"add_lora(a small {shown}, targets=('w_q', {bad_target!r}))", add_lora,
                      kernel.modern_gpt(config, state_of(plain), "cpu"), targets=("w_q", bad_target),
                      why="for a target that is none of w_q, w_k, w_v, w_o", criterion="add_lora.unknown_target")
        bad_block = config["num_layers"] + pick("add_lora.bad_block", [0, 1, 4])
        expect_raises(ValueError, f"add_lora(a small {shown}, blocks=[0, {bad_block}])", add_lora,
                      kernel.modern_gpt(config, state_of(plain), "cpu"), blocks=[0, bad_block],
                      why=f"for a block index the model does not have (it has {config['num_layers']} blocks)",
                      criterion="add_lora.bad_block")
