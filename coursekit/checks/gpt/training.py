"""Public self-checks of notebook 08's training helpers: `lr_at` at the turns of its schedule, and `train_step` over a
few steps against the steps written out here (a tiny language model, SGD with two parameter groups)."""
from __future__ import annotations

import math

import torch
from torch import nn

from coursekit.checks.toolkit import fail, mistake_hint, passed, run, uses_parts
from coursekit.criteria import argument, edge_case
from coursekit.tolerance import CLIPPED_NORM_RTOL, CPU_FLOAT32, LR_SCHEDULE


def check_lr_at(lr_at) -> None:
    # warm-up 10, 100 steps: the default floor 0.0, then min_lr=1e-4
    _lr_cases(lr_at, {0: 1e-4, 4: 5e-4, 9: 1e-3, 10: 1e-3, 55: 5e-4, 100: 0.0, 150: 0.0}, None)
    with argument("lr_at.min_lr"):
        _lr_cases(lr_at, {0: 1e-4, 4: 5e-4, 9: 1e-3, 10: 1e-3, 55: 5.5e-4, 100: 1e-4, 150: 1e-4}, 1e-4)
    with edge_case("lr_at.bad_warmup"):
        for warmup in (20, -1):
            try:
                lr_at(0, 1e-3, warmup, 10)
            except ValueError:
                pass
            else:
                fail(f"lr_at with warmup_steps={warmup}, max_steps=10 should raise ValueError (0 <= warmup_steps "
                     f"<= max_steps).")
    passed("lr_at")


def _lr_cases(lr_at, cases: dict, min_lr) -> None:
    shown = "" if min_lr is None else f", min_lr={min_lr:g}"
    for step, expected in cases.items():
        got = run("lr_at", lr_at, step, 1e-3, 10, 100, *(() if min_lr is None else (min_lr,)))
        if not isinstance(got, (int, float)) or not _same_rate(got, expected):
            hint = None
            if step < 10 and isinstance(got, (int, float)) and _same_rate(got, 1e-3 * step / 10):
                hint = mistake_hint("lr_at.warmup_off_by_one")
            elif min_lr and step == 55 and isinstance(got, (int, float)) and _same_rate(got, 5e-4):
                hint = mistake_hint("lr_at.min_lr_ignored")
            elif step == 10 and isinstance(got, (int, float)) and got < 1e-3:
                hint = mistake_hint("lr_at.cosine_from_zero")
            fail(f"lr_at({step}, max_lr=1e-3, warmup_steps=10, max_steps=100{shown}) should be "
                 f"{expected:g}, got {got}.", hint)


def _same_rate(got: float, expected: float) -> bool:
    """Two learning rates equal at the tolerance of the schedule, computed in Python floats."""
    return math.isclose(got, expected, rel_tol=LR_SCHEDULE["rtol"], abs_tol=LR_SCHEDULE["atol"])


class _TinyLM(nn.Module):
    """A tiny deterministic language model: a (V, V) table of logits per token, a running mean, a bias (V,)."""

    def __init__(self, vocab: int = 7, seed: int = 9):
        super().__init__()
        generator = torch.Generator().manual_seed(seed)
        self.table = nn.Parameter(torch.randn(vocab, vocab, generator=generator) * 3)
        self.bias = nn.Parameter(torch.randn(vocab, generator=generator))

    def forward(self, ids):
        x = self.table[ids].cumsum(1) / torch.arange(1, ids.size(1) + 1, device=ids.device)[None, :, None]
        return x + self.bias


# (lr, grad_clip) of each step; "default" calls without grad_clip. The gradient norms are above 1 at every step.
_STEPS = ((0.5, 0.2), (0.2, None), (0.3, "default"), (0.4, 0.05))
_DEFAULT_STEPS = tuple((lr, "default") for lr, _clip in _STEPS)  # the same rates, every step with grad_clip=1.0


def _steps(step_fn, training=True, plan=_STEPS):
    """Runs `plan` with `step_fn` on a fresh _TinyLM and an SGD optimizer with two groups (table, then bias)."""
    model = _TinyLM().train(training)
    optimizer = torch.optim.SGD([{"params": [model.table]}, {"params": [model.bias]}], lr=0.9, momentum=0.5)
    generator = torch.Generator().manual_seed(10)
    returns = []
    for lr, clip in plan:
        x, y = torch.randint(7, (2, 6), generator=generator), torch.randint(7, (2, 6), generator=generator)
        returns.append(step_fn(model, optimizer, x, y, lr, *(() if clip == "default" else (clip,))))
    return returns, model, optimizer


def _hand_step(zero="before", clip="before", lr_groups="all", step=True, result="before"):
    """One step written out here (the expected behaviour, and the known mistakes with one switch changed)."""
    def train_step(model, optimizer, x, y, lr, grad_clip=1.0):
        groups = {"all": optimizer.param_groups, "first": optimizer.param_groups[:1], "none": []}[lr_groups]
        for group in groups:
            group["lr"] = lr
        if zero == "before":
            optimizer.zero_grad()
        log_probs = model(x).log_softmax(-1)
        loss = -log_probs.gather(-1, y[..., None]).mean()
        loss.backward()
        if zero == "after":
            optimizer.zero_grad()
        if clip == "before" and grad_clip is not None:
            nn.utils.clip_grad_norm_(model.parameters(), grad_clip)
        if step:
            optimizer.step()
        if clip == "after" and grad_clip is not None:
            nn.utils.clip_grad_norm_(model.parameters(), grad_clip)
        if result == "after":
            with torch.no_grad():
                return float(-model(x).log_softmax(-1).gather(-1, y[..., None]).mean())
        return float(loss.detach())
    return train_step


def _same(a, b) -> bool:
    returns_a, model_a, _ = a
    returns_b, model_b, _ = b
    return (all(isinstance(r, float) and math.isclose(r, s, rel_tol=CPU_FLOAT32["rtol"], abs_tol=CPU_FLOAT32["atol"])
                for r, s in zip(returns_a, returns_b))
            and all(torch.allclose(p, q, **CPU_FLOAT32) for p, q in zip(model_a.parameters(), model_b.parameters())))


@uses_parts("train_step")
def check_train_step(train_step) -> None:
    _judge_steps(train_step, _DEFAULT_STEPS)
    with argument("train_step.grad_clip"):
        _judge_steps(train_step, _STEPS)  # the thresholds 0.2, None (no clipping), the default, 0.05
    returns, model, _ = run("train_step", lambda: _steps(train_step, training=False, plan=_DEFAULT_STEPS))
    if model.training:
        fail("train_step put a model given in eval mode into training mode.", mistake_hint("train_step.mode_changed"))
    passed("train_step", "(rates on every group, gradients cleared, clipped before the step, the loss before it)")


def _judge_steps(train_step, plan) -> None:
    """`plan` run with `train_step` against the steps written out here; a failure names the likely mistake."""
    got = run("train_step", lambda: _steps(train_step, plan=plan))
    returns, model, optimizer = got
    for value in returns:
        if isinstance(value, torch.Tensor):
            fail("train_step returned a tensor.", mistake_hint("train_step.returns_tensor"))
        if not isinstance(value, float):
            fail(f"train_step should return the loss as a Python float, got {type(value).__name__}.")
    expected = _steps(_hand_step(), plan=plan)
    if not _same(got, expected):
        grads = [p.grad for p in model.parameters()]
        last = 1.0 if plan[-1][1] == "default" else plan[-1][1]            # the last step's threshold
        clipped_grads = last is not None and all(g is not None for g in grads) and math.isclose(
            float(torch.cat([g.flatten() for g in grads]).norm()), last, rel_tol=CLIPPED_NORM_RTOL)
        cleared = all(g is None or not bool(g.any()) for g in grads)      # no gradients left after the steps
        hint = None
        for flags, hint_of in (
                (dict(zero="none"), lambda: mistake_hint("train_step.no_zero_grad")),
                (dict(step=False), lambda: mistake_hint("train_step.zero_grad_after_backward") if cleared
                 else mistake_hint("train_step.no_step")),
                (dict(clip="after"), lambda: mistake_hint("train_step.clip_after_step") if clipped_grads
                 else mistake_hint("train_step.no_clip")),
                (dict(lr_groups="none"), lambda: mistake_hint("train_step.lr_not_set")),
                (dict(lr_groups="first"), lambda: mistake_hint("train_step.lr_first_group_only")),
                (dict(result="after"), lambda: mistake_hint("train_step.loss_after_step"))):
            if _same(got, _steps(_hand_step(**flags), plan=plan)):
                hint = hint_of()
                break
        fail(f"after {len(plan)} steps (SGD with two parameter groups, lr and grad_clip "
             f"{[(lr, clip) for lr, clip in plan]}) the returned losses or the weights differ from the expected "
             f"ones.\nexpected losses {[round(r, 4) for r in expected[0]]}, got {[round(r, 4) for r in returns]}",
             hint)
    if any(group["lr"] != plan[-1][0] for group in optimizer.param_groups):
        fail("after the last step not every parameter group holds its lr.",
             mistake_hint("train_step.lr_first_group_only"))
    if not model.training:
        fail("train_step left the model in eval mode.", mistake_hint("train_step.mode_changed"))
