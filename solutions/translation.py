"""Reference for notebook 10 (translate): label smoothing, the 2017 schedule, beam search and corpus BLEU."""
from __future__ import annotations

import math
from collections import Counter

import torch
import torch.nn.functional as F

__all__ = ["label_smoothed_cross_entropy", "noam_lr", "beam_search", "corpus_bleu"]


def label_smoothed_cross_entropy(logits, targets, smoothing: float = 0.1, ignore_index: int = 0):
    """Mean over the kept positions of (1 - smoothing) * NLL(target) + smoothing * mean_v(-log p[v])."""
    if not 0.0 <= smoothing < 1.0:
        raise ValueError(f"smoothing must lie in [0, 1), got {smoothing}")
    log_p = F.log_softmax(logits, dim=-1)                                     # (N, V)
    keep = targets != ignore_index                                            # (N,)
    safe = targets.masked_fill(~keep, 0)                                      # any valid index where ignored
    nll = -log_p.gather(-1, safe[:, None]).squeeze(-1)                        # (N,)
    uniform = -log_p.mean(dim=-1)                                             # (N,): cross-entropy with 1/V
    per_position = (1.0 - smoothing) * nll + smoothing * uniform              # (N,)
    return per_position[keep].mean()


def noam_lr(step: int, d_model: int, warmup_steps: int, factor: float = 1.0) -> float:
    """The learning rate of Vaswani et al. (2017), section 5.3, at `step` (counted from 0 or 1: step 0 acts as 1)."""
    if warmup_steps < 1:
        raise ValueError(f"warmup_steps must be >= 1, got {warmup_steps}")
    s = max(step, 1)
    return factor * d_model ** -0.5 * min(s ** -0.5, s * warmup_steps ** -1.5)


def _ranking_score(score: float, length: int, length_penalty: float) -> float:
    """GNMT's length-normalised score: log-probability / ((5 + L) / 6) ** alpha."""
    return score / ((5 + length) / 6) ** length_penalty


@torch.no_grad()
def beam_search(model, src_ids, beam_size: int, max_len: int, bos_id: int = 2, eos_id: int = 3,
                length_penalty: float = 0.6) -> list[int]:
    """The best-ranked translation of one source sentence (1, S) under a beam of `beam_size` hypotheses."""
    if beam_size < 1:
        raise ValueError(f"beam_size must be >= 1, got {beam_size}")
    if src_ids.dim() != 2 or src_ids.size(0) != 1:
        raise ValueError(f"beam_search translates one sentence: src_ids must be (1, S), got {tuple(src_ids.shape)}")
    was_training = model.training
    model.eval()
    try:
        device = next(model.parameters()).device
        memory, src_mask = model.encode(src_ids.to(device))                  # (1, S, d), (1, 1, 1, S)
        beam: list[tuple[list[int], float]] = [([bos_id], 0.0)]
        finished: list[tuple[list[int], float]] = []
        for _ in range(max_len):
            ys = torch.tensor([tokens for tokens, _ in beam], device=device)  # (k, t)
            k = ys.size(0)
            logits = model.decode(ys, memory.expand(k, -1, -1), src_mask.expand(k, -1, -1, -1))[:, -1]  # (k, V)
            scores = torch.tensor([score for _, score in beam], dtype=torch.float64, device=device)
            scores = scores[:, None] + F.log_softmax(logits.double(), dim=-1)   # (k, V)
            # walking down stops once the beam is full; at most one <eos> extension per hypothesis comes first
            top = scores.flatten().topk(min(beam_size + k, scores.numel()))
            new_beam = []
            for score, index in zip(top.values.tolist(), top.indices.tolist()):
                row, token = divmod(index, scores.size(1))
                extended = (beam[row][0] + [token], score)
                if token == eos_id:
                    finished.append(extended)
                else:
                    new_beam.append(extended)
                    if len(new_beam) == beam_size:
                        break
            beam = new_beam
            if len(finished) >= beam_size or not beam:
                break
        else:
            finished.extend(beam)                                               # max_len reached: finish as is
        if not finished:                                                        # max_len == 0
            finished = beam
        best = max(finished, key=lambda hyp: _ranking_score(hyp[1], len(hyp[0]) - 1, length_penalty))
        return best[0][1:]
    finally:
        model.train(was_training)


def _ngrams(tokens: list[str], n: int) -> Counter:
    return Counter(tuple(tokens[i:i + n]) for i in range(len(tokens) - n + 1))


def corpus_bleu(hypotheses: list[list[str]], references: list[list[str]], max_n: int = 4) -> float:
    """Corpus BLEU in [0, 100]: clipped n-gram counts summed over the corpus, geometric mean, brevity penalty."""
    if len(hypotheses) != len(references):
        raise ValueError(f"{len(hypotheses)} hypotheses but {len(references)} references: one reference each")
    matches = [0] * max_n
    totals = [0] * max_n
    hyp_len = ref_len = 0
    for hyp, ref in zip(hypotheses, references):
        hyp_len += len(hyp)
        ref_len += len(ref)
        for n in range(1, max_n + 1):
            hyp_counts, ref_counts = _ngrams(hyp, n), _ngrams(ref, n)
            matches[n - 1] += sum(min(count, ref_counts[gram]) for gram, count in hyp_counts.items())
            totals[n - 1] += max(len(hyp) - n + 1, 0)
    if hyp_len == 0 or min(matches) == 0:
        return 0.0
    log_precision = sum(math.log(m / t) for m, t in zip(matches, totals)) / max_n
    brevity = 1.0 if hyp_len >= ref_len else math.exp(1.0 - ref_len / hyp_len)
    return 100.0 * brevity * math.exp(log_precision)
