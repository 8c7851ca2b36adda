"""Hidden checks of notebook 08's training helpers: `lr_at` (warm-up, cosine decay, floor) against the reference at
the steps around its turns, and `train_step` over a run of steps on a small language model and an SGD optimizer
lent to it (`common.py`), judged by the losses it returns, the weights and gradients it leaves, the rates in the
optimizer's groups and the model's mode."""
from __future__ import annotations

import math
import numbers

import torch
import torch.nn.functional as F

from autograder.checks.gpt import mistakes as M
from autograder.checks.gpt.common import PROBE_LM_CONFIG, local_lm, probe_state, remote_lm, training_flag
from autograder.checks.kit import remote as _remote
from autograder.checks.kit.compare import describe, from_table, values_close
from autograder.checks.kit.criteria import argument
from autograder.checks.kit.draws import pick
from autograder.checks.kit.inputs import reference
from autograder.checks.kit.remote import RemoteObject, hidden_check
from autograder.checks.kit.parts import given_working_parts
from autograder.checks.kit.tolerance import tolerance
from autograder.checks.kit.toolkit import (
    call, expect_raises, expected_got, fail, grader_step, randint, shape_of, start_check, type_name,
)
from coursekit.tolerance import LR_SCHEDULE, TRAINING_RUN_LOOSER


# ------------------------------------------------------------------------------------------------------- lr_at


@hidden_check
def check_lr_at(lr_at) -> None:
    """lr_at(step, max_lr, warmup_steps, max_steps, min_lr=0.0): linear warm-up, cosine decay, then min_lr."""
    start_check()
    solution = reference("gpt")
    # a warm-up with a floor; no warm-up; warm-up as long as the run; the default floor
    configs = [(pick("gpt.lr_at.lr_a", [3e-3, 2.5e-3, 4e-3]), pick("gpt.lr_at.warmup_a", [10, 8, 12, 15]),
                pick("gpt.lr_at.steps_a", [100, 90, 120]), pick("gpt.lr_at.min_a", [2e-4, 1e-4, 3e-4])),
               (pick("gpt.lr_at.lr_b", [1e-3, 6e-4, 2e-3]), 0, pick("gpt.lr_at.steps_b", [40, 30, 50]),
                pick("gpt.lr_at.min_b", [5e-5, 1e-5, 8e-5])),
               (pick("gpt.lr_at.lr_c", [5e-4, 7e-4, 9e-4]), *[pick("gpt.lr_at.both_c", [7, 5, 9, 11])] * 2,
                pick("gpt.lr_at.min_c", [1e-5, 2e-5, 4e-5])),
               (pick("gpt.lr_at.lr_d", [2e-3, 1.5e-3, 3e-3]), pick("gpt.lr_at.warmup_d", [25, 20, 30]),
                pick("gpt.lr_at.steps_d", [60, 55, 70]), None)]
    # the core: every schedule with the default floor min_lr=0.0; then min_lr: the same schedules with their floor
    for max_lr, warmup, max_steps, _min_lr in configs:
        _try_lr_at(lr_at, solution, max_lr, warmup, max_steps, None)
    with argument("lr_at.min_lr"):
        for max_lr, warmup, max_steps, min_lr in configs:
            if min_lr is not None:
                _try_lr_at(lr_at, solution, max_lr, warmup, max_steps, min_lr)
    max_steps = pick("gpt.lr_at.bad_steps", [10, 12, 20, 8])
    for warmup in (max_steps + pick("gpt.lr_at.bad_over", [1, 2, 5]), -pick("gpt.lr_at.bad_under", [1, 2, 3])):
        expect_raises(ValueError, f"lr_at(0, 1e-3, warmup_steps={warmup}, max_steps={max_steps})", lr_at,
                      0, 1e-3, warmup, max_steps, why="unless 0 <= warmup_steps <= max_steps",
                      criterion="lr_at.bad_warmup")


def _try_lr_at(lr_at, solution, max_lr: float, warmup: int, max_steps: int, min_lr: float | None) -> None:
    """lr_at at the steps around the warm-up's end and the run's end (min_lr None: the default floor)."""
    extra = () if min_lr is None else (min_lr,)
    for step in sorted({0, 1, warmup // 2, max(warmup - 1, 0), warmup, warmup + 1, (warmup + max_steps) // 2,
                        max_steps - 1, max_steps, max_steps + 5}):
        tested = (f"lr_at({step}, max_lr={max_lr:g}, warmup_steps={warmup}, max_steps={max_steps}"
                  + (f", min_lr={min_lr:g})" if extra else ")"))
        got = call("lr_at", lr_at, step, max_lr, warmup, max_steps, *extra, tested=tested)
        if isinstance(got, torch.Tensor) and got.numel() == 1:
            got = float(got)
        if not isinstance(got, numbers.Real) or isinstance(got, bool):
            fail("lr_at must return a float.", tested=tested, details=[f"got a {type(got).__name__}"])
        expected = solution.lr_at(step, max_lr, warmup, max_steps, *extra)
        if not _same_rate(float(got), expected):
            variants = from_table(M.TABLE, lambda variant, switches: variant(
                step, max_lr, warmup, max_steps, min_lr=min_lr or 0.0, **switches), M.ids_of(M.lr_variant))
            mistake = next((m for m, produce in variants.items() if _same_rate(float(got), produce())), None)
            fail("lr_at: the learning rate differs from the reference solution.", tested=tested,
                 details=expected_got(f"{expected:.6g}", f"{float(got):.6g}"), mistake=mistake)


# -------------------------------------------------------------------------------------------------- train_step
# The steps of the run: (learning rate, grad_clip), the optimizer starting at another rate (STEP_START_LR). The
# gradient norms of the lent model (its weights scaled by 3) on these batches are above 1 and below 50 (drawn until
# they are): clipping at 0.5 and 0.05 is active, at 50 it is not; the step without grad_clip uses the default, 1.0,
# which is active too. The last step clips, so that the gradients left after it tell clipping after the step from no
# clipping. The rates are drawn per submission (today's first), the clipping thresholds are what the plan tests.
STEP_CLIPS = (0.5, None, 50.0, "default", 0.05)
STEP_RATES = [(0.3, 0.2, 0.4, 0.25, 0.35), (0.25, 0.35, 0.3, 0.2, 0.4), (0.4, 0.3, 0.2, 0.35, 0.25),
              (0.2, 0.4, 0.35, 0.3, 0.45), (0.35, 0.25, 0.45, 0.4, 0.3)]
STEP_PLAN = tuple(zip(STEP_RATES[0], STEP_CLIPS))
STEP_START_LR, STEP_MOMENTUM = 0.9, 0.5
STEP_B, STEP_T = [3, 2, 4], [10, 8, 12, 9]      # batch and length of the batches (today's first), drawn


def _step_batches(device, seed: int = 140) -> list[tuple[torch.Tensor, torch.Tensor]]:
    vocab = PROBE_LM_CONFIG["vocab_size"]
    shape = (pick("gpt.train_step.batch", STEP_B), pick("gpt.train_step.length", STEP_T))
    return [(randint(0, vocab, shape, seed=seed + k, device=device),
             randint(0, vocab, shape, seed=seed + 10 + k, device=device)) for k in range(len(STEP_CLIPS))]


def _clip_norms(setup: dict, device) -> list[float]:
    """The total gradient norm before clipping at each step of the reference's run."""
    model = local_lm(setup["state"], device, True)
    optimizer = torch.optim.SGD(_groups(dict(model.named_parameters())), lr=STEP_START_LR, momentum=STEP_MOMENTUM)
    norms = []
    for (lr, clip), (x, y) in zip(setup["plan"], setup["batches"]):
        for group in optimizer.param_groups:
            group["lr"] = lr
        optimizer.zero_grad(set_to_none=True)
        logits = model(x)
        F.cross_entropy(logits.reshape(-1, logits.size(-1)), y.reshape(-1)).backward()
        norms.append(float(torch.nn.utils.clip_grad_norm_(model.parameters(), math.inf)))
        if clip is not None:
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0 if clip == "default" else clip)
        optimizer.step()
    return norms


def step_setup(device) -> dict:
    """This submission's train_step run: the plan (rates drawn), the lent model's weights and the batches, from the
    first seed 140, 1140, 2140, ... whose gradient norms keep every clipping threshold active or not as planned, and
    the default threshold (1.0) active at every step of the core's run (the same rates, no grad_clip given)."""
    plan = tuple(zip(pick("gpt.train_step.rates", STEP_RATES), STEP_CLIPS))
    setup = None
    for k in range(20):
        seed = 140 + 1000 * k
        setup = {"plan": plan, "state": {key: v * 3 for key, v in probe_state(seed).items()},
                 "batches": _step_batches(device, seed)}
        norms = _clip_norms(setup, device)
        core = _clip_norms({**setup, "plan": tuple((lr, "default") for lr, _clip in plan)}, device)
        if all(clip is None or (norm < 0.9 * clip if clip == 50.0 else norm > 1.1 * (1.0 if clip == "default"
                                                                                    else clip))
               for norm, (_lr, clip) in zip(norms, plan)) and all(norm > 1.1 for norm in core):
            break
    return setup


def _groups(parameters: dict) -> list[dict]:
    """The optimizer's two parameter groups, as the course's loop makes them: matrices and embeddings, then biases."""
    names = sorted(parameters)
    return [{"params": [parameters[n] for n in names if n.endswith("weight")]},
            {"params": [parameters[n] for n in names if n.endswith("bias")]}]


def _local_step_run(setup: dict, device, step, training: bool = True) -> dict:
    """The plan run here with `step` (the reference or a known mistake): returns, weights, final gradients."""
    model = local_lm(setup["state"], device, training)
    optimizer = torch.optim.SGD(_groups(dict(model.named_parameters())), lr=STEP_START_LR, momentum=STEP_MOMENTUM)
    returns = []
    for (lr, clip), (x, y) in zip(setup["plan"], setup["batches"]):
        extra = () if clip == "default" else (clip,)
        value = step(model, optimizer, x, y, lr, *extra)
        returns.append(float(value.detach()) if isinstance(value, torch.Tensor) else float(value))
    return {"returns": returns, "weights": {k: v.detach().clone() for k, v in model.state_dict().items()},
            "grads": {n: None if p.grad is None else p.grad.detach().clone() for n, p in model.named_parameters()},
            "lrs": [group["lr"] for group in optimizer.param_groups]}


def _same_run(got: dict, expected: dict, device, what=("returns", "weights")) -> bool:
    for key in what:
        if key == "returns":
            if not all(_same_loss(a, b, device) for a, b in zip(got["returns"], expected["returns"])):
                return False
            continue
        for name, value in expected[key].items():
            mine = got[key].get(name)
            if value is None or mine is None:
                if not (value is None and (mine is None or not bool(mine.abs().max() > 0))):
                    return False
            elif not isinstance(mine, torch.Tensor) or not values_close(mine, value, device,
                                                                     looser=TRAINING_RUN_LOOSER):
                return False
    return True


@hidden_check
@given_working_parts("train_step")
def check_train_step(train_step) -> None:
    """train_step(model, optimizer, x, y, lr, grad_clip=1.0) -> the loss before the step, after one step."""
    device = start_check()
    solution = reference("gpt")
    channel = train_step.channel
    setup = step_setup(device)                                   # larger weights: gradient norms above 1
    state, plan = setup["state"], setup["plan"]
    description = ("train_step(a small language model in training mode, an SGD optimizer with two parameter groups, "
                   f"x {shape_of(setup['batches'][0][0])}, y {shape_of(setup['batches'][0][1])}, lr, grad_clip)")

    def make():
        model = remote_lm(channel, state, device, True)
        parameters = {n: model.attr(*n.split(".")) for n, _shape, _dtype in describe(model, "the lent model")
                      .get("parameters", [])}
        optimizer = _remote.new(channel, "torch.optim.SGD", _groups(parameters), lr=STEP_START_LR,
                                momentum=STEP_MOMENTUM)
        return model, optimizer

    # the core: every step with the default grad_clip (1.0); then grad_clip: the plan's thresholds (0.5, None, 50,
    # the default, 0.05), on the same batches from the same weights
    _judge_step_run(train_step, {**setup, "plan": tuple((lr, "default") for lr, _clip in plan)},
                    description.removesuffix(", grad_clip)") + ")", make, device, solution)
    with argument("train_step.grad_clip"):
        _judge_step_run(train_step, setup, description, make, device, solution)
    # a model in eval mode stays there, and its loss is the eval-mode loss
    model = remote_lm(channel, state, device, False)
    optimizer = grader_step(description, lambda: _remote.new(channel, "torch.optim.SGD", model.attr("parameters")(),
                                                             lr=STEP_START_LR))
    x, y = setup["batches"][0]
    lr = plan[0][0]
    tested = f"train_step(a small language model in eval mode, an SGD optimizer, x, y, lr={lr})"
    got = call("train_step", train_step, model, optimizer, x.clone(), y.clone(), lr, tested=tested)
    local = local_lm(state, device, False)
    expected_loss = solution.train_step(local, torch.optim.SGD(local.parameters(), lr=STEP_START_LR), x, y, lr)
    changed = training_flag(model, "the lent model") is not False
    if changed or not isinstance(got, numbers.Real) or not _same_loss(float(got), expected_loss, device):
        fail("train_step must leave the model's mode as it was and run it in that mode (the caller sets it).",
             tested=tested, details=["the model was left in training mode" if changed else
                                     f"expected the eval-mode loss {expected_loss:.4f}, got {got}"],
             mistake="train_step.mode_changed")


def _judge_step_run(train_step, setup: dict, description: str, make, device, solution) -> None:
    """The plan of `setup` run with the student's train_step on a fresh lent model and optimizer (`make`), judged
    against the reference's run: the returned losses, the weights, the rates left in the groups, the mode."""
    plan = setup["plan"]
    model, optimizer = grader_step(description, make)
    returns = []
    for k, ((lr, clip), (x, y)) in enumerate(zip(plan, setup["batches"])):
        extra = () if clip == "default" else (clip,)
        shown = "" if clip == "default" else f", grad_clip={clip}"
        tested = f"step {k + 1} of {len(plan)}: train_step(model, optimizer, x, y, lr={lr}{shown})"
        got = call("train_step", train_step, model, optimizer, x.clone(), y.clone(), lr, *extra, tested=tested)
        if isinstance(got, RemoteObject) or isinstance(got, bool) or not isinstance(got, (numbers.Real,
                                                                                           torch.Tensor)):
            fail("train_step must return the loss as a Python float.", tested=tested,
                 details=[f"got a {type_name(got)}"])
        if isinstance(got, torch.Tensor):
            fail("train_step must return the loss as a Python float, not a tensor.", tested=tested,
                 details=[f"got a tensor of shape {tuple(got.shape)}"], mistake="train_step.returns_tensor")
        returns.append(float(got))
    weights = grader_step(description, model.state)
    grads = {}
    for name in weights:
        grads[name] = grader_step(description, lambda name=name: model.attr(*name.split("."), "grad").fetch())
    lrs = [group.get("lr") if isinstance(group, dict) else None
           for group in grader_step(description, optimizer.attr("param_groups").fetch)]
    got_run = {"returns": returns, "weights": weights, "grads": grads, "lrs": lrs}
    expected = _local_step_run(setup, device, solution.train_step)

    returns_ok = _same_run(got_run, expected, device, ("returns",))
    weights_ok = _same_run(got_run, expected, device, ("weights",))
    if not (returns_ok and weights_ok):
        mistake = _diagnose_step_run(got_run, setup, device, returns_ok, weights_ok)
        if not weights_ok:
            fail(f"{description}: after {len(plan)} steps the weights differ from the reference's (same "
                 "initial weights, same optimizer, same batches, rates and clipping).",
                 details=expected_got("the same weights as the reference", "different weights"), mistake=mistake)
        fail(f"{description}: the returned losses differ from the reference's.",
             details=expected_got(", ".join(f"{v:.4f}" for v in expected["returns"]),
                                  ", ".join(f"{v:.4f}" for v in returns)), mistake=mistake,
             hint=None if mistake else "return loss.item(): the loss of the batch before the step")
    if any(not isinstance(lr, numbers.Real) or not math.isclose(lr, plan[-1][0]) for lr in lrs):
        fail(f"{description}: after the last step the optimizer's parameter groups do not all hold its rate.",
             details=expected_got(f"lr={plan[-1][0]} in every group", ", ".join(str(v) for v in lrs)),
             mistake="train_step.lr_first_group_only" if lrs and lrs[0] == plan[-1][0] else
             "train_step.lr_not_set")
    if training_flag(model, "the lent model") is not True:
        fail(f"{description}: the model is no longer in training mode after train_step.",
             mistake="train_step.mode_changed")


def _diagnose_step_run(got_run: dict, setup: dict, device, returns_ok: bool, weights_ok: bool) -> str | None:
    """The first known mistake whose run of the plan here gives the student's: the losses or the weights that differ
    (both when both do), and the gradients left after the run where the mistake is about clearing, clipping or
    stepping (the same weights: clipping after the step or never; no step or nothing to step)."""
    what = (("returns",) if weights_ok else ("weights",) if returns_ok else ("returns", "weights"))
    runs = from_table(M.TABLE, lambda variant, switches: _local_step_run(
        setup, device, lambda *args: variant(*args, **switches)), M.ids_of(M.train_step_variant))
    for mistake_id, run in runs.items():
        switches = M.TABLE[mistake_id][1]
        variant = run()
        compared = what + (("grads",) if {"clip", "zero_grad", "step"} & set(switches) else ())
        try:
            if _same_run(got_run, variant, device, compared):
                return mistake_id
        except Exception:  # noqa: BLE001 -- a variant that cannot be compared does not match
            continue
    return None


def _same_loss(got: float, expected: float, device) -> bool:
    """Two losses equal at the float32 tolerance of the device they were computed on."""
    tol = tolerance(device)
    return math.isclose(got, expected, rel_tol=tol["rtol"], abs_tol=tol["atol"])


def _same_rate(got: float, expected: float) -> bool:
    """Two learning rates equal at the tolerance of the schedule, computed in Python floats."""
    return math.isclose(got, expected, rel_tol=LR_SCHEDULE["rtol"], abs_tol=LR_SCHEDULE["atol"])
