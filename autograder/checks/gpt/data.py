"""Hidden checks of notebook 08's data and loss helpers: `get_batch` (the contract's draw of the windows, from the
generator given or torch's global one), `lm_loss`, and `estimate_loss` on a small language model lent to it
(`common.py`)."""
from __future__ import annotations

import math
import numbers

import torch
import torch.nn.functional as F

from autograder.checks.gpt import mistakes as M
from autograder.checks.gpt.common import (
    PROBE_LM_CONFIG, local_generator, local_lm, probe_state, remote_generator, remote_lm, training_flag,
)
from autograder.checks.kit.compare import as_tensor, expect_shape, expect_tensor, from_table
from autograder.checks.kit.criteria import argument
from autograder.checks.kit.draws import pick
from autograder.checks.kit.tolerance import tolerance
from autograder.checks.kit.toolkit import (
    call, expect_raises, expected_got, fail, randint, randn, seeded, shape_of, start_check,
)
from autograder.checks.kit.remote import hidden_check
from coursekit.tolerance import DISTINCT_LOSS_RTOL


# ---------------------------------------------------------------------------------------------------- get_batch
def _starts(n: int, block_size: int, batch_size: int, seed: int, high: int | None = None, source="generator"):
    """The contract's draw of the windows' starts (or with another upper bound `high`)."""
    high = n - block_size if high is None else high
    if source == "generator":
        return torch.randint(high, (batch_size,), generator=local_generator(seed))
    with seeded(seed):
        return torch.randint(high, (batch_size,))


def _wrong_highs(n: int, block_size: int) -> tuple[int, ...]:
    return tuple(h for h in (n - block_size - 1, n - block_size + 1, n - 1, n) if h > 0 and h != n - block_size)


def _revealing_seed(seed: int, n: int, block_size: int, batch_size: int, source="generator") -> int:
    """`seed`, or the first of seed + 1000, seed + 2000, ... whose draw differs from the draw with every wrong upper
    bound (get_batch.start_range), so that the mistake cannot pass by luck (bounded)."""
    for k in range(50):
        candidate = seed + 1000 * k
        right = _starts(n, block_size, batch_size, candidate, source=source)
        if all(not torch.equal(right, _starts(n, block_size, batch_size, candidate, high, source))
               for high in _wrong_highs(n, block_size)):
            return candidate
    return seed


@hidden_check
def check_get_batch(get_batch) -> None:
    """get_batch(data, block_size, batch_size, generator=None): windows at torch.randint(N - block_size, ...)."""
    device = start_check()
    n, offset = pick("gpt.get_batch.n", [50, 45, 56, 61, 53]), pick("gpt.get_batch.offset", [1000, 700, 3000, 1500])
    data = (torch.arange(n) + offset).to(device)               # value - offset = position: windows are readable
    plan = [(pick("gpt.get_batch.block_a", [7, 6, 8, 5, 10]), pick("gpt.get_batch.batch_a", [5, 6, 4, 7]), 90),
            (pick("gpt.get_batch.block_b", [3, 2, 4]), pick("gpt.get_batch.batch_b", [9, 8, 10, 11]), 91),
            (n - 1, pick("gpt.get_batch.batch_c", [4, 3, 5]), 92)]   # one window fits: every start is 0
    # the core: generator=None, the global generator (the grader seeds it for each call)
    plan.append((pick("gpt.get_batch.block_g", [7, 9, 5, 6]), pick("gpt.get_batch.batch_g", [6, 7, 5]), 93))
    for block_size, batch_size, seed in plan:
        if block_size < n - 1:
            seed = _revealing_seed(seed, n, block_size, batch_size, "global")
        tested = (f"get_batch(data {shape_of(data)}, block_size={block_size}, batch_size={batch_size}) "
                  "without a generator")
        got = call("get_batch", get_batch, data.clone(), block_size, batch_size, tested=tested, _seed=seed)
        x, y = _batch_pair(got, tested, (batch_size, block_size))
        _judge_batch(x, y, _starts(n, block_size, batch_size, seed, source="global"), n, offset, block_size,
                     batch_size, seed, tested, "global")
    # generator: the starts are drawn from it
    with argument("get_batch.generator"):
        for block_size, batch_size, seed in plan[:3]:
            if block_size < n - 1:
                seed = _revealing_seed(seed, n, block_size, batch_size)
            tested = f"get_batch(data {shape_of(data)}, block_size={block_size}, batch_size={batch_size}, generator)"
            generator = remote_generator(get_batch.channel, seed)
            got = call("get_batch", get_batch, data.clone(), block_size, batch_size, generator, tested=tested)
            x, y = _batch_pair(got, tested, (batch_size, block_size))
            starts = _starts(n, block_size, batch_size, seed)
            _judge_batch(x, y, starts, n, offset, block_size, batch_size, seed, tested, "generator")


def _batch_pair(got, tested, shape):
    if not isinstance(got, (tuple, list)) or len(got) != 2:
        fail("get_batch must return a pair (x, y).", tested=tested, details=[f"got a {type(got).__name__}"])
    x, y = (as_tensor(t, "get_batch's " + n, tested) for t, n in zip(got, ("x", "y")))
    for t, label in ((x, "x"), (y, "y")):
        expect_shape(t, shape, f"get_batch's {label}", tested, hint="x and y are (batch_size, block_size)")
        if t.dtype != torch.long:
            fail(f"get_batch's {label} has dtype {t.dtype}, expected torch.int64 (token ids).", tested=tested)
    return x.cpu(), y.cpu()


def _judge_batch(x, y, starts, n, offset, block_size, batch_size, seed, tested, source):
    position = x - offset
    windows = position[:, :1] + torch.arange(block_size)
    if torch.equal(x, y):
        fail("get_batch: y equals x.", tested=tested, mistake="get_batch.no_shift")
    if torch.equal(position, windows) and torch.equal(x, y + 1):
        fail("get_batch: x and y are swapped.", tested=tested, mistake="get_batch.swapped")
    if not torch.equal(position, windows) or not torch.equal(y, x + 1):
        fail("get_batch: each row of x must be a window of consecutive tokens of data and y the same window "
             "shifted by one token.", tested=tested, mistake="get_batch.shift" if torch.equal(position, windows)
             else None)
    got_starts = position[:, 0]
    if torch.equal(got_starts, starts):
        return
    mistake = None
    for high in _wrong_highs(n, block_size):
        if torch.equal(_starts(n, block_size, batch_size, seed, high, source), got_starts):
            mistake = "get_batch.start_range"
    fail("get_batch: the windows start at other positions than the contract's draw.", tested=tested,
         details=[f"expected starts drawn by torch.randint(len(data) - block_size, (batch_size,), "
                  f"generator=generator)" + (" from the global generator" if source == "global" else "")],
         mistake=mistake,
         hint=None if mistake else "draw the starts with exactly that one call, passing the generator on")


# ------------------------------------------------------------------------------------------------------ lm_loss
@hidden_check
def check_lm_loss(lm_loss) -> None:
    """lm_loss(logits (B, T, V), targets (B, T)) -> mean cross-entropy over all B * T positions."""
    device = start_check()
    plan = ((pick("gpt.lm_loss.b", [2, 3, 4]), pick("gpt.lm_loss.t", [5, 4, 6, 7]),
             pick("gpt.lm_loss.v", [11, 9, 13]), 100),
            (pick("gpt.lm_loss.b1", [3, 2, 5]), 1, pick("gpt.lm_loss.v1", [7, 6, 8]), 101),            # T = 1
            (1, pick("gpt.lm_loss.t2", [6, 5, 8]), pick("gpt.lm_loss.v2", [4, 3, 5]), 102))            # B = 1
    for b, t, v, seed in plan:
        logits = randn(b, t, v, seed=seed, device=device) * 2
        targets = randint(0, v, (b, t), seed=seed + 50, device=device)
        tested = f"lm_loss(logits {shape_of(logits)}, targets {shape_of(targets)})"
        got = call("lm_loss", lm_loss, logits.clone(), targets.clone(), tested=tested, _no_grad=True)
        if isinstance(got, numbers.Real) and not isinstance(got, bool):
            fail("lm_loss must return a scalar tensor, not a Python number: the training loop calls .backward() "
                 "on it.", tested=tested, details=[f"got a {type(got).__name__}"], mistake="lm_loss.python_float")
        got = as_tensor(got, "lm_loss's result", tested)
        if got.numel() != 1 or got.dim() != 0:
            fail("lm_loss must return a scalar tensor (the mean over all positions).", tested=tested,
                 details=[f"got shape {tuple(got.shape)}"])
        expected = F.cross_entropy(logits.reshape(-1, v), targets.reshape(-1))
        expect_tensor(got.to(device), expected, "lm_loss", device, tested=tested, mistakes=lambda: from_table(
            M.TABLE, lambda variant, switches: variant(logits, targets, **switches), M.ids_of(M.lm_loss_variant)))


# ------------------------------------------------------------------------------------------------ estimate_loss
def _estimate_data(state: dict, n: int, block_size: int, device) -> torch.Tensor:
    """`n` tokens (seed 111 + n, else + 1000, + 2000, ...) on which every known mistake that reads other windows
    than the right ones gives a loss at least DISTINCT_LOSS_RTOL (relative) away from the right loss: none passes by
    luck."""
    right = M.window_starts(n, block_size)
    others = [M.window_starts(n, block_size, last_window=False), M.window_starts(n, block_size, overlapping=True)]
    others = [starts for starts in others if starts != right]
    data = None
    for k in range(30):
        data = randint(0, PROBE_LM_CONFIG["vocab_size"], (n,), seed=111 + n + 1000 * k, device="cpu")
        local = local_lm(state, device, False)
        expected = M.loss_over_windows(local, data, block_size, right, device)
        if all(abs(M.loss_over_windows(local, data, block_size, starts, device) - expected)
               > DISTINCT_LOSS_RTOL * abs(expected) for starts in others):
            break
    return data


@hidden_check
def check_estimate_loss(estimate_loss) -> None:
    """estimate_loss(model, data, block_size, device): non-overlapping windows, eval mode, mode restored."""
    device = start_check()
    state = probe_state(110)
    # n = k * block_size + 3, + 1 (the last window ends at the last token: estimate_loss.last_window), + 0; then
    # another block size
    block_size, k = pick("gpt.estimate_loss.block", [8, 6, 7, 9]), pick("gpt.estimate_loss.windows", [9, 8, 10, 7])
    other, n_other = pick("gpt.estimate_loss.block2", [13, 11, 12]), pick("gpt.estimate_loss.n2", [40, 37, 43, 47])
    plan = ((k * block_size + 3, block_size, True), (k * block_size + 1, block_size, False),
            (k * block_size, block_size, True), (n_other, other, True))
    for n, block_size, training in plan:
        data = _estimate_data(state, n, block_size, device)
        model = remote_lm(estimate_loss.channel, state, device, training)
        tested = (f"estimate_loss(a small language model in {'training' if training else 'eval'} mode, "
                  f"data {shape_of(data)}, block_size={block_size}, device)")
        got = call("estimate_loss", estimate_loss, model, data.clone(), block_size, device, tested=tested)
        if isinstance(got, torch.Tensor) and got.numel() == 1:
            got = float(got)
        if not isinstance(got, numbers.Real) or isinstance(got, bool):
            fail("estimate_loss must return a float (the mean loss).", tested=tested,
                 details=[f"got a {type(got).__name__}"])
        local = local_lm(state, device, False)
        expected = M.loss_over_windows(local, data, block_size, M.window_starts(n, block_size), device)
        if not _close(float(got), expected, device):
            variants = from_table(M.TABLE, lambda variant, switches: variant(local, data, block_size, device,
                                                                             **switches),
                                  M.ids_of(M.estimate_loss_variant))
            mistake = next((m for m, produce in variants.items() if _close(float(got), produce(), device)), None)
            fail("estimate_loss: the loss differs from the reference solution.", tested=tested,
                 details=expected_got(f"{expected:.5f}", f"{float(got):.5f}"), mistake=mistake)
        if training_flag(model, "the lent model") != training:
            fail("estimate_loss does not restore the model's training mode.", tested=tested,
                 mistake="estimate_loss.mode_not_restored")
    model = remote_lm(estimate_loss.channel, state, device, True)
    block_size = plan[0][1]
    short = randint(0, 13, (block_size,), seed=119, device="cpu")
    expect_raises(ValueError, f"estimate_loss(model, data of {block_size} tokens, block_size={block_size}, device)",
                  estimate_loss, model, short, block_size, device,
                  why="when no window of block_size + 1 tokens fits in data",
                  criterion="estimate_loss.too_short")


def _close(got: float, expected: float, device) -> bool:
    """Two losses equal at the float32 tolerance of the device they were computed on."""
    tol = tolerance(device)
    return math.isclose(got, expected, rel_tol=tol["rtol"], abs_tol=tol["atol"])
