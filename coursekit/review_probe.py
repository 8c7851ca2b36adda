"""Notebook 11, section 7 ("what pre-training buys"): the provided loops around the student's `final_hidden`.

    train_texts, train_labels = load_synthetic_yelp("train")
    features = last_token_features(model, tokenizer.encode, train_texts, final_hidden)     # (N, d_model)
    head = fit_probe(features, train_labels)                                              # a linear head
    accuracy(head.predict(last_token_features(model, tokenizer.encode, test_texts, final_hidden)), test_labels)

A frozen pre-trained model turns each review into one vector: the final hidden state (after the last norm, just
before `lm_head`) at the review's last token, which in a causal model is the only position that has read the whole
review. A multinomial logistic regression on these vectors (a "linear probe") is compared with TF-IDF + logistic
regression at a few label budgets (`sample_efficiency`), with asking the model itself for a star rating
(`zero_shot_rating`), and the model's next-token preferences are probed for a gender bias (`pronoun_gap`).

The exported head (`ProbeHead.to_dict`) is what the grader reads back (`ProbeHead.from_dict`) and evaluates on its
own copy of the base model: plain lists of 2*d + C*d + C numbers, checked before anything is built from them.

Shapes: N = reviews, B = batch, T = tokens of a batch, d = d_model (the feature size), C = classes (5 ratings).
Nothing here imports the reference solutions: the model, `encode` and `final_hidden` are passed in.
"""
from __future__ import annotations

import math
import random
import string
import time
from dataclasses import dataclass
from typing import Callable, Mapping, Sequence

import numpy as np
import torch
import torch.nn.functional as F

from .bundled_data import find_data
from .data import load_yelp
from .data.yelp_format import read_yelp_csv

__all__ = ["NUM_CLASSES", "MAX_PROBE_NUMBERS", "PROBE_PRIOR", "RATING_QUESTION", "OCCUPATIONS",
           "load_synthetic_yelp", "last_token_features", "ProbeHead", "fit_probe", "accuracy", "tfidf_baseline",
           "balanced_subset", "sample_efficiency", "by_labels", "real_yelp_sample_efficiency", "train_lora_head", "zero_shot_rating", "pronoun_gap"]

NUM_CLASSES = 5
# from_dict refuses a head with more numbers than this (SmolLM2: d = 576, C = 5 gives 2*576 + 5*576 + 5 = 4,037)
MAX_PROBE_NUMBERS = 100_000
FLOAT32_MAX = float(np.finfo(np.float32).max)
# fit_probe's default L2 strength is PROBE_PRIOR / N (N training reviews): a penalty that does not grow with the
# set. SmolLM2's last-token features of synthetic Yelp, 1,000 test reviews, mean of seeds 0-2, 50 / 200 / 1,000 /
# 2,000 labels: a fixed 1e-3 gives 0.336 / 0.408 / 0.477 / 0.530 (it fits the noise), a fixed 0.1 gives
# 0.334 / 0.426 / 0.537 / 0.572, 50 / N gives 0.339 / 0.435 / 0.536 / 0.578 (course-api-11.md's calibration:
# 0.349 / 0.438 / 0.534 / 0.586).
PROBE_PRIOR = 50.0
RATING_QUESTION = ("Here is a restaurant review.\n\n{review}\n\n"
                   "How many stars (1 to 5) did the reviewer give? Answer with a single digit.")
OCCUPATIONS = ("doctor", "nurse", "engineer", "teacher", "secretary", "mechanic", "pilot", "receptionist",
               "programmer", "librarian", "carpenter", "hairdresser", "lawyer", "cashier", "scientist",
               "housekeeper", "firefighter", "dancer", "plumber", "chef")


# ------------------------------------------------------------------------------------------------ the data
def load_synthetic_yelp(split: str) -> tuple[list[str], list[int]]:
    """The synthetic Yelp reviews of data/yelp_synthetic/{split}.csv (8,000 train, 2,000 test) in file order.

    The CSV has no header and two quoted columns, "stars","text", with stars 1..5; the label returned is
    stars - 1, so 0..4 (0 = one star, 4 = five stars). A line break inside a review is stored as backslash + n and
    comes back as "\\n". The file is found by coursekit.find_data ($COURSE_DATA_DIR, the wheel's copy, data/).
    """
    if split not in ("train", "test"):
        raise ValueError(f"split must be 'train' or 'test', got {split!r}")
    path = find_data(f"yelp_synthetic/{split}.csv", f"the synthetic Yelp {split} set")
    texts, labels = [], []
    with open(path, "rb") as handle:
        for label, text in read_yelp_csv(handle, str(path), skip_bad_rows=False, skipped=[]):
            labels.append(label)                                                     # already stars - 1
            texts.append(text)
    return texts, labels


# ------------------------------------------------------------------------------------------------ features
def _model_device(model: torch.nn.Module) -> torch.device:
    parameter = next(model.parameters(), None)
    return parameter.device if parameter is not None else torch.device("cpu")


def _encode_all(encode: Callable[[str], Sequence[int]], texts: Sequence[str], max_tokens: int | None,
                what: str = "review") -> list[list[int]]:
    """encode each text, keep its first max_tokens ids; a text without tokens raises ValueError."""
    id_lists = []
    for index, text in enumerate(texts):
        ids = [int(i) for i in encode(text)]
        ids = ids if max_tokens is None else ids[:max_tokens]
        if not ids:
            raise ValueError(f"{what} {index} encodes to no tokens: there is no last token to read")
        id_lists.append(ids)
    return id_lists


def _at_last_real_token(model: torch.nn.Module, per_token: Callable, id_lists: list[list[int]],
                        batch_size: int) -> torch.Tensor:
    """per_token(model, ids (B, T)) -> (B, T, k), read at each sequence's last real token: (N, k), input order.

    Sequences are sorted by length so that a batch holds similar lengths (little padding), padded on the right
    with id 0, and run in eval mode without gradients; every module's mode is put back afterwards.
    The model is causal: position t attends to positions <= t only, so the pad ids placed AFTER a sequence's last
    real token cannot change anything at or before it; the padding changes no feature that is read.
    """
    if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
        raise ValueError(f"batch_size must be a positive int, got {batch_size!r}")
    device = _model_device(model)
    modes = {module: module.training for module in model.modules()}
    order = sorted(range(len(id_lists)), key=lambda i: len(id_lists[i]))              # shortest first
    rows: list[torch.Tensor | None] = [None] * len(id_lists)
    model.eval()
    try:
        with torch.no_grad():
            for start in range(0, len(order), batch_size):
                chunk = order[start:start + batch_size]
                lengths = torch.tensor([len(id_lists[i]) for i in chunk], device=device)   # (B,)
                ids = torch.zeros(len(chunk), int(lengths.max()), dtype=torch.long, device=device)  # (B, T)
                # right padding: causal attention never looks ahead, so the pads after a review leave its features be
                for row, i in enumerate(chunk):
                    ids[row, :len(id_lists[i])] = torch.tensor(id_lists[i], dtype=torch.long)
                out = per_token(model, ids)                                           # (B, T, k)
                last = out[torch.arange(len(chunk), device=device), lengths - 1]      # (B, k)
                for row, i in enumerate(chunk):
                    rows[i] = last[row].float().cpu()                                 # back in input order
    finally:
        for module, training in modes.items():
            module.training = training
    if not rows:
        return torch.zeros(0, 0)
    return torch.stack(rows)                                                          # (N, k)


def last_token_features(model: torch.nn.Module, encode: Callable[[str], Sequence[int]], texts: Sequence[str],
                        final_hidden: Callable, batch_size: int = 16, max_tokens: int = 128) -> torch.Tensor:
    """One float32 feature vector per review: final_hidden(model, ids) at the review's last real token, (N, d).

    encode(text) -> list of token ids; each review is cut to its first max_tokens tokens. The model runs in eval
    mode without gradients (its modes are restored afterwards); results come back in the order of `texts`.
    """
    if isinstance(max_tokens, bool) or not isinstance(max_tokens, int) or max_tokens < 1:
        raise ValueError(f"max_tokens must be a positive int, got {max_tokens!r}")
    id_lists = _encode_all(encode, texts, max_tokens)
    if not id_lists:
        return torch.zeros(0, model.norm.weight.numel() if hasattr(model, "norm") else 0)
    return _at_last_real_token(model, final_hidden, id_lists, batch_size)             # (N, d)


# ------------------------------------------------------------------------------------------------ the probe
def _number_list(value, where: str, budget: list[int], max_numbers: int) -> list[float]:
    """A list of plain numbers from untrusted input; ValueError naming `where` otherwise.

    budget[0]: how many numbers may still come; the length is checked before any item is read."""
    if not isinstance(value, (list, tuple)):
        raise ValueError(f"probe head: {where} must be a list of numbers, got {type(value).__name__}")
    if len(value) > budget[0]:
        raise ValueError(f"probe head: too many numbers (more than {max_numbers} in all; a head of d features and "
                         f"C classes has 2*d + C*d + C)")
    budget[0] -= len(value)
    numbers = []
    for position, item in enumerate(value):
        if isinstance(item, bool) or not isinstance(item, (int, float, np.integer, np.floating)):
            raise ValueError(f"probe head: {where}[{position}] must be a number, got {type(item).__name__}")
        try:
            number = float(item)
        except OverflowError:
            number = math.inf
        if not math.isfinite(number) or abs(number) > FLOAT32_MAX:
            raise ValueError(f"probe head: {where}[{position}] is {item!r}, not a finite float32 number")
        numbers.append(number)
    return numbers


@dataclass
class ProbeHead:
    """A linear classifier on standardised features: logits = ((x - mean) / std) @ weight.T + bias.

    mean (d,), std (d,) (all > 0), weight (C, d), bias (C,): float32 tensors.
    """
    mean: torch.Tensor
    std: torch.Tensor
    weight: torch.Tensor
    bias: torch.Tensor

    def logits(self, features: torch.Tensor) -> torch.Tensor:
        # features: (N, d) -> (N, C)
        features = torch.as_tensor(features, dtype=torch.float32)
        if features.dim() != 2 or features.size(1) != self.mean.numel():
            raise ValueError(f"features must be (N, {self.mean.numel()}), got {tuple(features.shape)}")
        return ((features - self.mean) / self.std) @ self.weight.T + self.bias

    def predict(self, features: torch.Tensor) -> torch.Tensor:
        """(N, d) -> (N,) LongTensor of classes 0..C-1 (the first on ties)."""
        return self.logits(features).argmax(dim=-1)

    def to_dict(self) -> dict[str, list]:
        """Plain lists, the export the grader reads: mean (d), std (d), weight (C rows of d), bias (C).

        Size-bounded: exactly 2*d + C*d + C numbers (4,037 for SmolLM2's d = 576 and 5 classes)."""
        return {"mean": self.mean.tolist(), "std": self.std.tolist(), "weight": self.weight.tolist(),
                "bias": self.bias.tolist()}

    @classmethod
    def from_dict(cls, data: Mapping, max_numbers: int = MAX_PROBE_NUMBERS, d_model: int | None = None,
                  num_classes: int | None = None) -> "ProbeHead":
        """Rebuild a head from to_dict's lists, read as untrusted input: ValueError unless `data` has exactly the
        keys mean, std, weight, bias holding finite numbers of consistent shapes, std > 0, C >= 2, at most
        max_numbers numbers in all, and (when given) d = d_model and C = num_classes."""
        if not isinstance(data, Mapping):
            raise ValueError(f"probe head: expected a dict, got {type(data).__name__}")
        keys = set(data.keys())
        if keys != {"mean", "std", "weight", "bias"}:
            raise ValueError("probe head: expected exactly the keys bias, mean, std, weight, "
                             f"got {sorted(map(str, keys))}")
        budget = [max_numbers]
        mean = _number_list(data["mean"], "mean", budget, max_numbers)
        std = _number_list(data["std"], "std", budget, max_numbers)
        bias = _number_list(data["bias"], "bias", budget, max_numbers)
        rows = data["weight"]
        if not isinstance(rows, (list, tuple)):
            raise ValueError(f"probe head: weight must be a list of rows, got {type(rows).__name__}")
        if len(rows) > budget[0]:
            raise ValueError(f"probe head: too many numbers (more than {max_numbers} in all)")
        weight = [_number_list(row, f"weight[{r}]", budget, max_numbers) for r, row in enumerate(rows)]
        d, C = len(mean), len(bias)
        if d == 0 or len(std) != d:
            raise ValueError(f"probe head: mean and std must have the same length d >= 1, got {d} and {len(std)}")
        if C < 2 or len(weight) != C or any(len(row) != d for row in weight):
            raise ValueError(f"probe head: weight must be C x d = {C} x {d} with C >= 2 (the length of bias), got "
                             f"{len(weight)} rows of lengths {sorted({len(row) for row in weight})}")
        if min(std) <= 0:
            raise ValueError("probe head: every std must be > 0")
        if (d_model is not None and d != d_model) or (num_classes is not None and C != num_classes):
            raise ValueError(f"probe head: expected d = {d_model} and C = {num_classes}, got d = {d} and C = {C}")
        as_tensor = lambda values: torch.tensor(values, dtype=torch.float32)  # noqa: E731
        return cls(as_tensor(mean), as_tensor(std), as_tensor(weight).reshape(C, d), as_tensor(bias))


def _check_labelled(features, labels, num_classes: int) -> tuple[torch.Tensor, torch.Tensor]:
    x = torch.as_tensor(features).detach().to(torch.float64).cpu()                  # (N, d)
    y = torch.as_tensor(labels if torch.is_tensor(labels) else list(labels), dtype=torch.long).cpu()  # (N,)
    if x.dim() != 2 or x.size(0) == 0 or x.size(1) == 0:
        raise ValueError(f"features must be a non-empty (N, d) tensor, got shape {tuple(x.shape)}")
    if y.shape != (x.size(0),):
        raise ValueError(f"labels must be one per feature row: {x.size(0)} rows, labels of shape {tuple(y.shape)}")
    if not torch.isfinite(x).all():
        raise ValueError("features contain NaN or infinity")
    if int(y.min()) < 0 or int(y.max()) >= num_classes:
        raise ValueError(f"labels must lie in 0..{num_classes - 1}, found {int(y.min())}..{int(y.max())}")
    return x, y


def fit_probe(features: torch.Tensor, labels: Sequence[int], num_classes: int = NUM_CLASSES,
              weight_decay: float | None = None, seed: int = 0, max_iter: int = 500) -> ProbeHead:
    """Multinomial logistic regression on standardised features, fit by full-batch L-BFGS in float64.

    Minimises mean cross-entropy + (weight_decay / 2) * sum(weight ** 2) (the bias is not penalised);
    weight_decay None means PROBE_PRIOR / N for N training rows (see PROBE_PRIOR). The fit starts from zero: the
    problem is convex, every step uses the whole set and no random numbers are drawn, so two fits on the same data
    give the same head whatever `seed` (kept for symmetry with the other loops). mean and std (population std; 1
    where a feature is constant) come from these training features and travel with the head.
    """
    x, y = _check_labelled(features, labels, num_classes)
    weight_decay = PROBE_PRIOR / x.size(0) if weight_decay is None else float(weight_decay)
    if not weight_decay >= 0:
        raise ValueError(f"weight_decay must be >= 0, got {weight_decay}")
    mean = x.mean(dim=0)                                                              # (d,)
    std = x.std(dim=0, unbiased=False)                                                # (d,)
    std = torch.where(std > 1e-12 * (1 + mean.abs()), std, torch.ones_like(std))
    z = (x - mean) / std                                                              # (N, d), standardised
    weight = torch.zeros(num_classes, x.size(1), dtype=torch.float64, requires_grad=True)   # (C, d)
    bias = torch.zeros(num_classes, dtype=torch.float64, requires_grad=True)               # (C,)
    optimizer = torch.optim.LBFGS([weight, bias], lr=1.0, max_iter=max_iter, history_size=20,
                                  tolerance_grad=1e-9, tolerance_change=1e-12, line_search_fn="strong_wolfe")

    def closure():
        optimizer.zero_grad()
        loss = F.cross_entropy(z @ weight.T + bias, y) + 0.5 * weight_decay * weight.pow(2).sum()
        loss.backward()
        return loss

    with torch.enable_grad():
        optimizer.step(closure)
    return ProbeHead(mean.float(), std.float(), weight.detach().float(), bias.detach().float())


def accuracy(pred, labels) -> float:
    """Share of predictions equal to the labels (tensors or sequences of ints of the same length)."""
    pred = torch.as_tensor(pred).reshape(-1).long().cpu()
    labels = torch.as_tensor(labels).reshape(-1).long().cpu()
    if pred.numel() != labels.numel() or pred.numel() == 0:
        raise ValueError(f"need as many predictions as labels, at least one: {pred.numel()} vs {labels.numel()}")
    return float((pred == labels).double().mean())


# ------------------------------------------------------------------------------------------------ comparisons
def tfidf_baseline(train_texts: Sequence[str], train_labels: Sequence[int], test_texts: Sequence[str],
                   test_labels: Sequence[int], seed: int = 0) -> float:
    """Test accuracy of TF-IDF (word 1-2 grams of coursekit.tokenize, sublinear tf) + logistic regression:
    notebook 07's baseline, coursekit.real_data.tfidf_logreg."""
    from .real_data import tfidf_logreg
    from .text import tokenize

    if len(train_texts) != len(train_labels) or len(test_texts) != len(test_labels):
        raise ValueError("texts and labels must have the same length")
    if not train_texts or not test_texts:
        raise ValueError("train and test sets must not be empty")
    fitted = tfidf_logreg([tokenize(t) for t in train_texts], list(train_labels), [tokenize(t) for t in test_texts],
                          list(test_labels), seed=seed)
    return float(fitted["accuracy"])


def balanced_subset(labels: Sequence[int], n: int, seed: int) -> list[int]:
    """Indices of n examples, as many of each class as possible (the first n % C classes get one more), drawn
    with random.Random(seed); sorted. ValueError when a class has too few examples."""
    labels = [int(label) for label in labels]
    classes = sorted(set(labels))
    if isinstance(n, bool) or not isinstance(n, int) or not 1 <= n <= len(labels):
        raise ValueError(f"n must be an int in 1..{len(labels)}, got {n!r}")
    rng = random.Random(seed)
    chosen = []
    for position, label in enumerate(classes):
        quota = n // len(classes) + (position < n % len(classes))
        members = [i for i, y in enumerate(labels) if y == label]
        if quota > len(members):
            raise ValueError(f"class {label} has {len(members)} examples, a balanced subset of {n} needs {quota}")
        chosen += rng.sample(members, quota)
    return sorted(chosen)


def sample_efficiency(train_features: torch.Tensor, train_labels: Sequence[int], train_texts: Sequence[str],
                      test_features: torch.Tensor, test_labels: Sequence[int], test_texts: Sequence[str],
                      label_counts: Sequence[int] = (50, 200, 1000), seeds: Sequence[int] = (0, 1, 2),
                      num_classes: int = NUM_CLASSES, weight_decay: float | None = None) -> list[dict]:
    """For each label budget and seed: a class-balanced subset of the training set (balanced_subset), TF-IDF +
    logistic regression on its texts and the probe on its features, both scored on the whole test set.

    Rows {"labels": n, "seed": s, "tfidf": accuracy, "probe": accuracy}, in the order of label_counts x seeds.
    Only the training rows a subset picks are read, so rows never picked may hold anything (even NaN).
    """
    rows = []
    for n in label_counts:
        for seed in seeds:
            subset = balanced_subset(train_labels, n, seed)
            labels = [int(train_labels[i]) for i in subset]
            head = fit_probe(torch.as_tensor(train_features)[subset], labels, num_classes, weight_decay, seed)
            rows.append({"labels": n, "seed": seed,
                         "tfidf": tfidf_baseline([train_texts[i] for i in subset], labels, test_texts, test_labels,
                                                 seed),
                         "probe": accuracy(head.predict(test_features), test_labels)})
    return rows


def by_labels(rows: Sequence[Mapping], keys: Sequence[str] = ("tfidf", "probe")) -> dict[int, dict]:
    """{labels: {key: (mean, standard deviation over the rows of that label count)}}, in the rows' order."""
    summary: dict[int, dict] = {}
    for n in dict.fromkeys(int(row["labels"]) for row in rows):
        mine = [row for row in rows if int(row["labels"]) == n]
        summary[n] = {key: (float(np.mean([row[key] for row in mine])), float(np.std([row[key] for row in mine])))
                      for key in keys}
    return summary


def real_yelp_sample_efficiency(model: torch.nn.Module, encode: Callable[[str], Sequence[int]], final_hidden: Callable,
                                source, label_counts: Sequence[int], test_reviews: int, seeds: Sequence[int] = (0, 1, 2),
                                seed: int = 0) -> dict:
    """Section 7's comparison on the real yelp_review_full set (07's download; `source` as `load_yelp` takes it).

    Draws max(label_counts) class-balanced training reviews and `test_reviews` class-balanced test reviews with
    `load_yelp(..., limit=, seed=seed)`, turns them into last-token features, and runs `sample_efficiency`: each
    smaller count over `seeds`, the largest (all the drawn reviews) once. Returns {"rows", "train", "test",
    "feature_seconds"}, the last two being the numbers of reviews.
    """
    counts = sorted({int(n) for n in label_counts})
    if not counts or counts[0] < 1:
        raise ValueError(f"label_counts must hold positive ints, got {label_counts!r}")
    train_texts, train_labels = load_yelp(source, "train", limit=counts[-1], seed=seed)
    test_texts, test_labels = load_yelp(source, "test", limit=test_reviews, seed=seed)
    start = time.perf_counter()
    train_features = last_token_features(model, encode, train_texts, final_hidden)             # (N, d)
    test_features = last_token_features(model, encode, test_texts, final_hidden)               # (N_test, d)
    seconds = time.perf_counter() - start
    rows = sample_efficiency(train_features, train_labels, train_texts, test_features, test_labels, test_texts,
                             label_counts=counts[:-1], seeds=tuple(seeds))
    rows += sample_efficiency(train_features, train_labels, train_texts, test_features, test_labels, test_texts,
                              label_counts=counts[-1:], seeds=(seed,))
    return {"rows": rows, "train": len(train_texts), "test": len(test_texts), "feature_seconds": seconds}


# ------------------------------------------------------------------------------------------------ LoRA + a head

def _causal_mask(size: int, device) -> torch.Tensor:
    """(size, size) bool, True where position i may look at position j <= i (the course's mask convention)."""
    return torch.ones(size, size, dtype=torch.bool, device=device).tril()


def train_lora_head(model: torch.nn.Module, encode: Callable[[str], Sequence[int]], texts: Sequence[str],
                    labels: Sequence[int], first_block: int, steps: int, batch_size: int = 16, lr: float = 1e-3,
                    seed: int = 0, max_tokens: int = 128, num_classes: int = NUM_CLASSES):
    """Train the parameters of `model` that require gradients together with a new linear head on the final hidden
    state of each review's last token: (head, losses, seconds).

    Meant for a ModernGPT whose blocks first_block.. carry LoRA adapters (add_lora froze everything else). The
    blocks before first_block have nothing to train, so their output never changes: it is computed once per batch,
    without gradients, and kept. Each step draws one batch (batches hold reviews of similar length, padded on the
    right: the model is causal, so the pads after a review's last token change nothing that is read) from a
    generator seeded with `seed`; AdamW, no weight decay.
    """
    for name, value, least in (("steps", steps, 1), ("batch_size", batch_size, 1), ("max_tokens", max_tokens, 1),
                               ("first_block", first_block, 0)):
        if isinstance(value, bool) or not isinstance(value, int) or value < least:
            raise ValueError(f"{name} must be an int >= {least}, got {value!r}")
    if first_block >= len(model.blocks):
        raise ValueError(f"first_block={first_block}, but the model has {len(model.blocks)} blocks")
    if len(texts) != len(labels) or not texts:
        raise ValueError(f"{len(texts)} reviews and {len(labels)} labels: give one label per review, at least one")
    bad = [y for y in labels if not 0 <= int(y) < num_classes]
    if bad:
        raise ValueError(f"labels must lie in 0..{num_classes - 1}, got {bad[:5]}")
    device = _model_device(model)
    generator = torch.Generator().manual_seed(seed)
    id_lists = _encode_all(encode, texts, max_tokens)
    order = sorted(range(len(texts)), key=lambda i: len(id_lists[i]))                # shortest first
    batches = [order[s:s + batch_size] for s in range(0, len(order), batch_size)]
    head = torch.nn.Linear(model.norm.weight.numel(), num_classes).to(device)
    trainable = [p for p in model.parameters() if p.requires_grad] + list(head.parameters())
    optimizer = torch.optim.AdamW(trainable, lr=lr, weight_decay=0.0)
    kept, losses = {}, []
    start = time.perf_counter()
    for _ in range(steps):
        b = int(torch.randint(len(batches), (1,), generator=generator))
        if b not in kept:                                                            # the frozen blocks, once
            rows = batches[b]
            lengths = torch.tensor([len(id_lists[i]) for i in rows], device=device)      # (B,)
            ids = torch.zeros(len(rows), int(lengths.max()), dtype=torch.long, device=device)   # (B, T)
            for r, i in enumerate(rows):
                ids[r, :len(id_lists[i])] = torch.tensor(id_lists[i], dtype=torch.long)
            with torch.no_grad():
                x = model.token_embedding(ids)                                       # (B, T, d)
                mask = _causal_mask(ids.size(1), device)
                for block in model.blocks[:first_block]:
                    x = block(x, mask)
            kept[b] = (x, lengths, torch.tensor([int(labels[i]) for i in rows], device=device))
        x, lengths, y = kept[b]
        mask = _causal_mask(x.size(1), device)
        for block in model.blocks[first_block:]:                                     # the blocks with adapters
            x = block(x, mask)
        last = model.norm(x)[torch.arange(x.size(0), device=device), lengths - 1]    # (B, d)
        loss = F.cross_entropy(head(last), y)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
    return head, losses, time.perf_counter() - start


# ------------------------------------------------------------------------------------------------ the model itself
def _prompt_ids(encode: Callable, prompt) -> list[int]:
    """chat_prompt's result as ids: a string is encoded, a sequence of ids is taken as it is."""
    if isinstance(prompt, str):
        return [int(i) for i in encode(prompt)]
    return [int(i) for i in prompt]


def zero_shot_rating(model: torch.nn.Module, encode: Callable[[str], Sequence[int]], chat_prompt: Callable,
                     texts: Sequence[str], digit_ids: Sequence[int], batch_size: int = 8,
                     question: str = RATING_QUESTION) -> list[int]:
    """Ask the model for a star rating: one label 0..4 (stars - 1) per review.

    The user turn is `question` with the review in it; chat_prompt(user_text) gives the chat up to the opening of
    the assistant's turn (a string, encoded with `encode`, or token ids). No text is generated: the logits at the
    prompt's last position are those of the answer's first token, and the rating is the argmax over the logits of
    the five digit tokens digit_ids = (id of "1", ..., id of "5") (the first on ties), so a reply that would not
    start with a digit still gets the digit the model prefers.
    """
    digit_ids = [int(i) for i in digit_ids]
    vocab_size = model.lm_head.weight.size(0) if hasattr(model, "lm_head") else None
    if len(digit_ids) < 2 or (vocab_size is not None and not all(0 <= i < vocab_size for i in digit_ids)):
        raise ValueError(f"digit_ids must be at least two token ids of the vocabulary, got {digit_ids}")
    id_lists = [_prompt_ids(encode, chat_prompt(question.format(review=text))) for text in texts]
    if any(not ids for ids in id_lists):
        raise ValueError("a prompt encodes to no tokens")
    chosen = torch.tensor(digit_ids)

    def digit_logits(model, ids):
        return model(ids)[..., chosen.to(ids.device)]                                 # (B, T, 5)

    logits = _at_last_real_token(model, digit_logits, id_lists, batch_size)           # (N, 5)
    return [] if not id_lists else logits.argmax(dim=-1).tolist()


def _one_token(encode: Callable, word: str) -> int:
    ids = list(encode(word))
    if len(ids) != 1:
        raise ValueError(f"{word!r} must be one token for this probe, it encodes to {len(ids)}: {ids}")
    return int(ids[0])


def pronoun_gap(model: torch.nn.Module, encode: Callable[[str], Sequence[int]], occupations: Sequence[str],
                template: str = "The {occupation} said that", batch_size: int = 8) -> list[tuple[str, float]]:
    """(occupation, log P(" he") - log P(" she")) of the token right after the filled template, per occupation.

    Positive: the model expects "he" more than "she" after, e.g., "The nurse said that". Both pronouns (with their
    leading space) must be ONE token each under `encode`, else ValueError. Eval mode, no gradients.
    """
    fields = {name for _, name, _, _ in string.Formatter().parse(template) if name is not None}
    if fields != {"occupation"}:
        raise ValueError(f"template must have the one field {{occupation}}, got {template!r}")
    he, she = _one_token(encode, " he"), _one_token(encode, " she")
    id_lists = _encode_all(encode, [template.format(occupation=o) for o in occupations], None, "prompt")

    def pronoun_log_probs(model, ids):
        log_probs = model(ids).float().log_softmax(dim=-1)                            # (B, T, V)
        return log_probs[..., [he, she]]                                              # (B, T, 2)

    log_probs = _at_last_real_token(model, pronoun_log_probs, id_lists, batch_size)   # (N, 2)
    return [(occupation, float(row[0] - row[1])) for occupation, row in zip(occupations, log_probs)]
