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
    python bench/translate.py --warmup-demo --seeds 0 1 2 --out DIR      # section 3: with and without warm-up
    python bench/translate.py --calibration --smoothing 0 0.1 --seeds 0 1 2 --out DIR   # section 8: calibration

--collect writes the kinds of run found in DIR into their own part of data/translation_runs.json and keeps the
others: "meta" and "runs" (the budgets' runs above), "warmup" (the notebook's warm-up comparison: both schedules,
their curves and what the model predicts) and "calibration" (the student models retrained, same seeds, and the
reliability of their next-token probabilities on `val`), each with its own "meta" (when, where, the command).
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


# --- section 3 of the notebook: the warm-up comparison (--warmup-demo) ------------------------------------------

WARMUP_VAL_CAPTIONS = 200       # validated on the first 200 val captions, as the notebook's live run


def warmup_demo_budget(steps: int = 200):
    """The notebook's warm-up comparison: a small model, small batches, a warm-up of 20 at the paper's factor 1,
    evaluated every 10 steps (evaluating draws no random numbers, so the curves are those of the notebook's run)."""
    from coursekit.translation_training import BUDGETS

    return replace(BUDGETS["grading"], steps=steps, d_ff=128, max_tokens=600, warmup_steps=20, noam_factor=1.0,
                   eval_every=10)


def without_warmup(noam_lr):
    """The schedule that skips the warm-up: the peak rate from step 1, then exactly noam_lr's decay."""
    return lambda step, d_model, warmup_steps, factor: noam_lr(max(step, warmup_steps), d_model, warmup_steps, factor)


def unigram_loss(data, pairs) -> float:
    """Cross-entropy per token of `pairs`' targets (after <bos>, <eos> included) under the training targets' token
    frequencies (add-one): the loss of a model that writes the same distribution at every position."""
    counts = torch.bincount(torch.tensor([t for _, tgt in data.pairs["train"] for t in tgt[1:]]),
                            minlength=len(data.en_vocab)).double() + 1
    targets = torch.tensor([t for _, tgt in pairs for t in tgt[1:]])
    return float(-(counts / counts.sum()).log()[targets].mean())


@torch.no_grad()
def prediction_spread(model, pairs, max_tokens: int, device) -> tuple[float, float]:
    """(spread, residual norm) of the teacher-forced predictions over `pairs`, in eval mode (mode restored).

    spread: the mean total-variation distance between each target position's predicted distribution and their
    mean over all positions (0: the model writes the same distribution everywhere, whatever it reads);
    residual norm: the mean length of the vector entering the last decoder block's last LayerNorm (post-norm)."""
    from coursekit.translation_training import PAD_ID, token_batches

    was_training = model.training
    model.eval()
    norms, probs = [], []
    hook = model.decoder.layers[-1].norm3.register_forward_hook(lambda m, inputs, out: norms.append(inputs[0]))
    try:
        for src, tgt in token_batches(pairs, max_tokens, torch.Generator().manual_seed(0)):
            src, tgt = src.to(device), tgt.to(device)
            keep = tgt[:, 1:] != PAD_ID                                                   # (B, T-1)
            probs.append(model(src, tgt[:, :-1]).softmax(-1)[keep].double().cpu())       # (n, V)
            norms[-1] = norms[-1][keep].norm(dim=-1).double().cpu()                      # (n,)
    finally:
        hook.remove()
        model.train(was_training)
    p = torch.cat(probs)
    return float(0.5 * (p - p.mean(0)).abs().sum(-1).mean()), float(torch.cat(norms).mean())


def warmup_run(data, seed: int, device: str, steps: int = 200) -> dict:
    """Both schedules of the notebook's warm-up comparison from the same weights and batches (seed `seed`)."""
    from coursekit.translation_training import model_config, train_translator
    from solutions.transformer import Transformer
    from solutions.translation import label_smoothed_cross_entropy, noam_lr

    budget = warmup_demo_budget(steps)
    val = data.pairs["val"][:WARMUP_VAL_CAPTIONS]
    small = replace(data, pairs={**data.pairs, "val": val})
    row = {"kind": "warmup", "seed": seed, "steps": steps, "config": asdict(budget), "val_captions": len(val),
           "unigram_loss": unigram_loss(data, val), "schedules": {}}
    for name, schedule in (("with warm-up", noam_lr), ("without warm-up", without_warmup(noam_lr))):
        torch.manual_seed(seed)
        model = Transformer(len(data.de_vocab), len(data.en_vocab), **model_config(budget)).to(device)
        spreads, norms = [], []

        def look(step, history, model=model, spreads=spreads, norms=norms):
            spread, norm = prediction_spread(model, val, budget.max_tokens, device)
            spreads.append(spread)
            norms.append(norm)

        history = train_translator(model, small, budget, label_smoothed_cross_entropy, schedule, device,
                                   generator=torch.Generator().manual_seed(seed), on_eval=look)
        row["schedules"][name] = {"lr": history["lr"], "train_loss": history["train loss"],
                                  "val_step": history["val step"], "val_loss": history["val loss"],
                                  "spread": spreads, "residual_norm": norms, "cpu_seconds": history["cpu seconds"]}
        print(f"  warm-up demo seed {seed}, {name}: val loss {history['val loss'][-1]:.3f} at step {steps}, "
              f"spread {spreads[-1]:.3f}, residual norm {norms[-1]:.1f} (unigram loss {row['unigram_loss']:.3f}); "
              f"{history['cpu seconds']:.0f} s of CPU", flush=True)
    return row


# --- section 8 of the notebook: calibration of the recorded settings (--calibration) -----------------------------

CALIBRATION_BINS = 10


@torch.no_grad()
def calibration_bins(model, pairs, max_tokens: int, device, n_bins: int = CALIBRATION_BINS) -> dict:
    """The reliability of the teacher-forced next-token predictions over `pairs` (eval mode, mode restored).

    Each target position (padding left out) has a confidence, the largest predicted probability, and is correct
    when that token is the reference's. Per confidence bin [b / n_bins, (b + 1) / n_bins): the number of
    positions, the sum of their confidences and the number correct; and the plain cross-entropy per token."""
    from coursekit.translation_training import PAD_ID, token_batches

    was_training = model.training
    model.eval()
    count, confidence, correct = (torch.zeros(n_bins, dtype=torch.float64) for _ in range(3))
    nll, tokens = 0.0, 0
    try:
        for src, tgt in token_batches(pairs, max_tokens, torch.Generator().manual_seed(0)):
            src, tgt = src.to(device), tgt.to(device)
            keep = tgt[:, 1:] != PAD_ID                                                   # (B, T-1)
            log_p = model(src, tgt[:, :-1]).double().log_softmax(-1)[keep].cpu()         # (n, V)
            target = tgt[:, 1:][keep].cpu()                                               # (n,)
            top, predicted = log_p.exp().max(-1)                                          # (n,), (n,)
            b = (top * n_bins).long().clamp(max=n_bins - 1)
            count += torch.bincount(b, minlength=n_bins)
            confidence += torch.bincount(b, weights=top, minlength=n_bins)
            correct += torch.bincount(b, weights=(predicted == target).double(), minlength=n_bins)
            nll -= float(log_p.gather(-1, target[:, None]).sum())
            tokens += int(target.numel())
    finally:
        model.train(was_training)
    return {"count": count.tolist(), "confidence": confidence.tolist(), "correct": correct.tolist(),
            "loss": nll / tokens}


def calibration_run(data, budget, seed: int, device: str) -> dict:
    """Train the budget's model exactly as `run` does (same seed: the same model) without the intermediate
    evaluations, then measure the calibration of its next-token probabilities on all of `val`."""
    from coursekit.translation_training import model_config, train_translator
    from solutions.transformer import Transformer
    from solutions.translation import label_smoothed_cross_entropy, noam_lr

    torch.manual_seed(seed)
    model = Transformer(len(data.de_vocab), len(data.en_vocab), **model_config(budget)).to(device)
    history = train_translator(model, data, replace(budget, eval_every=budget.steps), label_smoothed_cross_entropy,
                               noam_lr, device, generator=torch.Generator().manual_seed(seed))
    bins = calibration_bins(model, data.pairs["val"], budget.max_tokens, device)
    return {"kind": "calibration", "budget": budget.name, "seed": seed, "label_smoothing": budget.label_smoothing,
            "steps": budget.steps, "split": "val", "val_ppl": math.exp(history["val loss"][-1]), "bins": bins,
            "cpu_seconds": history["cpu seconds"]}


def expected_calibration_error(bins: dict) -> float:
    """Sum over the bins of (share of the positions) * |accuracy - mean confidence| (Guo et al., 2017)."""
    total = sum(bins["count"])
    return sum(abs(c - f) for c, f in zip(bins["correct"], bins["confidence"])) / total


# --- recording ---------------------------------------------------------------------------------------------------

COMMANDS = {
    "runs": "python bench/translate.py{budget} --smoothing 0 0.1 --seeds 0 1 2 --out DIR, then --collect DIR{only}",
    "warmup": "python bench/translate.py --warmup-demo --seeds 0 1 2 --out DIR, then --collect DIR",
    "calibration": "python bench/translate.py --calibration --smoothing 0 0.1 --seeds 0 1 2 --out DIR, then "
                   "--collect DIR{only}",
}


def collect(folder: Path, only_budget: str | None = None) -> dict:
    """data/translation_runs.json with the run files of `folder`: each kind found replaces its part, the others are
    kept. The budgets' runs are the top-level "meta" and "runs"; "warmup" and "calibration" have their own."""
    rows = [json.loads(p.read_text()) for p in sorted(folder.glob("*.json"))]
    rows = [r for r in rows if only_budget in (None, r.get("budget"))]
    recorded = json.loads(RUNS_FILE.read_text(encoding="utf-8")) if RUNS_FILE.exists() else {}
    for kind in dict.fromkeys(r.get("kind", "runs") for r in rows):
        mine = [r for r in rows if r.get("kind", "runs") == kind]
        command = COMMANDS[kind].format(budget=f" --budget {only_budget}" if only_budget else "",
                                        only=f" --collect-budget {only_budget}" if only_budget else "")
        meta = {"recorded": sorted({r.pop("recorded") for r in mine}), "command": command,
                "machine": "load averages per run in load_average; wall times depend on the load, CPU times less"}
        section = {"meta": meta, "runs": _rounded([{k: v for k, v in r.items() if k != "kind"} for r in mine])}
        if kind == "runs":
            recorded.update(section)
        else:
            recorded[kind] = section
        print(f"{len(mine)} {kind} -> {RUNS_FILE}")
    RUNS_FILE.write_text(json.dumps(recorded) + "\n", encoding="utf-8")
    return recorded


def _parser() -> argparse.ArgumentParser:
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
    parser.add_argument("--warmup-demo", action="store_true",
                        help="the notebook's warm-up comparison (section 3) instead; --steps (default 200)")
    parser.add_argument("--calibration", action="store_true",
                        help="retrain the budget's models and measure their calibration on val (section 8)")
    parser.add_argument("--out", type=Path, default=None, help="write each finished run to this folder")
    parser.add_argument("--collect", type=Path, default=None,
                        help="write data/translation_runs.json from the run files of this folder (no training)")
    parser.add_argument("--collect-budget", default=None, help="with --collect: keep only this budget's runs")
    return parser


def main(argv=None) -> int:
    args = _parser().parse_args(argv)
    if args.collect:
        collect(args.collect, args.collect_budget)
        return 0
    from coursekit.translation_training import BUDGETS

    torch.set_num_threads(args.threads)
    stamp = f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, {platform.node()}"
    print(f"# {stamp}, torch {torch.__version__}, {args.threads} thread(s), device {args.device}, "
          f"{os.cpu_count()} CPUs, load average {[round(x, 1) for x in os.getloadavg()]}", flush=True)
    overrides = {"steps": args.steps, "warmup_steps": args.warmup, "noam_factor": args.factor, "d_ff": args.d_ff,
                 "max_tokens": args.max_tokens, "test_sentences": args.test_sentences,
                 "max_decode_len": args.max_decode_len}
    budget = replace(BUDGETS[args.budget], **{k: v for k, v in overrides.items() if v is not None})
    start = time.perf_counter()
    data = reference_data()
    print(f"data: {time.perf_counter() - start:.1f} s, vocabularies {len(data.de_vocab)} German, "
          f"{len(data.en_vocab)} English (min_freq {budget.min_freq})", flush=True)
    if args.out:
        args.out.mkdir(parents=True, exist_ok=True)

    def save(row, name):
        row["load_average"] = os.getloadavg()
        if args.out:
            (args.out / name).write_text(json.dumps({**row, "recorded": stamp}) + "\n", encoding="utf-8")

    if args.warmup_demo:
        for seed in args.seeds:
            save(warmup_run(data, seed, args.device, args.steps or 200), f"warmup_{seed}.json")
        return 0
    smoothings = args.smoothing if args.smoothing is not None else [budget.label_smoothing]
    if args.calibration:
        for smoothing, seed in ((s, seed) for s in smoothings for seed in args.seeds):
            row = calibration_run(data, replace(budget, label_smoothing=smoothing), seed, args.device)
            print(f"{budget.name} ls {smoothing} seed {seed}: val ppl {row['val_ppl']:.4f}, expected calibration "
                  f"error {expected_calibration_error(row['bins']):.4f}; {row['cpu_seconds']:.0f} s of CPU", flush=True)
            save(row, f"calibration_{budget.name}_ls{smoothing}_{seed}.json")
        return 0
    rows = []
    for smoothing, seed in ((s, seed) for s in smoothings for seed in args.seeds):
        row = run(data, replace(budget, label_smoothing=smoothing), seed, args.device, args.beams)
        rows.append(row)
        _report(row)
        save(row, f"{budget.name}_ls{smoothing}_{seed}.json")
    _table(budget.name, rows)
    return 0


def _report(row: dict) -> None:
    decoding = ", ".join(f"{k} {v['bleu']:.1f} ({v['seconds']:.1f} s)" for k, v in row["decoding"].items())
    print(f"{row['budget']} ls {row['label_smoothing']} seed {row['seed']}: {row['train_seconds']:.0f} s training "
          f"({row['steps_per_second']:.2f} steps/s, {row['seconds']:.0f} s with evaluation; CPU "
          f"{row['train_cpu_seconds']:.0f} s, {row['cpu_seconds']:.0f} s), val ppl {row['val_ppl'][-1]:.2f}, test ppl "
          f"{row['test_ppl']:.2f}; BLEU {decoding}", flush=True)


def _table(name: str, rows: list[dict]) -> None:
    print("\n| budget | label smoothing | seeds | steps/s | train s | val ppl | test BLEU greedy | test BLEU beam |")
    print("|---|---|---|---|---|---|---|---|")
    for smoothing in dict.fromkeys(r["label_smoothing"] for r in rows):
        mine = [r for r in rows if r["label_smoothing"] == smoothing]
        print(f"| {name} | {smoothing} | {len(mine)} | {_spread([r['steps_per_second'] for r in mine], 2)} | "
              f"{_spread([r['train_seconds'] for r in mine], 0)} | {_spread([r['val_ppl'][-1] for r in mine])} | "
              f"{_spread([r['bleu_greedy'] for r in mine], 1)} | {_spread([r['bleu_beam'] for r in mine], 1)} |")


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
