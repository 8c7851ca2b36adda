"""Benchmark: the reference Transformer review classifier against TF-IDF + logistic regression and the majority class.

Trains the notebook 07 pipeline (coursekit.tokenize -> vocabulary -> truncated ids -> length-bucketed batches ->
solutions.TransformerClassifier with AdamW, one `solutions.train_one_epoch` per epoch) on any coursekit.load_yelp
source and prints accuracy, macro-F1, training wall time and tokens/s next to the two baselines on the same split,
on the CPU and, when present, on CUDA.

    python bench/yelp.py                                  # synthetic set, the notebook's default budget
    python bench/yelp.py --budget grading --markdown      # the budget the notebook uses under nbgrader
    python bench/yelp.py --source data/ --limit 5000 --folds 5   # a small real sample, 5-fold cross-validation

Budgets (shared with the notebook; keep them in sync with course/source/07_yelp_classifier):
  grading: what the notebook trains under `coursekit.grading_mode()`; it sets the hidden check's accuracy bar.
  default: the student run outside grading (<= 3 minutes on 2 CPU cores).
"""
from __future__ import annotations

import argparse
import math
import platform
import statistics
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))  # bench/ itself: tfidf_baseline

BUDGETS = {
    "grading": dict(train_limit=None, epochs=6, lr=3e-3),
    "default": dict(train_limit=None, epochs=20, lr=3e-3),
}
MODEL = dict(d_model=64, num_heads=4, d_ff=128, num_layers=2, dropout=0.1)
DATA = dict(min_freq=2, max_len=128, batch_size=32)
OPTIMIZER = dict(weight_decay=0.05)


# ------------------------------------------------------------------------------------------------ pipeline
def build_vocab(tokenized_texts, min_freq: int) -> dict[str, int]:
    from solutions import build_vocab as reference_build_vocab

    return reference_build_vocab(tokenized_texts, min_freq=min_freq)


def encode_all(tokenized_texts, vocab: dict[str, int], max_len: int) -> list[list[int]]:
    """Token ids of each review, cut after max_len tokens (the head of a review is kept)."""
    unk = vocab["<unk>"]
    return [[vocab.get(token, unk) for token in tokens][:max_len] or [unk] for tokens in tokenized_texts]


def epoch_lr_factor(epoch: int, epochs: int) -> float:
    """Learning-rate factor per epoch: full rate, then linear decay to a tenth at the last epoch."""
    if epochs <= 1:
        return 1.0
    return 1.0 - 0.9 * epoch / (epochs - 1)


def train_transformer(train_texts, train_labels, test_texts, test_labels, epochs: int, lr: float, seed: int = 0,
                      device: torch.device | str = "cpu", progress: bool = False, **overrides) -> dict:
    """Train the reference classifier; returns metrics, the model, its vocab and the per-epoch history."""
    import solutions
    from coursekit import set_seed, tokenize
    from coursekit.loaders import make_loader

    settings = {**MODEL, **DATA, **OPTIMIZER, **overrides}
    device = torch.device(device)
    set_seed(seed)
    start = time.perf_counter()
    train_tokens = [tokenize(text) for text in train_texts]
    vocab = build_vocab(train_tokens, settings["min_freq"])
    train_ids = encode_all(train_tokens, vocab, settings["max_len"])
    test_ids = encode_all([tokenize(text) for text in test_texts], vocab, settings["max_len"])
    prep_seconds = time.perf_counter() - start

    train_loader = make_loader(train_ids, train_labels, settings["batch_size"], shuffle=True, seed=seed)
    test_loader = make_loader(test_ids, test_labels, 256, shuffle=False)
    model = solutions.TransformerClassifier(
        len(vocab), num_classes=5, d_model=settings["d_model"], num_heads=settings["num_heads"],
        d_ff=settings["d_ff"], num_layers=settings["num_layers"], max_len=settings["max_len"],
        dropout=settings["dropout"]).to(device)
    optimizer = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=settings["weight_decay"])
    schedule = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda epoch: epoch_lr_factor(epoch, epochs))

    history = {"train loss": [], "test accuracy": []}
    train_seconds = 0.0
    epochs_iter = range(epochs)
    if progress:
        from tqdm.auto import tqdm
        epochs_iter = tqdm(epochs_iter, desc=f"training on {device.type}")
    for _ in epochs_iter:
        tick = time.perf_counter()
        history["train loss"].append(solutions.train_one_epoch(model, train_loader, optimizer, device))
        if device.type == "cuda":
            torch.cuda.synchronize()
        train_seconds += time.perf_counter() - tick
        schedule.step()
        history["test accuracy"].append(solutions.evaluate(model, test_loader, device))

    predictions = predict(model, test_loader, device)
    from sklearn.metrics import f1_score

    tokens = sum(len(ids) for ids in train_ids) * epochs
    return {
        "accuracy": history["test accuracy"][-1],
        "macro_f1": float(f1_score(test_labels_in_loader_order(test_loader), predictions, average="macro")),
        "seconds": train_seconds,
        "prep_seconds": prep_seconds,
        "tokens_per_s": tokens / max(train_seconds, 1e-9),
        "model": model,
        "vocab": vocab,
        "max_len": settings["max_len"],
        "history": history,
    }


@torch.no_grad()
def predict(model, loader, device) -> list[int]:
    model.eval()
    return [int(p) for ids, _ in loader for p in model(ids.to(device)).argmax(dim=-1).cpu()]


def test_labels_in_loader_order(loader) -> list[int]:
    return [int(label) for _, labels in loader for label in labels]


def train_reference(budget: str = "grading", seed: int = 0, source="synthetic", device="cpu",
                    epochs: int | None = None) -> dict:
    """The notebook's run of `budget` on `source`'s train split, scored on its test split."""
    from coursekit import load_yelp

    config = BUDGETS[budget]
    train_texts, train_labels = load_yelp(source, "train", limit=config["train_limit"], seed=seed)
    test_texts, test_labels = load_yelp(source, "test")
    return train_transformer(train_texts, train_labels, test_texts, test_labels,
                             epochs=epochs or config["epochs"], lr=config["lr"], seed=seed, device=device)


# ------------------------------------------------------------------------------------------------ comparisons
def compare_on_split(train, test, epochs: int, lr: float, devices, seed: int = 0) -> dict[str, dict]:
    from tfidf_baseline import majority_baseline, tfidf_logreg_baseline

    rows = {"majority class": majority_baseline(train[1], test[1]),
            "TF-IDF 1-2 grams + logistic regression": tfidf_logreg_baseline(*train, *test)}
    for device in devices:
        result = train_transformer(*train, *test, epochs=epochs, lr=lr, seed=seed, device=device)
        rows[f"Transformer ({torch.device(device).type}, {epochs} epochs)"] = result
    return rows


def stratified_folds(labels, k: int, seed: int) -> list[list[int]]:
    """k lists of indices with the classes spread evenly over the folds."""
    import random

    by_class: dict[int, list[int]] = {}
    for index, label in enumerate(labels):
        by_class.setdefault(label, []).append(index)
    folds: list[list[int]] = [[] for _ in range(k)]
    rng = random.Random(seed)
    position = 0
    for label in sorted(by_class):
        indices = by_class[label]
        rng.shuffle(indices)
        for index in indices:
            folds[position % k].append(index)
            position += 1
    return folds


def cross_validate(texts, labels, k: int, epochs: int, lr: float, devices, seed: int = 0) -> dict[str, dict]:
    """Mean (and spread) of each method over k train/test folds of one labelled sample."""
    if k < 2 or k > len(texts):
        raise ValueError(f"--folds must be between 2 and the number of reviews ({len(texts)}), got {k}")
    per_method: dict[str, list[dict]] = {}
    for fold in stratified_folds(labels, k, seed):
        held_out = set(fold)
        train = ([t for i, t in enumerate(texts) if i not in held_out], [y for i, y in enumerate(labels)
                                                                          if i not in held_out])
        test = ([texts[i] for i in fold], [labels[i] for i in fold])
        for name, result in compare_on_split(train, test, epochs, lr, devices, seed).items():
            per_method.setdefault(name, []).append(result)
    summary = {}
    for name, results in per_method.items():
        summary[name] = {key: statistics.fmean(r[key] for r in results) for key in ("accuracy", "macro_f1",
                                                                                     "seconds")}
        summary[name]["tokens_per_s"] = statistics.fmean(r.get("tokens_per_s", math.nan) for r in results)
        summary[name]["accuracy_sd"] = statistics.pstdev(r["accuracy"] for r in results)
    return summary


def format_table(rows: dict[str, dict], title: str, markdown: bool) -> str:
    header = ["method", "accuracy", "macro-F1", "train s", "tokens/s"]
    body = []
    for name, r in rows.items():
        accuracy = f"{r['accuracy']:.3f}" + (f" ± {r['accuracy_sd']:.3f}" if "accuracy_sd" in r else "")
        tokens = r.get("tokens_per_s")
        body.append([name, accuracy, f"{r['macro_f1']:.3f}", f"{r['seconds']:.1f}",
                     "-" if tokens is None or math.isnan(tokens) else f"{tokens:,.0f}"])
    if markdown:
        lines = [f"**{title}**", "", "| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
        lines += ["| " + " | ".join(row) + " |" for row in body]
        return "\n".join(lines)
    widths = [max(len(str(row[i])) for row in [header] + body) for i in range(len(header))]
    lines = [title, "  ".join(h.ljust(w) for h, w in zip(header, widths))]
    lines += ["  ".join(str(c).ljust(w) for c, w in zip(row, widths)) for row in body]
    return "\n".join(lines)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--source", default="synthetic", help="a coursekit.load_yelp source (default: synthetic)")
    parser.add_argument("--budget", choices=sorted(BUDGETS), default="default",
                        help="epochs / training subset / learning rate of the notebook's run (default: default)")
    parser.add_argument("--limit", type=int, default=None,
                        help="class-balanced subset of the training split (default: the budget's)")
    parser.add_argument("--test-limit", type=int, default=None, help="class-balanced subset of the test split")
    parser.add_argument("--folds", type=int, default=0,
                        help="k-fold cross-validation on the (limited) training split instead of the test split")
    parser.add_argument("--epochs", type=int, default=None, help="override the budget's number of epochs")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--device", choices=["auto", "cpu", "cuda"], default="auto",
                        help="auto: the CPU, plus CUDA when present")
    parser.add_argument("--threads", type=int, default=None, help="torch CPU threads (default: torch's choice)")
    parser.add_argument("--markdown", action="store_true", help="print a markdown table")
    args = parser.parse_args(argv)

    from coursekit import load_yelp

    if args.threads:
        torch.set_num_threads(args.threads)
    if args.device == "cuda" and not torch.cuda.is_available():
        parser.error("--device cuda but CUDA is not available")
    devices = {"cpu": ["cpu"], "cuda": ["cuda"]}.get(args.device) or (
        ["cpu", "cuda"] if torch.cuda.is_available() else ["cpu"])
    if "cuda" in devices:
        torch.backends.cuda.matmul.allow_tf32 = False
        torch.backends.cudnn.allow_tf32 = False
    config = BUDGETS[args.budget]
    epochs = args.epochs or config["epochs"]
    limit = args.limit if args.limit is not None else config["train_limit"]
    try:
        train = load_yelp(args.source, "train", limit=limit, seed=args.seed)
        if args.folds:
            rows = cross_validate(*train, k=args.folds, epochs=epochs, lr=config["lr"], devices=devices,
                                  seed=args.seed)
            split = f"{args.folds}-fold cross-validation over {len(train[0])} reviews"
        else:
            test = load_yelp(args.source, "test", limit=args.test_limit, seed=args.seed)
            rows = compare_on_split(train, test, epochs, config["lr"], devices, args.seed)
            split = f"{len(train[0])} train / {len(test[0])} test reviews"
    except (OSError, ValueError) as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    machine = f"{platform.machine()}, {torch.get_num_threads()} torch threads, torch {torch.__version__}"
    title = (f"Yelp classifier on {args.source} ({split}; budget {args.budget}, seed {args.seed}; "
             f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}; {machine})")
    print(format_table(rows, title, args.markdown))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
