"""Benchmark: notebook 09's comparison of 08's GPT with ModernGPT (same loop, budget, data and parameter count).

Trains the reference models (`solutions.gpt.GPT`, `solutions.modern.ModernGPT` with the matched SwiGLU width) with
08's loop and budget (`coursekit.lm_training`) on tinyshakespeare's 90/10 split, for each seed, and records per run:
the validation curve, the final loss in nats per character and bits per character over the whole validation text,
the loss of ModernGPT on windows longer than it was trained on, a sample, and the wall time.

    python bench/modern.py --seeds 0 1 2 --record        # writes data/modern_vs_gpt.json (what notebook 09 shows)
    python bench/modern.py --models modern --seeds 0     # one run, printed only
    python bench/modern.py --attention                   # the attention cost table (03's attention vs F.sdpa)

One torch thread per run unless --threads says otherwise; --jobs runs that many runs side by side (processes).
"""
from __future__ import annotations

import argparse
import json
import math
import platform
import statistics
import time
from concurrent.futures import ProcessPoolExecutor, as_completed
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[1]
LONGER = (128, 256)          # evaluation lengths past the training block (64)


def run(model_kind: str, seed: int, budget_name: str, threads: int, steps: int | None = None) -> dict:
    torch.set_num_threads(threads)
    from coursekit.lm_training import BUDGETS, model_config, train_language_model
    from coursekit.modern_comparison import matched_d_ff, parameter_count
    from coursekit.shakespeare import CharVocabulary, load_shakespeare, split_text
    from solutions.gpt import GPT, estimate_loss, generate, get_batch, lr_at, train_step
    from solutions.modern import ModernGPT

    budget = BUDGETS[budget_name]
    text = load_shakespeare()
    train_text, val_text = split_text(text)
    chars = CharVocabulary(text)
    train_ids, val_ids = torch.tensor(chars.encode(train_text)), torch.tensor(chars.encode(val_text))
    config = model_config(budget)
    torch.manual_seed(seed)
    gpt = GPT(len(chars), **config)
    if model_kind == "gpt":
        model = gpt
    else:
        d_ff = matched_d_ff(parameter_count(gpt), len(chars), budget.d_model, budget.num_heads,
                            max(1, budget.num_heads // 2), budget.num_layers)
        torch.manual_seed(seed)
        model = ModernGPT(len(chars), budget.d_model, budget.num_heads, max(1, budget.num_heads // 2), d_ff,
                          budget.num_layers, max_len=max(LONGER))
    history = train_language_model(model, train_ids, val_ids, budget, get_batch, train_step, estimate_loss, lr_at,
                                   "cpu", steps=steps, generator=torch.Generator().manual_seed(seed))
    loss = estimate_loss(model, val_ids, budget.block_size, "cpu")
    longer = {}
    if model_kind == "modern":
        for length in LONGER:
            longer[str(length)] = estimate_loss(model, val_ids[:40_000], length, "cpu")
        longer[str(budget.block_size)] = estimate_loss(model, val_ids[:40_000], budget.block_size, "cpu")
    prompt = torch.tensor([chars.encode("\n")])
    sampler = model
    if model_kind == "modern":
        # generate feeds the last model.max_len tokens: sample with the context the model was trained on (block_size),
        # not the longer max_len built for the evaluation above (the rotary tables are not in the state_dict)
        sampler = ModernGPT(len(chars), budget.d_model, budget.num_heads, max(1, budget.num_heads // 2), d_ff,
                            budget.num_layers, max_len=budget.block_size)
        sampler.load_state_dict(model.state_dict())
    sample = chars.decode(generate(sampler, prompt, 300, temperature=0.8,
                                   generator=torch.Generator().manual_seed(seed))[0, 1:])
    return {"model": "GPT" if model_kind == "gpt" else "ModernGPT", "seed": seed, "budget": budget_name,
            "parameters": parameter_count(model),
            "d_ff": model.blocks[0].ffn.w_up.out_features if model_kind == "modern" else config["d_ff"],
            "steps": len(history["step"]), "val_step": history["val step"], "val_loss": history["val loss"],
            "train_loss_every_25": [statistics.fmean(history["train loss"][i:i + 25])
                                    for i in range(0, len(history["train loss"]), 25)],
            "final_val_loss": loss, "bits_per_char": loss / math.log(2),   # one token per character
            "longer_windows": longer, "sample": sample, "train_seconds": history["seconds"]}


def attention_table(lengths, device: str, threads: int) -> list[dict]:
    torch.set_num_threads(threads)
    from coursekit.attention_cost import measure
    from solutions.attention import scaled_dot_product_attention

    return measure(scaled_dot_product_attention, lengths, device)


def _markdown_runs(runs: list[dict]) -> str:
    lines = ["| budget | model | parameters | seed | steps | val nats/char | val bits/char | train time (s) |",
             "|---|---|---|---|---|---|---|---|"]
    for r in runs:
        lines.append(f"| {r['budget']} | {r['model']} | {r['parameters']:,} | {r['seed']} | {r['steps']} | "
                     f"{r['final_val_loss']:.3f} | {r['bits_per_char']:.3f} | {r['train_seconds']:.0f} |")
    for budget, model in sorted({(r["budget"], r["model"]) for r in runs}):
        bits = [r["bits_per_char"] for r in runs if (r["budget"], r["model"]) == (budget, model)]
        spread = f" ± {statistics.stdev(bits):.3f}" if len(bits) > 1 else ""
        lines.append(f"| {budget} | **{model}** mean of {len(bits)} | | | | | **{statistics.fmean(bits):.3f}{spread}** "
                     f"| |")
    return "\n".join(lines)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", nargs="+", default=["gpt", "modern"], choices=["gpt", "modern"])
    parser.add_argument("--seeds", type=int, nargs="+", default=[0])
    parser.add_argument("--budget", default="student", choices=["student", "grading"])
    parser.add_argument("--steps", type=int, default=None)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--jobs", type=int, default=1)
    parser.add_argument("--record", action="store_true", help="write data/modern_vs_gpt.json")
    parser.add_argument("--out", type=Path, default=None, help="also write each finished run to this folder")
    parser.add_argument("--collect", type=Path, default=None,
                        help="write data/modern_vs_gpt.json from the run files of this folder (no training)")
    parser.add_argument("--attention", action="store_true", help="print the attention cost table instead")
    parser.add_argument("--lengths", type=int, nargs="+", default=[64, 128, 256, 512, 1024, 2048])
    args = parser.parse_args(argv)
    stamp = (f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, {platform.node()}, "
             f"{platform.processor() or platform.machine()}, torch {torch.__version__}, {args.threads} thread(s)")
    if args.attention:
        device = "cuda" if torch.cuda.is_available() else "cpu"
        rows = attention_table(args.lengths, device, args.threads)
        print(f"# attention cost, {stamp}, device {device}")
        from coursekit.attention_cost import markdown

        print(markdown(rows))
        return 0
    if args.collect:
        runs = [json.loads(p.read_text()) for p in sorted(args.collect.glob("*.json"))]
        runs.sort(key=lambda r: (r["budget"] != "student", r["seed"], r["model"]))
        path = ROOT / "data" / "modern_vs_gpt.json"
        path.write_text(json.dumps({"meta": {"recorded": sorted({r.pop("recorded") for r in runs}),
                                             "command": "python bench/modern.py " + " ".join(argv or [])},
                                    "runs": runs}, indent=1) + "\n", encoding="utf-8")
        print(_markdown_runs(runs))
        print(f"wrote {path}")
        return 0
    jobs = [(m, s) for s in args.seeds for m in args.models]
    runs = []
    with ProcessPoolExecutor(max_workers=args.jobs) as pool:
        futures = [pool.submit(run, m, s, args.budget, args.threads, args.steps) for m, s in jobs]
        for future in as_completed(futures):
            result = future.result()
            runs.append(result)
            if args.out:   # one file per finished run: a long benchmark keeps what it finished
                args.out.mkdir(parents=True, exist_ok=True)
                name = f"{result['budget']}_{result['model']}_{result['seed']}.json"
                (args.out / name).write_text(json.dumps({**result, "recorded": stamp}) + "\n", encoding="utf-8")
                print(f"finished {name} ({result['bits_per_char']:.3f} bits/char)", flush=True)
    runs.sort(key=lambda r: (r["seed"], r["model"]))
    print(f"# GPT vs ModernGPT, {stamp}, {args.jobs} run(s) side by side, budget {args.budget}")
    print(_markdown_runs(runs))
    for r in runs:
        if r["longer_windows"]:
            print(f"{r['model']} seed {r['seed']} loss by window length: "
                  + ", ".join(f"{k}: {v:.3f}" for k, v in sorted(r["longer_windows"].items(), key=lambda kv: int(kv[0]))))
    if args.record:
        path = ROOT / "data" / "modern_vs_gpt.json"
        path.write_text(json.dumps({"meta": {"recorded": stamp, "jobs": args.jobs, "budget": args.budget,
                                             "command": "python bench/modern.py " + " ".join(argv or [])},
                                    "runs": runs}, indent=1) + "\n", encoding="utf-8")
        print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    import sys

    raise SystemExit(main(sys.argv[1:]))
