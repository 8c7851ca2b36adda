"""Public self-checks for notebook 10 (translate: label smoothing, the 2017 schedule, beam search, corpus BLEU).

The loss is recomputed row by row from its formula; the schedule is checked at steps worked out by hand; beam search
runs on `TableTranslator`, a tiny model whose next-token probabilities are written out in a table, so that greedy
and beam disagree and the length penalty decides; BLEU is checked on captions whose n-gram counts are worked out in
the comments (and against sacrebleu when it is installed). Shapes: N positions, V classes (target vocabulary).
"""
from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn

from coursekit.checks.toolkit import (expect_close, expect_type, fail, first_matching_hint, isclose, mistake_hint,
                                     passed, run)
from coursekit.criteria import argument, edge_case

PAD, BOS, EOS = 0, 2, 3


def _expect_value_error(name: str, call, problem: str, hint: str | None = None) -> None:
    """`call()` must raise ValueError (any other exception, or none, fails with `problem`)."""
    try:
        call()
    except ValueError:
        return
    except NotImplementedError:
        run(name, call)
    except Exception as error:  # noqa: BLE001
        fail(f"{problem}, got {type(error).__name__}: {error}", hint)
    fail(problem + ".", hint)


# ---------------------------------------------------------------------------------------------- label smoothing

def _smoothed(logits, targets, smoothing, ignore_index, spread="all", kept_only=True, divide_by="kept",
              target_weight=None):
    """The loss written out row by row in float64; the keyword switches give the known wrong answers."""
    log_p = logits.double().log_softmax(-1)                                    # (N, V)
    V = log_p.size(1)
    rows, kept = [], 0
    for row, target in zip(log_p, targets.tolist()):
        if target == ignore_index:
            if kept_only:
                continue
            target = 0 if target >= V or target < 0 else target
        else:
            kept += 1
        nll = -row[target]
        uniform = -row.mean() if spread == "all" else -(row.sum() - row[target]) / (V - 1)
        weight = 1 - smoothing if target_weight is None else target_weight
        rows.append(weight * nll + (1 - weight) * uniform)
    total = torch.stack(rows).sum()
    return {"kept": total / kept, "all": total / len(targets), "none": total}[divide_by]


def _loss_case(fn, logits, targets, smoothing, ignore_index, what):
    got = run("label_smoothed_cross_entropy", fn, logits, targets, smoothing, ignore_index)
    if isinstance(got, (int, float)):
        fail(f"label_smoothed_cross_entropy should return a scalar tensor, got a Python {type(got).__name__}.",
             mistake_hint("smoothing.python_float", "return the tensor itself (without .item())."))
    expect_type(got, torch.Tensor, "label_smoothed_cross_entropy's result")
    if got.dim() != 0:
        fail(f"label_smoothed_cross_entropy should return a scalar (shape ()), got shape {tuple(got.shape)}.",
             "average over the kept positions: the result is one number.")
    expected = _smoothed(logits, targets, smoothing, ignore_index)
    wrong = [
        (_smoothed(logits, targets, smoothing, ignore_index, spread="others"),
         mistake_hint("smoothing.over_other_classes", "the uniform term is -log_p.mean(dim=-1).")),
        (_smoothed(logits, targets, smoothing, ignore_index, target_weight=smoothing),
         mistake_hint("smoothing.weights_swapped")),
        (_smoothed(logits, targets, smoothing, ignore_index, divide_by="none"),
         mistake_hint("smoothing.sum_not_mean", "divide by the number of kept positions.")),
        (_smoothed(logits, targets, smoothing, ignore_index, divide_by="all"),
         mistake_hint("smoothing.mean_over_all_positions", "divide by (targets != ignore_index).sum().")),
        (_smoothed(logits, targets, smoothing, ignore_index, kept_only=False, divide_by="all"),
         mistake_hint("smoothing.ignored_positions_counted", "keep = targets != ignore_index; average over keep.")),
        (_smoothed(logits, targets, smoothing, ignore_index, kept_only=False, divide_by="none"),
         mistake_hint("smoothing.ignored_positions_counted", "keep = targets != ignore_index; average over keep.")),
    ]
    if ignore_index != 0:
        wrong.append((_smoothed(logits, targets, smoothing, 0),
                      "targets equal to 0 were left out: leave out those equal to ignore_index (here "
                      f"{ignore_index}), not a fixed 0."))
    expect_close(got, expected, f"label_smoothed_cross_entropy ({what})", first_matching_hint(got, wrong))


def check_label_smoothed_cross_entropy(label_smoothed_cross_entropy) -> None:
    fn = label_smoothed_cross_entropy
    generator = torch.Generator().manual_seed(10)
    logits = torch.randn(6, 5, generator=generator) * 2                       # (N=6, V=5)
    targets = torch.tensor([2, 0, 4, 1, 0, 3])                                # positions 1 and 4 are padding
    _loss_case(fn, logits, targets, 0.1, 0, "smoothing=0.1, targets 0 ignored")
    got = run("label_smoothed_cross_entropy", fn, logits, targets)
    expect_type(got, torch.Tensor, "label_smoothed_cross_entropy(logits, targets)")
    expect_close(got, _smoothed(logits, targets, 0.1, 0), "label_smoothed_cross_entropy(logits, targets) with "
                 "the defaults", "the defaults are smoothing=0.1, ignore_index=0.")
    with argument("label_smoothed_cross_entropy.smoothing"):
        _loss_case(fn, logits, targets, 0.3, 0, "smoothing=0.3, targets 0 ignored")
        got = run("label_smoothed_cross_entropy", fn, logits, targets, 0.0, 0)
        expect_close(got, F.cross_entropy(logits, targets, ignore_index=0), "label_smoothed_cross_entropy with "
                     "smoothing=0 (plain cross-entropy)", "with smoothing=0 only the -log p[target] term is left.")
    with argument("label_smoothed_cross_entropy.ignore_index"):
        # ignore_index 4: target 0 is now a real class and the two positions whose target is 4 are left out
        _loss_case(fn, logits, targets, 0.1, 4, "smoothing=0.1, ignore_index=4")
    # the gradient reaches the logits (the training loop calls backward on the loss)
    leaf = logits.clone().requires_grad_(True)
    loss = run("label_smoothed_cross_entropy", fn, leaf, targets, 0.1, 0)
    if not isinstance(loss, torch.Tensor) or not loss.requires_grad:
        fail("label_smoothed_cross_entropy's result carries no gradient back to the logits.",
             mistake_hint("smoothing.detached", "compute with torch operations on the logits all the way."))
    loss.backward()
    if leaf.grad is None or leaf.grad[1].abs().max() > 0 or leaf.grad[4].abs().max() > 0:
        fail("the gradient of the loss reaches the logits of padded positions (targets 1 and 4 are 0).",
             mistake_hint("smoothing.ignored_positions_counted", "leave the ignored rows out entirely."))
    with edge_case("label_smoothed_cross_entropy.bad_smoothing"):
        for smoothing in (-0.1, 1.0, 1.5):
            _expect_value_error("label_smoothed_cross_entropy", lambda: fn(logits, targets, smoothing, 0),
                                f"label_smoothed_cross_entropy with smoothing={smoothing} should raise ValueError "
                                f"(smoothing lies in [0, 1))",
                                "check `0 <= smoothing < 1` first and raise ValueError otherwise.")
    passed("label_smoothed_cross_entropy", "(mass over all V classes, padding left out, ignore_index other "
                                           "than 0, smoothing=0, smoothing outside [0, 1))")


# ---------------------------------------------------------------------------------------------- the schedule

def check_noam_lr(noam_lr) -> None:
    # d_model 256 (256 ** -0.5 = 1/16), warm-up 4 (4 ** -1.5 = 1/8): lr(s) = factor / 16 * min(1 / sqrt(s), s / 8)
    try:
        at_zero = noam_lr(0, 256, 4)
    except NotImplementedError:
        run("noam_lr", noam_lr, 0, 256, 4)
    except ZeroDivisionError as error:
        fail("noam_lr(0, d_model=256, warmup_steps=4) divided by zero.",
             mistake_hint("noam.step_zero"), cause=error)
    else:
        if isinstance(at_zero, (int, float)) and (at_zero == 0 or math.isinf(at_zero) or math.isnan(at_zero)):
            fail(f"noam_lr(0, d_model=256, warmup_steps=4) should equal noam_lr(1, ...) = 1/128, got {at_zero}.",
                 mistake_hint("noam.step_zero"))
    cases = [  # (step, d_model, warmup_steps, factor, expected)
        (0, 256, 4, 1.0, 1 / 16 * 1 / 8),               # step 0 counts as step 1: min(1, 1/8) = 1/8
        (1, 256, 4, 1.0, 1 / 16 * 1 / 8),
        (2, 256, 4, 1.0, 1 / 16 * 2 / 8),               # linear rise: min(0.707, 1/4)
        (4, 256, 4, 1.0, 1 / 16 * 1 / 2),               # the peak at s = warmup_steps: both terms are 1/2
        (16, 256, 4, 1.0, 1 / 16 * 1 / 4),              # decay as 1 / sqrt(s): 4 times the step, half the rate
        (64, 256, 4, 1.0, 1 / 16 * 1 / 8),
        (4, 256, 4, 2.5, 2.5 / 16 * 1 / 2),             # factor multiplies everything
        (100, 16, 1, 1.0, 1 / 4 * 1 / 10),              # warmup_steps = 1: pure 1 / sqrt(s) from the start
        (3, 16, 100, 1.0, 1 / 4 * 3 / 1000),            # deep in the warm-up: s / warmup ** 1.5
    ]
    for step, d_model, warmup, factor, expected in cases:
        if factor == 1.0:
            _noam_case(noam_lr, step, d_model, warmup, factor, expected)
        else:
            with argument("noam_lr.factor"):
                _noam_case(noam_lr, step, d_model, warmup, factor, expected)
    # the peak sits at warmup_steps
    rates = [run("noam_lr", noam_lr, step, 64, 10) for step in range(0, 41)]
    if max(range(41), key=lambda step: rates[step]) != 10:
        fail("with warmup_steps=10 the rate should peak at step 10.",
             mistake_hint("noam.min_max_swapped", "the rate rises for warmup_steps steps, then decays."))
    with edge_case("noam_lr.bad_warmup"):
        for warmup in (0, -3):
            _expect_value_error("noam_lr", lambda: noam_lr(5, 64, warmup),
                                f"noam_lr with warmup_steps={warmup} should raise ValueError",
                                "check `warmup_steps >= 1` first and raise ValueError otherwise.")
    passed("noam_lr", "(step 0, linear rise, peak at warmup_steps, 1/sqrt decay, factor, warmup_steps < 1)")


def _noam_case(noam_lr, step, d_model, warmup, factor, expected) -> None:
    got = run("noam_lr", noam_lr, step, d_model, warmup, factor)
    if not isinstance(got, (int, float)) or isinstance(got, bool):
        fail(f"noam_lr should return a float, got {type(got).__name__}.",
             "compute with Python numbers (or return float(...)).")
    if isclose(got, expected, 1e-9):
        return
    s = max(step, 1)
    raw = min(s ** -0.5, s * warmup ** -1.5)
    hint = None
    if isclose(got, factor * d_model ** -0.5 * max(s ** -0.5, s * warmup ** -1.5), 1e-9):
        hint = mistake_hint("noam.min_max_swapped", "min(s ** -0.5, s * warmup_steps ** -1.5).")
    elif isclose(got, factor * raw, 1e-9):
        hint = mistake_hint("noam.no_d_model_scale", "multiply by d_model ** -0.5.")
    elif factor != 1 and isclose(got, d_model ** -0.5 * raw, 1e-9):
        hint = mistake_hint("noam.factor_ignored", "multiply the result by factor.")
    fail(f"noam_lr({step}, d_model={d_model}, warmup_steps={warmup}, factor={factor}) should be "
         f"{expected:.6g}, got {got}.", hint)


# ---------------------------------------------------------------------------------------------- beam search

A, B, C = 4, 5, 6  # three word tokens; 0 <pad>, 1 <unk>, 2 <bos>, 3 <eos> as everywhere in the course


class TableTranslator(nn.Module):
    """A tiny "translator" whose next-token probabilities are written out by hand.

    It has the decoding interface of the course's `Transformer` (`pad_id`, `encode`, `decode`), but ignores the
    source: `table` maps the target prefix (the tokens after <bos>, as a tuple) to {token: probability}; a prefix not
    in the table gives `default`. Tokens not named get probability `rest`. In training mode a dropout on the logits
    makes decoding random. It records every decode call (training mode, gradients enabled) and counts encodes.
    """

    def __init__(self, table: dict, default: dict, vocab_size: int = 7, rest: float = 1e-6, pad_id: int = PAD):
        super().__init__()
        self.pad_id = pad_id
        self.table, self.default, self.vocab_size, self.rest = table, default, vocab_size, rest
        self.scale = nn.Parameter(torch.ones(()))                              # gives the device, like any model
        self.drop = nn.Dropout(0.5)
        self.calls: list[tuple[bool, bool]] = []
        self.encodes = 0
        self.bos = BOS   # a hypothesis that starts with another token gets `default` at every position

    def next_logits(self, prefix: tuple) -> torch.Tensor:
        """(V,) log-probabilities after <bos> + prefix (unnormalised by at most `rest` * V)."""
        probs = torch.full((self.vocab_size,), self.rest, dtype=torch.float64)
        for token, p in self.table.get(tuple(prefix), self.default).items():
            probs[token] = p
        return probs.log()

    def encode(self, src_ids: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """(B, S) -> memory (B, S, 1) of zeros, src_mask (B, 1, 1, S)."""
        self.encodes += 1
        return (torch.zeros(*src_ids.shape, 1, device=src_ids.device),
                (src_ids != self.pad_id)[:, None, None, :])

    def decode(self, tgt_ids: torch.Tensor, memory: torch.Tensor, src_mask: torch.Tensor) -> torch.Tensor:
        """(B, T) target ids starting with <bos> -> logits (B, T, V); position t depends on tokens 1..t."""
        self.calls.append((self.training, torch.is_grad_enabled()))
        rows = [[self.next_logits(tuple(ids[1:t + 1]) if ids[0] == self.bos else ("not <bos>",))
                 for t in range(len(ids))] for ids in tgt_ids.tolist()]
        logits = torch.stack([torch.stack(row) for row in rows]).float().to(tgt_ids.device)
        return self.drop(logits * self.scale)

    def forward(self, src_ids: torch.Tensor, tgt_ids: torch.Tensor) -> torch.Tensor:
        memory, src_mask = self.encode(src_ids)
        return self.decode(tgt_ids, memory, src_mask)


def greedy_vs_beam_translator(eos: int = EOS) -> TableTranslator:
    """Greedy takes A (0.5) and then <eos> (0.4): [A, <eos>] has probability 0.20. A beam of 2 also keeps B
    (0.4), whose <eos> has probability 0.95: [B, <eos>] has 0.38 and wins (both have L = 2, so the penalty does not
    matter)."""
    return TableTranslator({(): {A: 0.5, B: 0.4, C: 0.1},
                            (A,): {eos: 0.4, A: 0.35, B: 0.25},
                            (B,): {eos: 0.95, C: 0.05}},
                           default={C: 0.9, A: 0.1})


def length_penalty_translator() -> TableTranslator:
    """Two finished translations compete: the short [<eos>] (L = 1, log-probability log 0.4 = -0.916) and the long
    [A, A, A, <eos>] (L = 4, 0.55 * 0.9 * 0.9 * p = exp(-1.34), -1.34). Ranked by score / ((5 + L) / 6) ** alpha:
    alpha 0 and 0.6 pick the short one (-0.916 > -1.34 / 1.275 = -1.051), alpha 1 and 2 the long one
    (-1.34 / 1.5 = -0.893, -1.34 / 2.25 = -0.596). Counting <bos> in L (divisors 7/6 and 10/6) flips alpha 1 back
    to the short one (-0.785 > -0.804), not alpha 2. With a beam of 2 the runner-up (B..., then A C...) never
    finishes, so the search stops once the long one has finished (step 4)."""
    p = math.exp(-1.34) / (0.55 * 0.9 * 0.9)
    return TableTranslator({(): {A: 0.55, EOS: 0.4, B: 0.05},
                            (A,): {A: 0.9, C: 0.1},
                            (A, A): {A: 0.9, B: 0.1},
                            (A, A, A): {EOS: p, C: 1 - p}},
                           default={C: 1.0})


_SRC = torch.tensor([[7, 8, 9]])                                               # (1, S=3): the source is ignored


def _greedy(model: TableTranslator, max_len: int) -> list[int]:
    tokens: list[int] = []
    while len(tokens) < max_len and (not tokens or tokens[-1] != EOS):
        tokens.append(int(model.next_logits(tuple(tokens)).argmax()))
    return tokens


def _decoded(fn, model, beam_size, max_len, length_penalty=0.6, bos_id=BOS, eos_id=EOS):
    got = run("beam_search", fn, model, _SRC, beam_size, max_len, bos_id, eos_id, length_penalty)
    ids = "" if (bos_id, eos_id) == (BOS, EOS) else f", bos_id={bos_id}, eos_id={eos_id}"
    call = (f"beam_search(model, src, beam_size={beam_size}, max_len={max_len}{ids}, "
            f"length_penalty={length_penalty})")
    if isinstance(got, torch.Tensor):
        fail(f"{call} should return a list of ints, got a tensor.", "return tokens.tolist() (or a list built "
                                                                      "from them).")
    if model.encodes != 1:
        fail(f"{call} encoded the source {model.encodes} times: encode it once, before the loop.",
             "memory, src_mask = model.encode(src_ids); then call model.decode(...) each step.")
    if any(training for training, _ in model.calls):
        fail(f"{call} called the model in training mode.", mistake_hint("beam.dropout_on", "model.eval() first."))
    if any(grad for _, grad in model.calls):
        fail(f"{call} called the model with gradients enabled.", "decode under `with torch.no_grad():`.")
    expect_type(got, list, call)
    if not all(isinstance(t, int) for t in got):
        fail(f"{call} should return a list of Python ints, got {got}.", "convert with int(...) or .tolist().")
    if got[:1] == [bos_id]:
        fail(f"{call} returned {got}, which starts with <bos> ({bos_id}).",
             mistake_hint("beam.returns_bos", "return best_tokens[1:]."))
    if eos_id in got[:-1]:
        fail(f"{call} returned {got}: tokens after <eos> ({eos_id}).",
             mistake_hint("beam.continues_after_eos", "an extension ending in <eos> goes to the finished list."))
    if len(got) > max_len:
        fail(f"{call} returned {len(got)} tokens: at most max_len={max_len} steps.")
    return got


def check_beam_search(beam_search) -> None:
    fn = beam_search
    # beam_size = 1 is greedy decoding
    for make in (greedy_vs_beam_translator, length_penalty_translator):
        model = make().eval()
        expected = _greedy(model, 6)
        got = _decoded(fn, model, 1, 6)
        if got != expected:
            fail(f"with beam_size=1 beam_search should give greedy decoding's tokens {expected}, got {got}.",
                 "a beam of one keeps the single best extension each step; an <eos> extension above it finishes.")
    # a beam of 2 finds a more probable translation than greedy, and restores the training mode
    model = greedy_vs_beam_translator().train()
    got = _decoded(fn, model, 2, 6)
    if not model.training:
        fail("beam_search left the model in eval mode.",
             mistake_hint("beam.mode_not_restored", "remember model.training and call model.train(it) at the end."))
    if got != [B, EOS]:
        hint = None
        if got == [A, EOS]:
            hint = "greedy's answer: keep the beam_size best extensions each step (B has probability 0.4)."
        fail(f"beam_search(beam_size=2) on a model where [B, <eos>] has probability 0.38 and greedy's [A, <eos>] "
             f"0.20 should give {[B, EOS]}, got {got}.", hint)
    # the length penalty ranks the finished hypotheses (the default 0.6 first, then the others)
    short, long = [EOS], [A, A, A, EOS]
    expected = {0.0: short, 0.6: short, 1.0: long, 2.0: long}
    results = {0.6: _decoded(fn, length_penalty_translator().eval(), 2, 8, 0.6)}
    _penalty_verdict(results, {0.6: short})
    with argument("beam_search.length_penalty"):
        results.update({alpha: _decoded(fn, length_penalty_translator().eval(), 2, 8, alpha)
                        for alpha in (0.0, 1.0, 2.0)})
        _penalty_verdict(dict(sorted(results.items())), expected)
    # max_len: after max_len steps the beam is finished as it is
    got = _decoded(fn, length_penalty_translator().eval(), 2, 2, 0.6)
    if got != [A, A]:
        fail(f"with max_len=2 the beam holds [A, A] (log-prob -0.70) and [A, C] and [<eos>] has finished; ranked with "
             f"the penalty [A, A] wins: expected {[A, A]}, got {got}.",
             "after max_len steps, every hypothesis still in the beam is finished as it is.")
    got = _decoded(fn, length_penalty_translator().eval(), 2, 0, 0.6)
    if got != []:
        fail(f"with max_len=0 nothing is generated: expected [], got {got}.",
             "with no step the only hypothesis is [<bos>]: return the tokens after it, [].")
    # other ids: hypotheses start with bos_id (the model answers nonsense after another first token), and eos_id
    # finishes them
    with argument("beam_search.bos_id"):
        model = greedy_vs_beam_translator().eval()
        model.bos = 1
        got = _decoded(fn, model, 2, 6, bos_id=1)
        if got != [B, EOS]:
            fail(f"beam_search(..., bos_id=1) on a model whose hypotheses start with 1 should give {[B, EOS]}, got "
                 f"{got}.", "start every hypothesis with bos_id (not a fixed 2).")
    with argument("beam_search.eos_id"):
        got = _decoded(fn, greedy_vs_beam_translator(eos=1).eval(), 2, 6, eos_id=1)
        if got != [B, 1]:
            fail(f"beam_search(..., eos_id=1) on a model whose end token is 1 should give {[B, 1]}, got {got}.",
                 "a hypothesis is finished when it ends in eos_id (not a fixed 3).")
    passed("beam_search", "(greedy at beam_size=1, a better translation than greedy, the length penalty, "
                          "max_len, other bos_id and eos_id, eval mode restored)")


def _penalty_verdict(results: dict, expected: dict) -> None:
    short, long = [EOS], [A, A, A, EOS]
    if results != expected:
        hint = None
        if all(got == short for got in results.values()):
            hint = mistake_hint("beam.no_length_penalty", "rank finished ones by score / ((5 + L) / 6) ** alpha.")
        elif results == {0.0: short, 0.6: short, 1.0: short, 2.0: long}:
            hint = mistake_hint("beam.length_counts_bos", "L = len(tokens) - 1 when tokens starts with <bos>.")
        fail(f"with A = {A} and <eos> = {EOS}: [<eos>] (L=1, log-prob -0.916) and [A, A, A, <eos>] (L=4, log-prob -1.34) are finished; ranked by "
             f"score / ((5 + L) / 6) ** alpha, alpha 0 and 0.6 pick {short}, 1 and 2 pick {long}; got "
             f"{results}.", hint)


# ---------------------------------------------------------------------------------------------- BLEU

def _bleu(precisions, c, r, brevity=True):
    """100 * BP * geometric mean of `precisions` (c, r: hypothesis and reference lengths)."""
    if min(precisions) == 0:
        return 0.0
    bp = math.exp(1 - r / c) if brevity and c < r else 1.0
    return 100 * bp * math.exp(sum(math.log(p) for p in precisions) / len(precisions))


# worked examples (one reference each); the n-gram counts are in the comments
_MAN = ("a man in a blue shirt is riding a bike".split(), "a man in a red shirt is riding a bicycle".split())
# 10 and 10 tokens. 1-grams: a a a man in shirt is riding = 8/10; 2-grams: a man, man in, in a, shirt is, is riding,
# riding a = 6/9; 3-grams: a man in, man in a, shirt is riding, is riding a = 4/8; 4-grams: a man in a, shirt is
# riding a = 2/7.
_DOGS = ("two dogs play in snow".split(), "two dogs are playing in the snow".split())
# 5 and 7 tokens. 1-grams: two dogs in snow = 4/5; 2-grams: two dogs = 1/4; 3-grams 0/3; 4-grams 0/2.
_MAN_P = [8 / 10, 6 / 9, 4 / 8, 2 / 7]
_CORPUS_P = [12 / 15, 7 / 13, 4 / 11, 2 / 9]                                  # both sentences' counts summed


def _bleu_case(fn, hyps, refs, max_n, expected, what, wrong=()):
    got = run("corpus_bleu", fn, hyps, refs, max_n)
    if not isinstance(got, (int, float)) or isinstance(got, bool):
        fail(f"corpus_bleu should return a float, got {type(got).__name__}.", "return a Python float (float(...)).")
    if isclose(got, expected, 1e-9):
        return
    hint = None
    if expected > 1 and isclose(got * 100, expected, 1e-9):
        hint = mistake_hint("bleu.fraction_not_percent", "multiply by 100.")
    else:
        for value, text in wrong:
            if isclose(got, value, 1e-9):
                hint = text
                break
    if hint is None and not 0 <= got <= 100:
        hint = "BLEU lies in [0, 100]."
    fail(f"corpus_bleu on {what} should be {expected:.6g}, got {got}.", hint)


def check_corpus_bleu(corpus_bleu) -> None:
    fn = corpus_bleu
    same = "a girl is climbing a rock wall".split()
    _bleu_case(fn, [same], [same], 4, 100.0, "a hypothesis equal to its reference")
    # clipping: 'the' 6 times, but only twice in the reference -> 2/6 (c = r = 6: no brevity penalty)
    with argument("corpus_bleu.max_n"):                 # with max_n 4 this corpus scores 0 (no matching 2-gram)
        got = run("corpus_bleu", fn, [["the"] * 6], ["the cat is on the mat".split()], 1)
        if isinstance(got, (int, float)) and not isinstance(got, bool) and got == 0:
            fail("corpus_bleu on 'the the the the the the' vs 'the cat is on the mat', max_n=1 should be "
                 f"{100 * 2 / 6:.6g}, got 0 (the score with max_n=4).",
                 "use max_n: with max_n=1 only the unigram precision counts.")
    _bleu_case(fn, [["the"] * 6], ["the cat is on the mat".split()], 1, 100 * 2 / 6,
               "'the the the the the the' vs 'the cat is on the mat', max_n=1",
               [(100.0, mistake_hint("bleu.no_clipping", "min(count in hypothesis, count in reference).")),
                (0.0, "use max_n: with max_n=1 only the unigram precision counts.")])
    # the geometric mean of the four precisions (c = r = 10)
    _bleu_case(fn, [_MAN[0]], [_MAN[1]], 4, _bleu(_MAN_P, 10, 10), "'a man in a blue shirt ...'",
               [(100 * sum(_MAN_P) / 4, mistake_hint("bleu.arithmetic_mean", "exp(mean of log p_n)."))])
    with argument("corpus_bleu.max_n"):
        _bleu_case(fn, [_MAN[0]], [_MAN[1]], 2, _bleu(_MAN_P[:2], 10, 10), "'a man in a blue shirt ...' with max_n=2",
                   [(_bleu(_MAN_P, 10, 10), "use max_n: the precisions for n = 1 .. max_n."),
                    (100 * sum(_MAN_P[:2]) / 2, mistake_hint("bleu.arithmetic_mean", "exp(mean of log p_n)."))])
    short, long, ref = ("a dog runs".split(), "a dog runs on the beach today".split(),
                        "a dog runs on the beach".split())
    # a longer hypothesis is not penalised for its length (its extra words already lower the precisions)
    _bleu_case(fn, [long], [ref], 2, 100 * math.sqrt(6 / 7 * 5 / 6),
               "'a dog runs on the beach today' vs 'a dog runs on the beach', max_n=2",
               [(100 * math.sqrt(6 / 7 * 5 / 6) * math.exp(1 - 7 / 6), mistake_hint("bleu.brevity_inverted")),
                (100 * math.sqrt(6 / 7 * 5 / 6) * math.exp(1 - 6 / 7), mistake_hint("bleu.brevity_inverted"))])
    # the brevity penalty: a short hypothesis whose every n-gram matches (p1 = p2 = 1), c = 3 < r = 6
    _bleu_case(fn, [short], [ref], 2, 100 * math.exp(1 - 6 / 3), "'a dog runs' vs 'a dog runs on the beach', max_n=2",
               [(100.0, mistake_hint("bleu.no_brevity_penalty", "times exp(1 - r / c) when c < r.")),
                (100 * math.exp(1 - 3 / 6), mistake_hint("bleu.brevity_inverted"))])
    # the corpus: counts summed over both sentences (the dogs sentence alone has no matching 3-gram)
    hyps, refs = [_MAN[0], _DOGS[0]], [_MAN[1], _DOGS[1]]
    expected = _bleu(_CORPUS_P, 15, 17)
    _bleu_case(fn, hyps, refs, 4, expected, "a corpus of two captions",
               [((_bleu(_MAN_P, 10, 10) + 0.0) / 2,
                 mistake_hint("bleu.sentence_average", "sum matches and totals over the sentences first.")),
                (100 * math.exp(1 - 17 / 15) * sum(_CORPUS_P) / 4, mistake_hint("bleu.arithmetic_mean")),
                (_bleu(_CORPUS_P, 15, 17, brevity=False), mistake_hint("bleu.no_brevity_penalty"))])
    # zero precisions and empty hypotheses give 0 (no smoothing)
    _bleu_case(fn, [_DOGS[0]], [_DOGS[1]], 4, 0.0, "'two dogs play in snow' (no matching 3-gram)")
    _bleu_case(fn, [["a", "cat"]], [["a", "cat", "sits"]], 4, 0.0, "'a cat' vs 'a cat sits' (no 4-gram at all)")
    with argument("corpus_bleu.max_n"):
        _bleu_case(fn, [["a", "cat"]], [["a", "cat", "sits"]], 2, 100 * math.exp(1 - 3 / 2),
                   "'a cat' vs 'a cat sits', max_n=2")
    _bleu_case(fn, [[], []], [["a", "cat"], ["a", "dog"]], 4, 0.0, "two empty hypotheses")
    try:
        import sacrebleu
    except ImportError:
        sacrebleu = None
    if sacrebleu is not None:
        reference = sacrebleu.corpus_bleu([" ".join(h) for h in hyps], [[" ".join(r) for r in refs]],
                                          tokenize="none", smooth_method="none", force=True).score
        got = run("corpus_bleu", fn, hyps, refs)
        if not isclose(got, reference, 1e-9):
            fail(f"corpus_bleu on the two captions should equal sacrebleu's {reference:.6g}, got {got}.")
    with edge_case("corpus_bleu.length_mismatch"):
        _expect_value_error("corpus_bleu", lambda: fn([_MAN[0]], [_MAN[1], _DOGS[1]]),
                            "corpus_bleu with 1 hypothesis and 2 references should raise ValueError",
                            "check len(hypotheses) == len(references) first.")
    passed("corpus_bleu", "(clipping, the brevity penalty, the geometric mean, corpus counts, max_n, zero "
                          "precisions, sacrebleu)" if sacrebleu is not None else
           "(clipping, the brevity penalty, the geometric mean, corpus counts, max_n, zero precisions)")
