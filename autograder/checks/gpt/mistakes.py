"""Known-mistake variants of notebook 08 (byte-level BPE, GPT, training helpers, sampling, generation).

`TABLE` = {mistake id: (variant, switches)}: the variant run with those switches on a check's own inputs gives that
mistake's answer (`kit.compare.from_table`); each check tries the rows of its variant in the table's order
(`ids_of(variant)`), the first match naming the mistake. `FORMS` = {mistake id: [switches, ...]}: other switches of the
same variant that make the same mistake, tried right after its row (`kit.compare.candidates`). With every switch off,
each variant is the reference.
"""
from __future__ import annotations

import math
from collections import Counter

import torch
import torch.nn.functional as F


def merge_pair(ids, pair, new_id):
    """`ids` with every occurrence of `pair` replaced by `new_id`, left to right (a merged pair is not looked at
    again: 'aaa' -> [Z, a])."""
    out, i = [], 0
    while i < len(ids):
        if i + 1 < len(ids) and (ids[i], ids[i + 1]) == tuple(pair):
            out.append(new_id)
            i += 2
        else:
            out.append(ids[i])
            i += 1
    return out


def _merge_every_position(ids, pair, new_id):
    """The replacement without skipping the pair's second element: 'aaa' -> [Z, Z, a] (overlapping merges)."""
    out = []
    for i in range(len(ids)):
        if i + 1 < len(ids) and (ids[i], ids[i + 1]) == tuple(pair):
            out.append(new_id)
        elif i > 0 and (ids[i - 1], ids[i]) == tuple(pair):
            continue
        else:
            out.append(ids[i])
    return out


def bpe_train_variant(text, num_merges, ties="first", count="overlapping", merge="left_to_right",
                      stop=True, first_id=256):
    """train_bpe with one switch changed: ties "first" | "smallest" | "largest" | "last"; count "overlapping" |
    "without_overlap"; merge "left_to_right" | "every_position"; stop (at a highest count below 2); first_id."""
    ids = list(text.encode("utf-8"))
    merges = []
    for k in range(num_merges):
        if count == "overlapping":
            counts = Counter(zip(ids, ids[1:]))
        else:
            counts, i = Counter(), 0
            while i + 1 < len(ids):
                pair = (ids[i], ids[i + 1])
                counts[pair] += 1
                i += 2 if i + 2 < len(ids) and (ids[i + 1], ids[i + 2]) == pair else 1
        if not counts:
            break
        best = max(counts.values())
        tied = [pair for pair in counts if counts[pair] == best]     # in order of first occurrence
        pair = {"first": tied[0], "last": tied[-1], "smallest": min(tied), "largest": max(tied)}[ties]
        if stop and best < 2:
            break
        new_id = first_id + k
        ids = _merge_every_position(ids, pair, new_id) if merge == "every_position" else merge_pair(ids, pair, new_id)
        merges.append(pair)
    return merges


def bpe_encode_variant(text, merges, order="learned", units="bytes"):
    """bpe_encode with the merges applied in another order ("reversed"; "most_frequent": repeatedly the present merge
    whose pair is the most frequent, ties to the earliest learned) or on characters instead of bytes."""
    ids = list(text.encode("utf-8")) if units == "bytes" else [ord(c) for c in text]
    if order == "most_frequent":
        rank = {tuple(pair): k for k, pair in enumerate(merges)}
        while True:
            counts = Counter(pair for pair in zip(ids, ids[1:]) if pair in rank)
            if not counts:
                return ids
            pair = max(counts, key=lambda p: (counts[p], -rank[p]))
            ids = merge_pair(ids, pair, 256 + rank[pair])
    ranked = list(enumerate(merges))
    if order == "reversed":
        ranked = ranked[::-1]
    for k, pair in ranked:
        ids = merge_pair(ids, tuple(pair), 256 + k)
    return ids


def bpe_decode_variant(ids, merges, how="joined"):
    """bpe_decode with each token's bytes decoded on their own (how="per_token") or the joined bytes decoded as
    Latin-1 ("latin1"); "joined": the reference, the joined bytes decoded once as UTF-8."""
    pieces = [bytes([b]) for b in range(256)]
    for first, second in merges:
        pieces.append(pieces[first] + pieces[second])
    if how == "per_token":
        return "".join(pieces[i].decode("utf-8", errors="replace") for i in ids)
    joined = b"".join(pieces[i] for i in ids)
    return joined.decode("latin-1") if how == "latin1" else joined.decode("utf-8", errors="replace")


def gpt_variant(model, ids, causal=True, scale=False, norm_first=True, final_norm=True, future_only=False):
    """The reference GPT's forward with one switch changed (a known mistake)."""
    from solutions.attention import make_causal_mask

    size = ids.size(1)
    x = model.token_embedding(ids) * (math.sqrt(model.token_embedding.weight.shape[1]) if scale else 1.0)
    x = model.drop(model.position_embedding(x))
    mask = make_causal_mask(size, ids.device)
    if future_only:
        mask = mask.transpose(0, 1)
    for block in model.blocks:
        saved, block.norm_first = block.norm_first, norm_first
        try:
            x = block(x, mask if causal else None)
        finally:
            block.norm_first = saved
    return model.lm_head(model.norm(x) if final_norm else x)


def lm_loss_variant(logits, targets, reduction="mean", softmax_first=False, shift_again=False):
    """lm_loss with one switch changed: summed (reduction="sum"), a softmax before the cross-entropy, or logits and
    targets shifted once more."""
    if shift_again:
        logits, targets = logits[:, :-1], targets[:, 1:]
    flat = logits.reshape(-1, logits.size(-1))
    return F.cross_entropy(flat.softmax(-1) if softmax_first else flat, targets.reshape(-1), reduction=reduction)


def window_starts(n: int, block_size: int, last_window=True, overlapping=False) -> list[int]:
    """The starts of estimate_loss's windows in `n` tokens: every block_size tokens while a window of block_size + 1
    tokens fits; without the last one that fits (last_window=False); or every position (overlapping)."""
    if overlapping:
        return list(range(n - block_size))
    return list(range(0, n - block_size - (0 if last_window else 1), block_size))


def estimate_loss_variant(model, data, block_size, device, training=False, last_window=True, overlapping=False):
    """estimate_loss with one switch changed: in training mode, without the last window, or overlapping windows."""
    starts = window_starts(len(data), block_size, last_window, overlapping)
    return loss_over_windows(model, data, block_size, starts, device, training)


def loss_over_windows(model, data, block_size, starts, device, training=False) -> float:
    """Mean next-token loss of `model` over the windows at `starts` (every token weighted equally)."""
    model.train(training)
    total, count = 0.0, 0
    with torch.no_grad():
        for s in starts:
            x = data[s:s + block_size][None].to(device)
            y = data[s + 1:s + block_size + 1][None].to(device)
            logits = model(x)
            total += float(F.cross_entropy(logits.reshape(-1, logits.size(-1)), y.reshape(-1), reduction="sum"))
            count += y.numel()
    return total / count


def lr_variant(step, max_lr, warmup, max_steps, min_lr=0.0, warmup_plus_one=True, cosine_from_zero=False,
               use_min=True):
    floor = min_lr if use_min else 0.0
    if step < warmup:
        return max_lr * ((step + 1) if warmup_plus_one else step) / warmup
    if step >= max_steps:
        return floor
    progress = step / max_steps if cosine_from_zero else (step - warmup) / (max_steps - warmup)
    return floor + 0.5 * (max_lr - floor) * (1 + math.cos(math.pi * progress))


def tempered(logits: torch.Tensor, temperature: float, top_k, how="right") -> torch.Tensor:
    """The distribution sample_next_token draws from, right or with one mistake (how)."""
    if how == "after_softmax":
        return torch.softmax(logits, -1)                           # dividing probabilities changes nothing
    scaled = logits * temperature if how == "multiplied" else logits / temperature
    if top_k is not None and top_k < scaled.size(-1):
        order = scaled.sort(-1, descending=True)
        if how == "k_minus_one":
            kth = order.values[..., top_k - 2:top_k - 1]
            scaled = scaled.masked_fill(scaled < kth, float("-inf"))
        elif how == "no_ties":
            keep = torch.zeros_like(scaled, dtype=torch.bool).scatter(-1, order.indices[..., :top_k], True)
            scaled = scaled.masked_fill(~keep, float("-inf"))
        else:
            kth = order.values[..., top_k - 1:top_k]
            scaled = scaled.masked_fill(scaled < kth, float("-inf"))
    return torch.softmax(scaled, -1)


def generate_variant(model, ids, max_new_tokens, crop=True, position=-1, training=False, sample=False):
    """Generation with one mistake: no cropping to max_len (crop=False) or the first max_len tokens kept
    (crop="first"), the logits of another position, training mode. Greedy, or with `sample` drawn as the defaults
    draw (temperature 1, no top-k: one torch.multinomial call per step from torch's global generator)."""
    model.train(training)
    with torch.no_grad():
        for _ in range(max_new_tokens):
            context = ids[:, :model.max_len] if crop == "first" else ids[:, -model.max_len:] if crop else ids
            logits = model(context)[:, position]
            if sample:
                next_id = torch.multinomial(torch.softmax(logits / 1.0, dim=-1), 1).squeeze(-1)
            else:
                next_id = logits.argmax(-1)
            ids = torch.cat([ids, next_id[:, None]], dim=1)
    return ids


def train_step_variant(model, optimizer, x, y, lr, grad_clip=1.0, lr_groups="all", zero_grad="before",
                       clip="before_step", step=True, result="before"):
    """One training step with one switch changed (a known mistake); returns what that step would return.

    lr_groups "all" | "first" | "none"; zero_grad "before" | "none" | "after_backward" (between the backward pass
    and the step); clip "before_step" | "after_step" | "none"; step; result "before" (loss.item() of the batch
    before the step) | "after" (the batch's loss recomputed after the step) | "tensor" (the loss tensor itself)."""
    groups = {"all": optimizer.param_groups, "first": optimizer.param_groups[:1], "none": []}[lr_groups]
    for group in groups:
        group["lr"] = lr
    if zero_grad == "before":
        optimizer.zero_grad(set_to_none=True)
    logits = model(x)
    loss = F.cross_entropy(logits.reshape(-1, logits.size(-1)), y.reshape(-1))
    loss.backward()
    if zero_grad == "after_backward":
        optimizer.zero_grad(set_to_none=True)
    if clip == "before_step" and grad_clip is not None:
        torch.nn.utils.clip_grad_norm_(model.parameters(), grad_clip)
    if step:
        optimizer.step()
    if clip == "after_step" and grad_clip is not None:
        torch.nn.utils.clip_grad_norm_(model.parameters(), grad_clip)
    if result == "after":
        with torch.no_grad():
            logits = model(x)
            return F.cross_entropy(logits.reshape(-1, logits.size(-1)), y.reshape(-1)).item()
    return loss if result == "tensor" else loss.item()


TABLE = {
    # train_bpe: bpe_train_variant(text, num_merges, **switches), matched on every case at once
    "bpe.ties": (bpe_train_variant, {"ties": "smallest"}),
    "bpe.count_without_overlap": (bpe_train_variant, {"count": "without_overlap"}),
    "bpe.merge_overlapping": (bpe_train_variant, {"merge": "every_position"}),
    "bpe.no_early_stop": (bpe_train_variant, {"stop": False}),
    "bpe.new_id": (bpe_train_variant, {"first_id": 257}),
    # bpe_encode: bpe_encode_variant(text, merges, **switches)
    "bpe.encode_order": (bpe_encode_variant, {"order": "reversed"}),
    "bpe.encode_most_frequent": (bpe_encode_variant, {"order": "most_frequent"}),
    "bpe.encode_characters": (bpe_encode_variant, {"units": "characters"}),
    # bpe_decode: bpe_decode_variant(ids, merges, **switches)
    "bpe.decode_per_token": (bpe_decode_variant, {"how": "per_token"}),
    "bpe.decode_latin1": (bpe_decode_variant, {"how": "latin1"}),
    # GPT: gpt_variant(reference model, ids, **switches)
    "gpt.no_causal_mask": (gpt_variant, {"causal": False}),
    "gpt.mask_inverted": (gpt_variant, {"future_only": True}),
    "gpt.embedding_scaled": (gpt_variant, {"scale": True}),
    "gpt.post_norm": (gpt_variant, {"norm_first": False}),
    "gpt.no_final_norm": (gpt_variant, {"final_norm": False}),
    # lm_loss: lm_loss_variant(logits, targets, **switches)
    "lm_loss.sum": (lm_loss_variant, {"reduction": "sum"}),
    "lm_loss.softmax_first": (lm_loss_variant, {"softmax_first": True}),
    "lm_loss.shifted_again": (lm_loss_variant, {"shift_again": True}),
    # estimate_loss: estimate_loss_variant(model, data, block_size, device, **switches)
    "estimate_loss.train_mode": (estimate_loss_variant, {"training": True}),
    "estimate_loss.last_window": (estimate_loss_variant, {"last_window": False}),
    "estimate_loss.overlapping": (estimate_loss_variant, {"overlapping": True}),
    # lr_at: lr_variant(step, max_lr, warmup_steps, max_steps, min_lr, **switches)
    "lr_at.warmup_off_by_one": (lr_variant, {"warmup_plus_one": False}),
    "lr_at.cosine_from_zero": (lr_variant, {"cosine_from_zero": True}),
    "lr_at.min_lr_ignored": (lr_variant, {"use_min": False}),
    # train_step: train_step_variant(model, optimizer, x, y, lr[, grad_clip], **switches), over a run of steps
    "train_step.no_zero_grad": (train_step_variant, {"zero_grad": "none"}),
    "train_step.zero_grad_after_backward": (train_step_variant, {"zero_grad": "after_backward"}),
    "train_step.clip_after_step": (train_step_variant, {"clip": "after_step"}),
    "train_step.no_clip": (train_step_variant, {"clip": "none"}),
    "train_step.lr_not_set": (train_step_variant, {"lr_groups": "none"}),
    "train_step.lr_first_group_only": (train_step_variant, {"lr_groups": "first"}),
    "train_step.no_step": (train_step_variant, {"step": False}),
    "train_step.loss_after_step": (train_step_variant, {"result": "after"}),
    # sample_next_token: tempered(logits, temperature, top_k, **switches), the distribution drawn from
    "sample.temperature_after_softmax": (tempered, {"how": "after_softmax"}),
    "sample.temperature_multiplied": (tempered, {"how": "multiplied"}),
    "sample.top_k_minus_one": (tempered, {"how": "k_minus_one"}),
    "sample.top_k_drops_ties": (tempered, {"how": "no_ties"}),
    # generate: generate_variant(model, ids, max_new_tokens, sample=True, **switches), drawn as the defaults draw
    "generate.first_position": (generate_variant, {"position": 0}),
    "generate.keeps_first_tokens": (generate_variant, {"crop": "first"}),
    "generate.train_mode": (generate_variant, {"training": True}),
}
FORMS = {
    "bpe.ties": [{"ties": "last"}, {"ties": "largest"}],          # ties broken by the last or the largest pair
    "bpe.new_id": [{"first_id": 255}],                           # the k-th merge numbered 255 + k
}


def ids_of(variant) -> tuple[str, ...]:
    """The ids of TABLE's rows that run `variant`, in table order."""
    return tuple(mistake_id for mistake_id, (row_variant, _switches) in TABLE.items() if row_variant is variant)
