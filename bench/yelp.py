"""Benchmark: the reference Transformer review classifier against TF-IDF + logistic regression and the majority class.

Trains the notebook 07 pipeline (coursekit.tokenize -> vocabulary -> truncated ids -> length-bucketed batches ->
solutions.TransformerClassifier with AdamW, one `solutions.train_one_epoch` per epoch) on any coursekit.load_yelp
source and prints accuracy, macro-F1, training wall time and tokens/s next to the two baselines on the same split,
on the CPU and, when present, on CUDA.

    python bench/yelp.py                                  # synthetic set, the notebook's default budget
    python bench/yelp.py --budget grading --markdown      # the budget the notebook uses under nbgrader
    python bench/yelp.py --source data/ --limit 5000 --folds 5   # a small real sample, 5-fold cross-validation
    python bench/yelp.py --variants random word2vec cls --limit 1000 --seeds 0 1 2
        # side by side, same seeds, batches and epochs: random start vs a start from word2vec vectors trained on
        # every training-split text (labelled or not), and [CLS]-token pooling instead of the masked mean

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


class ClsTokenClassifier(torch.nn.Module):
    """The reference encoder, classifying from the final vector of a [CLS] token put in front of every review."""

    def __init__(self, vocab_size: int, num_classes: int, d_model: int, num_heads: int, d_ff: int, num_layers: int,
                 max_len: int, dropout: float, pad_id: int = 0):
        import solutions

        super().__init__()
        self.pad_id = pad_id
        self.cls_id = vocab_size  # one extra row of the embedding, after the vocabulary
        self.encoder = solutions.Encoder(vocab_size + 1, d_model, num_heads, d_ff, num_layers, max_len + 1, dropout)
        self.classifier = torch.nn.Linear(d_model, num_classes)

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        import solutions

        cls = torch.full((ids.shape[0], 1), self.cls_id, dtype=ids.dtype, device=ids.device)   # (B, 1)
        ids = torch.cat([cls, ids], dim=1)                                                      # (B, 1 + T)
        hidden = self.encoder(ids, solutions.make_padding_mask(ids, self.pad_id))              # (B, 1 + T, d)
        return self.classifier(hidden[:, 0])                                                    # (B, classes)


def train_transformer(train_texts, train_labels, test_texts, test_labels, epochs: int, lr: float, seed: int = 0,
                      device: torch.device | str = "cpu", progress: bool = False, pooling: str = "mean",
                      word2vec_texts=None, **overrides) -> dict:
    """Train the reference classifier; returns metrics, the model, its vocab and the per-epoch history.

    pooling: "mean" (the notebook's masked mean) or "cls" (ClsTokenClassifier). word2vec_texts: when given, the
    token embedding starts from word2vec vectors trained on these texts (coursekit.word2vec_init); everything
    else (seed, batches, steps) is the same as without.
    """
    import solutions
    from coursekit import set_seed, tokenize
    from coursekit.loaders import make_loader

    if pooling not in ("mean", "cls"):
        raise ValueError(f"pooling must be 'mean' or 'cls', got {pooling!r}")
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
    word2vec_seconds = 0.0
    if word2vec_texts is not None:
        from coursekit.word2vec_init import rescale_known_rows, train_word2vec

        tick = time.perf_counter()
        vectors = train_word2vec((tokenize(text) for text in word2vec_texts), dim=settings["d_model"], seed=seed,
                                 min_count=settings["min_freq"])
        matrix, known = rescale_known_rows(solutions.embedding_matrix_from_word2vec(vocab, vectors))
        word2vec_seconds = time.perf_counter() - tick
    set_seed(seed)  # nothing above draws from torch's generator: the same start as without word2vec
    architecture = solutions.TransformerClassifier if pooling == "mean" else ClsTokenClassifier
    model = architecture(
        len(vocab), num_classes=5, d_model=settings["d_model"], num_heads=settings["num_heads"],
        d_ff=settings["d_ff"], num_layers=settings["num_layers"], max_len=settings["max_len"],
        dropout=settings["dropout"]).to(device)
    if word2vec_texts is not None:
        from coursekit.word2vec_init import init_embedding

        if pooling == "cls":  # the [CLS] row stays random
            matrix = torch.cat([matrix, torch.zeros(1, matrix.shape[1])])
            known = torch.cat([known, torch.zeros(1, dtype=torch.bool)])
        init_embedding(model, matrix, known)
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
        "word2vec_seconds": word2vec_seconds,
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


VARIANTS = {  # name -> (label, pooling, word2vec start)
    "random": ("masked mean, random start", "mean", False),
    "word2vec": ("masked mean, word2vec start", "mean", True),
    "cls": ("[CLS] token, random start", "cls", False),
}


def compare_variants(train, test, variants, epochs: int, lr: float, seeds, device="cpu",
                     word2vec_texts=None) -> dict[str, dict]:
    """Each variant trained with each seed on the same split; mean, spread and every seed's accuracy.

    word2vec_texts: the text word2vec reads for the "word2vec" variant (default: the labelled training texts).
    """
    rows = {}
    for key in variants:
        label, pooling, from_word2vec = VARIANTS[key]
        runs = [train_transformer(*train, *test, epochs=epochs, lr=lr, seed=seed, device=device, pooling=pooling,
                                  word2vec_texts=(word2vec_texts or train[0]) if from_word2vec else None)
                for seed in seeds]
        rows[label] = {
            "accuracy": statistics.fmean(r["accuracy"] for r in runs),
            "accuracy_sd": statistics.pstdev(r["accuracy"] for r in runs),
            "per_seed": [r["accuracy"] for r in runs],
            "macro_f1": statistics.fmean(r["macro_f1"] for r in runs),
            "seconds": statistics.fmean(r["seconds"] + r["word2vec_seconds"] for r in runs),
            "tokens_per_s": statistics.fmean(r["tokens_per_s"] for r in runs),
        }
    return rows


def format_variants(rows: dict[str, dict], seeds, title: str, markdown: bool) -> str:
    header = ["variant", "mean accuracy", *[f"seed {s}" for s in seeds], "macro-F1", "s per run"]
    body = [[name, f"{r['accuracy']:.3f} ± {r['accuracy_sd']:.3f}", *[f"{a:.3f}" for a in r["per_seed"]],
             f"{r['macro_f1']:.3f}", f"{r['seconds']:.1f}"] for name, r in rows.items()]
    if markdown:
        lines = [f"**{title}**", "", "| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
        return "\n".join(lines + ["| " + " | ".join(row) + " |" for row in body])
    widths = [max(len(str(row[i])) for row in [header] + body) for i in range(len(header))]
    lines = [title, "  ".join(h.ljust(w) for h, w in zip(header, widths))]
    return "\n".join(lines + ["  ".join(str(c).ljust(w) for c, w in zip(row, widths)) for row in body])


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
    parser.add_argument("--variants", nargs="+", choices=sorted(VARIANTS), default=None,
                        help="train these variants side by side (same seeds, batches, epochs) instead of the "
                             "baselines comparison: random (masked mean), word2vec (masked mean, word2vec start), "
                             "cls ([CLS]-token pooling)")
    parser.add_argument("--seeds", type=int, nargs="+", default=None, help="seeds of --variants (default: --seed)")
    parser.add_argument("--word2vec-text", choices=["all", "labelled"], default="all",
                        help="what word2vec reads for --variants word2vec: training-split texts, labels unused "
                             "(all, default; at most --word2vec-limit of them), or only the --limit labelled ones")
    parser.add_argument("--word2vec-limit", type=int, default=50_000,
                        help="most training-split texts word2vec reads with --word2vec-text all (default 50000)")
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
        if args.variants:
            if args.folds:
                parser.error("--variants and --folds do not combine")
            test = load_yelp(args.source, "test", limit=args.test_limit, seed=args.seed)
            word2vec_texts = None
            if "word2vec" in args.variants and args.word2vec_text == "all":
                word2vec_texts = train[0]
                if limit is not None and args.word2vec_limit > limit:  # more text than the labelled sample
                    word2vec_texts = load_yelp(args.source, "train", limit=args.word2vec_limit, seed=args.seed)[0]
            seeds = args.seeds or [args.seed]
            rows = compare_variants(train, test, args.variants, epochs, config["lr"], seeds, devices[-1],
                                    word2vec_texts)
            machine = f"{platform.machine()}, {torch.get_num_threads()} torch threads, torch {torch.__version__}"
            text = "every training-split text" if word2vec_texts is not None else "the labelled texts"
            print(format_variants(rows, seeds, (
                f"Yelp classifier variants on {args.source} ({len(train[0])} labelled train / {len(test[0])} test "
                f"reviews; word2vec reads {text}; {epochs} epochs, budget {args.budget}, device {devices[-1]}; "
                f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}; {machine})"), args.markdown))
            return 0
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
