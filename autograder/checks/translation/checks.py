"""Hidden checks of notebook 10 (label smoothing, the 2017 schedule, beam search, corpus BLEU).

Everything is judged here, in the grader's process, against independent references where the contract names one:
`F.cross_entropy(..., label_smoothing=)` for the loss (its value and its gradient, back-propagated in the kernel as
a training loop does), an exhaustive search over every output sequence of a tiny model and the reference's
`greedy_decode` for beam search, `sacrebleu` for BLEU; elsewhere the reference (`solutions.translation`). Beam search
is judged by the ranking score of the returned tokens, not by the tokens, since ties may fall either way.

Every probe input of a check is generated in one function from one seed (`*_SEED`) and is this submission's
(autograder/checks/kit/draws.py): the random tensors, corpora and models from `seed_for` / `generator`, and the
scalar arguments (sizes, smoothing values, ignore_index, d_model / warm-up / step / factor of the schedule, beam
sizes, max_len, length penalties, bos / eos ids, max_n, the edge cases' bad values) drawn with `pick` from the
spaces documented at each draw, whose first option is the value used with no salt.

The core of each check leaves every optional argument at its default (left out or passed); the probes of another
value of an argument with teeth (coursekit/criteria.py: smoothing, ignore_index, factor, bos_id, eos_id,
length_penalty, max_n) run in its `argument` block, and no probe tries two of them at once, so an answer wrong in
one argument only fails that criterion alone and keeps 1 - 0.25 / (the exercise's arguments) of the points.
"""
from __future__ import annotations

import contextlib
import functools
import math
import numbers
import random
from typing import NamedTuple

import torch
import torch.nn.functional as F

from autograder.checks.translation import mistakes as M
from autograder.checks.kit.criteria import argument
from autograder.checks.kit.draws import current_salt, generator, pick, sample, seed_for
from autograder.checks.kit.remote import ProbeBroken, RemoteObject, StudentError, probed
from autograder.checks.kit.tolerance import tolerance
from autograder.checks.kit.toolkit import (
    call, expect_callable, expect_raises, expected_got, fail, lend_model, randint, randn, shape_of, start_check,
)
from autograder.checks.kit.compare import as_tensor, describe, expect_tensor, is_integer

SMOOTHING_SEED, NOAM_SEED, BEAM_SEED, BLEU_SEED = 160, 165, 170, 175


def _reference():
    import solutions.translation as reference

    return reference


def _greedy_decode():
    from solutions.transformer import greedy_decode

    return greedy_decode


def _as_float(got, label: str, tested: str) -> float:
    """A returned number (a Python or numpy float, or a one-element tensor) as a float, or a clear failure."""
    if isinstance(got, torch.Tensor) and got.numel() == 1 and got.is_floating_point():
        got = float(got)
    if not isinstance(got, numbers.Real) or isinstance(got, bool):
        fail(f"{label} must return a float.", tested=tested, details=[f"got a {type(got).__name__}"])
    return float(got)


def _close64(got: float, expected: float) -> bool:
    """Equal up to float64 rounding (the tolerance of tolerance.py for float64)."""
    tol = tolerance(dtype=torch.float64)
    return math.isclose(got, expected, rel_tol=tol["rtol"], abs_tol=tol["atol"])


# ------------------------------------------------------------------------------------------------ label smoothing
class SmoothingCase(NamedTuple):
    logits: torch.Tensor   # (N, V)
    targets: torch.Tensor  # (N,), some positions equal to ignore_index
    kwargs: dict           # smoothing / ignore_index as passed (left out: the defaults 0.1 / 0)


def _first(value, options) -> list:
    """`value` first, then the other `options`: a space for `pick` whose value with no salt is `value`."""
    return [value, *(option for option in options if option != value)]


# the smoothing values drawn for the cases that pass one other than 0 and the default 0.1
SMOOTHING_VALUES = (0.25, 0.3, 0.6, 0.05, 0.15, 0.2, 0.35, 0.4, 0.45, 0.5, 0.7, 0.8, 0.9)


def smoothing_configs() -> list[tuple[int, int, float | None, int | None, int]]:
    """(N, V, smoothing, ignore_index, ignored positions) of the probes, None = left out of the call, this
    submission's: every case keeps what it was chosen for (both left out; smoothing alone; smoothing 0 with
    ignore_index 0 passed; ignore_index other than 0, where class 0 is then an ordinary target, with smoothing left
    out and with the default 0.1 passed; both defaults passed with no ignored position), the sizes and values drawn
    around it. No case passes both arguments at values other than their defaults: each argument with teeth is
    judged on its own (`_smoothing_block`)."""
    def size(label, value, low, high):
        return pick(f"translation.smoothing.{label}", _first(value, range(low, high + 1)))

    def smoothing(label, value):
        return pick(f"translation.smoothing.{label}", _first(value, SMOOTHING_VALUES))

    configs = []
    for k, (n, v, value, ignore_index, ignored) in enumerate((
            (12, 7, None, None, 4), (10, 5, 0.25, None, 3), (9, 6, 0.0, 0, 2), (11, 8, None, 5, 3),
            (8, 4, 0.1, 2, 1), (6, 9, 0.1, 0, 0))):
        n, v = size(f"{k}.N", n, 6, 14), size(f"{k}.V", v, 4, 10)
        if value not in (None, 0.0, 0.1):
            value = smoothing(f"{k}.smoothing", value)
        if ignore_index not in (None, 0):
            ignore_index = pick(f"translation.smoothing.{k}.ignore_index", _first(ignore_index, range(1, v)))
            ignore_index = min(ignore_index, v - 1)                     # a class of this V, never 0
        if ignored:
            ignored = pick(f"translation.smoothing.{k}.ignored", _first(ignored, range(1, n // 2 + 1)))
        configs.append((n, v, value, ignore_index, min(ignored, n - 2)))
    return configs


def bad_smoothings() -> list[float]:
    """The smoothing values outside [0, 1) tried: 1 (the boundary, always) and one below 0 and one above 1."""
    return [1.0, pick("translation.smoothing.below", (-0.1, -0.01, -0.05, -0.3, -0.5, -1.0)),
            pick("translation.smoothing.above", (1.5, 1.01, 1.1, 1.2, 2.0, 3.0))]


def smoothing_probes(seed: int, device) -> list[SmoothingCase]:
    """Logits and targets with ignored (padding) positions; ignore_index 0 (the default) and others, where class 0
    is then an ordinary target; smoothing 0 (plain cross-entropy), the default 0.1 and others."""
    cases = []
    for k, (n, v, smoothing, ignore_index, ignored) in enumerate(smoothing_configs()):
        pad = 0 if ignore_index is None else ignore_index
        logits = randn(n, v, seed=seed + k, device=device) * 2                       # (N, V)
        targets = randint(0, v - 1, (n,), seed=seed + 50 + k, device=device)         # (N,)
        targets = torch.where(targets >= pad, targets + 1, targets)                  # never pad, class 0 included
        if pad != 0:
            targets[0] = 0
        positions = torch.randperm(n, generator=generator(seed + 100 + k))[:ignored]
        targets[positions.to(device)] = pad
        if pad != 0 and not (targets == 0).any():                                   # class 0 stays a target
            targets[int((targets != pad).nonzero()[0])] = 0
        kwargs = {key: value for key, value in (("smoothing", smoothing), ("ignore_index", ignore_index))
                  if value is not None}
        cases.append(SmoothingCase(logits, targets, kwargs))
    return cases


def _smoothing_block(kwargs: dict):
    """The criterion block of one probe: the core (both arguments at their defaults, passed or left out), or the
    argument with teeth whose other value it passes."""
    if kwargs.get("smoothing", 0.1) != 0.1:
        return argument("label_smoothed_cross_entropy.smoothing")
    if kwargs.get("ignore_index", 0) != 0:
        return argument("label_smoothed_cross_entropy.ignore_index")
    return contextlib.nullcontext()


def _described(kwargs: dict) -> str:
    return "".join(f", {k}={v}" for k, v in kwargs.items())


@probed
def check_label_smoothed_cross_entropy(label_smoothed_cross_entropy) -> None:
    """label_smoothed_cross_entropy(logits (N, V), targets (N,), smoothing=0.1, ignore_index=0) -> scalar tensor."""
    device = start_check()
    fn = label_smoothed_cross_entropy
    expect_callable(fn, "label_smoothed_cross_entropy")
    gradient = RemoteObject(fn.channel, {"new": "coursekit.probe.translation.loss_and_gradient"})

    def compare(logits, targets, kwargs):
        smoothing, ignore_index = kwargs.get("smoothing", 0.1), kwargs.get("ignore_index", 0)
        ignored = int((targets == ignore_index).sum())
        tested = (f"label_smoothed_cross_entropy(logits {shape_of(logits)}, targets {shape_of(targets)} with "
                  f"{ignored} ignored{_described(kwargs)})")
        got = call("label_smoothed_cross_entropy", fn, logits.clone(), targets.clone(), tested=tested, **kwargs)
        if isinstance(got, numbers.Real) and not isinstance(got, bool):
            fail("label_smoothed_cross_entropy must return a scalar tensor, not a Python number: the training loop "
                 "calls .backward() on it.", tested=tested, details=[f"got a {type(got).__name__}"],
                 mistake="smoothing.python_float")
        got = as_tensor(got, "label_smoothed_cross_entropy's result", tested)
        if got.dim() != 0:
            fail("label_smoothed_cross_entropy must return a scalar tensor (the mean over the kept positions).",
                 tested=tested, details=[f"got shape {tuple(got.shape)}"])
        leaf = logits.clone().requires_grad_(True)
        expected = F.cross_entropy(leaf, targets, ignore_index=ignore_index, label_smoothing=smoothing)
        expected.backward()

        def mistakes(logits=logits, targets=targets, smoothing=smoothing, ignore_index=ignore_index):
            def run(**flags):
                return M.smoothed_ce(logits, targets, smoothing, ignore_index, **flags)

            return [("smoothing.over_other_classes", lambda: run(spread="others")),
                    ("smoothing.ignored_positions_counted", lambda: run(count_ignored=True)),
                    ("smoothing.mean_over_all_positions", lambda: run(divide_by="all")),
                    ("smoothing.sum_not_mean", lambda: run(divide_by="none")),
                    ("smoothing.weights_swapped", lambda: run(swap_weights=True))]

        expect_tensor(got.to(device), expected.detach(), "label_smoothed_cross_entropy", device, tested=tested,
                      mistakes=mistakes,
                      note="it equals F.cross_entropy(logits, targets, ignore_index=ignore_index, "
                           "label_smoothing=smoothing)")
        # training back-propagates through the loss: the gradient must reach the logits, and be the right one
        _value, grad = call("label_smoothed_cross_entropy", gradient, fn, logits.clone(), targets.clone(),
                            tested=tested + " then .backward()", **kwargs)
        if grad is None:
            fail("label_smoothed_cross_entropy's result is not connected to the logits: .backward() on it gives "
                 "them no gradient, so training would not learn.", tested=tested + " then .backward()",
                 mistake="smoothing.detached",
                 hint="compute with torch operations on the logits all the way (no .item(), .detach(), .numpy() "
                      "or torch.tensor(...) of intermediate values)")
        expect_tensor(grad, leaf.grad, "the gradient of the loss with respect to the logits", device,
                      tested=tested + " then .backward()")

    for logits, targets, kwargs in smoothing_probes(SMOOTHING_SEED, device):
        with _smoothing_block(kwargs):
            compare(logits, targets, kwargs)
    logits, targets, _ = smoothing_probes(SMOOTHING_SEED, device)[0]
    for smoothing in bad_smoothings():
        expect_raises(ValueError, f"label_smoothed_cross_entropy(logits, targets, smoothing={smoothing})", fn,
                      logits.clone(), targets.clone(), smoothing=smoothing, why="when smoothing is outside [0, 1)",
                      criterion="label_smoothed_cross_entropy.bad_smoothing")


# ------------------------------------------------------------------------------------------------------- noam_lr
def noam_configs(seed: int) -> list[tuple[int, int, float | None]]:
    """(d_model, warmup_steps, factor or None = left out), this submission's: the paper's scale with factor left
    out, a short warm-up with a factor above 1, warmup_steps 1 (pure decay) with a factor below 1, factor 1.0
    passed, and one configuration drawn from the seed."""
    draw = random.Random(seed_for(seed))

    def drawn(label, value, options):
        return pick(f"translation.noam.{label}", _first(value, options))

    return [(drawn("0.d_model", 512, (256, 384, 768, 1024, 128)),
             drawn("0.warmup", 4000, (500, 1000, 2000, 3000, 6000, 8000)), None),
            (drawn("1.d_model", 64, (48, 80, 96, 128, 160)), drawn("1.warmup", 10, range(3, 41)),
             drawn("1.factor", 2.0, (1.5, 2.5, 3.0, 4.0, 1.25))),
            (drawn("2.d_model", 256, (128, 192, 320, 512)), 1, drawn("2.factor", 0.5, (0.25, 0.3, 0.75, 0.1, 0.8))),
            (drawn("3.d_model", 32, (16, 24, 40, 48, 64)), drawn("3.warmup", 25, range(11, 61)), 1.0),
            (draw.choice((48, 96, 160)), draw.randint(3, 40), round(draw.uniform(0.3, 3.0), 3))]


def noam_probes(seed: int) -> list[tuple[int, int, int, float | None]]:
    """(step, d_model, warmup_steps, factor or None = left out) around and far beyond each warm-up; step 0 and 1
    first, and one step drawn from around the warm-up (this submission's)."""
    cases = []
    for k, (d_model, warmup, factor) in enumerate(noam_configs(seed)):
        around = [max(2, round(warmup * f)) for f in (0.3, 0.7, 1.3, 1.7, 3.5, 7.0, 25.0)]
        drawn = pick(f"translation.noam.{k}.step", _first(warmup, around + [2, 3]))   # no salt: a step listed
        steps = sorted({0, 1, max(warmup // 2, 1), max(warmup - 1, 1), warmup, warmup + 1, 2 * warmup,
                        10 * warmup + 3, drawn})
        cases += [(step, d_model, warmup, factor) for step in steps]
    return cases


def bad_warmups() -> list[tuple[int, int, int]]:
    """(step, d_model, warmup_steps) with warmup_steps below 1: 0 (the boundary, always) and one below 0."""
    step = pick("translation.noam.bad.step", (10, 1, 5, 100, 4000))
    d_model = pick("translation.noam.bad.d_model", (512, 64, 128, 256))
    return [(step, d_model, 0), (step, d_model, pick("translation.noam.bad.warmup", (-5, -1, -2, -10, -4000)))]


def _noam_call(noam_lr, step, d_model, warmup, factor, tested):
    extra = () if factor is None else (factor,)
    try:
        return noam_lr(step, d_model, warmup, *extra)
    except StudentError as error:
        if step == 0 and error.is_a("ZeroDivisionError"):
            fail("noam_lr raised ZeroDivisionError at step 0.", tested=tested, mistake="noam.step_zero")
    except ProbeBroken:
        pass
    return call("noam_lr", noam_lr, step, d_model, warmup, *extra, tested=tested)   # the usual message


@probed
def check_noam_lr(noam_lr) -> None:
    """noam_lr(step, d_model, warmup_steps, factor=1.0) -> factor * d_model**-0.5 * min(s**-0.5, s * w**-1.5)."""
    start_check()
    reference = _reference()
    expect_callable(noam_lr, "noam_lr")

    def compare(step, d_model, warmup, factor):
        tested = f"noam_lr({step}, d_model={d_model}, warmup_steps={warmup}" + \
                 ("" if factor is None else f", factor={factor}") + ")"
        got = _as_float(_noam_call(noam_lr, step, d_model, warmup, factor, tested), "noam_lr", tested)
        expected = reference.noam_lr(step, d_model, warmup, 1.0 if factor is None else factor)
        if _close64(got, expected):
            return
        variants = [("noam.step_zero", {"clamp_step": False}), ("noam.min_max_swapped", {"use_max": True}),
                    ("noam.no_d_model_scale", {"d_model_scale": False}), ("noam.factor_ignored", {"use_factor": False})]
        mistake = next((m for m, flags in variants
                        if _close64(got, M.noam(step, d_model, warmup, 1.0 if factor is None else factor, **flags))),
                       None)
        fail("noam_lr: the learning rate differs from the reference solution.", tested=tested,
             details=expected_got(f"{expected:.6g}", f"{got:.6g}"), mistake=mistake,
             hint=None if mistake else "s = max(step, 1); factor * d_model ** -0.5 * min(s ** -0.5, "
                                       "s * warmup_steps ** -1.5)")

    for step, d_model, warmup, factor in noam_probes(NOAM_SEED):
        if factor in (None, 1.0):                      # the core: factor left out or its default passed
            compare(step, d_model, warmup, factor)
        else:
            with argument("noam_lr.factor"):
                compare(step, d_model, warmup, factor)
    for step, d_model, warmup in bad_warmups():
        expect_raises(ValueError, f"noam_lr({step}, {d_model}, warmup_steps={warmup})", noam_lr, step, d_model, warmup,
                      why="when warmup_steps < 1", criterion="noam_lr.bad_warmup")


# -------------------------------------------------------------------------------------------------- beam search
PROBE_CLASS = "coursekit.probe.translation.BeamSearchProbe"
SRC_VOCAB, TGT_VOCAB, D_MODEL, PROBE_MAX_LEN = 11, 7, 8, 16
EXHAUSTIVE_LEN = 4                       # every sequence of at most 4 tokens: 7 ** 4 = 2401 at the last step
WIDE_BEAM = TGT_VOCAB ** EXHAUSTIVE_LEN  # a beam that never drops a hypothesis within EXHAUSTIVE_LEN steps


def _probe_config() -> dict:
    return {"src_vocab_size": SRC_VOCAB, "tgt_vocab_size": TGT_VOCAB, "d_model": D_MODEL,
            "max_len": PROBE_MAX_LEN, "pad_id": 0, "dropout": 0.5}


class BeamProbe(NamedTuple):
    state: dict            # the probe's weights
    bos_id: int
    eos_id: int
    sources: list          # one (1, S) LongTensor per sentence


class BeamCase(NamedTuple):
    probe: int             # index into the probes
    source: int            # index into that probe's sources
    beam_size: int
    max_len: int
    length_penalty: float | None   # None: left out of the call (0.6)
    explicit_ids: bool     # bos_id and eos_id passed (else left out: 2 and 3)
    training: bool         # the model handed in in training mode (dropout on)


class BeamSettings(NamedTuple):
    """The scalar arguments of the beam-search calls, this submission's (`beam_settings`)."""
    small: int                  # the narrow beam (greedy is beam 1, the exhaustive one WIDE_BEAM)
    large: int                  # the wider beam
    middle: int                 # the second probe's third beam
    max_len: int                # the first probe's calls (its exhaustive ones: EXHAUSTIVE_LEN)
    max_lens: tuple[int, int]   # the second probe's calls
    length_penalty: float       # the penalty passed besides 0 and the default 0.6 (left out or passed)
    ids: tuple[int, int]        # the second probe's bos_id and the third's eos_id (the first probe's: 2 / 3)


def beam_settings() -> BeamSettings:
    """Beam sizes from 2 to 6 (two distinct ones per probe, besides greedy and the exhaustive beam), max_len 5 to
    10 (within the probe's 16 positions), a length penalty other than 0 and 0.6 between 0.8 and 1.5, and ids other
    than <pad> 0 and the defaults 2 / 3: a bos_id for the second probe, an eos_id for the third."""
    small, large = pick("translation.beam.sizes", [(2, 5), (2, 4), (3, 5), (2, 6), (3, 6), (3, 4), (4, 6)])
    return BeamSettings(small, large, pick("translation.beam.middle", (3, 2, 4)),
                        pick("translation.beam.max_len", (8, 7, 9, 10)),
                        pick("translation.beam.max_lens", [(6, 7), (5, 7), (6, 8), (7, 6), (7, 9), (8, 6)]),
                        pick("translation.beam.length_penalty", (1.0, 0.8, 0.9, 1.2, 1.5)),
                        pick("translation.beam.ids", [(4, 5), (5, 4), (6, 1), (1, 4), (5, 6), (6, 4), (4, 1)]))


SOURCE_POOL = 24         # sources drawn for each probe model (the first two are the plain ones)
SOURCE_SEARCH = 24       # at most this many more drawn for one model while a search below finds none
MODEL_DRAWS = 24         # at most this many models drawn per probe, one after the other, until the searches succeed


def _sources(generator: torch.Generator):
    """Source sentences (1, S), S from 2 to 7, drawn one after the other from `generator`, without end."""
    j = 0
    while True:
        yield torch.randint(1, SRC_VOCAB, (1, 2 + j % 6), generator=generator)
        j += 1


def _probe_model(draws: torch.Generator, bos_id: int, eos_id: int):
    """A BeamSearchProbe with weights drawn from `draws` (in eval mode): <pad> and <bos> never likely outputs,
    <eos> likelier the longer the hypothesis."""
    from coursekit.probe.translation import BeamSearchProbe

    model = BeamSearchProbe(**_probe_config())
    with torch.no_grad():
        for parameter in model.parameters():
            parameter.copy_(torch.randn(parameter.shape, generator=draws) * 0.8)
        model.generator.bias[[0, bos_id]] = -30.0
        model.position_bias[:, eos_id] = -3.0 + 0.7 * torch.arange(PROBE_MAX_LEN)
    return model.eval()


# What the first probe's searched sources must show, each on a source of its own: (the mistake's switches of
# M.beam_search, the switches of mistakes whose translation must differ from it in the same call). Ranking by the
# raw score (beam.no_length_penalty), told apart from counting <bos> in L: that mistake also favours short
# translations, where it shows at all, so the diagnosis (which tries ranking by the raw score first) needs a call
# where the two differ; counting <bos> in L (beam.length_counts_bos); searching on past the contract's stopping
# rule (no catalogue id: the check compares with the contract's search, not with the best it can find); the length
# penalty applied while walking down the candidates (beam.penalty_on_unfinished). All are searched at the default
# penalty 0.6: they are mistakes of the core, which must fail it on every submission's inputs (not only the calls
# with another length_penalty, where they would keep the partial credit of that argument).
SEARCHED_MISTAKES = (({"rank_raw": True}, ({"length_counts_bos": True},)), ({"length_counts_bos": True}, ()),
                     ({"early_stop": False}, ()), ({"penalty_in_beam": "stored"}, ()))


def _searched_sources(model, draws, bos_id: int, eos_id: int, settings: BeamSettings) -> list | None:
    """Two plain sources, then for each of SEARCHED_MISTAKES the first source drawn on which one call of the core (a
    beam of settings.small or .large, the default length penalty 0.6) gives a translation of that
    mistake that ranks apart from the reference's (the check compares ranking scores, so it then fails) and that
    differs from the translations of the mistakes to tell it from (so the diagnosis names it). None when
    SOURCE_POOL - 2 + SOURCE_SEARCH sources have no such call for one of them."""
    reference = _reference()
    drawn = _sources(draws)
    pool = [next(drawn) for _ in range(SOURCE_POOL)]
    sources, candidates = pool[:2], pool[2:]
    memo = {}   # (source index, beam, lp, switches) -> (tokens, raw log-probability)

    def translation(index, beam, lp, flags) -> tuple[list[int], float]:
        key = (index, beam, lp, tuple(sorted(flags.items())))
        if key not in memo:
            src = candidates[index]
            args = (model, src, beam, settings.max_len, bos_id, eos_id, lp)
            tokens = M.beam_search(*args, **flags) if flags else reference.beam_search(*args)
            memo[key] = tokens, M.sequence_log_prob(model, src, tokens, bos_id)
        return memo[key]

    def apart(a, b, lp) -> bool:
        return not math.isclose(a[1] / _penalty(len(a[0]), lp), b[1] / _penalty(len(b[0]), lp),
                                rel_tol=1e-4, abs_tol=1e-4)

    def shows(index, flags, others) -> bool:
        for lp in (0.6,):   # the core's penalty: these mistakes are wrong at the default, not only with another
            for beam in (settings.small, settings.large):
                got = translation(index, beam, lp, flags)
                if apart(got, translation(index, beam, lp, {}), lp) and all(
                        len(got[0]) != len(other[0]) or apart(got, other, 0.0)
                        for other in (translation(index, beam, lp, o) for o in others)):
                    return True
        return False

    for flags, others in SEARCHED_MISTAKES:
        for index in range(SOURCE_POOL - 2 + SOURCE_SEARCH):
            while index >= len(candidates):
                candidates.append(next(drawn))
            if shows(index, flags, others):
                sources.append(candidates[index])
                break
        else:
            return None
    return sources


def _id_sources(model, draws, bos_id: int, eos_id: int, settings: BeamSettings) -> list | None:
    """The second and third probes' sources: two plain ones, then the first source drawn on which a search that
    ignores the probe's other id (starting with <bos> 2, or finishing at <eos> 3) fails the check in one of the
    probe's calls with max_len settings.max_lens[0] (a beam of settings.small or .middle, the default penalty 0.6):
    its translation is not finished by the probe's eos_id, or ranks apart from the reference's. None when
    SOURCE_POOL - 2 + SOURCE_SEARCH sources have no such call (the model never lets the id matter)."""
    reference = _reference()
    wrong_bos, wrong_eos = (2, eos_id) if bos_id != 2 else (bos_id, 3)
    max_len = settings.max_lens[0]
    drawn = _sources(draws)
    sources = [next(drawn) for _ in range(2)]

    def rank(src, tokens) -> float:
        return M.sequence_log_prob(model, src, tokens, bos_id) / _penalty(len(tokens), 0.6)

    def shows(src) -> bool:
        for beam in (settings.small, settings.middle):
            right = reference.beam_search(model, src, beam, max_len, bos_id, eos_id, 0.6)
            wrong = reference.beam_search(model, src, beam, max_len, wrong_bos, wrong_eos, 0.6)
            if _structure_problem(wrong, max_len, eos_id) or not math.isclose(
                    rank(src, wrong), rank(src, right), rel_tol=1e-4, abs_tol=1e-4):
                return True
        return False

    for _index in range(SOURCE_POOL - 2 + SOURCE_SEARCH):
        src = next(drawn)
        if shows(src):
            return sources + [src]
    return None


def beam_probes(seed: int) -> tuple[list[BeamProbe], list[BeamCase]]:
    """Three random probes (bos 2 / eos 3; another bos_id with eos 3; bos 2 with another eos_id; see
    `_probe_model`), source sentences for each, and the calls (`beam_settings`): greedy (beam 1), two wider beams
    with length penalties 0, 0.6 and another, and a beam wide enough to be an exhaustive search, some on a model
    handed in in training mode. Each call tries one argument with teeth at most (`_beam_block`): the first probe's
    calls with a length penalty other than 0.6 try length_penalty, the second's bos_id, the third's eos_id; the
    rest is the core.

    Besides two plain sources, the first probe gets sources found by a deterministic search over sources drawn
    from the seed (`_searched_sources`): one where the length penalty changes the best translation (so that ranking
    by the raw score, `beam.no_length_penalty`, shows), one where counting <bos> in L does
    (`beam.length_counts_bos`), one where searching on after beam_size finished hypotheses does, each at the
    default penalty 0.6 (they are core mistakes); the second and third probes get one source where ignoring their
    other id shows (`_id_sources`). When a model shows one of them on none of its sources, the next model drawn is
    tried (at most MODEL_DRAWS), so that each shows on every submission's inputs."""
    return _beam_probes(seed, current_salt())


@functools.lru_cache(maxsize=4)
def _beam_probes(seed: int, salt: int) -> tuple[list[BeamProbe], list[BeamCase]]:
    """beam_probes for this salt (the search costs up to seconds: done once per submission and process; the
    tensors handed out are never changed in place by the checks, which move or clone them)."""
    settings = beam_settings()
    probes = []
    # the defaults 2 / 3 (the core and the length penalty), another bos_id, another eos_id (one argument each)
    for k, (bos_id, eos_id) in enumerate(((2, 3), (settings.ids[0], 3), (2, settings.ids[1]))):
        draws = generator(seed + k)
        for _attempt in range(MODEL_DRAWS):
            model = _probe_model(draws, bos_id, eos_id)
            search = _searched_sources if k == 0 else _id_sources
            sources = search(model, draws, bos_id, eos_id, settings)
            if sources is not None:
                break
        else:
            raise RuntimeError(f"beam_probes: no probe model of {MODEL_DRAWS} shows every searched mistake "
                               f"(probe {k})")
        state = {key: value.detach().clone() for key, value in model.state_dict().items()}
        probes.append(BeamProbe(state, bos_id, eos_id, sources))
    small, large, middle, max_len, (first, second) = settings[:5]
    cases = []
    for source in range(len(probes[0].sources)):
        cases.append(BeamCase(0, source, 1, max_len, None, False, False))
        cases += [BeamCase(0, source, beam, max_len, lp, False, False)
                  for beam in (small, large) for lp in (0.0, None, settings.length_penalty)]
        cases += [BeamCase(0, source, WIDE_BEAM, EXHAUSTIVE_LEN, lp, False, False)
                  for lp in (0.0, 0.6, settings.length_penalty)]
    for k in (1, 2):   # the ids passed (one of them its default), the length penalty at its default 0.6
        for source in range(len(probes[k].sources)):
            cases += [BeamCase(k, source, 1, first, 0.6, True, False),
                      BeamCase(k, source, small, first, None, True, False),
                      BeamCase(k, source, large, second, 0.6, True, False),
                      BeamCase(k, source, middle, first, None, True, False)]
    for source in range(2):
        cases += [BeamCase(0, source, beam, max_len, 0.6, False, True) for beam in (1, small)]
    return probes, cases


def _local_probe(state: dict, device):
    from coursekit.probe.translation import BeamSearchProbe

    model = BeamSearchProbe(**_probe_config())
    model.load_state_dict(state)
    return model.to(device).eval()


def _penalty(length: int, length_penalty: float) -> float:
    return ((5 + length) / 6) ** length_penalty


def exhaustive_best(model, src_ids, max_len: int, bos_id: int, eos_id: int, length_penalty: float) -> float:
    """The highest ranking score over EVERY finished sequence of at most `max_len` tokens (ending in eos_id, or
    max_len tokens long), enumerated step by step with the model in eval mode."""
    with torch.no_grad():
        memory, src_mask = model.encode(src_ids)                                   # (1, S, d), (1, 1, 1, S)
        prefixes = torch.full((1, 1), bos_id, device=src_ids.device)               # (n, t)
        scores = torch.zeros(1, dtype=torch.float64, device=src_ids.device)        # (n,)
        best = -math.inf
        for length in range(1, max_len + 1):
            n = prefixes.size(0)
            logits = model.decode(prefixes, memory.expand(n, -1, -1), src_mask.expand(n, -1, -1, -1))[:, -1]
            total = scores[:, None] + F.log_softmax(logits.double(), dim=-1)        # (n, V)
            ends = total if length == max_len else total[:, eos_id:eos_id + 1]     # the finished ones
            best = max(best, float(ends.max()) / _penalty(length, length_penalty))
            if length < max_len:
                keep = torch.arange(total.size(1), device=src_ids.device) != eos_id
                tokens = torch.arange(total.size(1), device=src_ids.device)[keep]   # (V - 1,)
                prefixes = torch.cat([prefixes.repeat_interleave(len(tokens), 0),
                                      tokens.repeat(n)[:, None]], dim=1)            # (n * (V - 1), t + 1)
                scores = total[:, keep].reshape(-1)
    return best


def _as_tokens(got, tested) -> list[int]:
    if isinstance(got, torch.Tensor) and got.dim() == 1 and not got.is_floating_point():
        got = got.tolist()
    if not isinstance(got, (list, tuple)) or not all(is_integer(i) for i in got):
        fail("beam_search must return a list of int token ids.", tested=tested,
             details=[f"got a {type(got).__name__}"])
    return [int(i) for i in got]


def _structure_problem(tokens: list[int], max_len: int, eos_id: int) -> str | None:
    if any(not 0 <= t < TGT_VOCAB for t in tokens):
        return "the returned tokens are not ids of the target vocabulary"
    if len(tokens) > max_len:
        return f"{len(tokens)} tokens returned, more than max_len={max_len}"
    if eos_id in tokens[:-1]:
        return "a token follows <eos>"
    if not tokens or (tokens[-1] != eos_id and len(tokens) < max_len):
        return "the hypothesis neither ends in <eos> nor has max_len tokens: it is not finished"
    return None


class _Beams:
    """The grader's side of the beam-search probes: the probes built locally, scoring and the known mistakes."""

    def __init__(self, seed: int, device):
        self.device = device
        self.probes, self.cases = beam_probes(seed)
        self.models = [_local_probe(p.state, device) for p in self.probes]
        self.tol = tolerance(device)

    def source(self, case: BeamCase) -> torch.Tensor:
        return self.probes[case.probe].sources[case.source].to(self.device)

    @staticmethod
    def length_penalty(case: BeamCase) -> float:
        return 0.6 if case.length_penalty is None else case.length_penalty

    def close(self, a: float, b: float) -> bool:
        return math.isclose(a, b, rel_tol=self.tol["rtol"], abs_tol=self.tol["atol"])

    def raw_score(self, case: BeamCase, tokens: list[int]) -> float:
        probe = self.probes[case.probe]
        return M.sequence_log_prob(self.models[case.probe], self.source(case), tokens, probe.bos_id)

    def rank(self, case: BeamCase, tokens: list[int]) -> float:
        return self.raw_score(case, tokens) / _penalty(len(tokens), self.length_penalty(case))

    def expected(self, case: BeamCase) -> tuple[float, str]:
        """The ranking score to reach, and what it is."""
        probe, model = self.probes[case.probe], self.models[case.probe]
        if case.beam_size == WIDE_BEAM:
            best = exhaustive_best(model, self.source(case), case.max_len, probe.bos_id, probe.eos_id,
                                   self.length_penalty(case))
            return best, (f"the best ranking score over all sequences of at most {case.max_len} tokens (a beam of "
                          f"{WIDE_BEAM} drops none)")
        tokens = _reference().beam_search(model, self.source(case), case.beam_size, case.max_len, probe.bos_id,
                                          probe.eos_id, self.length_penalty(case))
        return self.rank(case, tokens), "the ranking score of the reference's translation"

    def greedy(self, case: BeamCase) -> list[int]:
        probe = self.probes[case.probe]
        return _greedy_decode()(self.models[case.probe], self.source(case), case.max_len, bos_id=probe.bos_id,
                                eos_id=probe.eos_id, use_cache=False)[0].tolist()

    def variant(self, case: BeamCase, **flags) -> list[int]:
        """A known mistake's tokens, the local model in the mode the student's was handed in."""
        probe, model = self.probes[case.probe], self.models[case.probe]
        model.train(case.training)
        try:
            return M.beam_search(model, self.source(case), case.beam_size, case.max_len, probe.bos_id, probe.eos_id,
                                 self.length_penalty(case), **flags)
        finally:
            model.eval()

    def same(self, case: BeamCase, got: list[int], other: list[int]) -> bool:
        """The same hypothesis, or one that no ranking can tell from it (same length and log-probability)."""
        if got == other:
            return True
        return (len(got) == len(other) and all(0 <= t < TGT_VOCAB for t in got)
                and self.close(self.raw_score(case, got), self.raw_score(case, other)))

    def diagnosis(self, results: list[tuple[BeamCase, list[int]]]) -> str | None:
        """The known mistake that reproduces the student's tokens on every call."""
        candidates = [("beam.dropout_on", {"eval_mode": False}), ("beam.returns_bos", {"keep_bos": True}),
                      ("beam.continues_after_eos", {"eos_leaves_beam": False}),
                      ("beam.no_length_penalty", {"rank_raw": True}),
                      ("beam.length_counts_bos", {"length_counts_bos": True}),
                      ("beam.penalty_on_unfinished", {"penalty_in_beam": "stored"}),
                      ("beam.penalty_on_unfinished", {"penalty_in_beam": "stored_twice"})]
        for mistake, flags in candidates:
            try:
                if all(self.same(case, got, self.variant(case, **flags)) for case, got in results):
                    return mistake
            except Exception:  # noqa: BLE001 -- a variant that cannot run here does not match
                continue
        return None


def _beam_block(case: BeamCase, probe: BeamProbe):
    """The criterion block of one call: the argument with teeth it tries at another value, or the core."""
    if probe.bos_id != 2:
        return argument("beam_search.bos_id")
    if probe.eos_id != 3:
        return argument("beam_search.eos_id")
    if case.length_penalty not in (None, 0.6):
        return argument("beam_search.length_penalty")
    return contextlib.nullcontext()


def _beam_tested(case: BeamCase, probe: BeamProbe, kwargs: dict) -> str:
    shown = "".join(f", {k}={v}" for k, v in kwargs.items())
    return (f"beam_search(a small seq2seq model{' in training mode' if case.training else ''} with a target "
            f"vocabulary of {TGT_VOCAB}, src_ids {shape_of(probe.sources[case.source])}, "
            f"beam_size={case.beam_size}, max_len={case.max_len}{shown})")


@probed
def check_beam_search(beam_search) -> None:
    """beam_search(model, src_ids (1, S), beam_size, max_len, bos_id=2, eos_id=3, length_penalty=0.6) -> list[int]."""
    device = start_check()
    expect_callable(beam_search, "beam_search")
    beams = _Beams(BEAM_SEED, device)
    lent, runs = {}, []
    # every call first (one call alone may not tell two known mistakes apart), then the verdicts in order
    for case in beams.cases:
        probe = beams.probes[case.probe]
        if (case.probe, case.training) not in lent:
            lent[case.probe, case.training] = lend_model(
                beam_search.channel, PROBE_CLASS, _probe_config(), probe.state, device, case.training,
                "a small seq2seq model lent to your beam_search")
        model = lent[case.probe, case.training]
        kwargs = {"bos_id": probe.bos_id, "eos_id": probe.eos_id} if case.explicit_ids else {}
        if case.length_penalty is not None:
            kwargs["length_penalty"] = case.length_penalty
        tested = _beam_tested(case, probe, kwargs)
        with _beam_block(case, probe):
            got = _as_tokens(call("beam_search", beam_search, model, beams.source(case).clone(), case.beam_size,
                                  case.max_len, tested=tested, **kwargs), tested)
            restored = describe(model, "the lent model").get("training") == case.training
            runs.append((case, tested, got, restored))
    results = [(case, got) for case, _tested, got, _restored in runs]

    def verdict(case, tested, got, restored):
        problem = _structure_problem(got, case.max_len, beams.probes[case.probe].eos_id)
        if problem:
            fail(f"beam_search: {problem}.", tested=tested, mistake=beams.diagnosis(results),
                 hint="return the best-ranked finished hypothesis's tokens after <bos>, ending in <eos> when it "
                      "finished with one")
        if case.beam_size == 1:
            greedy = beams.greedy(case)
            if got != greedy:
                fail("beam_search with beam_size=1 does not return the tokens of greedy decoding.", tested=tested,
                     details=expected_got(f"{len(greedy)} tokens", f"{len(got)} tokens"),
                     mistake=beams.diagnosis(results),
                     hint="with one hypothesis, each step keeps the most likely next token")
        else:
            expected, what = beams.expected(case)
            score = beams.rank(case, got)
            if not beams.close(score, expected):
                fail("beam_search: the returned translation is not the best-ranked hypothesis of the search.",
                     tested=tested, details=[*expected_got(f"{what}: {expected:.5f}",
                                                           f"{score:.5f} ({len(got)} tokens)"),
                                             "ranking score: log-probability / ((5 + L) / 6) ** length_penalty"],
                     mistake=beams.diagnosis(results))
        if not restored:
            fail("beam_search does not restore the model's training mode.", tested=tested,
                 mistake="beam.mode_not_restored",
                 hint="remember model.training first, switch to model.eval() for decoding, then call "
                      "model.train(was_training) before returning")

    for case, tested, got, restored in runs:
        with _beam_block(case, beams.probes[case.probe]):
            verdict(case, tested, got, restored)


# -------------------------------------------------------------------------------------------------- corpus BLEU
WORDS = ("a", "dog", "the", "runs", "in", "park", "red", "ball",   # the words with no salt: the first 8
         "man", "on", "street", "girl", "blue", "shirt", "water", "two", "with", "jumps", "at", "woman")
VOCABULARY = 8           # words of the corpora, sampled from WORDS (never "zebra": a word no reference holds)


def bleu_probes(seed: int) -> list[tuple[list[list[str]], list[list[str]], int | None]]:
    """(hypotheses, references, max_n or None = left out) on corpora of a small vocabulary: hypotheses shorter than
    their references (the brevity penalty) and longer, repeated words beyond the reference's count (clipping),
    corpora whose 3- and 4-gram precision is 0 (BLEU 0 at max_n 4, not at max_n 2), empty hypotheses, one
    sentence, a perfect corpus; max_n 1 to 4. The words, the corpora and the max_n of the cases that do not need
    max_n 4 (sacrebleu's) are this submission's."""
    draw = random.Random(seed_for(seed))
    words = sample("translation.bleu.words", WORDS, VOCABULARY)

    def sentence(length):
        return [draw.choice(words) for _ in range(length)]

    def max_n(label, value, options=(1, 2, 3)):
        return pick(f"translation.bleu.max_n.{label}", _first(value, options))

    refs = [sentence(draw.randint(5, 10)) for _ in range(6)]
    shorter = [r[:len(r) - draw.randint(1, 3)] for r in refs]                      # c < r
    shorter[0] = shorter[0] + [shorter[0][0]] * 3                                  # repeats beyond the reference
    longer = [r + sentence(draw.randint(1, 3)) for r in refs]                      # c > r
    longer[1] = [refs[1][1]] * 4 + longer[1]
    edited = [[w if draw.random() < 0.75 else draw.choice(words) for w in r] for r in refs]
    pairs = [r[:2] + ["zebra"] + r[3:5] + ["zebra"] for r in refs]                   # no 3-gram can match
    other = [sentence(draw.randint(3, 9)) for _ in range(5)]
    other_refs = [sentence(draw.randint(4, 9)) for _ in range(5)]
    one = [words[2]] * 6                                                              # clipped to the reference's 3
    cases = [(shorter, refs, None), (longer, refs, 4), (edited, refs, 4), (pairs, refs, 4),
             (pairs, refs, max_n("pairs", 2, (1, 2))),                                # no 3-gram: > 0 at max_n <= 2
             (shorter, refs, max_n("shorter", 2)), (longer, refs, max_n("longer", 3)),
             (edited, refs, max_n("edited", 1)), (other, other_refs, 4), (other, other_refs, max_n("other", 1)),
             ([[] for _ in refs], refs, 4), ([[]] + shorter[1:], refs, 4), ([shorter[2]], [refs[2]], 4),
             ([one], [[words[2], words[1], words[4], words[2], words[5], words[2]]], max_n("one", 1, (1, 2))),
             (refs, refs, 4)]
    return [([list(h) for h in hyps], [list(r) for r in references], max_n) for hyps, references, max_n in cases]


def length_mismatches() -> list[tuple[list[list[str]], list[list[str]]]]:
    """(hypotheses, references) of different lengths, this submission's: more hypotheses than references (3 and 2
    with no salt), then fewer; never an empty list (an early return for it would hide the comparison)."""
    more, fewer = pick("translation.bleu.mismatch", [(3, 2), (2, 1), (4, 2), (3, 1), (5, 3), (4, 3)])
    words = sample("translation.bleu.mismatch.words", WORDS, 5)
    sentences = [[word] for word in words[:more]]
    return [([list(s) for s in sentences], [list(s) for s in sentences[:fewer]]),
            ([list(s) for s in sentences[:fewer]], [list(s) for s in sentences])]


def _bleu_block(max_n: int | None):
    """The criterion block of one corpus: the core (max_n left out or 4, its default), or the argument max_n."""
    return contextlib.nullcontext() if max_n in (None, 4) else argument("corpus_bleu.max_n")


def _sacrebleu(hypotheses, references) -> float:
    import sacrebleu

    return sacrebleu.corpus_bleu([" ".join(h) for h in hypotheses], [[" ".join(r) for r in references]],
                                 tokenize="none", smooth_method="none", force=True).score


@probed
def check_corpus_bleu(corpus_bleu) -> None:
    """corpus_bleu(hypotheses, references, max_n=4) -> corpus BLEU in [0, 100], equal to sacrebleu's."""
    start_check()
    reference = _reference()
    expect_callable(corpus_bleu, "corpus_bleu")
    runs = []
    # every call first (one corpus alone may not tell two known mistakes apart), then the verdicts in order
    for hypotheses, references, max_n in bleu_probes(BLEU_SEED):
        c, r = sum(map(len, hypotheses)), sum(map(len, references))
        tested = (f"corpus_bleu({len(hypotheses)} hypotheses of {c} tokens in all, references of {r}"
                  + ("" if max_n is None else f", max_n={max_n}") + ")")
        extra = () if max_n is None else (max_n,)
        with _bleu_block(max_n):
            got = _as_float(call("corpus_bleu", corpus_bleu, [list(h) for h in hypotheses],
                                 [list(x) for x in references], *extra, tested=tested), "corpus_bleu", tested)
            runs.append((hypotheses, references, max_n or 4, got, tested))
    variants = [("bleu.no_clipping", {"clip": False}), ("bleu.brevity_inverted", {"brevity": "ratio_inverted"}),
                ("bleu.brevity_inverted", {"brevity": "condition_inverted"}),
                ("bleu.no_brevity_penalty", {"brevity": "none"}), ("bleu.arithmetic_mean", {"mean": "arithmetic"}),
                ("bleu.sentence_average", {"per_sentence": True}), ("bleu.fraction_not_percent", {"percent": False})]

    def verdict(hypotheses, references, max_n, got, tested):
        if max_n == 4:
            expected, source = _sacrebleu(hypotheses, references), "sacrebleu.corpus_bleu"
        else:
            expected, source = reference.corpus_bleu(hypotheses, references, max_n), "the reference solution"
        if _close64(got, expected):
            return
        mistake = next((m for m, flags in variants
                        if all(_close64(g, M.bleu(h, x, n, **flags)) for h, x, n, g, _ in runs)), None)
        fail(f"corpus_bleu: the score differs from {source}.", tested=tested,
             details=expected_got(f"{expected:.6f}", f"{got:.6f}"), mistake=mistake)

    for hypotheses, references, max_n, got, tested in runs:
        with _bleu_block(max_n):
            verdict(hypotheses, references, max_n, got, tested)
    for hypotheses, references in length_mismatches():
        expect_raises(ValueError, f"corpus_bleu({len(hypotheses)} hypotheses, {len(references)} references)",
                      corpus_bleu, hypotheses, references, why="when the two lists differ in length",
                      criterion="corpus_bleu.length_mismatch")
