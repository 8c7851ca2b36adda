"""Public self-checks for notebook 08 (byte-level BPE, the GPT, training helpers, sampling and generation).

BPE is checked on small texts worked out by hand and by round trips; the GPT's wiring is composed here from your
module's own submodules (embeddings, blocks, norm, head) and its causality tested by changing a future token;
`get_batch`, `lm_loss`, `estimate_loss` and `lr_at` are recomputed directly, `train_step` against steps written out
here; sampling is checked by how often each token is drawn. Shapes: B batch, T length, V vocabulary.
"""
from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn

from coursekit.checks.toolkit import (expect_close, expect_shape, expect_type, fail, first_matching_hint,
                                     mistake_hint, passed, run, uses_parts)
from coursekit.criteria import argument, edge_case

_A, _B, _C, _D = (ord(c) for c in "abcd")


# -------------------------------------------------------------------------------------------------------- BPE

def _as_pairs(merges, name):
    if not isinstance(merges, list) or not all(isinstance(p, tuple) and len(p) == 2 for p in merges):
        fail(f"{name} should return a list of (int, int) tuples, got {type(merges).__name__} "
             f"{str(merges)[:60]}.", "append each merged pair as a tuple: merges.append(pair)")
    return merges


def check_train_bpe(train_bpe) -> None:
    # "aaabdaaabac": aa occurs 4 times -> 256; then (256, a) and (a, b) both occur twice and (256, a) comes first
    # -> 257; then (257, b) -> 258; then every pair occurs once, so training stops after 3 merges.
    got = _as_pairs(run("train_bpe", train_bpe, "aaabdaaabac", 10), "train_bpe")
    worked = [(_A, _A), (256, _A), (257, _B)]
    if got != worked:
        hint = None
        if len(got) > 3 and got[:3] == worked:
            hint = mistake_hint("bpe.no_early_stop", "stop when the highest count is below 2.")
        elif got[:1] == [(_A, _A)] and len(got) > 1 and got[1] == (256, 256):
            hint = mistake_hint("bpe.merge_overlapping", "'aaab' becomes [256, 97, 98].")
        elif got[:1] == [(_A, _A)] and len(got) > 1 and got[1] == (_A, _B):
            hint = mistake_hint("bpe.ties", "(256, 97) occurs first in the sequence after the first merge.")
        elif got[:1] == [(_A, _A)] and len(got) > 1 and got[1][0] != 256:
            hint = mistake_hint("bpe.new_id", "the k-th merge (k = 0, 1, ...) creates token 256 + k.")
        fail(f"train_bpe('aaabdaaabac', 10) should give {worked}, got {got}.", hint)
    # ties: "cdcd abab" -> (c, d) comes first although (a, b) is smaller
    got = _as_pairs(run("train_bpe", train_bpe, "cdcd abab", 1), "train_bpe")
    if got != [(_C, _D)]:
        fail(f"train_bpe('cdcd abab', 1) should give [(99, 100)], got {got}.",
             mistake_hint("bpe.ties", "both pairs occur twice; (c, d) appears first."))
    # overlapping counts: in "aaa-bcbc" aa is counted twice (positions 0 and 1), as often as bc; aa comes first
    got = _as_pairs(run("train_bpe", train_bpe, "aaa-bcbc", 1), "train_bpe")
    if got != [(_A, _A)]:
        fail(f"train_bpe('aaa-bcbc', 1) should give [(97, 97)], got {got}.",
             mistake_hint("bpe.count_without_overlap", "then aa and bc tie with 2 and aa comes first."))
    # "aaaa" -> [256, 256] after the first merge (left to right without overlap), then nothing repeats
    got = _as_pairs(run("train_bpe", train_bpe, "aaaa", 5), "train_bpe")
    if got != [(_A, _A)]:
        fail(f"train_bpe('aaaa', 5) should give [(97, 97)], got {got}.",
             mistake_hint("bpe.merge_overlapping", "after merging, 'aaaa' is [256, 256] and (256, 256) occurs once.")
             if len(got) > 1 else None)
    if run("train_bpe", train_bpe, "abcdef", 3) != []:
        fail("train_bpe('abcdef', 3) should give [] (no pair occurs twice).",
             mistake_hint("bpe.no_early_stop", "stop when the highest count is below 2."))
    with edge_case("train_bpe.empty_text"):
        for text in ("", "a"):
            got = run("train_bpe", train_bpe, text, 3)
            if got != []:
                fail(f"train_bpe({text!r}, 3) should give [] (a text of fewer than two bytes has no pair), got "
                     f"{got}.", "stop as soon as there is no pair to count (an empty Counter has no max).")
    passed("train_bpe", "(a worked example, ties, overlapping pairs, early stop, a text without pairs)")


def _lowest_rank_encode(text, merges):
    """An independent encoder: repeatedly merge the present pair with the lowest rank."""
    rank = {tuple(pair): k for k, pair in enumerate(merges)}
    ids = list(text.encode("utf-8"))
    while len(ids) >= 2:
        pair = min(zip(ids, ids[1:]), key=lambda p: rank.get(p, math.inf))
        if pair not in rank:
            break
        out, i = [], 0
        while i < len(ids):
            if i + 1 < len(ids) and (ids[i], ids[i + 1]) == pair:
                out.append(256 + rank[pair])
                i += 2
            else:
                out.append(ids[i])
                i += 1
        ids = out
    return ids


_MERGES = [(_A, _A), (256, _A), (257, _B), (0xC3, 0xA9), (ord("t"), ord("h")), (260, ord("e"))]  # ..., "é", "the"
_TEXTS = ("aaabdaaabac", "the café", "naïve café — 日本語", "", "aaaaa")


def check_bpe_encode(bpe_encode) -> None:
    for text in _TEXTS:
        got = run("bpe_encode", bpe_encode, text, _MERGES)
        expect_type(got, list, f"bpe_encode({text!r}, merges)", "return a list of ints.")
        expected = _lowest_rank_encode(text, _MERGES)
        if got != expected:
            hint = None
            if any(ord(c) in got for c in text if ord(c) > 127):
                hint = mistake_hint("bpe.encode_characters", "start from list(text.encode('utf-8')).")
            elif text == "aaabdaaabac":
                hint = mistake_hint("bpe.encode_order", "apply merge 0 first, then merge 1, ...")
            fail(f"bpe_encode({text!r}, merges) should give {expected}, got {got}.", hint)
    # the order learned, not the frequency in the text: (b, c) was learned before (a, b), which is commoner here
    merges = [(_B, _C), (_A, _B), (_C, _A)]
    got = run("bpe_encode", bpe_encode, "abcabab", merges)
    expected = _lowest_rank_encode("abcabab", merges)                     # [97, 256, 257, 257]
    if got != expected:
        fail(f"bpe_encode('abcabab', {merges}) should give {expected}, got {got}.",
             mistake_hint("bpe.encode_most_frequent", "merge 0 first wherever it occurs, then merge 1, ...")
             if got == [257, 99, 257, 257] else None)
    passed("bpe_encode", "(ASCII and non-ASCII texts, merges applied in the order learned)")


def check_bpe_decode(bpe_decode) -> None:
    for text in _TEXTS:
        ids = _lowest_rank_encode(text, _MERGES)
        got = run("bpe_decode", bpe_decode, ids, _MERGES)
        if got != text:
            hint = None
            if "\ufffd" in str(got):
                hint = mistake_hint("bpe.decode_per_token", "b''.join(...) then .decode('utf-8', errors='replace').")
            elif isinstance(got, str) and len(got) > len(text):
                hint = mistake_hint("bpe.decode_latin1")
            fail(f"bpe_decode(bpe_encode({text!r}, merges), merges) should give back {text!r}, got {got!r}.", hint)
    got = run("bpe_decode", bpe_decode, [0xE6, 0x97], [])
    if got != "\ufffd":
        fail(f"bpe_decode([0xE6, 0x97], []) (half of a character) should give '\\ufffd', got {got!r}.",
             "decode with errors='replace' so that invalid bytes never raise.")
    passed("bpe_decode", "(round trips, including characters that span several bytes)")


# -------------------------------------------------------------------------------------------------------- GPT

def _randomize(module: nn.Module, seed: int) -> None:
    generator = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, parameter in sorted(module.named_parameters()):
            parameter.copy_(torch.randn(parameter.shape, generator=generator) * 0.3
                            + (1.0 if "norm" in name and name.endswith("weight") else 0.0))


def check_gpt(GPT) -> None:
    vocab, d_model, heads, d_ff, layers, max_len = 11, 8, 2, 16, 2, 12
    model = run("GPT", GPT, vocab, d_model, heads, d_ff, layers, max_len)
    expect_type(model, nn.Module, "GPT(...)", "subclass nn.Module.")
    for sub in ("token_embedding", "position_embedding", "drop", "blocks", "norm", "lm_head"):
        if not isinstance(getattr(model, sub, None), nn.Module):
            fail(f"GPT needs a submodule `{sub}`.", "use exactly the names of the exercise.")
    if getattr(model, "max_len", None) != max_len:
        fail(f"GPT(..., max_len={max_len}).max_len should be {max_len}, got {getattr(model, 'max_len', None)}.")
    if len(model.blocks) != layers or not all(getattr(b, "norm_first", None) is True for b in model.blocks):
        fail(f"GPT.blocks should hold {layers} EncoderBlocks with norm_first=True.",
             mistake_hint("gpt.post_norm") if len(model.blocks) == layers else None)
    if model.lm_head.weight is not model.token_embedding.weight:
        fail("lm_head.weight is not the token embedding's weight.",
             mistake_hint("gpt.untied_head", "write self.lm_head.weight = self.token_embedding.weight."))
    big = run("GPT", GPT, 50, 64, 4, 32, 1, 256)
    std = big.position_embedding.embedding.weight.std().item()
    if not 0.8 * 64 ** -0.5 < std < 1.2 * 64 ** -0.5:
        fail(f"GPT(50, d_model=64, ...): the position table has std {std:.3f}, expected about {64 ** -0.5:.3f}.",
             mistake_hint("gpt.position_init", "nn.init.normal_(self.position_embedding.embedding.weight, "
                                               "std=d_model ** -0.5)."))
    model.eval()
    _randomize(model, 8)
    ids = torch.tensor([[1, 5, 2, 9, 3, 3, 7], [4, 0, 10, 6, 8, 2, 1]])                      # (B=2, T=7)
    with torch.no_grad():
        out = run("GPT.forward", model, ids)
        expect_type(out, torch.Tensor, "GPT's output")
        expect_shape(out, (2, 7, vocab), "GPT's output (logits)")
        causal = torch.ones(7, 7, dtype=torch.bool).tril()

        def compose(scale=1.0, mask=causal, final=True):
            x = model.position_embedding(model.token_embedding(ids) * scale)
            for block in model.blocks:
                x = block(x, mask)
            return model.lm_head(model.norm(x) if final else x)

        expected = compose()
        hint = first_matching_hint(out, [
            (compose(mask=None), mistake_hint("gpt.no_causal_mask", "pass make_causal_mask(T, ids.device) to every "
                                                                    "block.")),
            (compose(mask=causal.T), mistake_hint("gpt.mask_inverted")),
            (compose(scale=math.sqrt(d_model)), mistake_hint("gpt.embedding_scaled")),
            (compose(final=False), mistake_hint("gpt.no_final_norm", "apply self.norm before self.lm_head.")),
        ])
        expect_close(out, expected, "GPT's logits", hint)
        # causality: changing the token at position 4 changes no logit before it
        changed = ids.clone()
        changed[:, 4] = (changed[:, 4] + 1) % vocab
        after = model(changed)
        if not torch.allclose(after[:, :4], out[:, :4], atol=1e-5):
            fail("changing the token at position 4 changed the logits at positions 0..3: future tokens leak.",
                 mistake_hint("gpt.no_causal_mask"))
    with edge_case("GPT.too_long"):
        try:
            model(torch.zeros(1, max_len + 1, dtype=torch.long))
        except ValueError:
            pass
        except Exception as error:  # noqa: BLE001
            fail(f"GPT on {max_len + 1} tokens (max_len={max_len}) should raise ValueError, got "
                 f"{type(error).__name__}.", "check T > self.max_len at the start of forward.")
        else:
            fail(f"GPT on {max_len + 1} tokens (max_len={max_len}) should raise ValueError.")
    with argument("GPT.dropout"):  # the same weights with dropout=0.5: eval mode as before, training mode differs
        dropped = run("GPT", GPT, vocab, d_model, heads, d_ff, layers, max_len, 0.5)
        run("load_state_dict", dropped.load_state_dict, model.state_dict())
        with torch.no_grad():
            same = torch.allclose(run("GPT.forward", dropped.eval(), ids), out, atol=1e-5)
            torch.manual_seed(0)
            noisy = run("GPT.forward", dropped.train(), ids)
        if not same:
            fail("GPT(..., dropout=0.5) in eval mode gives other logits than the same weights with dropout=0.0.",
                 "dropout must act in training mode only (nn.Dropout does that by itself).")
        if torch.allclose(noisy, out, atol=1e-5):
            fail("GPT(..., dropout=0.5) in training mode gives the logits of eval mode: nothing is dropped.",
                 "pass dropout on to self.drop = nn.Dropout(dropout) and to every EncoderBlock.")
    passed("GPT", "(tied head, pre-norm blocks, causal: a future token changes no earlier logit)")


# ----------------------------------------------------------------------------------------------------- training

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
        fail("y equals x.", mistake_hint("get_batch.no_shift", "y[b] = data[s_b + 1 : s_b + block_size + 1]."))
    if torch.equal(y, expected_x):
        fail("x and y look swapped.", mistake_hint("get_batch.swapped"))
    if not torch.equal(y, x + 1):
        fail("y should be x shifted by one token: y[b, t] = data[s_b + t + 1].",
             mistake_hint("get_batch.shift", "targets start one token after the inputs."))
    if not torch.equal(x, expected_x):
        source = "torch's generator seeded with torch.manual_seed(1)" if generator is None else "this generator"
        fail(f"the windows start at {(x[:, 0] - 100).tolist()}, expected {starts.tolist()} from {source}.",
             mistake_hint("get_batch.start_range",
                          "s = torch.randint(len(data) - block_size, (batch_size,), generator=generator).")
             if generator is None else "pass the generator on: torch.randint(len(data) - block_size, "
                                       "(batch_size,), generator=generator).")


def check_lm_loss(lm_loss) -> None:
    generator = torch.Generator().manual_seed(2)
    logits, targets = torch.randn(2, 3, 5, generator=generator), torch.randint(5, (2, 3), generator=generator)
    got = run("lm_loss", lm_loss, logits, targets)
    if isinstance(got, (int, float)):
        fail(f"lm_loss should return a scalar tensor, got a Python {type(got).__name__}.",
             mistake_hint("lm_loss.python_float", "return F.cross_entropy(...) itself, without .item()."))
    expect_type(got, torch.Tensor, "lm_loss's result")
    log_probs = logits.log_softmax(-1)
    expected = -torch.stack([log_probs[b, t, targets[b, t]] for b in range(2) for t in range(3)]).mean()
    hint = first_matching_hint(got, [
        (expected * 6, mistake_hint("lm_loss.sum", "average over all B * T positions.")),
        (F.cross_entropy(logits.reshape(-1, 5).softmax(-1), targets.reshape(-1)), mistake_hint("lm_loss.softmax_first")),
        (F.cross_entropy(logits[:, :-1].reshape(-1, 5), targets[:, 1:].reshape(-1)),
         mistake_hint("lm_loss.shifted_again")),
    ])
    expect_close(got, expected, "lm_loss", hint)
    passed("lm_loss")


class _CountingModel(nn.Module):
    """A tiny causal language model with dropout: it records (training, grad enabled) of every call."""

    def __init__(self):
        super().__init__()
        generator = torch.Generator().manual_seed(3)
        self.table = nn.Parameter(torch.randn(7, 7, generator=generator))
        self.drop = nn.Dropout(0.5)
        self.max_len = 8
        self.calls = []

    def forward(self, ids):
        self.calls.append((self.training, torch.is_grad_enabled()))
        x = self.table[ids].cumsum(1) / torch.arange(1, ids.size(1) + 1, device=ids.device)[None, :, None]
        return self.drop(x)


def check_estimate_loss(estimate_loss) -> None:
    model = _CountingModel().train()
    data = torch.randint(7, (29,), generator=torch.Generator().manual_seed(4))                # N = 29, block 4
    got = run("estimate_loss", estimate_loss, model, data, 4, "cpu")
    if not isinstance(got, float):
        fail(f"estimate_loss should return a float, got {type(got).__name__}.", "return total / count as a float "
                                                                                 "(tensor.item()).")
    if not model.training:
        fail("estimate_loss left the model in eval mode.",
             mistake_hint("estimate_loss.mode_not_restored", "remember model.training and call model.train(it)."))
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
        (windows(range(0, 21, 4)), mistake_hint("estimate_loss.last_window", "a window fits while start + "
                                                                             "block_size + 1 <= len(data).")),
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
        if not isinstance(got, (int, float)) or not math.isclose(got, expected, rel_tol=1e-6):
            hint = None
            if step < 10 and isinstance(got, (int, float)) and math.isclose(got, 1e-3 * step / 10, abs_tol=1e-12):
                hint = mistake_hint("lr_at.warmup_off_by_one")
            elif min_lr and step == 55 and isinstance(got, (int, float)) and math.isclose(got, 5e-4, rel_tol=1e-6):
                hint = mistake_hint("lr_at.min_lr_ignored")
            elif step == 10 and isinstance(got, (int, float)) and got < 1e-3:
                hint = mistake_hint("lr_at.cosine_from_zero", "progress = (step - warmup_steps) / (max_steps - "
                                                              "warmup_steps).")
            fail(f"lr_at({step}, max_lr=1e-3, warmup_steps=10, max_steps=100{shown}) should be "
                 f"{expected:g}, got {got}.", hint)


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
    return (all(isinstance(r, float) and math.isclose(r, s, rel_tol=1e-5, abs_tol=1e-6)
                for r, s in zip(returns_a, returns_b))
            and all(torch.allclose(p, q, atol=1e-5) for p, q in zip(model_a.parameters(), model_b.parameters())))


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
            fail("train_step returned a tensor.", mistake_hint("train_step.returns_tensor", "return loss.item()."))
        if not isinstance(value, float):
            fail(f"train_step should return the loss as a Python float, got {type(value).__name__}.")
    expected = _steps(_hand_step(), plan=plan)
    if not _same(got, expected):
        grads = [p.grad for p in model.parameters()]
        last = 1.0 if plan[-1][1] == "default" else plan[-1][1]            # the last step's threshold
        clipped_grads = last is not None and all(g is not None for g in grads) and math.isclose(
            float(torch.cat([g.flatten() for g in grads]).norm()), last, rel_tol=1e-3)
        cleared = all(g is None or not bool(g.any()) for g in grads)      # no gradients left after the steps
        hint = None
        for flags, hint_of in (
                (dict(zero="none"), lambda: mistake_hint("train_step.no_zero_grad",
                                                         "optimizer.zero_grad() before loss.backward().")),
                (dict(step=False), lambda: mistake_hint("train_step.zero_grad_after_backward") if cleared
                 else mistake_hint("train_step.no_step")),
                (dict(clip="after"), lambda: mistake_hint("train_step.clip_after_step") if clipped_grads
                 else mistake_hint("train_step.no_clip")),
                (dict(lr_groups="none"), lambda: mistake_hint("train_step.lr_not_set",
                                                              "for group in optimizer.param_groups: ...")),
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


# ----------------------------------------------------------------------------------------------------- sampling

def check_sample_next_token(sample_next_token) -> None:
    logits = torch.tensor([[1.0, 3.0, 3.0, 0.0], [0.5, 0.2, 2.0, 2.0]])
    _frequencies(sample_next_token, 1.0, None)  # the defaults: plain draws from torch's global generator
    with argument("sample_next_token.temperature"):
        got = run("sample_next_token", sample_next_token, logits, 0.0)
        if not isinstance(got, torch.Tensor) or got.tolist() != [1, 2]:
            fail(f"temperature 0 should give the argmax of each row, [1, 2] (first index on ties), got {got}.")
        _frequencies(sample_next_token, 0.5, None)
    with argument("sample_next_token.top_k"):
        _frequencies(sample_next_token, 1.0, 2)
    probs = logits.softmax(-1)
    with argument("sample_next_token.generator"):
        draws = run("sample_next_token", sample_next_token, logits, 1.0, None, torch.Generator().manual_seed(6))
        if not torch.equal(draws, torch.multinomial(probs, 1, generator=torch.Generator().manual_seed(6)).squeeze(-1)):
            again = run("sample_next_token", sample_next_token, logits, 1.0, None, torch.Generator().manual_seed(6))
            fail("with a generator the draws should be torch.multinomial(probs, 1, generator=generator).squeeze(-1).",
                 mistake_hint("sample.generator_ignored", "pass the generator on to torch.multinomial.")
                 if not torch.equal(again, draws) else "pass the generator on to torch.multinomial.")
    # top_k at or above the vocabulary size keeps every token (torch.topk would raise for k > V)
    with edge_case("sample_next_token.top_k_past_vocabulary"):
        for top_k in (4, 9):
            draws = run("sample_next_token", sample_next_token, logits, 1.0, top_k,
                        torch.Generator().manual_seed(7))
            expected = torch.multinomial(probs, 1, generator=torch.Generator().manual_seed(7)).squeeze(-1)
            if not isinstance(draws, torch.Tensor) or not torch.equal(draws, expected):
                fail(f"with top_k={top_k} on {logits.size(-1)} tokens every token must stay possible (top_k >= V "
                     f"keeps all): the draws should equal those without top_k.", "apply top-k only when top_k < V.")
    passed("sample_next_token", "(argmax at temperature 0, frequencies with temperature and top-k, top_k >= V)")


def _frequencies(sample_next_token, temperature, top_k) -> None:
    """4000 draws from the same row (torch's global generator, seeded here) against the right distribution."""
    row = torch.tensor([2.0, 1.0, 1.0, 0.0, -1.0])                                # a tie at the 2nd/3rd largest
    n = 4000
    torch.manual_seed(5)
    draws = run("sample_next_token", sample_next_token, row.expand(n, 5).clone(), temperature, top_k)
    expect_shape(draws, (n,), "sample_next_token's result", "one token id per row: (B,)")
    counts = torch.bincount(draws.long(), minlength=5).double()
    scaled = row / temperature
    if top_k is not None:
        scaled = scaled.masked_fill(scaled < scaled.sort(descending=True).values[top_k - 1], float("-inf"))
    probs = scaled.softmax(-1).double()
    blocked = probs == 0
    frequencies = counts / n
    if bool((counts[blocked] > 0).any()) or (frequencies - probs).abs().max() > 0.04 or \
            bool(((counts == 0) & ~blocked).any()):
        hint = None
        if top_k is not None and int((counts > 0).sum()) == top_k:
            hint = mistake_hint("sample.top_k_drops_ties", "keep every logit >= the k-th largest.")
        elif top_k is not None and int((counts > 0).sum()) == top_k - 1:
            hint = mistake_hint("sample.top_k_minus_one")
        elif (frequencies - row.softmax(-1).double()).abs().max() < 0.04:
            hint = mistake_hint("sample.temperature_after_softmax")
        elif (frequencies - (row * temperature).softmax(-1).double()).abs().max() < 0.04:
            hint = mistake_hint("sample.temperature_multiplied")
        fail(f"with temperature={temperature}, top_k={top_k} the tokens were drawn with frequencies "
             f"{[round(f, 3) for f in frequencies.tolist()]}, expected about "
             f"{[round(p, 3) for p in probs.tolist()]}.", hint)


@uses_parts("generate")
def check_generate(generate) -> None:
    model = _CountingModel().train()
    prompt = torch.tensor([[1, 2], [3, 4]])
    out = run("generate", generate, model, prompt, 10, 0.0)
    expect_type(out, torch.Tensor, "generate's output")
    expect_shape(out, (2, 12), "generate's output (the prompt followed by 10 new tokens)")
    if not torch.equal(out[:, :2], prompt):
        fail("generate's output should start with the prompt.")
    if not model.training:
        fail("generate left the model in eval mode.", mistake_hint("generate.mode_not_restored"))
    if any(training for training, _ in model.calls):
        fail("the model was called in training mode.", mistake_hint("generate.train_mode"))
    model.eval()
    ids = prompt
    with torch.no_grad():
        for _ in range(10):
            ids = torch.cat([ids, model(ids[:, -model.max_len:])[:, -1].argmax(-1, keepdim=True)], dim=1)
    if not torch.equal(out, ids):
        wrong = prompt
        with torch.no_grad():
            for _ in range(10):
                wrong = torch.cat([wrong, model(wrong[:, -model.max_len:])[:, 0].argmax(-1, keepdim=True)], dim=1)
        first = prompt
        with torch.no_grad():
            for _ in range(10):
                first = torch.cat([first, model(first[:, :model.max_len])[:, -1].argmax(-1, keepdim=True)], dim=1)
        fail(f"generate(model, prompt, 10, temperature=0) should give {ids.tolist()}, got {out.tolist()}.",
             mistake_hint("generate.first_position", "use logits[:, -1, :].") if torch.equal(out, wrong) else
             mistake_hint("generate.keeps_first_tokens") if torch.equal(out, first) else
             "feed ids[:, -model.max_len:] each step and append the argmax of the last position.")
    # every argument goes on to sample_next_token: the draws of a seeded generator, as written out here
    with argument("generate.generator"):
        _sampled_like_here(generate, model, prompt, (), 11)
    with argument("generate.temperature"):
        _sampled_like_here(generate, model, prompt, (0.5,), 12)
    with argument("generate.top_k"):
        _sampled_like_here(generate, model, prompt, (1.0, 2), 13)
    passed("generate", "(greedy, longer than max_len, training mode restored, temperature, top_k, generator)")


def _sampled_like_here(generate, model, prompt, args, seed) -> None:
    """generate with a seeded generator draws what the loop written out here draws with your own sample_next_token
    (the one your generate calls; the contract's draw where it cannot be found): each argument must go on to it."""
    out = run("generate", generate, model, prompt, 6, *args, generator=torch.Generator().manual_seed(seed))
    sampler = getattr(generate, "__globals__", {}).get("sample_next_token")
    try:
        expected = _sampled(model, prompt, 6, *args, seed=seed, sampler=sampler if callable(sampler) else None)
    except Exception:  # noqa: BLE001 -- your sample_next_token fails here: its own check says so
        expected = _sampled(model, prompt, 6, *args, seed=seed)
    if not isinstance(out, torch.Tensor) or not torch.equal(out, expected):
        shown = "".join(f", {a}" for a in args)
        fail(f"generate(model, prompt, 6{shown}, generator=torch.Generator().manual_seed({seed})) should "
             f"give {expected.tolist()}, got {out.tolist() if isinstance(out, torch.Tensor) else out}.",
             "pass temperature, top_k and the generator on to sample_next_token at every step.")


def _sampled(model, prompt, steps, temperature=1.0, top_k=None, seed=0, sampler=None):
    """generate written out here: softmax(logits / temperature) after top-k, one torch.multinomial per step (or
    `sampler(logits, temperature, top_k, generator)` when given)."""
    generator = torch.Generator().manual_seed(seed)
    ids = prompt
    model.eval()
    with torch.no_grad():
        for _ in range(steps):
            if sampler is not None:
                drawn = sampler(model(ids[:, -model.max_len:])[:, -1], temperature, top_k, generator)
                ids = torch.cat([ids, drawn.reshape(-1, 1).to(ids.dtype)], dim=1)
                continue
            logits = model(ids[:, -model.max_len:])[:, -1] / temperature
            if top_k is not None and top_k < logits.size(-1):
                kth = logits.sort(-1, descending=True).values[:, top_k - 1:top_k]
                logits = logits.masked_fill(logits < kth, float("-inf"))
            ids = torch.cat([ids, torch.multinomial(logits.softmax(-1), 1, generator=generator)], dim=1)
    return ids
