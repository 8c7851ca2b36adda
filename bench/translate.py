"""Benchmark: notebook 10's translator (06's Transformer, German -> English on Multi30k), per budget and seed.

Trains with the reference (`solutions.translation`'s loss and schedule, 06's greedy decoding) through the notebook's
own loop and budgets (`coursekit.translation_training`), then measures BLEU on test_2016_flickr (the reference
`corpus_bleu`, checked against sacrebleu) greedy and with beam search, and the validation perplexity.

    python bench/translate.py                                  # the student budget (CPU), seed 0
    python bench/translate.py --budget grading --seeds 0 1 2   # what the notebook trains under grading: sets the bar
    python bench/translate.py --beams 1 2 4 8                  # also BLEU and decoding time per beam size
    python bench/translate.py --smoothing 0 0.1 --seeds 0 1 2  # label smoothing 0 vs 0.1, side by side
    python bench/translate.py ... --out DIR                    # each finished run as DIR/<budget>_<ls>_<seed>.json
    python bench/translate.py --collect DIR                    # data/translation_runs.json from those files

One torch thread unless --threads says otherwise (the notebook's setting on a 2-core machine).
"""
from __future__ import annotations

import argparse
import json
import math
import os
import platform
import statistics
import time
from dataclasses import asdict, replace
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[1]
RUNS_FILE = ROOT / "data" / "translation_runs.json"
TEST = "test_2016_flickr"


def reference_data():
    from coursekit.translation_training import prepare_translation_data
    from solutions.embeddings import build_vocab, encode

    return prepare_translation_data(build_vocab, encode)


def run(data, budget, seed: int, device: str, beams=(), examples: int = 5) -> dict:
    """Train one model at `budget` with seed `seed`; BLEU on test_2016_flickr greedy, with the budget's beam and `beams`."""
    from coursekit.translation_training import model_config, train_translator, translate_corpus
    from solutions.transformer import Transformer, greedy_decode
    from solutions.translation import beam_search, corpus_bleu, label_smoothed_cross_entropy, noam_lr

    torch.manual_seed(seed)
    _progress.start = time.perf_counter()
    model = Transformer(len(data.de_vocab), len(data.en_vocab), **model_config(budget)).to(device)
    history = train_translator(model, data, budget, label_smoothed_cross_entropy, noam_lr, device,
                               generator=torch.Generator().manual_seed(seed), decode_fn=greedy_decode,
                               bleu_fn=corpus_bleu, on_eval=_progress)
    train_seconds = history["seconds"] - history["eval seconds"]
    train_cpu = history["cpu seconds"] - history["eval cpu seconds"]
    n = budget.test_sentences
    row = {"budget": budget.name, "seed": seed, "label_smoothing": budget.label_smoothing, "steps": budget.steps,
           "parameters": sum(p.numel() for p in model.parameters()), "config": asdict(budget),
           "seconds": history["seconds"], "train_seconds": train_seconds,
           "steps_per_second": budget.steps / train_seconds,
           "cpu_seconds": history["cpu seconds"], "train_cpu_seconds": train_cpu,
           "cpu_steps_per_second": budget.steps / train_cpu, "tokens": history["tokens"],
           "val_step": history["val step"], "val_loss": history["val loss"],
           "val_ppl": [math.exp(x) for x in history["val loss"]], "val_bleu_greedy": history["val bleu"],
           "train_loss": history["train loss"], "lr": history["lr"], "test_sentences": n}
    decodings = {}
    for beam in dict.fromkeys([None, budget.beam_size, *beams]):                 # greedy, the budget's beam, others
        start, cpu_start = time.perf_counter(), time.process_time()
        if beam is None:
            hyps = translate_corpus(model, data.sources(TEST)[:n], greedy_decode, data.en_itos, budget.max_decode_len)
        else:
            hyps = translate_corpus(model, data.sources(TEST)[:n], beam_search, data.en_itos, budget.max_decode_len,
                                    beam_size=beam, length_penalty=budget.length_penalty)
        seconds, cpu_seconds = time.perf_counter() - start, time.process_time() - cpu_start
        refs = data.references(TEST)[:n]
        decodings["greedy" if beam is None else f"beam {beam}"] = {
            "bleu": corpus_bleu(hyps, refs), "seconds": seconds, "cpu_seconds": cpu_seconds,
            "hyp_tokens": sum(map(len, hyps)), "ref_tokens": sum(map(len, refs))}
        if beam == budget.beam_size:
            row["examples"] = [{"de": " ".join(data.tokens[TEST][0][i]), "en": " ".join(refs[i]),
                                "model": " ".join(hyps[i])} for i in range(examples)]
    row["decoding"] = decodings
    row["bleu_greedy"] = decodings["greedy"]["bleu"]
    row["bleu_beam"] = decodings[f"beam {budget.beam_size}"]["bleu"]
    row["test_ppl"] = math.exp(_test_loss(model, data, budget, device))
    return row


def _progress(step, history):
    bleu = f", val BLEU greedy {history['val bleu'][-1]:.1f}" if history["val bleu"] else ""
    print(f"  step {step}: train loss {history['train loss'][-1]:.3f}, val ppl {math.exp(history['val loss'][-1]):.2f}"
          f"{bleu}, lr {history['lr'][-1]:.2e}, {time.perf_counter() - _progress.start:.0f} s", flush=True)


_progress.start = time.perf_counter()


def _test_loss(model, data, budget, device) -> float:
    from coursekit.translation_training import validation_loss

    return validation_loss(model, data.pairs[TEST][:budget.test_sentences], budget.max_tokens, device)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--budget", default="student", choices=["student", "grading", "gpu"])
    parser.add_argument("--seeds", type=int, nargs="+", default=[0])
    parser.add_argument("--smoothing", type=float, nargs="+", default=None,
                        help="label smoothing values to compare (default: the budget's)")
    parser.add_argument("--beams", type=int, nargs="*", default=[], help="also decode with these beam sizes")
    parser.add_argument("--steps", type=int, default=None)
    parser.add_argument("--warmup", type=int, default=None)
    parser.add_argument("--factor", type=float, default=None)
    parser.add_argument("--d-ff", type=int, default=None)
    parser.add_argument("--max-tokens", type=int, default=None)
    parser.add_argument("--max-decode-len", type=int, default=None)
    parser.add_argument("--test-sentences", type=int, default=None, help="BLEU on the first N test captions")
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--out", type=Path, default=None, help="write each finished run to this folder")
    parser.add_argument("--collect", type=Path, default=None,
                        help="write data/translation_runs.json from the run files of this folder (no training)")
    parser.add_argument("--collect-budget", default=None, help="with --collect: keep only this budget's runs")
    args = parser.parse_args(argv)
    if args.collect:
        runs = [json.loads(p.read_text()) for p in sorted(args.collect.glob("*.json"))]
        runs = [r for r in runs if args.collect_budget in (None, r["budget"])]
        budget = f" --budget {args.collect_budget}" if args.collect_budget else ""
        command = (f"python bench/translate.py{budget} --smoothing 0 0.1 --seeds 0 1 2 --out DIR, then "
                   f"--collect DIR{' --collect-budget ' + args.collect_budget if args.collect_budget else ''}")
        meta = {"recorded": sorted({r.pop("recorded") for r in runs}), "command": command,
                "machine": "load averages per run in load_average; wall times depend on the load, CPU times less"}
        RUNS_FILE.write_text(json.dumps({"meta": meta, "runs": _rounded(runs)}) + "\n", encoding="utf-8")
        print(f"{len(runs)} runs -> {RUNS_FILE}")
        return 0
    from coursekit.translation_training import BUDGETS

    torch.set_num_threads(args.threads)
    stamp = f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, {platform.node()}"
    print(f"# {stamp}, torch {torch.__version__}, {args.threads} thread(s), device {args.device}, "
          f"{os.cpu_count()} CPUs, load average {[round(x, 1) for x in os.getloadavg()]}", flush=True)
    budget = BUDGETS[args.budget]
    overrides = {"steps": args.steps, "warmup_steps": args.warmup, "noam_factor": args.factor, "d_ff": args.d_ff,
                 "max_tokens": args.max_tokens, "test_sentences": args.test_sentences,
                 "max_decode_len": args.max_decode_len}
    budget = replace(budget, **{k: v for k, v in overrides.items() if v is not None})
    start = time.perf_counter()
    data = reference_data()
    print(f"data: {time.perf_counter() - start:.1f} s, vocabularies {len(data.de_vocab)} German, "
          f"{len(data.en_vocab)} English (min_freq {budget.min_freq})", flush=True)
    if args.out:
        args.out.mkdir(parents=True, exist_ok=True)
    rows = []
    for smoothing in args.smoothing if args.smoothing is not None else [budget.label_smoothing]:
        for seed in args.seeds:
            row = run(data, replace(budget, label_smoothing=smoothing), seed, args.device, args.beams)
            row["load_average"] = os.getloadavg()
            rows.append(row)
            decoding = ", ".join(f"{k} {v['bleu']:.1f} ({v['seconds']:.1f} s)" for k, v in row["decoding"].items())
            print(f"{budget.name} ls {smoothing} seed {seed}: {row['train_seconds']:.0f} s training "
                  f"({row['steps_per_second']:.2f} steps/s, {row['seconds']:.0f} s with evaluation; CPU {row['train_cpu_seconds']:.0f} s, {row['cpu_seconds']:.0f} s), val ppl "
                  f"{row['val_ppl'][-1]:.2f}, test ppl {row['test_ppl']:.2f}; BLEU {decoding}", flush=True)
            if args.out:
                name = f"{budget.name}_ls{smoothing}_{seed}.json"
                (args.out / name).write_text(json.dumps({**row, "recorded": stamp}) + "\n", encoding="utf-8")
    print("\n| budget | label smoothing | seeds | steps/s | train s | val ppl | test BLEU greedy | test BLEU beam |")
    print("|---|---|---|---|---|---|---|---|")
    for smoothing in dict.fromkeys(r["label_smoothing"] for r in rows):
        mine = [r for r in rows if r["label_smoothing"] == smoothing]
        print(f"| {budget.name} | {smoothing} | {len(mine)} | {_spread([r['steps_per_second'] for r in mine], 2)} | "
              f"{_spread([r['train_seconds'] for r in mine], 0)} | {_spread([r['val_ppl'][-1] for r in mine])} | "
              f"{_spread([r['bleu_greedy'] for r in mine], 1)} | {_spread([r['bleu_beam'] for r in mine], 1)} |")
    return 0


def _rounded(value):
    """Floats to 6 significant digits (the recorded file stays small; no figure needs more)."""
    if isinstance(value, float):
        return float(f"{value:.6g}")
    if isinstance(value, dict):
        return {k: _rounded(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_rounded(v) for v in value]
    return value


def _spread(values, digits: int = 2) -> str:
    if len(values) == 1:
        return f"{values[0]:.{digits}f}"
    return f"{statistics.mean(values):.{digits}f} ({min(values):.{digits}f}-{max(values):.{digits}f})"


if __name__ == "__main__":
    raise SystemExit(main())
