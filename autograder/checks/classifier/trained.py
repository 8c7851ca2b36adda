"""Hidden check of notebook 07's trained model: `check_trained_classifier(model, vocab, max_len=None)`.

The trained weights come out of the kernel and are loaded into the contract's `TransformerClassifier` here
(`trained_weights.py`); that model is evaluated here, on reviews the grader generates with coursekit's synthetic
generator and this submission's seed (`draws.seed_for`: the same reviews when the same notebook is regraded, other
reviews for any other submission; a fresh random seed per run when no salt is set), never the shipped test split,
which the kernel can read. The reviews are tokenised with `coursekit.tokenize` and the student's `vocab` (data),
batched with coursekit's own padding collate and length-bucketed sampler (`coursekit.loaders`): neither the reviews,
nor their labels, nor the predictions ever pass through the student's code.
"""
from __future__ import annotations

import math
import numbers
import secrets

import torch
from torch.utils.data import DataLoader

from autograder.checks.kit.toolkit import expected_got, fail, fetch, kind_of, start_check, type_name
from autograder.checks.kit.compare import describe
from autograder.checks.kit.draws import current_salt, seed_for
from autograder.checks.kit.inputs import reference
from autograder.checks.kit.remote import RemoteObject, hidden_check
from autograder.checks.kit.trained_weights import count_layers, heads_of, load_into, size_of, trained_state

# The notebook's grading-mode run of the reference (bench/yelp.py budget "grading": all 8,000 synthetic training
# reviews, 6 epochs, d_model 64, 2 layers, dropout 0.1, AdamW 3e-3), with the contract's N(0, d_model^-1/2)
# TokenEmbedding, reached 0.584, 0.560 and 0.619 test accuracy for seeds 0, 1, 2 on the CPU (docs/benchmarks.md);
# always guessing one class gets 0.20. The bar sits 0.12 below the worst measured seed, so an honest
# implementation with a different order of operations (or a GPU run) passes, while an untrained or badly broken
# model (about 0.2) does not.
TRAINED_MIN_ACCURACY = 0.44
MAJORITY_ACCURACY = 0.20


HELDOUT_REVIEWS = 2000  # as many as the shipped test split
HELDOUT_SEED = 7070     # stands for this submission's seed of the generated reviews (`draws.seed_for`)
NOTEBOOK_HEADS = 4  # the notebook's TransformerClassifier(..., num_heads=4, ...)


def heldout_reviews(seed: int, count: int = HELDOUT_REVIEWS) -> tuple[list[str], list[int]]:
    """`count` new synthetic reviews (texts, labels 0..4), none of them a training review: the same generator and
    label distribution as the course's splits (coursekit/data/synth.py), a seed of the grader's choosing."""
    from coursekit import load_yelp
    from coursekit.data.synth import generate_reviews

    train_texts, _ = load_yelp("synthetic", split="train")
    reviews = generate_reviews(count, seed=seed, exclude=set(train_texts))
    return [review.text for review in reviews], [review.label - 1 for review in reviews]


def heldout_batches(vocab: dict[str, int], max_len: int, texts: list[str], labels: list[int],
                    batch_size: int = 128) -> DataLoader:
    """(ids (B, T), labels (B,)) batches of the reviews, shortest first.

    Each review is encoded with `vocab` (unknown tokens -> '<unk>'), cut to its first `max_len` tokens (an empty
    one becomes a single '<unk>'), and post-padded with '<pad>' to the longest of its batch.
    """
    from coursekit import tokenize
    from coursekit.loaders import BucketBatchSampler, pad_collate

    unk, pad = vocab.get("<unk>", 1), vocab.get("<pad>", 0)
    ids = [[vocab.get(token, unk) for token in tokenize(text)][:max_len] or [unk] for text in texts]
    # one chunk holding every review, not shuffled: the batches go from the shortest reviews to the longest
    sampler = BucketBatchSampler([len(sequence) for sequence in ids], batch_size, shuffle=False, bucket=True,
                                 batches_per_chunk=math.ceil(len(ids) / batch_size))
    return DataLoader(list(zip(ids, labels)), batch_sampler=sampler,
                      collate_fn=lambda batch: pad_collate(batch, pad_id=pad))


def contract_classifier(model: RemoteObject, state: dict[str, torch.Tensor]):
    """The contract's TransformerClassifier with the sizes of the student's weights, holding them."""
    label = "your trained model"
    vocab_size = size_of(state, "encoder.embedding.weight", 0, label)
    d_model = size_of(state, "encoder.embedding.weight", 1, label)
    d_ff = size_of(state, "encoder.layers.0.ffn.linear1.weight", 0, label)
    num_classes = size_of(state, "classifier.weight", 0, label)
    max_len = size_of(state, "encoder.pos_encoding.pe", 0, label)
    heads = heads_of(model.attr("encoder", "layers", "0", "self_attn", "num_heads"), d_model, NOTEBOOK_HEADS)
    TransformerClassifier = reference("classifier").TransformerClassifier
    with torch.device("cpu"):
        contract = TransformerClassifier(vocab_size, num_classes=num_classes, d_model=d_model, num_heads=heads,
                                         d_ff=d_ff, num_layers=count_layers(state, "encoder.layers."),
                                         max_len=max_len, dropout=0.0, pad_id=0)
    return load_into(contract, state, label)


def trained_accuracy(model: RemoteObject, vocab: dict[str, int], max_len: int | None = None,
                     batch_size: int = 128, seed: int | None = None, count: int = HELDOUT_REVIEWS) -> float:
    """Accuracy of the contract's classifier holding the handed-in model's weights, on `count` reviews generated
    with `seed` (drawn here when None): see the module docstring."""
    device = start_check()
    state = trained_state(model, "your trained model")
    classifier = contract_classifier(model, state).to(device)
    rows = state["encoder.embedding.weight"].shape[0]
    if min(vocab.values()) < 0 or max(vocab.values()) >= rows:
        fail("check_trained_classifier needs the vocabulary the model was trained with.",
             details=expected_got(f"ids 0 .. {rows - 1} (the rows of the model's embedding)",
                                  f"ids {min(vocab.values())} .. {max(vocab.values())}"))
    if seed is None:  # this submission's reviews (the same on a regrade); with no salt, new ones on every run
        seed = seed_for(HELDOUT_SEED) if current_salt() else secrets.randbits(62)
    texts, labels = heldout_reviews(seed, count)
    table = classifier.encoder.pos_encoding.pe.shape[0]
    correct = total = 0
    with torch.no_grad():
        for ids, truth in heldout_batches(vocab, min(max_len or table, table), texts, labels, batch_size):
            logits = classifier(ids.to(device))                                  # (B, num_classes)
            correct += int((logits.argmax(dim=-1).cpu() == truth).sum())
            total += len(truth)
    return correct / total


@hidden_check
def check_trained_classifier(model, vocab, max_len=None) -> None:
    """The notebook's trained model must beat the bar on new synthetic reviews (see the module docstring)."""
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
        fail("Your trained classifier is not accurate enough on new synthetic reviews it has never seen.",
             details=expected_got(f"accuracy >= {TRAINED_MIN_ACCURACY:.2f} (always guessing one class gives "
                                  f"{MAJORITY_ACCURACY:.2f})", f"{accuracy:.3f}"),
             hint="run the training cells again after the checks of the exercises above pass; "
                  "keep the notebook's settings (learning rate, epochs, MAX_LEN).")
