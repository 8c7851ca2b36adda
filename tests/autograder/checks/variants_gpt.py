"""Student answers for testing the hidden checks of notebook 08 (GPT language model).

CORRECT answers are written differently from the reference (dict counting, the lowest-rank encoding loop, a byte
table built recursively, stacked slices, nll_loss on log-softmax, one window at a time, torch.topk, ...) and must
pass. WRONG answers each contain one known mistake, written the way a student would; `WRONG` maps each to the
catalogue id its check must name. Each part of the checks (bpe, model, data, training, sampling) has its test files in
both layers; `correct(apis)` and `wrong(apis)` pick its exercises' answers.
"""
from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn

import solutions
from solutions.encoder import EncoderBlock


# ================================================================================================== BPE
def _counts(ids, overlapping=True):
    counts = {}
    i = 0
    while i + 1 < len(ids):
        pair = (ids[i], ids[i + 1])
        counts[pair] = counts.get(pair, 0) + 1
        # without overlap a run such as "aaa" counts (a, a) once
        i += 2 if not overlapping and i + 2 < len(ids) and (ids[i + 1], ids[i + 2]) == pair else 1
    return counts


def _replace(ids, pair, new_id, skip=True):
    out, i = [], 0
    while i < len(ids):
        if i < len(ids) - 1 and ids[i] == pair[0] and ids[i + 1] == pair[1]:
            out.append(new_id)
            i += 2 if skip else 1
        else:
            out.append(ids[i])
            i += 1
    return out


def make_train_bpe(ties="first", overlapping=True, skip=True, stop=True, first_id=256):
    def train_bpe(text, num_merges):
        ids = list(text.encode("utf-8"))
        merges = []
        for k in range(num_merges):
            counts = _counts(ids, overlapping)
            if not counts:
                break
            best = max(counts.values())
            if stop and best < 2:
                break
            if ties == "first":      # scan the sequence: the first position whose pair has the highest count
                pair = next(p for p in zip(ids, ids[1:]) if counts[p] == best)
            else:                    # a student's max over sorted pairs: the smallest pair wins ties
                pair = max(sorted(counts), key=lambda p: (counts[p], -p[0], -p[1]))
            if skip:
                ids = _replace(ids, pair, first_id + k)
            else:                    # "aaa" -> both positions replaced
                out = []
                for i in range(len(ids)):
                    if i + 1 < len(ids) and (ids[i], ids[i + 1]) == pair:
                        out.append(first_id + k)
                    elif i > 0 and (ids[i - 1], ids[i]) == pair:
                        continue
                    else:
                        out.append(ids[i])
                ids = out
            merges.append(pair)
        return merges

    return train_bpe


def bpe_encode_lowest_rank(text, merges):
    rank = {tuple(pair): k for k, pair in enumerate(merges)}
    ids = list(text.encode("utf-8"))
    while len(ids) >= 2:
        pair = min(zip(ids, ids[1:]), key=lambda p: rank.get(p, math.inf))
        if pair not in rank:
            break
        ids = _replace(ids, pair, 256 + rank[pair])
    return ids


def make_bpe_encode(order="learned", units="bytes"):
    def bpe_encode(text, merges):
        ids = list(text.encode("utf-8")) if units == "bytes" else [ord(c) for c in text]
        if order == "most_frequent":     # a student's loop: merge the commonest known pair until none is left
            while True:
                known = [p for p in zip(ids, ids[1:]) if p in [tuple(m) for m in merges]]
                if not known:
                    return ids
                pair = max(known, key=known.count)
                ids = _replace(ids, pair, 256 + [tuple(m) for m in merges].index(pair))
        ranked = list(enumerate(merges))
        for k, pair in (ranked[::-1] if order == "reversed" else ranked):
            ids = _replace(ids, tuple(pair), 256 + k)
        return ids

    return bpe_encode


def bpe_decode_recursive(ids, merges):
    def expand(i):
        return [i] if i < 256 else expand(merges[i - 256][0]) + expand(merges[i - 256][1])

    return bytes(b for i in ids for b in expand(i)).decode("utf-8", errors="replace")


def make_bpe_decode(how):
    def bpe_decode(ids, merges):
        table = {i: bytes([i]) for i in range(256)}
        for k, (a, b) in enumerate(merges):
            table[256 + k] = table[a] + table[b]
        if how == "per_token":
            return "".join(table[i].decode("utf-8", errors="replace") for i in ids)
        return "".join(chr(b) for i in ids for b in table[i])

    return bpe_decode


# ================================================================================================== GPT
class StudentGPT(nn.Module):
    """A GPT written with F.embedding, an explicit position slice and a tril mask; MISTAKE switches one thing."""

    MISTAKE = None

    def __init__(self, vocab_size, d_model=128, num_heads=4, d_ff=512, num_layers=4, max_len=256, dropout=0.0):
        super().__init__()
        self.max_len = max_len
        self.d_model = d_model
        self.token_embedding = solutions.TokenEmbedding(vocab_size, d_model)
        self.position_embedding = solutions.LearnedPositionalEmbedding(max_len, d_model)
        if self.MISTAKE != "position_init":
            with torch.no_grad():
                self.position_embedding.embedding.weight.normal_(0.0, d_model ** -0.5)
        self.drop = nn.Dropout(dropout)
        norm_first = self.MISTAKE != "post_norm"
        self.blocks = nn.ModuleList([EncoderBlock(d_model, num_heads, d_ff, dropout, norm_first=norm_first)
                                     for _ in range(num_layers)])
        self.norm = nn.LayerNorm(d_model)
        self.lm_head = nn.Linear(d_model, vocab_size, bias=False)
        if self.MISTAKE != "untied":
            self.lm_head.weight = self.token_embedding.weight

    def forward(self, ids):
        B, T = ids.shape
        if T > self.max_len:
            raise ValueError("too long")
        x = F.embedding(ids, self.token_embedding.weight)
        if self.MISTAKE == "scaled":
            x = x * math.sqrt(self.d_model)
        x = self.drop(x + self.position_embedding.embedding.weight[:T])
        mask = torch.tril(torch.ones(T, T, device=ids.device)).bool()
        if self.MISTAKE == "inverted":
            mask = mask.T
        for block in self.blocks:
            x = block(x, None if self.MISTAKE == "no_mask" else mask)
        return self.lm_head(x if self.MISTAKE == "no_final_norm" else self.norm(x))


def gpt_with(mistake):
    return type("GPT", (StudentGPT,), {"MISTAKE": mistake})


# ============================================================================================ training
def make_get_batch(mistake=None):
    def get_batch(data, block_size, batch_size, generator=None):
        high = len(data) - block_size - (1 if mistake == "start_range" else 0)
        ix = torch.randint(high, (batch_size,), generator=generator)
        x = torch.stack([data[i:i + block_size] for i in ix.tolist()])
        shift = {"no_shift": 0, "shift": 2}.get(mistake, 1)
        if mistake == "shift":
            y = torch.stack([data[min(i + 2, len(data) - block_size):][:block_size] for i in ix.tolist()])
        else:
            y = torch.stack([data[i + shift:i + shift + block_size] for i in ix.tolist()])
        return (y, x) if mistake == "swapped" else (x, y)

    return get_batch


def make_lm_loss(mistake=None):
    def lm_loss(logits, targets):
        V = logits.shape[-1]
        if mistake == "shifted_again":
            logits, targets = logits[:, :-1], targets[:, 1:]
        if mistake == "softmax_first":
            return F.cross_entropy(logits.reshape(-1, V).softmax(-1), targets.reshape(-1))
        nll = F.nll_loss(F.log_softmax(logits.reshape(-1, V), dim=-1), targets.reshape(-1), reduction="none")
        if mistake == "python_float":
            return nll.mean().item()
        return nll.sum() if mistake == "sum" else nll.mean()

    return lm_loss


def make_estimate_loss(mistake=None):
    def estimate_loss(model, data, block_size, device):
        if len(data) < block_size + 1:
            raise ValueError("data too short")
        was = model.training
        if mistake != "train_mode":
            model.eval()
        stop = len(data) - block_size - (1 if mistake == "last_window" else 0)
        step = 1 if mistake == "overlapping" else block_size
        losses = []
        with torch.no_grad():
            for s in range(0, stop, step):
                x = data[s:s + block_size].unsqueeze(0).to(device)
                y = data[s + 1:s + block_size + 1].unsqueeze(0).to(device)
                losses.append(solutions.lm_loss(model(x), y).item())
        if mistake != "mode_not_restored":
            model.train(was)
        return sum(losses) / len(losses)

    return estimate_loss


def make_lr_at(mistake=None):
    def lr_at(step, max_lr, warmup_steps, max_steps, min_lr=0.0):
        if warmup_steps < 0 or warmup_steps > max_steps:
            raise ValueError("bad schedule")
        floor = 0.0 if mistake == "min_lr_ignored" else min_lr
        if step < warmup_steps:
            return max_lr * (step if mistake == "warmup_off_by_one" else step + 1) / warmup_steps
        if step >= max_steps:
            return floor
        ratio = step / max_steps if mistake == "cosine_from_zero" else \
            (step - warmup_steps) / (max_steps - warmup_steps)
        return floor + (max_lr - floor) * (math.cos(math.pi * ratio) + 1) / 2

    return lr_at


# ============================================================================================ sampling
def make_sample_next_token(mistake=None):
    def sample_next_token(logits, temperature=1.0, top_k=None, generator=None):
        if temperature == 0:
            return torch.argmax(logits, dim=-1)
        if mistake == "multiplied":
            logits = logits * temperature
        elif mistake != "after_softmax":
            logits = logits / temperature
        if top_k is not None:
            k = min(top_k, logits.size(-1))
            if mistake == "k_minus_one" and k > 1:
                k -= 1
            values, indices = torch.topk(logits, k, dim=-1)
            if mistake == "no_ties":
                logits = torch.full_like(logits, -float("inf")).scatter(-1, indices, values)
            else:
                logits = torch.where(logits < values[:, [-1]], torch.full_like(logits, -float("inf")), logits)
        probs = F.softmax(logits, dim=-1)
        if mistake == "after_softmax":
            probs = probs / temperature
        if mistake == "no_generator":                       # torch's global generator instead of the one given
            generator = None
        return torch.multinomial(probs, num_samples=1, generator=generator).squeeze(-1)

    return sample_next_token


def make_generate(mistake=None):
    def generate(model, ids, max_new_tokens, temperature=1.0, top_k=None, generator=None):
        was = model.training
        if mistake != "train_mode":
            model.eval()
        for _ in range(max_new_tokens):
            with torch.no_grad():
                logits = model(ids[:, :model.max_len] if mistake == "keeps_first" else ids[:, -model.max_len:])
            position = 0 if mistake == "first_position" else -1
            nxt = solutions.sample_next_token(logits[:, position, :], temperature, top_k, generator)
            ids = torch.cat((ids, nxt.unsqueeze(1)), dim=1)
        if mistake != "mode_not_restored":
            model.train(was)
        return ids

    return generate


def make_train_step(mistake=None, style="loop"):
    """A student's train_step; style "loop" (a for loop over the groups, lm_loss, zero_grad(set_to_none=False),
    .item()) or "inline" (a comprehension, F.cross_entropy inline, model.zero_grad(), float(...))."""
    def train_step(model, optimizer, x, y, lr, grad_clip=1.0):
        if mistake == "mode_changed":
            model.train()
        if mistake != "lr_not_set":
            groups = optimizer.param_groups[:1] if mistake == "lr_first_group_only" else optimizer.param_groups
            if style == "loop":
                for group in groups:
                    group["lr"] = lr
            else:
                _ = [group.update(lr=lr) for group in groups]
        if mistake not in ("no_zero_grad", "zero_grad_after_backward"):
            if style == "loop":
                optimizer.zero_grad(set_to_none=False)
            else:
                model.zero_grad()
        if style == "loop":
            loss = solutions.lm_loss(model(x), y)
        else:
            logits = model(x)
            loss = F.cross_entropy(logits.view(-1, logits.shape[-1]), y.view(-1), reduction="mean")
        loss.backward()
        if mistake == "zero_grad_after_backward":
            optimizer.zero_grad()
        if grad_clip is not None and mistake not in ("no_clip", "clip_after_step"):
            torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm=grad_clip)
        if mistake != "no_step":
            optimizer.step()
        if mistake == "clip_after_step" and grad_clip is not None:
            torch.nn.utils.clip_grad_norm_(model.parameters(), grad_clip)
        if mistake == "returns_tensor":
            return loss
        if mistake == "loss_after_step":
            with torch.no_grad():
                return solutions.lm_loss(model(x), y).item()
        return loss.item() if style == "loop" else float(loss.detach())
    return train_step


CORRECT = {
    "train_bpe": [make_train_bpe()],
    "bpe_encode": [bpe_encode_lowest_rank, make_bpe_encode()],
    "bpe_decode": [bpe_decode_recursive],
    "GPT": [StudentGPT],
    "get_batch": [make_get_batch()],
    "lm_loss": [make_lm_loss()],
    "estimate_loss": [make_estimate_loss()],
    "lr_at": [make_lr_at()],
    "train_step": [make_train_step(), make_train_step(style="inline")],
    "sample_next_token": [make_sample_next_token()],
    "generate": [make_generate()],
}

# (API name, wrong answer, the catalogue id its check must name)
WRONG = [
    ("train_bpe", make_train_bpe(ties="smallest"), "bpe.ties"),
    ("train_bpe", make_train_bpe(overlapping=False), "bpe.count_without_overlap"),
    ("train_bpe", make_train_bpe(skip=False), "bpe.merge_overlapping"),
    ("train_bpe", make_train_bpe(stop=False), "bpe.no_early_stop"),
    ("train_bpe", make_train_bpe(first_id=257), "bpe.new_id"),
    ("bpe_encode", make_bpe_encode(order="reversed"), "bpe.encode_order"),
    ("bpe_encode", make_bpe_encode(order="most_frequent"), "bpe.encode_most_frequent"),
    ("bpe_encode", make_bpe_encode(units="characters"), "bpe.encode_characters"),
    ("bpe_decode", make_bpe_decode("per_token"), "bpe.decode_per_token"),
    ("bpe_decode", make_bpe_decode("latin1"), "bpe.decode_latin1"),
    ("GPT", gpt_with("untied"), "gpt.untied_head"),
    ("GPT", gpt_with("position_init"), "gpt.position_init"),
    ("GPT", gpt_with("no_mask"), "gpt.no_causal_mask"),
    ("GPT", gpt_with("inverted"), "gpt.mask_inverted"),
    ("GPT", gpt_with("scaled"), "gpt.embedding_scaled"),
    ("GPT", gpt_with("post_norm"), "gpt.post_norm"),
    ("GPT", gpt_with("no_final_norm"), "gpt.no_final_norm"),
    ("get_batch", make_get_batch("no_shift"), "get_batch.no_shift"),
    ("get_batch", make_get_batch("swapped"), "get_batch.swapped"),
    ("get_batch", make_get_batch("shift"), "get_batch.shift"),
    ("get_batch", make_get_batch("start_range"), "get_batch.start_range"),
    ("lm_loss", make_lm_loss("sum"), "lm_loss.sum"),
    ("lm_loss", make_lm_loss("softmax_first"), "lm_loss.softmax_first"),
    ("lm_loss", make_lm_loss("shifted_again"), "lm_loss.shifted_again"),
    ("lm_loss", make_lm_loss("python_float"), "lm_loss.python_float"),
    ("estimate_loss", make_estimate_loss("train_mode"), "estimate_loss.train_mode"),
    ("estimate_loss", make_estimate_loss("last_window"), "estimate_loss.last_window"),
    ("estimate_loss", make_estimate_loss("overlapping"), "estimate_loss.overlapping"),
    ("estimate_loss", make_estimate_loss("mode_not_restored"), "estimate_loss.mode_not_restored"),
    ("lr_at", make_lr_at("warmup_off_by_one"), "lr_at.warmup_off_by_one"),
    ("lr_at", make_lr_at("cosine_from_zero"), "lr_at.cosine_from_zero"),
    ("lr_at", make_lr_at("min_lr_ignored"), "lr_at.min_lr_ignored"),
    ("train_step", make_train_step("no_zero_grad"), "train_step.no_zero_grad"),
    ("train_step", make_train_step("zero_grad_after_backward"), "train_step.zero_grad_after_backward"),
    ("train_step", make_train_step("clip_after_step"), "train_step.clip_after_step"),
    ("train_step", make_train_step("no_clip"), "train_step.no_clip"),
    ("train_step", make_train_step("lr_not_set"), "train_step.lr_not_set"),
    ("train_step", make_train_step("lr_first_group_only"), "train_step.lr_first_group_only"),
    ("train_step", make_train_step("no_step"), "train_step.no_step"),
    ("train_step", make_train_step("returns_tensor"), "train_step.returns_tensor"),
    ("train_step", make_train_step("loss_after_step"), "train_step.loss_after_step"),
    ("train_step", make_train_step("mode_changed"), "train_step.mode_changed"),
    ("sample_next_token", make_sample_next_token("after_softmax"), "sample.temperature_after_softmax"),
    ("sample_next_token", make_sample_next_token("multiplied"), "sample.temperature_multiplied"),
    ("sample_next_token", make_sample_next_token("k_minus_one"), "sample.top_k_minus_one"),
    ("sample_next_token", make_sample_next_token("no_ties"), "sample.top_k_drops_ties"),
    ("sample_next_token", make_sample_next_token("no_generator"), "sample.generator_ignored"),
    ("generate", make_generate("first_position"), "generate.first_position"),
    ("generate", make_generate("keeps_first"), "generate.keeps_first_tokens"),
    ("generate", make_generate("train_mode"), "generate.train_mode"),
    ("generate", make_generate("mode_not_restored"), "generate.mode_not_restored"),
]


# ================================================================================= the parts of notebook 08's checks
# Each part of the checks (`coursekit.api.PART_MODULES`: gpt.bpe, gpt.model, ...) has its test file in both layers
# (tests/autograder/checks/gpt/test_<part>.py, tests/coursekit/checks/gpt/test_<part>.py); they read the answers of
# their part's exercises from here.
def correct(apis) -> list[tuple[str, object]]:
    """(API name, answer): the reference and the CORRECT answers of the exercises `apis`."""
    return [(name, answer) for name, answers in CORRECT.items() if name in apis
            for answer in [getattr(solutions, name), *answers]]


def wrong(apis) -> list[tuple[str, object, str]]:
    """The WRONG answers of the exercises `apis`."""
    return [entry for entry in WRONG if entry[0] in apis]
