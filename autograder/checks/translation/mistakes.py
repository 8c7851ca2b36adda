"""Known-mistake variants of notebook 10 (label smoothing, the 2017 schedule, beam search, corpus BLEU) and their
table (`TABLE`, at the end): see the package doc. Each function is written here from the contract
(docs/course-api.md), not from `solutions`."""
from __future__ import annotations

import functools
import math
from collections import Counter

import torch
import torch.nn.functional as F


# ------------------------------------------------------------------------------------------------ label smoothing
def smoothed_ce(logits, targets, smoothing=0.1, ignore_index=0, *, spread="all", kl=False, count_ignored=False,
                ignore_zero=False, divide_by="kept", swap_weights=False, target_weight="reduced"):
    """Label-smoothed cross-entropy with switches: spread "all" | "others" (the smoothing mass over the V - 1 other
    classes) | "no_pad" (over the V - 2 classes other than the target and the ignore_index column, which gets 0: The
    Annotated Transformer's distribution); kl (with "no_pad": the KL divergence to that distribution, as
    nn.KLDivLoss gives it, i.e. minus its entropy); count_ignored (ignored positions add their loss and count);
    ignore_zero (the positions left out are those whose target is 0, whatever ignore_index is); divide_by "kept" |
    "all" | "none" (the sum); swap_weights (smoothing on the target's term, 1 - smoothing on the uniform one);
    target_weight "reduced" | "one" (the target's term weighs 1, plus the smoothing / V it gets with every class) |
    "set_to_one" (the target's entry of the smoothed distribution set to 1)."""
    log_p = F.log_softmax(logits.double(), dim=-1)                                     # (N, V)
    V = log_p.size(-1)
    if count_ignored:
        keep = torch.ones_like(targets, dtype=torch.bool)                               # (N,)
    else:
        keep = targets != (0 if ignore_zero else ignore_index)                          # (N,)
    nll = -log_p.gather(-1, targets.clamp(0, V - 1)[:, None]).squeeze(-1)               # (N,)
    if spread == "others":
        uniform = (-log_p.sum(-1) - nll) / (V - 1)                                      # (N,)
    elif spread == "no_pad":
        uniform = (-log_p.sum(-1) - nll + log_p[:, ignore_index]) / (V - 2)             # (N,)
    else:
        uniform = -log_p.mean(-1)                                                       # (N,)
    w_target, w_uniform = (smoothing, 1.0 - smoothing) if swap_weights else (1.0 - smoothing, smoothing)
    if target_weight == "one":
        w_target = 1.0
    elif target_weight == "set_to_one":
        w_target = 1.0 - smoothing / V                                                  # 1 in place of 1 - s + s / V
    per_position = w_target * nll + w_uniform * uniform                                 # (N,)
    if kl:                                                                              # minus the entropy of q
        per_position = per_position + _negative_entropy(smoothing, V - 2)
    total = (per_position * keep).sum()
    if divide_by == "none":
        return total.to(logits.dtype)
    count = keep.sum() if divide_by == "kept" else torch.tensor(targets.numel())
    return (total / count).to(logits.dtype)


def _negative_entropy(smoothing: float, others: int) -> float:
    """sum(q * log q) of a distribution with 1 - smoothing on the target and smoothing / others on `others`
    classes (0 * log 0 = 0, as nn.KLDivLoss takes it)."""
    return sum(q * math.log(q) for q in (1.0 - smoothing, *[smoothing / others] * others) if q > 0)


# --------------------------------------------------------------------------------------------------- schedule
def noam(step, d_model, warmup_steps, factor=1.0, *, clamp_step=True, use_max=False, d_model_scale=True,
         use_factor=True):
    """The 2017 schedule with switches (clamp_step=False: step 0 as it is, so 0 ** -0.5 is infinite)."""
    s = max(step, 1) if clamp_step else step
    decay = math.inf if s == 0 else s ** -0.5
    rise = s * warmup_steps ** -1.5
    value = max(decay, rise) if use_max else min(decay, rise)
    if d_model_scale:
        value *= d_model ** -0.5
    return value * factor if use_factor else value


# ------------------------------------------------------------------------------------------------ beam search
def sequence_log_prob(model, src_ids, tokens, bos_id=2) -> float:
    """The sum of log p(token | prefix) over `tokens` (the tokens after bos_id), the model as it is (float64)."""
    if not tokens:
        return 0.0
    with torch.no_grad():
        memory, src_mask = model.encode(src_ids)
        ys = torch.tensor([[bos_id, *tokens[:-1]]], device=src_ids.device)               # (1, L)
        log_p = F.log_softmax(model.decode(ys, memory, src_mask)[0].double(), dim=-1)   # (L, V)
        picked = log_p.gather(-1, torch.tensor(tokens, device=src_ids.device)[:, None])
    return float(picked.sum())


def beam_search(model, src_ids, beam_size, max_len, bos_id=2, eos_id=3, length_penalty=0.6, *, rank_raw=False,
                penalty_in_beam=None, eos_leaves_beam=True, length_counts_bos=False, keep_bos=False,
                eval_mode=True, early_stop=True, stop_at_first=False):
    """Beam search as the contract walks it, with switches: rank_raw (finished ranked by raw score);
    penalty_in_beam "stored" | "stored_twice" (every extension's score divided by the length penalty and kept so,
    then ranked as stored or divided once more) | "mixed" (finished hypotheses stay in the beam, unchanged, and
    compete with the extensions of the live ones by the penalised score; the search stops when the beam holds
    finished hypotheses only, and the best-ranked hypothesis of the beam wins); eos_leaves_beam=False (a hypothesis
    ending in eos stays in the beam and keeps growing); length_counts_bos (L counts bos); keep_bos (the result
    starts with bos); eval_mode=False (the model used in the mode it was handed in: dropout on in training mode);
    stop_at_first (the search stops after the step where the first hypothesis finished); early_stop=False (the
    search goes on to max_len after beam_size hypotheses finished)."""
    was_training = model.training
    if eval_mode:
        model.eval()

    def penalty(length: int) -> float:                                                  # length: tokens after bos
        return ((5 + length + (1 if length_counts_bos else 0)) / 6) ** length_penalty

    try:
        with torch.no_grad():
            memory, src_mask = model.encode(src_ids)                                    # (1, S, d), mask
            if penalty_in_beam == "mixed":
                finished = _mixed_beam(model, memory, src_mask, beam_size, max_len, bos_id, eos_id, penalty)
            else:
                walk = functools.partial(_walk, eos_id=eos_id, beam_size=beam_size, eos_leaves_beam=eos_leaves_beam,
                                         penalty=penalty if penalty_in_beam else None)
                stop_at = 1 if stop_at_first else beam_size
                beam, finished = [([bos_id], 0.0)], []
                for _ in range(max_len):
                    beam = walk(_extensions(model, memory, src_mask, beam), finished)
                    if (early_stop and len(finished) >= stop_at) or not beam:
                        break
                else:
                    finished.extend(beam)
                if not finished:
                    finished = beam

            def rank(hyp):
                tokens, score = hyp
                if rank_raw or penalty_in_beam == "stored":
                    return score
                return score / penalty(len(tokens) - 1)

            best = max(finished, key=rank)[0]
    finally:
        model.train(was_training)
    return best if keep_bos else best[1:]


def _extensions(model, memory, src_mask, beam) -> list[tuple[list[int], float]]:
    """Every hypothesis of `beam` extended by every token, with its raw score (float64)."""
    ys = torch.tensor([tokens for tokens, _ in beam], device=memory.device)             # (k, t)
    k = ys.size(0)
    logits = model.decode(ys, memory.expand(k, -1, -1), src_mask.expand(k, -1, -1, -1))[:, -1]
    log_p = F.log_softmax(logits.double(), dim=-1).tolist()                             # k lists of V
    return [(tokens + [v], score + lp) for (tokens, score), row in zip(beam, log_p) for v, lp in enumerate(row)]


def _walk(extensions, finished, *, eos_id, beam_size, eos_leaves_beam, penalty):
    """The contract's walk down the extensions sorted by score (each score divided by `penalty` first when it is
    given): those ending in eos_id join `finished`, the others the new beam (returned) until it is full."""
    if penalty is not None:
        extensions = [(tokens, score / penalty(len(tokens) - 1)) for tokens, score in extensions]
    new_beam = []
    for tokens, score in sorted(extensions, key=lambda e: -e[1]):
        if eos_leaves_beam and tokens[-1] == eos_id:
            finished.append((tokens, score))
            continue
        new_beam.append((tokens, score))
        if len(new_beam) == beam_size:
            break
    return new_beam


def _mixed_beam(model, memory, src_mask, beam_size, max_len, bos_id, eos_id, penalty):
    """A beam that keeps its finished hypotheses: each step the live ones are extended, the finished carried over
    as they are, and the beam_size best by score / penalty(L) kept; it stops when the beam holds finished
    hypotheses only (or after max_len steps). Returns the beam (its best-ranked hypothesis is the answer)."""
    beam = [([bos_id], 0.0)]
    for _ in range(max_len):
        done = [hyp for hyp in beam if hyp[0][-1] == eos_id]
        live = [hyp for hyp in beam if hyp[0][-1] != eos_id]
        candidates = done + _extensions(model, memory, src_mask, live)
        beam = sorted(candidates, key=lambda h: -h[1] / penalty(len(h[0]) - 1))[:beam_size]
        if all(tokens[-1] == eos_id for tokens, _ in beam):
            break
    return beam


# -------------------------------------------------------------------------------------------------------- BLEU
def _grams(tokens, n):
    return Counter(tuple(tokens[i:i + n]) for i in range(len(tokens) - n + 1))


def _stats(hypotheses, references, max_n, clip):
    matches, totals, c, r = [0] * max_n, [0] * max_n, 0, 0
    for hyp, ref in zip(hypotheses, references):
        c, r = c + len(hyp), r + len(ref)
        for n in range(1, max_n + 1):
            hyp_grams, ref_grams = _grams(hyp, n), _grams(ref, n)
            matches[n - 1] += sum(min(k, ref_grams[g]) if clip else (k if g in ref_grams else 0)
                                  for g, k in hyp_grams.items())
            totals[n - 1] += sum(hyp_grams.values())
    return matches, totals, c, r


def _score(matches, totals, c, r, max_n, brevity, mean):
    if c == 0:
        return 0.0
    precisions = [m / t if t else 0.0 for m, t in zip(matches, totals)]
    if mean == "arithmetic_guarded" and min(precisions) == 0:   # the contract's 0, then the arithmetic mean
        return 0.0
    if mean in ("arithmetic", "arithmetic_guarded"):
        combined = sum(precisions) / max_n
    else:
        if min(precisions) == 0:
            return 0.0
        combined = math.exp(sum(math.log(p) for p in precisions) / max_n)
    if brevity == "right":
        bp = math.exp(1 - r / c) if c < r else 1.0
    elif brevity == "ratio_inverted":        # exp(1 - c / r) when c < r: above 1, short output rewarded
        bp = math.exp(1 - c / r) if c < r else 1.0
    elif brevity == "condition_inverted":    # exp(1 - r / c) when c > r: long output penalised
        bp = math.exp(1 - r / c) if c > r else 1.0
    else:
        bp = 1.0
    return bp * combined


def bleu(hypotheses, references, max_n=4, *, clip=True, brevity="right", mean="geometric", per_sentence=False,
         percent=True, use_max_n=True):
    """Corpus BLEU with switches: clip; brevity "right" | "ratio_inverted" | "condition_inverted" | "none"; mean
    "geometric" | "arithmetic" | "arithmetic_guarded" (0 when a precision is 0, as the contract says, else the
    arithmetic mean); per_sentence (the mean of sentence scores); percent (False: in [0, 1]); use_max_n=False (the
    precisions of n = 1 .. 4 whatever max_n is)."""
    if not use_max_n:
        max_n = 4
    if per_sentence:
        scores = [_score(*_stats([h], [r], max_n, clip), max_n, brevity, mean)
                  for h, r in zip(hypotheses, references)]
        value = sum(scores) / len(scores) if scores else 0.0
    else:
        value = _score(*_stats(hypotheses, references, max_n, clip), max_n, brevity, mean)
    return 100.0 * value if percent else value


# ------------------------------------------------------------------------------------------------------ the table
# {mistake id: (variant, switches)}: every mistake the hidden checks diagnose by running a variant on their own
# inputs (common.known_mistakes picks one exercise's rows by prefix). Within an exercise the order is the order of
# diagnosis: the first row that reproduces the answer names it.
TABLE = {
    "smoothing.over_other_classes": (smoothed_ce, {"spread": "others"}),
    "smoothing.pad_column_excluded": (smoothed_ce, {"spread": "no_pad"}),
    "smoothing.ignored_positions_counted": (smoothed_ce, {"count_ignored": True}),
    "smoothing.mean_over_all_positions": (smoothed_ce, {"divide_by": "all"}),
    "smoothing.sum_not_mean": (smoothed_ce, {"divide_by": "none"}),
    "smoothing.weights_swapped": (smoothed_ce, {"swap_weights": True}),
    "smoothing.target_not_discounted": (smoothed_ce, {"target_weight": "one"}),
    "smoothing.ignore_index_hardcoded": (smoothed_ce, {"ignore_zero": True}),
    "noam.step_zero": (noam, {"clamp_step": False}),
    "noam.min_max_swapped": (noam, {"use_max": True}),
    "noam.no_d_model_scale": (noam, {"d_model_scale": False}),
    "noam.factor_ignored": (noam, {"use_factor": False}),
    "beam.dropout_on": (beam_search, {"eval_mode": False}),
    "beam.returns_bos": (beam_search, {"keep_bos": True}),
    "beam.continues_after_eos": (beam_search, {"eos_leaves_beam": False}),
    "beam.stops_at_first_finished": (beam_search, {"stop_at_first": True}),
    "beam.no_length_penalty": (beam_search, {"rank_raw": True}),
    "beam.length_counts_bos": (beam_search, {"length_counts_bos": True}),
    "beam.penalty_on_unfinished": (beam_search, {"penalty_in_beam": "stored"}),
    "beam.searches_past_stop": (beam_search, {"early_stop": False}),
    "bleu.no_clipping": (bleu, {"clip": False}),
    "bleu.brevity_inverted": (bleu, {"brevity": "ratio_inverted"}),
    "bleu.no_brevity_penalty": (bleu, {"brevity": "none"}),
    "bleu.arithmetic_mean": (bleu, {"mean": "arithmetic"}),
    "bleu.sentence_average": (bleu, {"per_sentence": True}),
    "bleu.fraction_not_percent": (bleu, {"percent": False}),
    "bleu.max_n_ignored": (bleu, {"use_max_n": False}),
}

# {mistake id: [switches, ...]}: other switches of a row's variant that make the same mistake, tried right after its
# row (kit/compare.py's `candidates`): The Annotated Transformer's KL divergence (nn.KLDivLoss) in place of the
# cross-entropy, with its <pad> column left out; the target's entry of the smoothed distribution set to 1 instead of
# 1 added to it; the penalty divided into the stored scores and then once more when ranking; a beam that keeps its
# finished hypotheses, ranked with the live ones by the penalised score, and so runs on until it holds finished ones
# only (on the check's probes its translations are nearly always those of searching on); the brevity penalty applied
# to the longer output instead of the shorter; the arithmetic mean after the contract's "0 when any precision is 0".
FORMS = {
    "smoothing.pad_column_excluded": [{"spread": "no_pad", "kl": True}],
    "smoothing.target_not_discounted": [{"target_weight": "set_to_one"}],
    "beam.penalty_on_unfinished": [{"penalty_in_beam": "stored_twice"}],
    "beam.searches_past_stop": [{"penalty_in_beam": "mixed"}],
    "bleu.brevity_inverted": [{"brevity": "condition_inverted"}],
    "bleu.arithmetic_mean": [{"mean": "arithmetic_guarded"}],
}
