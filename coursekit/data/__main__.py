"""Command line: `python -m coursekit.data synthesize|download ...`."""
from __future__ import annotations

import argparse
import sys


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m coursekit.data", description=__doc__)
    commands = parser.add_subparsers(dest="command", required=True)

    synth = commands.add_parser("synthesize", help="write the synthetic Yelp-style review set")
    synth.add_argument("--seed", type=int, default=0)
    synth.add_argument("--dest", default="data/yelp_synthetic", help="folder (default: data/yelp_synthetic)")
    synth.add_argument("--train", type=int, default=8000, help="number of training reviews (default 8000)")
    synth.add_argument("--test", type=int, default=2000, help="number of test reviews (default 2000)")
    synth.add_argument("--force", action="store_true", help="overwrite CSV files this generator did not write")

    fetch = commands.add_parser("download", help="download a real data set (yelp_review_full)")
    fetch.add_argument("name", choices=["yelp_review_full"])
    fetch.add_argument("--dest", default="data", help="folder to put the file in (default: data)")
    fetch.add_argument("--url", help="download from this URL instead (a mirror)")
    fetch.add_argument("--md5", help="expected MD5 (default: the known one for the default URL)")
    fetch.add_argument("--size", type=int, help="expected size in bytes (default: known for the default URL)")
    fetch.add_argument("--timeout", type=float, default=15.0, help="network timeout in seconds (default 15)")
    fetch.add_argument("--no-progress", action="store_true", help="no progress bar")
    return parser


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    try:
        if args.command == "synthesize":
            from .synth import synthesize

            for path in synthesize(args.dest, seed=args.seed, train_size=args.train, test_size=args.test,
                                   force=args.force):
                print(f"wrote {path}")
        else:
            from .download import download

            path = download(args.name, dest=args.dest, url=args.url, md5=args.md5, size=args.size,
                            timeout=args.timeout, progress=not args.no_progress)
            print(f"ready: {path}")
    except (OSError, ValueError, RuntimeError) as error:
        print(f"error: {error}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
