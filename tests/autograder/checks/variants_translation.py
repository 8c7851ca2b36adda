"""Student answers for testing the hidden checks of notebook 10 (translate).

CORRECT answers are written differently from the reference (an explicit smoothed target distribution, nll_loss
with masked_select, an if/else schedule, a beam kept per hypothesis with float32 scores, n-grams counted with zip,
the brevity penalty as exp(min(0, 1 - r / c)) ...) and must pass. WRONG answers each contain one known mistake,
written the way a student would; `WRONG` maps each to the catalogue id its check must name. `UNNAMED` are wrong
answers whose mistake has no catalogue id: they must fail with the given words in the message.
"""
from __future__ import annotations

import math
from collections import Counter

import torch
import torch.nn.functional as F

import solutions


# ================================================================================================ label smoothing
def make_smoothing(mistake=None):
    def label_smoothed_cross_entropy(logits, targets, smoothing=0.1, ignore_index=0):
        if mistake != "no_check" and not 0 <= smoothing < 1:
            raise ValueError("smoothing must be in [0, 1)")
        N, V = logits.shape
        log_probs = torch.log_softmax(logits, dim=-1)
        # the target distribution: smoothing / V everywhere, plus 1 - smoothing on the target
        if mistake == "over_other_classes":
            dist = torch.full_like(log_probs, smoothing / (V - 1))
            dist[torch.arange(N), targets] = 1 - smoothing
        elif mistake == "pad_column_excluded":                 # The Annotated Transformer's distribution
            dist = torch.full_like(log_probs, smoothing / (V - 2))
            dist[torch.arange(N), targets] = 1 - smoothing
            dist[:, ignore_index] = 0
        elif mistake == "target_not_discounted":
            dist = torch.full_like(log_probs, smoothing / V)
            dist[torch.arange(N), targets] += 1
        elif mistake == "target_set_to_one":
            dist = torch.full_like(log_probs, smoothing / V)
            dist[torch.arange(N), targets] = 1
        else:
            dist = torch.full_like(log_probs, smoothing / V)
            dist[torch.arange(N), targets] += 1 - smoothing
        if mistake == "weights_swapped":
            dist = torch.full_like(log_probs, (1 - smoothing) / V)
            dist[torch.arange(N), targets] += smoothing
        per_token = -(dist * log_probs).sum(dim=-1)                                  # (N,)
        mask = (targets != (0 if mistake == "ignore_zero" else ignore_index)).float()
        if mistake == "ignored_positions_counted":
            return per_token.mean()
        if mistake == "mean_over_all_positions":
            return (per_token * mask).sum() / N
        if mistake == "sum_not_mean":
            return (per_token * mask).sum()
        loss = (per_token * mask).sum() / mask.sum()
        if mistake == "python_float":
            return loss.item()
        if mistake == "detached":
            return loss.detach()
        if mistake == "rebuilt":
            return torch.tensor(loss.item(), requires_grad=True)
        return loss

    return label_smoothed_cross_entropy


def smoothing_nll_masked_select(logits, targets, smoothing=0.1, ignore_index=0):
    if smoothing < 0 or smoothing >= 1:
        raise ValueError(f"bad smoothing {smoothing}")
    keep = targets.ne(ignore_index)
    log_p = logits[keep].log_softmax(-1)
    nll = F.nll_loss(log_p, targets[keep])
    uniform = -log_p.mean(-1).mean()
    return (1 - smoothing) * nll + smoothing * uniform


def smoothing_annotated_kl(logits, targets, smoothing=0.1, ignore_index=0):
    """WRONG (smoothing.pad_column_excluded): The Annotated Transformer's LabelSmoothing, KLDivLoss summed over the
    kept positions and divided by their number, <pad> (ignore_index) column and rows zeroed."""
    if not 0 <= smoothing < 1:
        raise ValueError("smoothing must be in [0, 1)")
    true_dist = torch.full_like(logits, smoothing / (logits.size(1) - 2))
    true_dist.scatter_(1, targets[:, None], 1 - smoothing)
    true_dist[:, ignore_index] = 0
    true_dist[targets == ignore_index] = 0
    loss = torch.nn.KLDivLoss(reduction="sum")(logits.log_softmax(-1), true_dist)
    return loss / (targets != ignore_index).sum()


def smoothing_by_pytorch(logits, targets, smoothing=0.1, ignore_index=0):
    if not 0.0 <= smoothing < 1.0:
        raise ValueError("smoothing outside [0, 1)")
    return F.cross_entropy(logits, targets, ignore_index=ignore_index, label_smoothing=smoothing)


# ======================================================================================================= noam_lr
def make_noam(mistake=None):
    def noam_lr(step, d_model, warmup_steps, factor=1.0):
        if warmup_steps < 1 and mistake != "no_check":
            raise ValueError("warmup_steps must be at least 1")
        s = step if mistake in ("step_zero", "step_zero_numpy") else max(step, 1)
        if mistake == "step_zero_numpy":
            import numpy as np

            with np.errstate(divide="ignore"):
                decay = float(np.float64(s) ** -0.5)
        else:
            decay = s ** -0.5
        pick = max if mistake == "min_max_swapped" else min
        lr = pick(decay, s * warmup_steps ** -1.5)
        if mistake != "no_d_model_scale":
            lr *= d_model ** -0.5
        return lr if mistake == "factor_ignored" else factor * lr

    return noam_lr


def noam_if_else(step, d_model, warmup_steps, factor=1.0):
    if warmup_steps < 1:
        raise ValueError(warmup_steps)
    s = 1 if step <= 0 else step
    shape = s / warmup_steps ** 1.5 if s < warmup_steps else 1 / math.sqrt(s)
    return factor * shape / math.sqrt(d_model)


# ================================================================================================== beam search
def make_beam_search(mistake=None):
    """A beam kept as a list of (tokens, score) pairs, one decode call per hypothesis, float32 scores."""
    def beam_search(model, src_ids, beam_size, max_len, bos_id=2, eos_id=3, length_penalty=0.6):
        def penalty(length):
            if mistake == "length_counts_bos":
                length += 1
            return ((5 + length) / 6) ** length_penalty

        was_training = model.training
        if mistake != "dropout_on":
            model.eval()
        with torch.no_grad():
            memory, src_mask = model.encode(src_ids)
            beam = [([bos_id], 0.0)]
            finished = []
            for _ in range(max_len):
                candidates = []
                for tokens, score in beam:
                    ys = torch.tensor([tokens], device=src_ids.device)
                    log_p = model.decode(ys, memory, src_mask)[0, -1].log_softmax(-1)
                    for v in range(log_p.size(0)):
                        new = score + float(log_p[v])
                        if mistake == "penalty_on_unfinished":
                            new = new / penalty(len(tokens))
                        candidates.append((tokens + [v], new))
                candidates.sort(key=lambda c: c[1], reverse=True)
                beam = []
                for tokens, score in candidates:
                    if tokens[-1] == eos_id and mistake != "continues_after_eos":
                        finished.append((tokens, score))
                    else:
                        beam.append((tokens, score))
                        if len(beam) == beam_size:
                            break
                if len(finished) >= beam_size and mistake != "no_early_stop":
                    break
                if finished and mistake == "stops_at_first_finished":
                    break
            else:
                finished += beam
        if mistake != "mode_not_restored":
            model.train(was_training)
        if mistake in ("no_length_penalty", "penalty_on_unfinished"):
            best = max(finished, key=lambda h: h[1])
        else:
            best = max(finished, key=lambda h: h[1] / penalty(len(h[0]) - 1))
        return best[0] if mistake == "returns_bos" else best[0][1:]

    return beam_search


def beam_search_keeping_finished(model, src_ids, beam_size, max_len, bos_id=2, eos_id=3, length_penalty=0.6):
    """WRONG (beam.searches_past_stop): finished hypotheses stay in the beam and compete with the live ones by the
    length-normalised score; the search ends when every hypothesis of the beam has finished."""
    def normalised(tokens, score):
        return score / ((5 + len(tokens) - 1) / 6) ** length_penalty

    was_training = model.training
    model.eval()
    with torch.no_grad():
        memory, src_mask = model.encode(src_ids)
        beam = [([bos_id], 0.0)]
        for _ in range(max_len):
            candidates = []
            for tokens, score in beam:
                if tokens[-1] == eos_id:
                    candidates.append((tokens, score))                   # finished: carried over as it is
                    continue
                log_p = model.decode(torch.tensor([tokens], device=src_ids.device), memory, src_mask)[0, -1]
                log_p = log_p.double().log_softmax(-1).tolist()
                candidates += [(tokens + [v], score + lp) for v, lp in enumerate(log_p)]
            beam = sorted(candidates, key=lambda c: normalised(*c), reverse=True)[:beam_size]
            if all(tokens[-1] == eos_id for tokens, _ in beam):
                break
    model.train(was_training)
    return max(beam, key=lambda c: normalised(*c))[0][1:]


def beam_search_tensors(model, src_ids, beam_size, max_len, bos_id=2, eos_id=3, length_penalty=0.6):
    """The beam as tensors: every hypothesis decoded in one batch, a full sort of all k * V extensions."""
    mode = model.training
    model.eval()
    try:
        with torch.no_grad():
            memory, src_mask = model.encode(src_ids)
            seqs = torch.tensor([[bos_id]], device=src_ids.device)                     # (k, t)
            scores = torch.zeros(1, dtype=torch.float64, device=src_ids.device)        # (k,)
            done = []
            for step in range(max_len):
                k = seqs.size(0)
                out = model.decode(seqs, memory.repeat(k, 1, 1), src_mask.repeat(k, 1, 1, 1))[:, -1, :]
                total = scores.unsqueeze(1) + torch.log_softmax(out.double(), dim=1)     # (k, V)
                order = torch.argsort(total.reshape(-1), descending=True)
                V = total.size(1)
                keep_rows, keep_tokens = [], []
                for flat in order.tolist():
                    row, token = flat // V, flat % V
                    if token == eos_id:
                        done.append((seqs[row].tolist()[1:] + [token], float(total[row, token])))
                    else:
                        keep_rows.append(row)
                        keep_tokens.append(token)
                        if len(keep_rows) == beam_size:
                            break
                rows = torch.tensor(keep_rows, device=seqs.device)
                tokens = torch.tensor(keep_tokens, device=seqs.device)
                seqs = torch.cat([seqs[rows], tokens[:, None]], dim=1)
                scores = total[rows, tokens]
                if len(done) >= beam_size:
                    break
            else:
                done += [(s[1:], float(v)) for s, v in zip(seqs.tolist(), scores)]
    finally:
        model.train(mode)
    lengths_normalised = [score / ((5 + len(tokens)) / 6) ** length_penalty for tokens, score in done]
    return done[max(range(len(done)), key=lengths_normalised.__getitem__)][0]


# ======================================================================================================= BLEU
def make_corpus_bleu(mistake=None):
    def corpus_bleu(hypotheses, references, max_n=4):
        if len(hypotheses) != len(references) and mistake != "no_check":
            raise ValueError("one reference per hypothesis")
        if mistake == "max_n_fixed":
            max_n = 4

        def ngrams(words, n):
            return Counter(zip(*[words[i:] for i in range(n)]))

        def stats(pairs):
            matched, counted = [0] * max_n, [0] * max_n
            for hyp, ref in pairs:
                for n in range(1, max_n + 1):
                    h, r = ngrams(hyp, n), ngrams(ref, n)
                    if mistake == "no_clipping":
                        matched[n - 1] += sum(c for g, c in h.items() if g in r)
                    else:
                        matched[n - 1] += sum((h & r).values())
                    counted[n - 1] += sum(h.values())
            c = sum(len(h) for h, _ in pairs)
            r = sum(len(x) for _, x in pairs)
            return matched, counted, c, r

        def score(matched, counted, c, r):
            if c == 0:
                return 0.0
            precisions = [m / t if t else 0.0 for m, t in zip(matched, counted)]
            if mistake == "arithmetic_mean":
                mean = sum(precisions) / max_n
            elif min(precisions) == 0:
                return 0.0
            elif mistake == "arithmetic_mean_guarded":
                mean = sum(precisions) / max_n
            else:
                mean = math.exp(sum(map(math.log, precisions)) / max_n)
            if mistake == "no_brevity_penalty":
                bp = 1.0
            elif mistake == "brevity_inverted":
                bp = math.exp(1 - c / r) if c < r else 1.0
            else:
                bp = math.exp(min(0.0, 1 - r / c))
            return bp * mean

        pairs = list(zip(hypotheses, references))
        if mistake == "sentence_average":
            value = sum(score(*stats([p])) for p in pairs) / len(pairs)
        else:
            value = score(*stats(pairs))
        return value if mistake == "fraction_not_percent" else 100 * value

    return corpus_bleu


def variant(function, mistake):
    """`function` (an answer with a `mistake=` switch) with `mistake` switched on."""
    def wrong(*args, **kwargs):
        return function(*args, **kwargs, mistake=mistake)
    wrong.__name__ = f"{function.__name__}_{mistake}"
    return wrong


def ignoring(function, **fixed):
    """`function` with the keyword arguments `fixed` held at their defaults, whatever the caller passes: an answer
    right in everything but that argument."""
    import inspect

    signature = inspect.signature(function)

    def wrong(*args, **kwargs):
        bound = signature.bind(*args, **kwargs)
        bound.arguments.update(fixed)
        return function(*bound.args, **bound.kwargs)
    wrong.__name__ = f"{function.__name__}_ignores_{'_'.join(fixed)}"
    return wrong


CORRECT = {
    "label_smoothed_cross_entropy": [make_smoothing(), smoothing_nll_masked_select, smoothing_by_pytorch],
    "noam_lr": [make_noam(), noam_if_else],
    "beam_search": [make_beam_search(), beam_search_tensors],
    "corpus_bleu": [make_corpus_bleu()],
}

WRONG = [
    ("label_smoothed_cross_entropy", make_smoothing("over_other_classes"), "smoothing.over_other_classes"),
    ("label_smoothed_cross_entropy", make_smoothing("ignored_positions_counted"),
     "smoothing.ignored_positions_counted"),
    ("label_smoothed_cross_entropy", make_smoothing("mean_over_all_positions"), "smoothing.mean_over_all_positions"),
    ("label_smoothed_cross_entropy", make_smoothing("sum_not_mean"), "smoothing.sum_not_mean"),
    ("label_smoothed_cross_entropy", make_smoothing("weights_swapped"), "smoothing.weights_swapped"),
    ("label_smoothed_cross_entropy", make_smoothing("pad_column_excluded"), "smoothing.pad_column_excluded"),
    ("label_smoothed_cross_entropy", smoothing_annotated_kl, "smoothing.pad_column_excluded"),
    ("label_smoothed_cross_entropy", make_smoothing("target_not_discounted"), "smoothing.target_not_discounted"),
    ("label_smoothed_cross_entropy", make_smoothing("target_set_to_one"), "smoothing.target_not_discounted"),
    ("label_smoothed_cross_entropy", make_smoothing("ignore_zero"), "smoothing.ignore_index_hardcoded"),
    ("label_smoothed_cross_entropy", ignoring(smoothing_by_pytorch, ignore_index=0),
     "smoothing.ignore_index_hardcoded"),
    ("noam_lr", make_noam("step_zero"), "noam.step_zero"),
    ("noam_lr", make_noam("step_zero_numpy"), "noam.step_zero"),
    ("noam_lr", make_noam("min_max_swapped"), "noam.min_max_swapped"),
    ("noam_lr", make_noam("no_d_model_scale"), "noam.no_d_model_scale"),
    ("noam_lr", make_noam("factor_ignored"), "noam.factor_ignored"),
    ("noam_lr", ignoring(noam_if_else, factor=1.0), "noam.factor_ignored"),
    ("beam_search", make_beam_search("no_length_penalty"), "beam.no_length_penalty"),
    ("beam_search", make_beam_search("penalty_on_unfinished"), "beam.penalty_on_unfinished"),
    ("beam_search", make_beam_search("continues_after_eos"), "beam.continues_after_eos"),
    ("beam_search", make_beam_search("length_counts_bos"), "beam.length_counts_bos"),
    ("beam_search", make_beam_search("returns_bos"), "beam.returns_bos"),
    ("beam_search", make_beam_search("dropout_on"), "beam.dropout_on"),
    ("beam_search", make_beam_search("stops_at_first_finished"), "beam.stops_at_first_finished"),
    ("beam_search", make_beam_search("no_early_stop"), "beam.searches_past_stop"),
    ("beam_search", beam_search_keeping_finished, "beam.searches_past_stop"),
    ("corpus_bleu", make_corpus_bleu("no_clipping"), "bleu.no_clipping"),
    ("corpus_bleu", make_corpus_bleu("brevity_inverted"), "bleu.brevity_inverted"),
    ("corpus_bleu", make_corpus_bleu("no_brevity_penalty"), "bleu.no_brevity_penalty"),
    ("corpus_bleu", make_corpus_bleu("arithmetic_mean"), "bleu.arithmetic_mean"),
    ("corpus_bleu", make_corpus_bleu("sentence_average"), "bleu.sentence_average"),
    ("corpus_bleu", make_corpus_bleu("fraction_not_percent"), "bleu.fraction_not_percent"),
    ("corpus_bleu", make_corpus_bleu("arithmetic_mean_guarded"), "bleu.arithmetic_mean"),
    ("corpus_bleu", make_corpus_bleu("max_n_fixed"), "bleu.max_n_ignored"),
    ("corpus_bleu", ignoring(make_corpus_bleu(), max_n=4), "bleu.max_n_ignored"),
    ("label_smoothed_cross_entropy", make_smoothing("python_float"), "smoothing.python_float"),
    ("label_smoothed_cross_entropy", make_smoothing("detached"), "smoothing.detached"),
    ("label_smoothed_cross_entropy", make_smoothing("rebuilt"), "smoothing.detached"),
    ("beam_search", make_beam_search("mode_not_restored"), "beam.mode_not_restored"),
]

UNNAMED = [
    ("label_smoothed_cross_entropy", make_smoothing("no_check"), "should raise ValueError"),
]


def correct(api_names) -> list[tuple[str, object]]:
    """(API name, answer): the reference and the CORRECT answers of the exercises `api_names` (one part's tests)."""
    return [(name, answer) for name, answers in CORRECT.items() if name in api_names
            for answer in [getattr(solutions, name), *answers]]


def of(api_names, rows):
    """The rows of CORRECT's items, WRONG or UNNAMED whose API name is one of `api_names` (one part's tests)."""
    return [row for row in rows if row[0] in api_names]
