"""Greedy decoding with and without the key/value cache, side by side.

Both paths run on the same randomly initialised reference Transformer (solutions.Transformer) and produce the
same tokens (checked on every run). The end-of-sequence token is made impossible, so every run decodes exactly
the requested number of tokens.

    python bench/decode.py                      # plain text
    python bench/decode.py --markdown           # a markdown table for docs/benchmarks.md
    python bench/decode.py --repeats 5 --lengths 32 64 128 --device cpu
"""
from __future__ import annotations

import argparse
import platform
import sys
import time

import torch

from solutions import Transformer, greedy_decode

EOS_ID = 3


def parse_args(argv=None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--lengths", type=int, nargs="+", default=[32, 64, 128], help="target lengths to decode")
    parser.add_argument("--repeats", type=int, default=2, help="timed runs per setting (the fastest is reported)")
    parser.add_argument("--batch", type=int, default=8)
    parser.add_argument("--src-len", type=int, default=32, help="source sequence length")
    parser.add_argument("--d-model", type=int, default=128)
    parser.add_argument("--heads", type=int, default=4)
    parser.add_argument("--d-ff", type=int, default=512)
    parser.add_argument("--layers", type=int, default=4)
    parser.add_argument("--vocab", type=int, default=1000)
    parser.add_argument("--device", action="append", choices=["cpu", "cuda"],
                        help="device(s) to run on (repeatable); default: cpu, plus cuda when present")
    parser.add_argument("--markdown", action="store_true", help="print a markdown table")
    args = parser.parse_args(argv)
    if args.repeats < 1:
        parser.error("--repeats must be at least 1")
    if min(args.lengths) < 1 or args.batch < 1 or args.src_len < 1:
        parser.error("--lengths, --batch and --src-len must be positive")
    if args.d_model % args.heads != 0:
        parser.error(f"--d-model {args.d_model} must be divisible by --heads {args.heads}")
    if args.device and "cuda" in args.device and not torch.cuda.is_available():
        parser.error("--device cuda was asked for, but no CUDA device is available")
    return args


def build_model(args, device: torch.device) -> Transformer:
    torch.manual_seed(0)
    model = Transformer(args.vocab, args.vocab, d_model=args.d_model, num_heads=args.heads, d_ff=args.d_ff,
                        num_layers=args.layers, max_len=max(512, max(args.lengths)), dropout=0.0)
    with torch.no_grad():
        model.generator.bias[EOS_ID] = -1e4  # never stop early: every run decodes the full length
    return model.to(device).eval()


def time_decode(model, src, length: int, use_cache: bool, repeats: int, device: torch.device):
    """Fastest wall time in seconds of `repeats` runs (the least disturbed by other load), and the tokens."""
    times = []
    for _ in range(repeats):
        if device.type == "cuda":
            torch.cuda.synchronize()
        start = time.perf_counter()
        tokens = greedy_decode(model, src, length, eos_id=EOS_ID, use_cache=use_cache)
        if device.type == "cuda":
            torch.cuda.synchronize()
        times.append(time.perf_counter() - start)
    return min(times), tokens


def main(argv=None) -> int:
    args = parse_args(argv)
    names = args.device or (["cpu", "cuda"] if torch.cuda.is_available() else ["cpu"])
    rows = []
    for name in names:
        device = torch.device(name)
        if device.type == "cuda":
            torch.backends.cuda.matmul.allow_tf32 = False  # both paths in plain float32
            torch.backends.cudnn.allow_tf32 = False
        model = build_model(args, device)
        src = torch.randint(4, args.vocab, (args.batch, args.src_len), generator=torch.Generator().manual_seed(1))
        src = src.to(device)
        for use_cache in (False, True):  # warm-up: first calls pay for allocation (and CUDA kernel loading)
            greedy_decode(model, src, min(args.lengths), eos_id=EOS_ID, use_cache=use_cache)
        for length in args.lengths:
            t_plain, tokens_plain = time_decode(model, src, length, False, args.repeats, device)
            t_cached, tokens_cached = time_decode(model, src, length, True, args.repeats, device)
            rows.append((name, length, t_plain, t_cached, torch.equal(tokens_plain, tokens_cached)))

    setup = (f"model: d_model={args.d_model}, heads={args.heads}, d_ff={args.d_ff}, layers={args.layers} "
             f"(encoder and decoder), vocab={args.vocab}; batch={args.batch}, source length={args.src_len}; "
             f"fastest of {args.repeats} runs after a warm-up; torch {torch.__version__}, "
             f"{platform.machine()}, {torch.get_num_threads()} CPU threads")
    header = ["device", "target length", "uncached (s)", "cached (s)", "speed-up", "same tokens"]
    lines = [[name, str(length), f"{tp:.3f}", f"{tc:.3f}", f"{tp / tc:.2f}x", "yes" if same else "NO"]
             for name, length, tp, tc, same in rows]
    if args.markdown:
        print(f"Greedy decoding, cached vs uncached. {setup}\n")
        print("| " + " | ".join(header) + " |")
        print("|" + "|".join("---" for _ in header) + "|")
        for line in lines:
            print("| " + " | ".join(line) + " |")
    else:
        print(setup)
        widths = [max(len(h), *(len(line[i]) for line in lines)) for i, h in enumerate(header)]
        print("  ".join(h.rjust(w) for h, w in zip(header, widths)))
        for line in lines:
            print("  ".join(cell.rjust(w) for cell, w in zip(line, widths)))
    if not all(same for *_, same in rows):
        print("ERROR: cached and uncached decoding produced different tokens", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
