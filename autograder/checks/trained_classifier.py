"""Hidden check of notebook 07's trained model: `check_trained_classifier(model, vocab, max_len=None)`.

The held-out synthetic test split is tokenised here with `coursekit.tokenize` and the student's `vocab` (data),
batched with coursekit's own padding collate and length-bucketed sampler (`coursekit.loaders`), and only the ids
are sent to the kernel; the predictions come back and are counted here: the labels never enter the kernel.
"""
from __future__ import annotations

import math
import numbers

import torch
from torch.utils.data import DataLoader

from autograder.checks.toolkit import (
    call, describe, expected_got, fail, fetch, kind_of, start_check, type_name,
)
from autograder.checks.remote import ProbeBroken, RemoteObject, StudentError, probed

# The notebook's grading-mode run of the reference (bench/yelp.py budget "grading": all 8,000 synthetic training
# reviews, 6 epochs, d_model 64, 2 layers, dropout 0.1, AdamW 3e-3), with the contract's N(0, d_model^-1/2)
# TokenEmbedding, reached 0.584, 0.560 and 0.619 test accuracy for seeds 0, 1, 2 on the CPU (docs/benchmarks.md);
# always guessing one class gets 0.20. The bar sits 0.12 below the worst measured seed, so an honest
# implementation with a different order of operations (or a GPU run) passes, while an untrained or badly broken
# model (about 0.2) does not.
TRAINED_MIN_ACCURACY = 0.44
MAJORITY_ACCURACY = 0.20
DEFAULT_MAX_LEN = 256  # when neither the notebook nor the model's positional table gives one


def _model_max_len(described: dict) -> int | None:
    """max_len of the model's positional table `encoder.pos_encoding.pe` (max_len, d_model), from `describe()`."""
    for name, shape in described.get("buffers", []):
        if name == "encoder.pos_encoding.pe" and isinstance(shape, list) and shape and isinstance(shape[0], int):
            return shape[0] if shape[0] > 0 else None
    return None


def heldout_batches(vocab: dict[str, int], max_len: int, batch_size: int = 128, limit: int | None = None) -> DataLoader:
    """(ids (B, T), labels (B,)) batches of the synthetic test split, shortest reviews first.

    Each review is encoded with `vocab` (unknown tokens -> '<unk>'), cut to its first `max_len` tokens (an empty
    one becomes a single '<unk>'), and post-padded with '<pad>' to the longest of its batch.
    """
    from coursekit import load_yelp, tokenize
    from coursekit.loaders import BucketBatchSampler, pad_collate

    texts, labels = load_yelp("synthetic", split="test", limit=limit)
    unk, pad = vocab.get("<unk>", 1), vocab.get("<pad>", 0)
    ids = [[vocab.get(token, unk) for token in tokenize(text)][:max_len] or [unk] for text in texts]
    # one chunk holding every review, not shuffled: the batches go from the shortest reviews to the longest
    sampler = BucketBatchSampler([len(sequence) for sequence in ids], batch_size, shuffle=False, bucket=True,
                                 batches_per_chunk=math.ceil(len(ids) / batch_size))
    return DataLoader(list(zip(ids, labels)), batch_sampler=sampler,
                      collate_fn=lambda batch: pad_collate(batch, pad_id=pad))


def trained_accuracy(model: RemoteObject, vocab: dict[str, int], max_len: int | None = None,
                     batch_size: int = 128, limit: int | None = None) -> float:
    """Accuracy of the handed-in `model` on the shipped synthetic test split (see the module docstring)."""
    label = "evaluating your trained model on the synthetic test set"
    device = start_check()
    described = describe(model, "your trained model")
    batches = heldout_batches(vocab, max_len or _model_max_len(described) or DEFAULT_MAX_LEN, batch_size, limit)
    was_training = bool(described.get("training"))
    call(label, model.attr("to"), device)
    call(label, model.attr("eval"))
    correct = total = 0
    try:
        for ids, truth in batches:
            logits = call(label, model, ids.to(device), _no_grad=True)  # (B, num_classes)
            if not isinstance(logits, torch.Tensor) or logits.dim() != 2 or logits.shape[0] != len(ids) \
                    or logits.shape[1] < 1:
                fail(f"{label}: the model must return logits of shape (B, num_classes).",
                     details=expected_got(f"a tensor of shape ({len(ids)}, 5)",
                                          str(tuple(logits.shape)) if isinstance(logits, torch.Tensor)
                                          else type_name(logits)))
            correct += int((logits.detach().argmax(dim=-1).cpu() == truth).sum())
            total += len(truth)
    finally:
        try:
            model.attr("train")(was_training)
        except (StudentError, ProbeBroken):
            pass
    return correct / total


@probed
def check_trained_classifier(model, vocab, max_len=None) -> None:
    """The notebook's trained model must beat the bar on the held-out synthetic test set."""
    start_check()
    info = kind_of(model, "model")
    if not info.get("module"):
        fail("check_trained_classifier needs your trained model.",
             details=expected_got("an nn.Module", str(info.get("type", "?"))))
    vocab = fetch(vocab, "the vocabulary")  # data: token -> id
    if not isinstance(vocab, dict) or vocab.get("<pad>") != 0 or "<unk>" not in vocab \
            or not all(isinstance(k, str) and isinstance(v, numbers.Integral) and not isinstance(v, bool)
                       for k, v in vocab.items()):
        fail("check_trained_classifier needs the vocabulary the model was trained with.",
             details=expected_got("a dict token -> id with '<pad>': 0 and '<unk>'", type_name(vocab)))
    max_len = fetch(max_len, "max_len")
    if isinstance(max_len, bool) or not isinstance(max_len, numbers.Integral) or max_len <= 0:
        max_len = None  # not given (or unusable): the model's own positional table decides
    if not describe(model, "your trained model").get("parameters"):
        fail("The trained model has no parameters.",
             details=expected_got("a TransformerClassifier", str(info.get("type", "?"))))
    accuracy = trained_accuracy(model, vocab, int(max_len) if max_len else None)
    if accuracy < TRAINED_MIN_ACCURACY:
        fail("Your trained classifier is not accurate enough on the held-out synthetic test set.",
             details=expected_got(f"accuracy >= {TRAINED_MIN_ACCURACY:.2f} (always guessing one class gives "
                                  f"{MAJORITY_ACCURACY:.2f})", f"{accuracy:.3f}"),
             hint="run the training cells again after the checks of the exercises above pass; "
                  "keep the notebook's settings (learning rate, epochs, MAX_LEN).")
