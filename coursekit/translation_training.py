"""Notebook 10's training: the budgets, Multi30k as token ids, bucketed batches, the loop, decoding and BLEU helpers.

The loop takes the notebook's own `label_smoothed_cross_entropy` and `noam_lr` as arguments (and 06's
`greedy_decode` for the validation BLEU), so the notebook trains with what the student wrote, and
`bench/translate.py` (which measures the budgets and sets the trained-translator check's bar) trains with the
reference through the very same code. The budgets live here once: the notebook, the benchmark and the tests read them.

    data = prepare_translation_data(build_vocab, encode)              # 01's functions (provided.py or solutions)
    budget = budget_for(device, grading=coursekit.grading_mode())
    model = Transformer(len(data.de_vocab), len(data.en_vocab), **model_config(budget)).to(device)
    history = train_translator(model, data, budget, label_smoothed_cross_entropy, noam_lr, device,
                               generator=torch.Generator().manual_seed(0), decode_fn=greedy_decode)
    bleu_of(model, data, "test_2016_flickr", beam_search, corpus_bleu, beam_size=budget.beam_size)

Recorded runs: label smoothing 0 vs 0.1 over 3 seeds takes far longer than the notebook's budget, so
`bench/translate.py` records them in `data/translation_runs.json` (date, machine, load) and the notebook shows them:

    recorded = load_translation_runs()   # {"meta": {"recorded": [...], ...}, "runs": [{"budget", "seed",
                                         #   "label_smoothing", "val_ppl", "bleu_greedy", "bleu_beam", ...}, ...]}

Names beyond the brief: `model_config(budget)` (06's Transformer keyword arguments of a budget) and
`sacrebleu_bleu` (the loop's default BLEU for its validation curve: the student writes `corpus_bleu` later in the
notebook than they train, and coursekit must not hold the exercise's answer). `train_translator` also takes
`bleu_fn`, `steps` and `progress`.

Conventions (../shared/course-api-10.md): `<pad>`=0, `<unk>`=1, `<bos>`=2, `<eos>`=3; sources are ids without
`<bos>`/`<eos>`, targets `[<bos>] + ids + [<eos>]`; BLEU on the lower-cased tokens of `tokenize_caption`.
"""
from __future__ import annotations

import json
import math
import os
import time
from dataclasses import dataclass, field, replace
from pathlib import Path

import torch
import torch.nn.functional as F

from .bundled_data import BUNDLED_DATA, find_data
from .multi30k import SPLITS, tokenized_multi30k

__all__ = ["Budget", "BUDGETS", "budget_for", "model_config", "TranslationData", "prepare_translation_data",
           "token_batches", "train_translator", "translate_corpus", "bleu_of", "validation_loss", "sacrebleu_bleu",
           "cross_attention_weights", "RUNS_FILE", "translation_runs_path", "load_translation_runs", "PAD_ID",
           "UNK_ID", "BOS_ID", "EOS_ID"]

PAD_ID, UNK_ID, BOS_ID, EOS_ID = 0, 1, 2, 3
TEST_SPLIT = "test_2016_flickr"
RUNS_FILE = "translation_runs.json"


@dataclass(frozen=True)
class Budget:
    """One training budget of notebook 10: 06's Transformer (German -> English) and how it is trained and scored."""

    name: str
    steps: int                      # optimizer steps (one batch each)
    max_tokens: int = 1500          # a batch's B * max(S, T) (padded source or target, whichever is longer)
    d_model: int = 128
    num_heads: int = 4
    d_ff: int = 256
    num_layers: int = 2             # encoder layers, and as many decoder layers
    max_len: int = 128              # the positional table (Multi30k's longest caption has 40-odd tokens)
    dropout: float = 0.1
    warmup_steps: int = 100         # noam_lr's warm-up
    noam_factor: float = 1.0        # noam_lr's factor: peak lr = factor * d_model ** -0.5 * warmup_steps ** -0.5
    label_smoothing: float = 0.1
    betas: tuple = (0.9, 0.98)      # AdamW, as in the 2017 paper
    eps: float = 1e-9
    weight_decay: float = 0.0
    clip_norm: float = 1.0
    eval_every: int = 100           # validation loss and greedy BLEU every this many steps, and at the end
    val_bleu_sentences: int = 200   # the first sentences of `val` the curve's greedy BLEU is measured on
    test_sentences: int = 1000      # the first sentences of test_2016_flickr the final BLEU is measured on
    max_decode_len: int = 60        # tokens a translation may have (its <eos> included)
    beam_size: int = 4
    length_penalty: float = 0.6
    min_freq: int = 2               # build_vocab's min_freq for both vocabularies


BUDGETS = {
    # the default student run: <= 3 minutes on 2 CPU cores with one torch thread (docs/benchmarks.md: 122 s of CPU,
    # test BLEU 28.0 with beam 4, 26.3 greedy, 3 seeds); peak lr 0.5 * 128 ** -0.5 * 100 ** -0.5 = 4.4e-3 at step
    # 100 (a peak of 1.1e-2 diverged: BLEU 5)
    "student": Budget("student", steps=450, warmup_steps=100, noam_factor=0.5),
    # under coursekit.grading_mode(): the notebook's model in <= 45 s (37 s of CPU; test BLEU 11.3 greedy, 12.0
    # beam 4, 3 seeds); sets the trained-translator check's bar
    "grading": Budget("grading", steps=200, d_model=64, d_ff=256, warmup_steps=50, noam_factor=0.3,
                      eval_every=100, val_bleu_sentences=100, test_sentences=1000),
    # picked automatically on a GPU: 176 s of training on one H200, test BLEU 37.9 greedy, 37.1 beam 4 (3 seeds,
    # docs/benchmarks.md)
    "gpu": Budget("gpu", steps=3000, max_tokens=4000, d_model=256, num_heads=8, d_ff=1024, num_layers=3,
                  warmup_steps=400, noam_factor=0.5, eval_every=500, val_bleu_sentences=1014),
}


def budget_for(device, grading: bool = False) -> Budget:
    """The budget of a run: grading mode first, then the GPU budget on CUDA, else the student's CPU budget."""
    if grading:
        return BUDGETS["grading"]
    return BUDGETS["gpu"] if torch.device(device).type == "cuda" else BUDGETS["student"]


def model_config(budget: Budget) -> dict:
    """06's Transformer keyword arguments of a budget (the vocabulary sizes come first, positionally)."""
    return dict(d_model=budget.d_model, num_heads=budget.num_heads, d_ff=budget.d_ff, num_layers=budget.num_layers,
                max_len=budget.max_len, dropout=budget.dropout)


# ---------------------------------------------------------------------------------------------------------------
# Data: tokens -> vocabularies -> id lists per split.
# ---------------------------------------------------------------------------------------------------------------


@dataclass
class TranslationData:
    """Multi30k as the notebook trains on it: two vocabularies and, per split, tokens and id pairs."""

    de_vocab: dict                  # German token -> id (01's build_vocab on the training split)
    en_vocab: dict                  # English token -> id
    tokens: dict                    # split -> (German token lists, English token lists)
    pairs: dict                     # split -> [(source ids, target ids)]: [ids...], [<bos>, ids..., <eos>]
    en_itos: list = field(default_factory=list)   # English id -> token

    def __post_init__(self):
        if not self.en_itos:
            self.en_itos = [None] * len(self.en_vocab)
            for token, index in self.en_vocab.items():
                self.en_itos[index] = token

    def references(self, split: str) -> list[list[str]]:
        """The English token lists of a split (BLEU's references: real words, no <unk>)."""
        return self.tokens[split][1]

    def sources(self, split: str) -> list[list[int]]:
        """The German id lists of a split (no <bos>/<eos>)."""
        return [src for src, _ in self.pairs[split]]


def prepare_translation_data(build_vocab, encode, min_freq: int = 2, splits=SPLITS) -> TranslationData:
    """Vocabularies from the training tokens with 01's `build_vocab`, ids of every split with 01's `encode`."""
    tokens = {split: tokenized_multi30k(split) for split in splits}
    train_de, train_en = tokens["train"] if "train" in tokens else tokenized_multi30k("train")
    de_vocab = build_vocab(train_de, min_freq=min_freq)
    en_vocab = build_vocab(train_en, min_freq=min_freq)
    for name, vocab in (("German", de_vocab), ("English", en_vocab)):
        wanted = {"<pad>": PAD_ID, "<unk>": UNK_ID, "<bos>": BOS_ID, "<eos>": EOS_ID}
        if any(vocab.get(token) != index for token, index in wanted.items()):
            raise ValueError(f"the {name} vocabulary must start with <pad>=0, <unk>=1, <bos>=2, <eos>=3 "
                             f"(build_vocab's specials), got {[vocab.get(t) for t in wanted]}")
    pairs = {}
    for split, (de_lists, en_lists) in tokens.items():
        pairs[split] = [(list(encode(de, de_vocab)), [BOS_ID] + list(encode(en, en_vocab)) + [EOS_ID])
                        for de, en in zip(de_lists, en_lists)]
    return TranslationData(de_vocab, en_vocab, tokens, pairs)


# ---------------------------------------------------------------------------------------------------------------
# Batches by tokens.
# ---------------------------------------------------------------------------------------------------------------


def _pad(sequences, pad_id: int = PAD_ID) -> torch.Tensor:
    out = torch.full((len(sequences), max(len(s) for s in sequences)), pad_id, dtype=torch.long)  # (B, L)
    for row, seq in enumerate(sequences):
        out[row, :len(seq)] = torch.as_tensor(seq, dtype=torch.long)
    return out


def token_batches(pairs, max_tokens: int, generator=None, chunk_size: int = 2000) -> list:
    """One epoch of (src (B, S), tgt (B, T)) LongTensor batches with B * max(S, T) <= max_tokens, padded with 0.

    Bucketing: the pairs are shuffled, cut into chunks of `chunk_size`, each chunk sorted by (target, source) length
    and cut greedily into batches (similar lengths together, little padding); the batches' order is shuffled too.
    A pair longer than `max_tokens` on its own becomes a batch of one. `generator` (a torch.Generator) makes the
    epoch reproducible; None uses torch's global generator.
    """
    if max_tokens < 1:
        raise ValueError(f"max_tokens must be >= 1, got {max_tokens}")
    order = torch.randperm(len(pairs), generator=generator).tolist()
    groups = []
    for start in range(0, len(order), chunk_size):
        chunk = sorted(order[start:start + chunk_size], key=lambda i: (len(pairs[i][1]), len(pairs[i][0])))
        group, longest = [], 0
        for i in chunk:
            length = max(len(pairs[i][0]), len(pairs[i][1]))
            if group and (len(group) + 1) * max(longest, length) > max_tokens:
                groups.append(group)
                group, longest = [], 0
            group.append(i)
            longest = max(longest, length)
        if group:
            groups.append(group)
    shuffled = torch.randperm(len(groups), generator=generator).tolist()
    return [(_pad([pairs[i][0] for i in groups[g]]), _pad([pairs[i][1] for i in groups[g]])) for g in shuffled]


# ---------------------------------------------------------------------------------------------------------------
# Decoding and BLEU.
# ---------------------------------------------------------------------------------------------------------------


def _words(ids, itos) -> list[str]:
    """Target ids -> tokens, stopping at <eos> (and at padding); a leading <bos> is skipped."""
    ids = ids.tolist() if isinstance(ids, torch.Tensor) else list(ids)
    if ids and ids[0] == BOS_ID:
        ids = ids[1:]
    words = []
    for index in ids:
        if index in (EOS_ID, PAD_ID):
            break
        words.append(itos[index] if 0 <= index < len(itos) else "<unk>")
    return words


def translate_corpus(model, src_id_lists, decode, itos, max_len: int = 60, beam_size: int | None = None,
                     length_penalty: float = 0.6, batch_size: int = 100, device=None) -> list[list[str]]:
    """Translations of German id lists, as English token lists (each stops before its first <eos>).

    beam_size None: `decode` is batched like 06's `greedy_decode(model, src (B, S), max_len)` -> ids (B, L).
    beam_size k: `decode` is per sentence like `beam_search(model, src (1, S), beam_size=k, max_len=...,
    length_penalty=...)` -> list of ids. `itos[i]` is the English token of id i (`TranslationData.en_itos`).
    """
    device = device if device is not None else next(model.parameters()).device
    out = []
    if beam_size is None:
        for start in range(0, len(src_id_lists), batch_size):
            src = _pad(src_id_lists[start:start + batch_size]).to(device)                 # (B, S)
            ys = decode(model, src, max_len)                                              # (B, <= max_len)
            out += [_words(row, itos) for row in ys.cpu()]
    else:
        for ids in src_id_lists:
            src = torch.as_tensor([ids], dtype=torch.long, device=device)                 # (1, S)
            out.append(_words(decode(model, src, beam_size=beam_size, max_len=max_len,
                                     length_penalty=length_penalty), itos))
    return out


def sacrebleu_bleu(hypotheses: list[list[str]], references: list[list[str]]) -> float:
    """Corpus BLEU of token lists with sacrebleu, on the tokens as they are (the contract's corpus_bleu's equal)."""
    import sacrebleu

    return sacrebleu.corpus_bleu([" ".join(h) for h in hypotheses], [[" ".join(r) for r in references]],
                                 tokenize="none", smooth_method="none", force=True).score


def bleu_of(model, data: TranslationData, split: str, decode, bleu_fn, n_sentences: int | None = None,
            max_len: int = 60, beam_size: int | None = None, length_penalty: float = 0.6, device=None) -> float:
    """BLEU of the model's translations of the first `n_sentences` (None: all) of a split, by `bleu_fn`.

    `decode` and `beam_size` as in `translate_corpus`; `bleu_fn(hypotheses, references)` takes token lists (the
    student's `corpus_bleu`, the reference's, or `sacrebleu_bleu`); the references are the split's English tokens.
    """
    sources = data.sources(split)[:n_sentences]
    references = data.references(split)[:n_sentences]
    hypotheses = translate_corpus(model, sources, decode, data.en_itos, max_len, beam_size, length_penalty,
                                  device=device)
    return float(bleu_fn(hypotheses, references))


@torch.no_grad()
def validation_loss(model, pairs, max_tokens: int, device) -> float:
    """Plain cross-entropy (no smoothing) per target token over `pairs`, teacher-forced: log of the perplexity."""
    was_training = model.training
    model.eval()
    total, count = 0.0, 0
    try:
        for src, tgt in token_batches(pairs, max_tokens, torch.Generator().manual_seed(0)):
            src, tgt = src.to(device), tgt.to(device)
            logits = model(src, tgt[:, :-1])                                              # (B, T-1, V)
            targets = tgt[:, 1:].reshape(-1)                                              # (B*(T-1),)
            total += F.cross_entropy(logits.reshape(-1, logits.size(-1)), targets, ignore_index=PAD_ID,
                                     reduction="sum").item()
            count += int((targets != PAD_ID).sum())
    finally:
        model.train(was_training)
    return total / max(count, 1)


# ---------------------------------------------------------------------------------------------------------------
# The loop.
# ---------------------------------------------------------------------------------------------------------------


def train_translator(model, data: TranslationData, budget: Budget, loss_fn, lr_fn, device, generator=None,
                     decode_fn=None, on_eval=None, bleu_fn=None, steps: int | None = None) -> dict:
    """Train `model` (06's Transformer, German -> English) for `steps` (default budget.steps) AdamW steps.

    Each step: the next bucketed batch of about `budget.max_tokens` tokens (`token_batches`, a new shuffled epoch
    when one runs out); teacher forcing: logits = model(src, tgt[:, :-1]) against targets tgt[:, 1:];
    loss = loss_fn(logits (N, V), targets (N,), budget.label_smoothing, 0) (padding ignored); back-propagate; clip
    the gradient norm at budget.clip_norm; set every parameter group's lr to
    lr_fn(step, budget.d_model, budget.warmup_steps, budget.noam_factor) with step = 1, 2, ... (the paper's
    step_num); AdamW step (betas, eps and weight decay from the budget).
    Every `budget.eval_every` steps and at the end: the validation loss (plain cross-entropy per token, no smoothing:
    exp of it is the perplexity) on the whole `val` split and, when `decode_fn` (06's greedy_decode) is given, the
    greedy BLEU on the first `budget.val_bleu_sentences` of `val` with `bleu_fn` (default `sacrebleu_bleu`);
    then `on_eval(step, history)` if given.
    Returns the history: {"step": [...], "train loss": [...], "lr": [...], "val step": [...], "val loss": [...],
    "val bleu": [...] (empty without decode_fn), "seconds": float (wall time, all of it), "eval seconds": float
    (of which evaluating), "cpu seconds" and "eval cpu seconds" (the same in this process's CPU time: with one torch
    thread, about the wall time on an idle machine), "tokens": int (target tokens trained on)}.
    """
    steps = budget.steps if steps is None else steps
    bleu_fn = sacrebleu_bleu if bleu_fn is None else bleu_fn
    optimizer = torch.optim.AdamW(model.parameters(), lr=0.0, betas=tuple(budget.betas), eps=budget.eps,
                                  weight_decay=budget.weight_decay)
    train_pairs = data.pairs["train"]
    history = {"step": [], "train loss": [], "lr": [], "val step": [], "val loss": [], "val bleu": [],
               "seconds": 0.0, "eval seconds": 0.0, "cpu seconds": 0.0, "eval cpu seconds": 0.0, "tokens": 0}
    batches: list = []
    start, cpu_start = time.perf_counter(), time.process_time()
    model.train()
    for step in range(1, steps + 1):
        if not batches:
            batches = token_batches(train_pairs, budget.max_tokens, generator)[::-1]       # pop() from the end
        src, tgt = batches.pop()
        src, tgt = src.to(device), tgt.to(device)                                         # (B, S), (B, T)
        lr = float(lr_fn(step, budget.d_model, budget.warmup_steps, budget.noam_factor))
        for group in optimizer.param_groups:
            group["lr"] = lr
        logits = model(src, tgt[:, :-1])                                                  # (B, T-1, V)
        targets = tgt[:, 1:]                                                              # (B, T-1)
        loss = loss_fn(logits.reshape(-1, logits.size(-1)), targets.reshape(-1), budget.label_smoothing, PAD_ID)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), budget.clip_norm)
        optimizer.step()
        history["step"].append(step)
        history["train loss"].append(loss.item())
        history["lr"].append(lr)
        history["tokens"] += int((targets != PAD_ID).sum())
        if step % budget.eval_every == 0 or step == steps:
            _evaluate(model, data, budget, step, history, decode_fn, bleu_fn, device)
            if on_eval is not None:
                on_eval(step, history)
    history["seconds"] = time.perf_counter() - start
    history["cpu seconds"] = time.process_time() - cpu_start
    return history


def _evaluate(model, data: TranslationData, budget: Budget, step: int, history: dict, decode_fn, bleu_fn,
              device) -> None:
    """One evaluation of `train_translator` at `step`, into `history`: the validation loss on the whole `val` split
    and, with `decode_fn`, the greedy BLEU on its first `budget.val_bleu_sentences`; the time it took is counted as
    evaluating (wall and CPU)."""
    eval_start, eval_cpu_start = time.perf_counter(), time.process_time()
    history["val step"].append(step)
    history["val loss"].append(validation_loss(model, data.pairs["val"], budget.max_tokens, device))
    if decode_fn is not None:
        history["val bleu"].append(bleu_of(model, data, "val", decode_fn, bleu_fn,
                                           budget.val_bleu_sentences, budget.max_decode_len, device=device))
    history["eval seconds"] += time.perf_counter() - eval_start
    history["eval cpu seconds"] += time.process_time() - eval_cpu_start


def with_steps(budget: Budget, steps: int) -> Budget:
    return replace(budget, steps=steps)


def perplexity(loss: float) -> float:
    return math.exp(loss)


# ---------------------------------------------------------------------------------------------------------------
# Looking inside: cross-attention.
# ---------------------------------------------------------------------------------------------------------------


@torch.no_grad()
def cross_attention_weights(model, src_ids, tgt_ids, layer: int = -1) -> torch.Tensor:
    """The cross-attention weights (H, T, S) of one sentence pair in decoder layer `layer` (default: the last).

    src_ids: the German ids (S,) (a list, or a (S,) / (1, S) tensor); tgt_ids: the decoder's input (T,), i.e.
    [<bos>] + English ids (row t is where the decoder looks while predicting target token t + 1). The weights are
    caught with a forward hook on `model.decoder.layers[layer].cross_attn` (04's MultiHeadAttention returns
    (output, weights)); the model runs in eval mode (no dropout) and its training mode is restored afterwards.
    Each row sums to 1 over the S source positions.
    """
    device = next(model.parameters()).device
    src = torch.as_tensor(src_ids, dtype=torch.long, device=device).reshape(1, -1)        # (1, S)
    tgt = torch.as_tensor(tgt_ids, dtype=torch.long, device=device).reshape(1, -1)        # (1, T)
    caught = []
    handle = model.decoder.layers[layer].cross_attn.register_forward_hook(
        lambda module, inputs, output: caught.append(output[1].detach()))
    was_training = model.training
    model.eval()
    try:
        model(src, tgt)
    finally:
        handle.remove()
        model.train(was_training)
    return caught[-1][0].cpu()                                                            # (H, T, S)


# ---------------------------------------------------------------------------------------------------------------
# The recorded runs of bench/translate.py.
# ---------------------------------------------------------------------------------------------------------------


def translation_runs_path() -> Path:
    """$COURSE_DATA_DIR/translation_runs.json, else the student wheel's copy, else the repository's data/, else a
    data/ folder in the working directory or one of its parents (as coursekit.modern_comparison looks)."""
    return find_data(RUNS_FILE, "the recorded translation runs", bundled=BUNDLED_DATA, package_file=__file__)


def load_translation_runs(path: str | os.PathLike | None = None) -> dict:
    """The recorded runs of bench/translate.py (see the module docstring)."""
    return json.loads(Path(path or translation_runs_path()).read_text(encoding="utf-8"))
