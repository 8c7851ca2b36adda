"""Benchmark: notebook 08's language models on tinyshakespeare (bigram, character GPT, BPE GPT), per budget and seed.

Trains with the reference (`solutions.gpt`) through the notebook's own loop and budgets (`coursekit.lm_training`),
on the contract's 90/10 split, and prints the validation loss in nats per token and bits per character of the whole
validation text, the wall time, and the BPE tokenizer's compression.

    python bench/gpt.py                                   # the student budget (CPU), seed 0, character model
    python bench/gpt.py --budget grading --seeds 0 1 2    # what the notebook trains under grading: sets the bar
    python bench/gpt.py --models bigram char bpe --markdown

One torch thread unless --threads says otherwise (the notebook's setting on a 2-core machine).
"""
from __future__ import annotations

import argparse
import math
import platform
import statistics
import time

import torch


def compression(train_text: str, val_text: str, merges_list=(0, 16, 64, 128, 256), train_chars=200_000) -> list:
    """(merges, tokens per character of the validation text) for the BPE learned on the training split's start."""
    from solutions.gpt import bpe_encode, train_bpe

    merges = train_bpe(train_text[:train_chars], max(merges_list))
    return [(k, len(bpe_encode(val_text, merges[:k])) / len(val_text)) for k in merges_list]


def run(budget_name: str, seed: int, model_kind: str, device: str, steps: int | None = None) -> dict:
    from coursekit.lm_training import BUDGETS, bigram_loss, model_config, train_language_model
    from coursekit.shakespeare import CharVocabulary, load_shakespeare, split_text
    from solutions.gpt import GPT, bpe_encode, estimate_loss, get_batch, lr_at, train_bpe, train_step

    budget = BUDGETS[budget_name]
    text = load_shakespeare()
    train_text, val_text = split_text(text)
    start, cpu_start = time.perf_counter(), time.process_time()
    if model_kind == "bpe":
        merges = train_bpe(train_text[:budget.bpe_train_chars], budget.bpe_merges)
        train_ids = torch.tensor(bpe_encode(train_text, merges))
        val_ids = torch.tensor(bpe_encode(val_text, merges))
        vocab_size = 256 + len(merges)
    else:
        chars = CharVocabulary(text)
        train_ids, val_ids = torch.tensor(chars.encode(train_text)), torch.tensor(chars.encode(val_text))
        vocab_size = len(chars)
    prepare = time.perf_counter() - start
    if model_kind == "bigram":
        loss = bigram_loss(train_ids, val_ids, vocab_size)
        seconds = time.perf_counter() - start
    else:
        torch.manual_seed(seed)
        model = GPT(vocab_size, **model_config(budget)).to(device)
        history = train_language_model(model, train_ids.to(device), val_ids.to(device), budget, get_batch, train_step,
                                       estimate_loss, lr_at, device, steps=steps if steps else
                                       (budget.race_steps if model_kind == "bpe" else budget.steps),
                                       generator=torch.Generator().manual_seed(seed))
        loss = estimate_loss(model, val_ids.to(device), budget.block_size, device)
        seconds = time.perf_counter() - start
    bits = loss * len(val_ids) / len(val_text) / math.log(2)
    return {"budget": budget_name, "seed": seed, "model": model_kind, "val_loss": loss, "bits_per_char": bits,
            "seconds": seconds, "cpu_seconds": time.process_time() - cpu_start, "prepare_seconds": prepare, "tokens_per_char": len(val_ids) / len(val_text)}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--budget", default="student", choices=["student", "grading", "gpu"])
    parser.add_argument("--seeds", type=int, nargs="+", default=[0])
    parser.add_argument("--models", nargs="+", default=["char"], choices=["bigram", "char", "bpe"])
    parser.add_argument("--steps", type=int, default=None, help="override the budget's steps (both models)")
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--compression", action="store_true", help="also print the BPE compression table")
    parser.add_argument("--markdown", action="store_true")
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)
    print(f"# {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, {platform.node()}, torch {torch.__version__}, "
          f"{args.threads} thread(s), device {args.device}, load average {[round(x, 1) for x in _load()]}")
    rows = []
    for model_kind in args.models:
        for seed in args.seeds if model_kind != "bigram" else [0]:
            row = run(args.budget, seed, model_kind, args.device, args.steps)
            rows.append(row)
            print(f"{row['budget']:8s} {row['model']:6s} seed {seed}: val {row['val_loss']:.4f} nats/token, "
                  f"{row['bits_per_char']:.4f} bits/char, {row['seconds']:.1f} s wall, {row['cpu_seconds']:.1f} s CPU",
                  flush=True)
    if args.markdown:
        print("\n| budget | model | seeds | val loss (nats/token) | bits/char | tokens/char | time (s) |")
        print("|---|---|---|---|---|---|---|")
        for model_kind in args.models:
            mine = [r for r in rows if r["model"] == model_kind]
            losses = [r["val_loss"] for r in mine]
            bits = [r["bits_per_char"] for r in mine]
            print(f"| {args.budget} | {model_kind} | {len(mine)} | {_spread(losses)} | {_spread(bits)} | "
                  f"{mine[0]['tokens_per_char']:.3f} | {statistics.mean(r['seconds'] for r in mine):.0f} |")
    if args.compression:
        from coursekit.shakespeare import load_shakespeare, split_text

        print("\n| merges | tokens per character (validation text) |\n|---|---|")
        for k, ratio in compression(*split_text(load_shakespeare())):
            print(f"| {k} | {ratio:.3f} |")
    return 0


def _spread(values) -> str:
    if len(values) == 1:
        return f"{values[0]:.3f}"
    return f"{statistics.mean(values):.3f} ({min(values):.3f}-{max(values):.3f})"


def _load():
    try:
        import os

        return os.getloadavg()
    except OSError:
        return (math.nan,) * 3


if __name__ == "__main__":
    raise SystemExit(main())
