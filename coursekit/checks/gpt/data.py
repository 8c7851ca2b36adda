"""Public self-checks of notebook 08's data and loss helpers: `get_batch` (the starts drawn from the generator given or
torch's global one), `lm_loss` and `estimate_loss`, recomputed directly. Shapes: B batch, T length, V vocabulary."""
from __future__ import annotations

import torch
import torch.nn.functional as F

from coursekit.checks.gpt.common import CountingModel
from coursekit.checks.toolkit import expect_close, expect_shape, expect_type, fail, first_matching_hint, mistake_hint, \
    passed, run
from coursekit.criteria import argument, edge_case


def check_get_batch(get_batch) -> None:
    data = torch.arange(100, 140)                                                              # N = 40
    _judge_windows(get_batch, data)  # the default: torch's global generator (seeded here)
    with argument("get_batch.generator"):
        _judge_windows(get_batch, data, torch.Generator().manual_seed(2))
    passed("get_batch")


def _judge_windows(get_batch, data, generator=None) -> None:
    """get_batch(data, 6, 4[, generator]) against the starts it should draw: the generator's, else those of torch's
    global generator seeded here with torch.manual_seed (the same starts for the same seed)."""
    seed = 1 if generator is None else generator.initial_seed()
    starts = torch.randint(len(data) - 6, (4,), generator=torch.Generator().manual_seed(seed))
    torch.manual_seed(seed if generator is None else seed + 100)  # with a generator, torch's draws other starts
    got = run("get_batch", get_batch, data, 6, 4, *(() if generator is None else (generator,)))
    if not isinstance(got, tuple) or len(got) != 2:
        fail(f"get_batch should return a tuple (x, y), got {type(got).__name__}.")
    x, y = got
    expect_shape(x, (4, 6), "x (batch_size, block_size)")
    expect_shape(y, (4, 6), "y (batch_size, block_size)")
    expected_x = torch.stack([data[s:s + 6] for s in starts.tolist()])
    if torch.equal(x, y):
        fail("y equals x.", mistake_hint("get_batch.no_shift"))
    if torch.equal(y, expected_x):
        fail("x and y look swapped.", mistake_hint("get_batch.swapped"))
    if not torch.equal(y, x + 1):
        fail("y should be x shifted by one token: y[b, t] = data[s_b + t + 1].", mistake_hint("get_batch.shift"))
    if not torch.equal(x, expected_x):
        source = "torch's generator seeded with torch.manual_seed(1)" if generator is None else "this generator"
        fail(f"the windows start at {(x[:, 0] - 100).tolist()}, expected {starts.tolist()} from {source}.",
             mistake_hint("get_batch.start_range")
             if generator is None else "pass the generator on: torch.randint(len(data) - block_size, "
                                       "(batch_size,), generator=generator).")


def check_lm_loss(lm_loss) -> None:
    generator = torch.Generator().manual_seed(2)
    logits, targets = torch.randn(2, 3, 5, generator=generator), torch.randint(5, (2, 3), generator=generator)
    got = run("lm_loss", lm_loss, logits, targets)
    if isinstance(got, (int, float)):
        fail(f"lm_loss should return a scalar tensor, got a Python {type(got).__name__}.",
             mistake_hint("lm_loss.python_float"))
    expect_type(got, torch.Tensor, "lm_loss's result")
    log_probs = logits.log_softmax(-1)
    expected = -torch.stack([log_probs[b, t, targets[b, t]] for b in range(2) for t in range(3)]).mean()
    hint = first_matching_hint(got, [
        (expected * 6, mistake_hint("lm_loss.sum")),
        (F.cross_entropy(logits.reshape(-1, 5).softmax(-1), targets.reshape(-1)),
         mistake_hint("lm_loss.softmax_first")),
        (F.cross_entropy(logits[:, :-1].reshape(-1, 5), targets[:, 1:].reshape(-1)),
         mistake_hint("lm_loss.shifted_again")),
    ])
    expect_close(got, expected, "lm_loss", hint)
    passed("lm_loss")


def check_estimate_loss(estimate_loss) -> None:
    model = CountingModel().train()
    data = torch.randint(7, (29,), generator=torch.Generator().manual_seed(4))                # N = 29, block 4
    got = run("estimate_loss", estimate_loss, model, data, 4, "cpu")
    if not isinstance(got, float):
        fail(f"estimate_loss should return a float, got {type(got).__name__}.", "return total / count as a float "
                                                                                 "(tensor.item()).")
    if not model.training:
        fail("estimate_loss left the model in eval mode.", mistake_hint("estimate_loss.mode_not_restored"))
    if any(training for training, _ in model.calls):
        fail("the model was called in training mode (dropout on).", mistake_hint("estimate_loss.train_mode"))
    if any(grad for _, grad in model.calls):
        fail("the model was called with gradients enabled.", "wrap the loop in `with torch.no_grad():`.")
    model.eval()

    def windows(starts):
        with torch.no_grad():
            losses = [F.cross_entropy(model(data[s:s + 4][None])[0], data[s + 1:s + 5]).item() for s in starts]
        return sum(losses) / len(losses)

    expected = windows(range(0, 25, 4))                                   # 0, 4, ..., 24 (24 + 5 <= 29)
    hint = first_matching_hint(got, [
        (windows(range(0, 21, 4)), mistake_hint("estimate_loss.last_window")),
        (windows(range(25)), mistake_hint("estimate_loss.overlapping")),
    ])
    expect_close(got, expected, "estimate_loss", hint)
    with edge_case("estimate_loss.too_short"):
        try:
            estimate_loss(model, data[:4], 4, "cpu")
        except ValueError:
            pass
        except Exception as error:  # noqa: BLE001
            fail(f"estimate_loss on 4 tokens with block_size=4 should raise ValueError, got "
                 f"{type(error).__name__}.")
        else:
            fail("estimate_loss on 4 tokens with block_size=4 should raise ValueError (no window of 5 tokens "
                 "fits).")
    passed("estimate_loss")
