"""Notebook 07 on the real yelp_review_full reviews: a class-balanced sample, the Transformer against TF-IDF.

`python -m coursekit.data download yelp_review_full` saves `yelp_review_full_csv.tgz` in `data/` under the
folder it runs in (`--dest` elsewhere). `find_real_yelp()` looks for it (or for its unpacked folder) in
$COURSE_DATA_DIR, in `data/` of the working folder and of its two parents (a notebook runs two levels below the
course root) and in the repository's `data/`; it returns None when there is none, and the notebook skips its
real-data cells.

`compare_on_real_data` trains the student's own classifier (any `make_model(vocab_size, max_len)` and the
notebook's `train_one_epoch` / `evaluate`) twice, from a random and from a word2vec start, and a TF-IDF + logistic
regression baseline, all on the same split, within a budget that fits the device (`budget_for`).
"""
from __future__ import annotations

import os
import random
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Sequence

import torch

from .bundled_data import DATA_DIR_ENV
from .data import load_yelp
from .env import cpu_budget, set_seed
from .loaders import make_loader
from .text import tokenize
from .word2vec_init import init_embedding, rescale_known_rows, train_word2vec

__all__ = ["REAL_TARBALL", "REAL_FOLDER", "RealBudget", "CPU_BUDGET", "GPU_BUDGET", "budget_for", "find_real_yelp",
           "search_folders", "RealSample", "load_real_sample", "tokenize_all", "tfidf_logreg", "train_and_score",
           "compare_on_real_data"]

REAL_TARBALL = "yelp_review_full_csv.tgz"   # what `python -m coursekit.data download yelp_review_full` saves
REAL_FOLDER = "yelp_review_full_csv"        # the tarball's folder, if someone unpacked it


@dataclass(frozen=True)
class RealBudget:
    train_limit: int        # labelled training reviews (class-balanced)
    test_limit: int         # test reviews (class-balanced)
    unlabelled_limit: int   # more training-split texts, labels unused: word2vec reads them with the labelled ones
    epochs: int
    max_len: int            # tokens kept per review (real reviews are long: the median is about 110 words)
    batch_size: int
    lr: float = 3e-3
    min_freq: int = 2


# A few minutes on a laptop CPU (most of it tokenising), and a larger sample where a GPU does the training.
CPU_BUDGET = RealBudget(train_limit=4_000, test_limit=2_000, unlabelled_limit=16_000, epochs=5, max_len=128,
                        batch_size=32)
GPU_BUDGET = RealBudget(train_limit=50_000, test_limit=10_000, unlabelled_limit=100_000, epochs=4, max_len=256,
                        batch_size=64, lr=1e-3)


def budget_for(device: torch.device | str) -> RealBudget:
    """GPU_BUDGET on CUDA, else CPU_BUDGET."""
    return GPU_BUDGET if torch.device(device).type == "cuda" else CPU_BUDGET


# ------------------------------------------------------------------------------------------------ finding the set
def search_folders() -> list[Path]:
    """Where find_real_yelp looks, in order."""
    folders = []
    if os.environ.get(DATA_DIR_ENV):
        folders.append(Path(os.environ[DATA_DIR_ENV]))
    here = Path.cwd()
    folders += [here / "data", here.parent / "data", here.parent.parent / "data",
                Path(__file__).resolve().parents[1] / "data"]
    unique = []
    for folder in folders:
        if folder not in unique:
            unique.append(folder)
    return unique


def find_real_yelp(folders: Sequence[Path] | None = None) -> Path | None:
    """A load_yelp source for the real set (the unpacked folder or the .tgz), or None when it is not there."""
    for folder in (search_folders() if folders is None else [Path(f) for f in folders]):
        unpacked = folder / REAL_FOLDER
        if (unpacked / "train.csv").is_file() and (unpacked / "test.csv").is_file():
            return unpacked
        if (folder / REAL_TARBALL).is_file():
            return folder / REAL_TARBALL
    return None


# ------------------------------------------------------------------------------------------------ the sample
@dataclass
class RealSample:
    train_texts: list[str]
    train_labels: list[int]
    test_texts: list[str]
    test_labels: list[int]
    unlabelled_texts: list[str]   # from the training split, not among train_texts; never from the test split


def _split_per_class(texts, labels, per_class: dict[int, int], seed: int):
    """Take per_class[c] reviews of each class c at random (kept in file order); return (taken, rest) indices."""
    rng = random.Random(seed)
    by_class: dict[int, list[int]] = {}
    for index, label in enumerate(labels):
        by_class.setdefault(label, []).append(index)
    taken = []
    for label, indices in sorted(by_class.items()):
        taken += rng.sample(indices, min(per_class.get(label, 0), len(indices)))
    chosen = set(taken)
    return sorted(taken), [i for i in range(len(texts)) if i not in chosen]


def load_real_sample(source, budget: RealBudget, seed: int = 0) -> RealSample:
    """A class-balanced labelled sample, more training texts for word2vec, and a class-balanced test sample.

    One pass over each split: load_yelp draws train_limit + unlabelled_limit balanced training reviews, of which
    train_limit (again balanced) keep their labels.
    """
    texts, labels = load_yelp(source, "train", limit=budget.train_limit + budget.unlabelled_limit, seed=seed)
    classes = sorted(set(labels))
    per_class = {c: budget.train_limit // len(classes) + (i < budget.train_limit % len(classes))
                 for i, c in enumerate(classes)}
    labelled, rest = _split_per_class(texts, labels, per_class, seed)
    test_texts, test_labels = load_yelp(source, "test", limit=budget.test_limit, seed=seed)
    return RealSample([texts[i] for i in labelled], [labels[i] for i in labelled], test_texts, test_labels,
                      [texts[i] for i in rest])


def tokenize_all(texts: Sequence[str], processes: int | None = None, min_parallel: int = 20_000
                 ) -> list[list[str]]:
    """coursekit.tokenize on every text; from `min_parallel` texts on, in several processes when CPUs allow
    (tokenising, about 5-10 ms per real review, is the slow part of preparing a large sample)."""
    processes = max(1, cpu_budget() - 1) if processes is None else processes
    if processes <= 1 or len(texts) < min_parallel:
        return [tokenize(text) for text in texts]
    import multiprocessing

    # fork (Linux) starts a worker in milliseconds; spawn (macOS, Windows) re-imports coursekit and torch in each
    method = "fork" if "fork" in multiprocessing.get_all_start_methods() else "spawn"
    chunk = max(1, min(1_000, len(texts) // (4 * processes)))
    with multiprocessing.get_context(method).Pool(processes) as pool:
        return pool.map(tokenize, texts, chunksize=chunk)


# ------------------------------------------------------------------------------------------------ the contenders
def tfidf_logreg(train_tokens: Sequence[list[str]], train_labels, test_tokens: Sequence[list[str]], test_labels,
                 seed: int = 0, max_features: int | None = None, C: float = 1.0) -> dict:
    """TF-IDF of word 1-2 grams (sublinear tf) + logistic regression on already tokenised texts: the course's
    bag-of-n-grams baseline (also bench/tfidf_baseline.py's). Returns dict(accuracy, predicted, seconds)."""
    from sklearn.feature_extraction.text import TfidfVectorizer
    from sklearn.linear_model import LogisticRegression

    start = time.perf_counter()
    vectorizer = TfidfVectorizer(analyzer="word", tokenizer=list, preprocessor=None, lowercase=False,
                                 token_pattern=None, ngram_range=(1, 2), sublinear_tf=True,
                                 min_df=2 if len(train_tokens) >= 1000 else 1, max_features=max_features)
    features = vectorizer.fit_transform(train_tokens)                                   # (N, n-grams) sparse
    classifier = LogisticRegression(C=C, max_iter=1000, random_state=seed).fit(features, list(train_labels))
    predicted = classifier.predict(vectorizer.transform(test_tokens)).tolist()
    accuracy = sum(int(p == y) for p, y in zip(predicted, test_labels)) / len(predicted)
    return {"accuracy": accuracy, "predicted": predicted, "seconds": time.perf_counter() - start}


def train_and_score(model: torch.nn.Module, train_ids, train_labels, test_ids, test_labels,
                    train_one_epoch: Callable, evaluate: Callable, device, epochs: int, lr: float,
                    batch_size: int, seed: int = 0, progress: bool = False) -> dict:
    """The notebook's recipe: AdamW (weight decay 0.05), the rate decayed linearly to a tenth, length buckets."""
    train_loader = make_loader(train_ids, train_labels, batch_size=batch_size, shuffle=True, seed=seed)
    test_loader = make_loader(test_ids, test_labels, batch_size=256, shuffle=False)
    optimizer = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=0.05)
    schedule = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda epoch: 1.0 - 0.9 * epoch / max(epochs - 1, 1))
    history = {"train loss": [], "test accuracy": []}
    start = time.perf_counter()
    epoch_range = range(epochs)
    if progress:
        from tqdm.auto import tqdm

        epoch_range = tqdm(epoch_range, desc="training", leave=False)
    for _ in epoch_range:
        history["train loss"].append(float(train_one_epoch(model, train_loader, optimizer, device)))
        schedule.step()
        history["test accuracy"].append(float(evaluate(model, test_loader, device)))
    return {"accuracy": history["test accuracy"][-1], "seconds": time.perf_counter() - start, "history": history}


def compare_on_real_data(source, make_model: Callable[[int, int], torch.nn.Module], train_one_epoch: Callable,
                         evaluate: Callable, build_vocab: Callable, encode: Callable,
                         embedding_matrix_from_word2vec: Callable, device="cpu",
                         budget: RealBudget | None = None, seed: int = 0, progress: bool = True,
                         log: Callable[[str], None] = print) -> dict[str, dict]:
    """TF-IDF + logistic regression, and the Transformer from a random and from a word2vec start, on one split.

    make_model(vocab_size, max_len) builds an untrained classifier whose token embedding is
    `model.encoder.embedding.weight`; build_vocab / encode / embedding_matrix_from_word2vec are notebook 01's. Returns name -> dict(accuracy,
    seconds[, history]); the first entry, "data", holds the sample's sizes and the preparation time.
    """
    budget = budget or budget_for(device)
    device = torch.device(device)
    start = time.perf_counter()
    sample = load_real_sample(source, budget, seed)
    log(f"real sample: {len(sample.train_texts)} labelled training reviews, {len(sample.unlabelled_texts)} more "
        f"for word2vec, {len(sample.test_texts)} test reviews ({time.perf_counter() - start:.0f} s)")
    train_tokens = tokenize_all(sample.train_texts)
    test_tokens = tokenize_all(sample.test_texts)
    unlabelled_tokens = tokenize_all(sample.unlabelled_texts)
    vocab = build_vocab(train_tokens, min_freq=budget.min_freq)
    unk = vocab["<unk>"]
    train_ids = [encode(tokens, vocab)[:budget.max_len] or [unk] for tokens in train_tokens]
    test_ids = [encode(tokens, vocab)[:budget.max_len] or [unk] for tokens in test_tokens]
    results: dict[str, dict] = {"data": {"train": len(train_ids), "test": len(test_ids),
                                         "unlabelled": len(unlabelled_tokens), "vocab": len(vocab),
                                         "seconds": time.perf_counter() - start}}
    log(f"tokenised, vocabulary of {len(vocab)} words ({time.perf_counter() - start:.0f} s)")

    results["TF-IDF + logistic regression"] = tfidf_logreg(train_tokens, sample.train_labels, test_tokens,
                                                           sample.test_labels, seed)
    set_seed(seed)
    probe = make_model(len(vocab), budget.max_len)
    dim = probe.encoder.embedding.weight.shape[1]
    tick = time.perf_counter()
    vectors = train_word2vec(train_tokens + unlabelled_tokens, dim=dim, seed=seed, min_count=budget.min_freq)
    matrix, known = rescale_known_rows(embedding_matrix_from_word2vec(vocab, vectors))
    word2vec_seconds = time.perf_counter() - tick
    for name, start_from_word2vec in (("Transformer, random start", False), ("Transformer, word2vec start", True)):
        set_seed(seed)
        model = make_model(len(vocab), budget.max_len).to(device)
        if start_from_word2vec:
            init_embedding(model, matrix, known)
        results[name] = train_and_score(model, train_ids, sample.train_labels, test_ids, sample.test_labels,
                                        train_one_epoch, evaluate, device, budget.epochs, budget.lr,
                                        budget.batch_size, seed, progress)
        if start_from_word2vec:
            results[name]["seconds"] += word2vec_seconds
        log(f"{name}: test accuracy {results[name]['accuracy']:.3f} ({results[name]['seconds']:.0f} s)")
    return results
