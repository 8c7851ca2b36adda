"""Benchmark: notebook 07's training epoch against torch's CPU thread count, with and without other load.

A student's kernel rarely has the machine to itself: on a JupyterHub node or a 2-core laptop other kernels (or the
browser) compete for the cores. torch's default is one thread per core; when the cores are busy, its threads wait for
each other at every operation and an epoch can take ten times longer. This script trains the 07 pipeline (the
reference TransformerClassifier and train_one_epoch, the notebook's data handling and settings) for one epoch per
setting and prints the seconds per epoch:

    python bench/student_threads.py                        # threads 1, 2 and torch's default; idle and loaded
    python bench/student_threads.py --limit 8000 --markdown   # the notebook's full training set, a markdown table

"loaded" starts `--load` busy processes (default: one per CPU) that each multiply matrices with torch's default
threads, as other students' kernels would. Every configuration runs in a fresh process, so the thread settings
cannot leak from one to the next.
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import time
from datetime import datetime, timezone
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

HOG = """
import torch
a = torch.randn(384, 384)
while True:
    a = torch.tanh(a @ a.T / 384)
"""

EPOCH = """
import json, sys, time
import torch
threads = int(sys.argv[1]); limit = int(sys.argv[2]); epochs = int(sys.argv[3])
if threads > 0:
    torch.set_num_threads(threads)
import coursekit
from coursekit import load_yelp, tokenize
from coursekit.loaders import make_loader
from solutions import TransformerClassifier, build_vocab, encode, train_one_epoch
coursekit.set_seed(0)
texts, labels = load_yelp("synthetic", split="train", limit=limit, seed=0)
vocab = build_vocab((tokenize(t) for t in texts), min_freq=2)
ids = [encode(tokenize(t), vocab)[:128] or [vocab["<unk>"]] for t in texts]
loader = make_loader(ids, labels, batch_size=32, shuffle=True, seed=0)
model = TransformerClassifier(len(vocab), num_classes=5, d_model=64, num_heads=4, d_ff=128, num_layers=2,
                              max_len=128, dropout=0.1)
optimizer = torch.optim.AdamW(model.parameters(), lr=3e-3, weight_decay=0.05)
seconds = []
for _ in range(epochs):
    start = time.perf_counter()
    train_one_epoch(model, loader, optimizer, torch.device("cpu"))
    seconds.append(time.perf_counter() - start)
print(json.dumps({"threads": torch.get_num_threads(), "seconds": min(seconds), "reviews": len(texts)}))
"""


def run_epoch(threads: int, limit: int, epochs: int) -> dict:
    env = {k: v for k, v in os.environ.items() if k not in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "COURSE_NUM_THREADS")}
    env["PYTHONPATH"] = str(ROOT)
    result = subprocess.run([sys.executable, "-c", EPOCH, str(threads), str(limit), str(epochs)], env=env,
                            capture_output=True, text=True, check=True, timeout=3600)
    return json.loads(result.stdout.strip().splitlines()[-1])


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--limit", type=int, default=2000, help="training reviews (07 uses 8000; default 2000)")
    parser.add_argument("--epochs", type=int, default=1, help="epochs per setting; the fastest one counts")
    parser.add_argument("--threads", type=int, nargs="+", default=[1, 2, 0], help="0 = torch's default")
    parser.add_argument("--load", type=int, default=os.cpu_count() or 1, help="busy processes when loaded")
    parser.add_argument("--markdown", action="store_true")
    args = parser.parse_args(argv)

    import torch

    rows = []
    for loaded in (False, True):
        hogs = []
        if loaded:
            hogs = [subprocess.Popen([sys.executable, "-c", HOG]) for _ in range(args.load)]
            time.sleep(2)
        try:
            for threads in args.threads:
                result = run_epoch(threads, args.limit, args.epochs)
                label = f"{result['threads']}" + (" (torch default)" if threads == 0 else "")
                rows.append((f"{args.load} busy processes" if loaded else "no extra load", label,
                             result["seconds"], result["reviews"]))
                print(f"{rows[-1][0]:>20} | threads {label:>17} | {result['seconds']:7.1f} s per epoch "
                      f"({result['reviews']} reviews)", flush=True)
        finally:
            for hog in hogs:
                hog.terminate()
            for hog in hogs:
                hog.wait()
    with open("/proc/loadavg") as f:
        load = f.read().split()[0]
    machine = (f"{platform.processor() or platform.machine()}, {os.cpu_count()} CPUs, torch {torch.__version__}, "
               f"1-min load average at the end {load}")
    if args.markdown:
        print(f"\n{datetime.now(timezone.utc):%Y-%m-%d %H:%M} UTC; {machine}; {args.limit} reviews, "
              f"best of {args.epochs} epoch(s)\n")
        print("| other load | torch threads | s per epoch | x 8000/limit (07's epoch) |")
        print("|---|---|---:|---:|")
        for load_label, threads, seconds, reviews in rows:
            print(f"| {load_label} | {threads} | {seconds:.1f} | {seconds * 8000 / reviews:.0f} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
