"""The hidden check of notebook 11's review probe: the head handed in is read as untrusted data before any model is
loaded (wrong shapes, NaN, oversize and non-dict payloads fail readably), it is scored here on reviews generated for
this submission with the grader's own features (nothing of the reviews crosses into the kernel), and, on the real
SmolLM2 file, the reference pipeline at the notebook's grading budget passes while heads that learned nothing fail.
"""
from __future__ import annotations

import json

import numpy as np
import pytest
import torch

import variants as V
from autograder.checks.kit import remote as _remote
from autograder.checks.kit.draws import salted
from autograder.checks.pretrained import trained
from coursekit import probe
from coursekit import review_probe as rp

fails_with = V.fails_with
D, C = trained.D_MODEL, trained.NUM_CLASSES


def head_dict(d=D, classes=C, seed=0, **replace):
    """An exported head (to_dict's lists) of d features and `classes` classes, random but valid."""
    g = torch.Generator().manual_seed(seed)
    head = rp.ProbeHead(torch.randn(d, generator=g), torch.rand(d, generator=g) + 0.5,
                        torch.randn(classes, d, generator=g), torch.randn(classes, generator=g))
    return {**head.to_dict(), **replace}


def block_width() -> int:
    return D // C


def separable_features(labels: list[int], seed: int = 0) -> torch.Tensor:
    """(N, 576) features whose block of columns c is raised for label c: a linear head can read the label."""
    g = torch.Generator().manual_seed(seed)
    x = 0.3 * torch.randn(len(labels), D, generator=g)
    for row, label in enumerate(labels):
        x[row, label * block_width():(label + 1) * block_width()] += 3.0
    return x


def reading_head() -> dict:
    """A head that reads separable_features right: class c sums block c."""
    weight = torch.zeros(C, D)
    for c in range(C):
        weight[c, c * block_width():(c + 1) * block_width()] = 1.0
    return rp.ProbeHead(torch.zeros(D), torch.ones(D), weight, torch.zeros(C)).to_dict()


@pytest.fixture
def no_model(monkeypatch):
    """The grader's model must not be loaded: every structural failure comes first."""
    def refuse(*args, **kwargs):
        raise RuntimeError("the grader's model was loaded for a head that cannot be read")

    monkeypatch.setattr(trained, "grader_model", refuse)


@pytest.fixture
def fake_scoring(monkeypatch):
    """Held-out reviews and their features without the real model: 300 short texts, labels cycling 0..4, features
    a linear head can read; the seeds asked for are recorded."""
    seeds = []

    def reviews(seed, count=trained.HELDOUT_REVIEWS):
        seeds.append(seed)
        return [f"review {i}" for i in range(count)], [i % C for i in range(count)]

    def features(texts, device=None):
        return separable_features([int(t.split()[1]) % C for t in texts])

    monkeypatch.setattr(trained, "heldout_reviews", reviews)
    monkeypatch.setattr(trained, "reference_features", features)
    return seeds


# ------------------------------------------------------------------------------------------------ reading the head
@pytest.mark.parametrize("payload, fragments", [
    ([1.0, 2.0], ("expected a dict, got list",)),
    ("head", ("expected a dict, got str",)),
    (None, ("expected a dict, got NoneType",)),
    ({"mean": [0.0], "std": [1.0]}, ("expected exactly the keys bias, mean, std, weight",)),
    (head_dict(d=10), ("expected d = 576 and C = 5, got d = 10 and C = 5",)),
    (head_dict(classes=3), ("expected d = 576 and C = 5, got d = 576 and C = 3",)),
    (head_dict(weight=[[0.0] * D] * 4), ("weight must be C x d = 5 x 576",)),
    (head_dict(weight=[[0.0] * (D - 1)] * C), ("weight must be C x d = 5 x 576",)),
    (head_dict(mean=[float("nan")] * D), ("mean[0] is nan, not a finite float32 number",)),
    (head_dict(bias=[0.0, float("inf"), 0.0, 0.0, 0.0]), ("bias[1] is inf",)),
    (head_dict(bias=[0.0, 1e39, 0.0, 0.0, 0.0]), ("not a finite float32 number",)),
    (head_dict(std=[0.0] * D), ("every std must be > 0",)),
    (head_dict(mean=["0.5"] * D), ("mean[0] must be a number, got str",)),
    (head_dict(mean=[True] * D), ("mean[0] must be a number, got bool",)),
    (head_dict(mean=[0.0] * (rp.MAX_PROBE_NUMBERS + 1)), ("too many numbers",)),
    (head_dict(weight=[[0.0] * 30_000] * 5), ("too many numbers",)),
], ids=["list", "str", "none", "keys", "d", "classes", "rows", "row_length", "nan", "inf", "float32_overflow",
        "std_zero", "strings", "bools", "oversize_mean", "oversize_weight"])
def test_a_head_that_cannot_be_read_fails_before_the_model_loads(no_model, payload, fragments):
    message = fails_with(trained.check_review_probe, payload, "could not be read as a linear head", *fragments)
    assert "head.to_dict()" in message


def test_an_oversize_tensor_is_refused_before_it_is_converted(no_model):
    payload = head_dict(mean=torch.zeros(rp.MAX_PROBE_NUMBERS + 1))
    fails_with(trained.check_review_probe, payload, "too large to be evaluated", "100,001 in mean")


def test_a_head_left_in_the_kernel_without_to_dict_fails_readably(no_model):
    fails_with(trained.check_review_probe, object(), "is not the exported head", "object")


def test_nothing_handed_in_fails_readably(no_model):
    nothing = _remote.RemoteObject(_remote.LoopbackChannel(), {"subject": "review_probe#none", "index": 0})
    fails_with(trained.check_review_probe, nothing, "head was not defined when the grade cell ran")


# ------------------------------------------------------------------------------------------------ scoring
def test_a_head_that_reads_the_features_passes_and_tensors_or_the_head_itself_are_accepted(fake_scoring):
    trained.check_review_probe(reading_head())
    as_tensors = {key: torch.tensor(value) for key, value in reading_head().items()}
    trained.check_review_probe(as_tensors)
    trained.check_review_probe({key: np.asarray(value) for key, value in reading_head().items()})
    trained.check_review_probe(rp.ProbeHead.from_dict(reading_head()))   # its to_dict() runs in the kernel


def test_a_head_that_learned_nothing_fails_with_its_accuracy(fake_scoring):
    zero = rp.ProbeHead(torch.zeros(D), torch.ones(D), torch.zeros(C, D), torch.zeros(C)).to_dict()
    message = fails_with(trained.check_review_probe, zero, "not accurate enough on new synthetic reviews",
                         f"accuracy >= {trained.TRAINED_MIN_ACCURACY:.2f}", "always one rating gives 0.20",
                         "got:      0.200", "300 reviews generated for this submission")
    assert "dequantize_q4_1, llama_state_dict and final_hidden" in message
    fails_with(trained.check_review_probe, head_dict(seed=3), "not accurate enough")   # random weights


def test_the_accuracy_is_the_heads_on_the_grader_features(fake_scoring):
    """probe_accuracy: the handed-in numbers' predictions on the grader's features of the generated reviews."""
    head = rp.ProbeHead.from_dict(reading_head())
    assert trained.probe_accuracy(head, seed=5, count=50) == 1.0
    half = reading_head()
    half["weight"] = [row if c < 2 else [0.0] * D for c, row in enumerate(half["weight"])]   # knows classes 0, 1
    half = rp.ProbeHead.from_dict(half)
    labels = [i % C for i in range(50)]
    expected = rp.accuracy(half.predict(separable_features(labels)), labels)
    assert 0.4 <= expected < 1.0
    assert trained.probe_accuracy(half, seed=5, count=50) == expected


def test_the_generated_reviews_are_this_submissions(fake_scoring):
    """The same reviews on a regrade, others for another submission, fresh ones when no salt is set."""
    for salt in (11, 11, 12, 0, 0):
        with salted(salt):
            trained.check_review_probe(reading_head())
    assert fake_scoring[0] == fake_scoring[1] != fake_scoring[2]
    assert len({fake_scoring[2], fake_scoring[3], fake_scoring[4]}) == 3


def test_the_held_out_reviews_are_new_and_balanced():
    """Generated by the course's generator: none of them in the shipped splits (which the kernel reads), each
    rating 60 times in 300, other texts for another seed."""
    texts, labels = trained.heldout_reviews(seed=5)
    assert len(texts) == len(set(texts)) == trained.HELDOUT_REVIEWS
    assert [labels.count(c) for c in range(C)] == [trained.HELDOUT_REVIEWS // C] * C
    train_texts, _ = rp.load_synthetic_yelp("train")
    test_texts, _ = rp.load_synthetic_yelp("test")
    assert not set(texts) & (set(train_texts) | set(test_texts))
    assert trained.heldout_reviews(seed=5)[0] == texts
    assert not set(trained.heldout_reviews(seed=6)[0]) & set(texts)


class RecordingChannel(_remote.LoopbackChannel):
    def __init__(self):
        self.requests = []

    def request(self, request):
        self.requests.append(json.loads(json.dumps(request)))
        return super().request(request)


def test_only_the_head_comes_out_and_nothing_goes_in(fake_scoring):
    """A dict head: one look at what it is and one `get`; no call runs code in the kernel, no argument is sent."""
    (remote,), _ = _remote.hand_in_locally((reading_head(),), {}, "recorded_probe")
    channel = RecordingChannel()
    try:
        trained.check_review_probe(_remote.RemoteObject(channel, remote.target))
    finally:
        probe.ProbeState.subjects.pop(remote.target["subject"], None)
        probe.ProbeState.handles.clear()
    assert [r["op"] for r in channel.requests] == ["describe", "get"]
    assert not any(r.get("args") or r.get("kwargs") for r in channel.requests)


def test_the_bar_is_far_above_guessing():
    assert trained.TRAINED_MIN_ACCURACY - trained.MAJORITY_ACCURACY >= 0.099


# ------------------------------------------------------------------------------------------------ the real model
@pytest.fixture(scope="module")
def real_model():
    pytest.importorskip("gguf")
    from coursekit.gguf_checkpoint import smollm2_path

    try:
        smollm2_path()
    except FileNotFoundError as error:
        pytest.skip(str(error))
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield trained.grader_model("cpu")
    finally:
        torch.set_num_threads(threads)


@pytest.mark.slow
def test_the_reference_probe_at_the_grading_budget_passes_and_heads_that_learned_nothing_fail(real_model,
                                                                                           monkeypatch):
    """The notebook's pipeline with the reference (200 class-balanced training labels, seed 0, fit_probe's
    defaults) passes on this submission's reviews; the same features with shuffled labels, and a zero head, fail.
    The held-out features are computed once (the three checks draw the same reviews)."""
    from solutions.pretrained import final_hidden

    model, tokenizer = real_model
    assert model.norm.weight.numel() == D and model.lm_head.weight.shape[0] == tokenizer.vocab_size
    texts, labels = rp.load_synthetic_yelp("train")
    subset = rp.balanced_subset(labels, 200, seed=0)
    features = rp.last_token_features(model, tokenizer.encode, [texts[i] for i in subset], final_hidden)
    y = [labels[i] for i in subset]
    head = rp.fit_probe(features, y)

    computed, scored = {}, []
    original = trained.reference_features

    def once(texts, device=None):
        key = tuple(texts)
        if key not in computed:
            computed[key] = original(texts, device)
        return computed[key]

    def recording_accuracy(head, seed=None, count=trained.HELDOUT_REVIEWS):
        scored.append(original_accuracy(head, seed, count))
        return scored[-1]

    original_accuracy = trained.probe_accuracy
    monkeypatch.setattr(trained, "reference_features", once)
    monkeypatch.setattr(trained, "probe_accuracy", recording_accuracy)
    trained.check_review_probe(head.to_dict())
    permutation = torch.randperm(len(y), generator=torch.Generator().manual_seed(0)).tolist()
    shuffled = rp.fit_probe(features, [y[i] for i in permutation])
    fails_with(trained.check_review_probe, shuffled.to_dict(), "not accurate enough")
    zero = rp.ProbeHead(torch.zeros(D), torch.ones(D), torch.zeros(C, D), torch.zeros(C))
    fails_with(trained.check_review_probe, zero.to_dict(), "not accurate enough", "0.200")
    assert len(computed) == 1
    print('review probe accuracies (reference, shuffled, zero):', scored)
    assert scored[0] >= trained.TRAINED_MIN_ACCURACY + 0.05, scored   # a margin over the bar
    assert scored[1] <= trained.TRAINED_MIN_ACCURACY - 0.05, scored
