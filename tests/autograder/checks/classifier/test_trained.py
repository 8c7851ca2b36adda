"""The hidden check of notebook 07's trained model: an untrained model fails it, the reference pipeline passes it,
and what crosses the wire is only the weights (the generated reviews, their labels and the predictions never enter
the kernel); a lookup of the shipped test labels earns nothing.
"""
from __future__ import annotations

import pytest
import torch
import torch.nn as nn

import solutions
import variants as V
from autograder.checks.kit import remote as _remote
from autograder.checks.classifier import trained as trained
from autograder.checks.kit import trained_weights
from coursekit import load_yelp, probe, tokenize


fails_with = V.fails_with  # the shared helper: it also records each wrong answer for naming.py


# ------------------------------------------------------------------------------------------ trained model
def small_vocab():
    from coursekit import load_yelp, tokenize

    texts, _ = load_yelp("synthetic", split="train", limit=500)
    return solutions.build_vocab([tokenize(t) for t in texts], min_freq=2)


def test_untrained_model_fails_the_trained_check():
    vocab = small_vocab()
    torch.manual_seed(0)
    model = solutions.TransformerClassifier(len(vocab), d_model=32, num_heads=2, d_ff=64, num_layers=1,
                                            max_len=128)
    message = fails_with(lambda m: trained.check_trained_classifier(m, vocab, max_len=128), model,
                         "not accurate enough", f"{trained.TRAINED_MIN_ACCURACY:.2f}")
    assert "0.20" in message  # the majority baseline is stated for comparison


def test_trained_check_rejects_bad_arguments():
    fails_with(lambda v: trained.check_trained_classifier(nn.Linear(2, 2), v), {"a": 1}, "vocabulary")
    fails_with(lambda m: trained.check_trained_classifier(m, {"<pad>": 0, "<unk>": 1}), "model", "nn.Module")


def test_threshold_is_far_above_the_majority_baseline():
    assert trained.TRAINED_MIN_ACCURACY >= 2 * trained.MAJORITY_ACCURACY


@pytest.mark.slow
def test_reference_pipeline_in_grading_budget_passes_the_trained_check():
    """bench/yelp.py's reference pipeline at the grading budget (seed 0) beats the majority baseline by far on its
    own test split and passes the trained check (one training for both: it takes half a minute)."""
    import importlib.util
    from pathlib import Path

    path = Path(__file__).resolve().parents[4] / "bench" / "yelp.py"
    spec = importlib.util.spec_from_file_location("bench_yelp", path)
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    result = bench.train_reference(budget="grading", seed=0)
    assert result["accuracy"] > 0.45
    trained.check_trained_classifier(result["model"], result["vocab"], max_len=result["max_len"])


def sent_values(request):
    """Every argument value of a request, decoded (objects in the kernel become ("object", target))."""
    values = [probe.decode(a, lambda info: ("object", info)) for a in request.get("args", [])]
    values += [probe.decode(v, lambda info: ("object", info)) for v in request.get("kwargs", {}).values()]
    flat = []

    def walk(value):
        flat.append(value)
        if isinstance(value, (list, tuple)) and value[:1] != ("object",):
            for item in value:
                walk(item)
        elif isinstance(value, dict):
            for item in value.values():
                walk(item)
    for value in values:
        walk(value)
    return flat


def test_trained_check_sends_nothing_of_the_reviews(recorded):
    """The weights come out (one "state" request); no review, id or label goes in, no call runs student code."""
    vocab = small_vocab()
    torch.manual_seed(0)
    model = solutions.TransformerClassifier(len(vocab), d_model=16, num_heads=2, d_ff=32, num_layers=1, max_len=32)
    channel, (remote_model, remote_vocab), _ = recorded(model, vocab)  # no max_len: the model's table decides
    with pytest.raises(AssertionError, match="not accurate enough"):
        trained.check_trained_classifier(remote_model, remote_vocab)
    assert {r["op"] for r in channel.requests} <= {"describe", "get", "state"}
    assert [r["op"] for r in channel.requests].count("state") == 1
    assert not any(isinstance(value, torch.Tensor) for request in channel.requests for value in sent_values(request))


class LookupClassifier(solutions.TransformerClassifier):
    """No training: it answers the shipped test split from its labels (readable in the kernel), by the ids."""

    def __init__(self, vocab, max_len):
        super().__init__(len(vocab), d_model=16, num_heads=2, d_ff=32, num_layers=1, max_len=max_len)
        texts, labels = load_yelp("synthetic", split="test")
        unk = vocab["<unk>"]
        self.answers = {tuple([vocab.get(t, unk) for t in tokenize(text)][:max_len] or [unk]): label
                        for text, label in zip(texts, labels)}

    def forward(self, ids):
        rows = [tuple(int(i) for i in row if i != 0) for row in ids]
        return torch.nn.functional.one_hot(torch.tensor([self.answers.get(r, 0) for r in rows]), 5).float() * 10


def test_a_lookup_model_of_the_shipped_test_labels_earns_nothing():
    """Issue #31 door 3: the predictions scored are the contract's model's with these (untrained) weights, on
    reviews generated for the run, not the lookup's answers on the shipped test split."""
    vocab = small_vocab()
    torch.manual_seed(0)
    lookup = LookupClassifier(vocab, max_len=64)
    texts, labels = load_yelp("synthetic", split="test")
    unk = vocab["<unk>"]
    hits = sum(int(lookup(torch.tensor([[vocab.get(t, unk) for t in tokenize(text)][:64] or [unk]])).argmax(-1)[0])
               == label for text, label in zip(texts[:200], labels[:200]))
    assert hits >= 190                         # it does know the shipped test labels
    with pytest.raises(AssertionError, match="not accurate enough"):
        trained.check_trained_classifier(lookup, vocab, max_len=64)


def test_the_accuracy_is_the_contract_models_on_new_reviews():
    """The accuracy reported is the reference classifier's, with the handed-in weights, on the generated reviews
    (recomputed here from the reference); each seed gives other reviews, none from the training split."""
    vocab = small_vocab()
    torch.manual_seed(1)
    model = solutions.TransformerClassifier(len(vocab), d_model=16, num_heads=2, d_ff=32, num_layers=1,
                                            max_len=48).eval()
    texts, labels = trained.heldout_reviews(seed=5, count=300)
    assert texts != trained.heldout_reviews(seed=6, count=300)[0]
    assert not set(texts) & set(load_yelp("synthetic", split="train")[0])
    correct = 0
    with torch.no_grad():
        for ids, truth in trained.heldout_batches(vocab, 48, texts, labels):
            correct += int((model(ids).argmax(-1) == truth).sum())
    (remote,), _ = _remote.hand_in_locally((model,), {}, "accuracy_test")
    try:
        assert trained.trained_accuracy(remote, vocab, seed=5, count=300) == correct / 300
    finally:
        probe.ProbeState.subjects.pop("accuracy_test", None)


def test_weights_that_do_not_fit_the_contract_fail_readably():
    vocab = small_vocab()

    class Renamed(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.table = torch.nn.Embedding(len(vocab), 8)

        def forward(self, ids):
            return self.table(ids).mean(1)[:, :5]

    fails_with(lambda m: trained.check_trained_classifier(m, vocab), Renamed(), "contract's names")
    big = solutions.TransformerClassifier(len(vocab), d_model=16, num_heads=2, d_ff=32, num_layers=1, max_len=32)
    big.extra = torch.nn.Parameter(torch.zeros(trained_weights.MAX_TRAINED_NUMBERS + 1))
    fails_with(lambda m: trained.check_trained_classifier(m, vocab), big, "too large")


def test_the_generated_reviews_are_this_submissions(monkeypatch):
    """Door 2: the reviews' seed is the submission's (the same on a regrade, another for another submission)."""
    from autograder.checks.kit.draws import salted

    seeds = []

    def capture(seed, count):
        seeds.append(seed)
        raise RuntimeError("stop")

    monkeypatch.setattr(trained, "heldout_reviews", capture)
    vocab = small_vocab()
    model = solutions.TransformerClassifier(len(vocab), d_model=16, num_heads=2, d_ff=32, num_layers=1, max_len=32)
    (remote,), _ = _remote.hand_in_locally((model,), {}, "seed_test")
    try:
        for salt in (11, 11, 12):
            with salted(salt), pytest.raises(RuntimeError):
                trained.trained_accuracy(remote, vocab)
    finally:
        probe.ProbeState.subjects.pop("seed_test", None)
    assert seeds[0] == seeds[1] != seeds[2]
