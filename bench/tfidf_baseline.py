"""Bag-of-n-grams baselines for the Yelp task: TF-IDF (word 1-2 grams) + logistic regression, and majority class.

    python bench/tfidf_baseline.py                      # the synthetic set
    python bench/tfidf_baseline.py --source data/        # any coursekit.load_yelp source (folder, .tgz, parquet)
    python bench/tfidf_baseline.py --source data/yelp_review_full_csv.tgz --limit 50000

Prints a markdown table. bench/yelp.py imports `tfidf_logreg_baseline` and `majority_baseline` from here.
Texts are tokenized with coursekit.tokenize, the same tokenizer the Transformer notebooks use.
"""
from __future__ import annotations

import argparse
import time
from collections import Counter
from typing import Sequence

__all__ = ["tfidf_logreg_baseline", "majority_baseline", "markdown_table"]


def _scores(true: Sequence[int], predicted: Sequence[int]) -> tuple[float, float]:
    from sklearn.metrics import accuracy_score, f1_score

    return float(accuracy_score(true, predicted)), float(f1_score(true, predicted, average="macro"))


def tfidf_logreg_baseline(train_texts: Sequence[str], train_labels: Sequence[int], test_texts: Sequence[str],
                          test_labels: Sequence[int], max_features: int | None = 200_000, C: float = 1.0,
                          seed: int = 0) -> dict:
    """Fit TF-IDF (word 1-2 grams, sublinear tf) + multinomial logistic regression (`coursekit.real_data.tfidf_logreg`
    on coursekit.tokenize's tokens); score on the test set.

    Returns dict(accuracy, macro_f1, seconds) where seconds covers fitting and predicting.
    """
    from coursekit.real_data import tfidf_logreg
    from coursekit.text import tokenize

    if len(train_texts) != len(train_labels) or len(test_texts) != len(test_labels):
        raise ValueError("texts and labels must have the same length")
    if not train_texts or not test_texts:
        raise ValueError("train and test sets must not be empty")
    start = time.perf_counter()
    fitted = tfidf_logreg([tokenize(t) for t in train_texts], train_labels, [tokenize(t) for t in test_texts],
                          test_labels, seed=seed, max_features=max_features, C=C)
    seconds = time.perf_counter() - start
    accuracy, macro_f1 = _scores(test_labels, fitted["predicted"])
    return {"accuracy": accuracy, "macro_f1": macro_f1, "seconds": seconds}


def majority_baseline(train_labels: Sequence[int], test_labels: Sequence[int]) -> dict:
    """Always predict the most frequent training label (ties: the smallest label)."""
    start = time.perf_counter()
    counts = Counter(train_labels)
    majority = min(counts, key=lambda label: (-counts[label], label))
    predicted = [majority] * len(test_labels)
    seconds = time.perf_counter() - start
    accuracy, macro_f1 = _scores(test_labels, predicted)
    return {"accuracy": accuracy, "macro_f1": macro_f1, "seconds": seconds}


def markdown_table(rows: dict[str, dict], title: str) -> str:
    lines = [f"**{title}**", "", "| model | accuracy | macro F1 | seconds |", "|---|---|---|---|"]
    for name, result in rows.items():
        lines.append(f"| {name} | {result['accuracy']:.3f} | {result['macro_f1']:.3f} | {result['seconds']:.1f} |")
    return "\n".join(lines)


def main(argv=None) -> int:
    from coursekit.data import load_yelp

    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--source", default="synthetic", help="a coursekit.load_yelp source (default: synthetic)")
    parser.add_argument("--limit", type=int, default=None, help="class-balanced subset of the training set")
    parser.add_argument("--test-limit", type=int, default=None, help="class-balanced subset of the test set")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    train_texts, train_labels = load_yelp(args.source, "train", limit=args.limit, seed=args.seed)
    test_texts, test_labels = load_yelp(args.source, "test", limit=args.test_limit, seed=args.seed)
    rows = {
        "majority class": majority_baseline(train_labels, test_labels),
        "TF-IDF 1-2 grams + logistic regression": tfidf_logreg_baseline(
            train_texts, train_labels, test_texts, test_labels, seed=args.seed),
    }
    title = f"Yelp baselines on {args.source} ({len(train_texts)} train / {len(test_texts)} test reviews)"
    print(markdown_table(rows, title))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
