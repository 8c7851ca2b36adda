"""The hidden checks of notebook 07: the reference and differently written correct answers pass; every diagnosed
mistake fails with its diagnosis named; an untrained model fails the trained-model check.

The checks run on `RemoteObject`s: called with ordinary objects here, `@probed` hands them in to the in-process
kernel side, so every call goes through the same JSON round trip as in grading. The last tests inspect those
requests: forged forward-call records never make a check pass, and the test labels never enter the kernel.
"""
from __future__ import annotations

import json

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

import solutions
import variants as V
from autograder.checks.kit import remote as _remote
from autograder.checks.classifier import checks as checks
from autograder.checks.classifier import trained as trained
from autograder.checks.kit import trained_weights
from coursekit import load_yelp, probe, tokenize
from coursekit.criteria import CRITERIA
from solutions.attention import make_padding_mask
from solutions.encoder import Encoder


fails_with = V.fails_with  # the shared helper: it also records each wrong answer for naming.py


# ------------------------------------------------------------------------------------------ masked_mean_pool
def pool_where(x, mask):
    kept = torch.where(mask[..., None], x, torch.zeros_like(x))
    return kept.sum(1) / mask.sum(1, keepdim=True).to(x.dtype)


def pool_loop(x, mask):
    return torch.stack([x[b][mask[b]].mean(0) for b in range(x.shape[0])])


def pool_einsum(x, mask):
    weights = mask.float() / mask.float().sum(-1, keepdim=True)
    return torch.einsum("bt,btd->bd", weights, x)


@pytest.mark.parametrize("pool", [solutions.masked_mean_pool, pool_where, pool_loop, pool_einsum])
def test_masked_mean_pool_accepts_correct_answers(pool):
    checks.check_masked_mean_pool(pool)


@pytest.mark.parametrize("pool, diagnosis", [
    (lambda x, m: x.mean(1), "pool.includes_padding"),
    (lambda x, m: (x * m[..., None]).sum(1) / x.shape[1], "pool.divides_by_T"),
    (lambda x, m: (x * (~m)[..., None]).sum(1) / (~m).sum(1, keepdim=True).clamp(min=1), "pool.mask_inverted"),
    (lambda x, m: (x * m[..., None]).sum(1), "pool.no_division"),
    (lambda x, m: (x * m[..., None]).sum(1) / m.sum(), "pool.divides_by_batch_count"),
])
def test_masked_mean_pool_names_the_mistake(pool, diagnosis):
    fails_with(checks.check_masked_mean_pool, pool, "likely mistake", diagnosis)


def test_masked_mean_pool_shape_nan_inplace_and_stub():
    fails_with(checks.check_masked_mean_pool, lambda x, m: x.mean(2), "wrong shape", "expected shape (")
    fails_with(checks.check_masked_mean_pool, lambda x, m: x.sum(1) / 0 * 0, "NaN")
    fails_with(checks.check_masked_mean_pool, lambda x, m: x.mul_(m[..., None]).sum(1) / m.sum(1, keepdim=True),
               "in place", "pool.in_place")

    def stub(x, mask):
        raise NotImplementedError()
    fails_with(checks.check_masked_mean_pool, stub, "NotImplementedError")
    fails_with(checks.check_masked_mean_pool, 3, "must be a function")


# ------------------------------------------------------------------------------------------ TransformerClassifier
class Classifier(nn.Module):
    """A correct answer written differently: loop pooling, mask built by hand; `pool` and `head` swappable."""

    def __init__(self, vocab_size, num_classes=5, d_model=64, num_heads=4, d_ff=128, num_layers=2, max_len=256,
                 dropout=0.1, pad_id=0):
        super().__init__()
        self.pad_id = pad_id
        self.encoder = Encoder(vocab_size, d_model, num_heads, d_ff, num_layers, max_len, dropout)
        self.classifier = nn.Linear(d_model, num_classes)

    def mask(self, ids):
        return ids.ne(self.pad_id).unsqueeze(1).unsqueeze(2)  # (B, 1, 1, T)

    def pool(self, x, ids):
        keep = ids.ne(self.pad_id)
        return torch.stack([x[b, keep[b]].sum(0) / keep[b].sum() for b in range(len(ids))])

    def head(self, pooled):
        return self.classifier(pooled)

    def forward(self, ids):
        return self.head(self.pool(self.encoder(ids, self.mask(ids)), ids))


class IncludesPadding(Classifier):
    def pool(self, x, ids):
        return x.mean(1)


class NoEncoderMask(Classifier):
    def mask(self, ids):
        return None


class HardCodedPad(Classifier):
    def mask(self, ids):
        return make_padding_mask(ids, 0)

    def pool(self, x, ids):
        return solutions.masked_mean_pool(x, ids != 0)


class Softmaxed(Classifier):
    def head(self, pooled):
        return self.classifier(pooled).softmax(-1)


class LogSoftmaxed(Classifier):
    def head(self, pooled):
        return F.log_softmax(self.classifier(pooled), dim=-1)


class FirstToken(Classifier):
    def pool(self, x, ids):
        return x[:, 0]


class MaxPool(Classifier):
    def pool(self, x, ids):
        return x.masked_fill(~ids.ne(self.pad_id)[..., None], float("-inf")).max(1).values


class RenamedHead(Classifier):
    def __init__(self, vocab_size, num_classes=5, d_model=64, **kwargs):
        super().__init__(vocab_size, num_classes, d_model, **kwargs)
        del self.classifier
        self.fc = nn.Linear(d_model, num_classes)

    def head(self, pooled):
        return self.fc(pooled)


@pytest.mark.parametrize("cls", [solutions.TransformerClassifier, Classifier])
def test_transformer_classifier_accepts_correct_answers(cls):
    checks.check_transformer_classifier(cls)


@pytest.mark.parametrize("cls, diagnosis", [
    (IncludesPadding, "classifier.pool_includes_padding"),
    (NoEncoderMask, "classifier.encoder_no_mask"),
    (Softmaxed, "classifier.returns_probabilities"),
    (LogSoftmaxed, "classifier.returns_log_probabilities"),
    (FirstToken, "classifier.first_position"),
    (MaxPool, "classifier.max_pooling"),
])
def test_transformer_classifier_names_the_mistake(cls, diagnosis):
    fails_with(checks.check_transformer_classifier, cls, "likely mistake", diagnosis)


class FixedDropout(Classifier):
    """Ignores its dropout argument: the encoder always gets the default 0.1."""

    def __init__(self, vocab_size, num_classes=5, d_model=64, num_heads=4, d_ff=128, num_layers=2, max_len=256,
                 dropout=0.1, pad_id=0):
        super().__init__(vocab_size, num_classes, d_model, num_heads, d_ff, num_layers, max_len, 0.1, pad_id)


class NoDropout(Classifier):
    """Ignores its dropout argument: the encoder never drops anything."""

    def __init__(self, vocab_size, num_classes=5, d_model=64, num_heads=4, d_ff=128, num_layers=2, max_len=256,
                 dropout=0.1, pad_id=0):
        super().__init__(vocab_size, num_classes, d_model, num_heads, d_ff, num_layers, max_len, 0.0, pad_id)


class FixedMaxLen(Classifier):
    """Ignores its max_len argument: the core's shapes (the positional table of max_len rows) tell it."""

    def __init__(self, vocab_size, num_classes=5, d_model=64, num_heads=4, d_ff=128, num_layers=2, max_len=256,
                 dropout=0.1, pad_id=0):
        super().__init__(vocab_size, num_classes, d_model, num_heads, d_ff, num_layers, 256, dropout, pad_id)


def test_a_hard_coded_pad_id_keeps_most_of_the_points():
    message = V.fails_partially(checks.check_transformer_classifier, HardCodedPad, "TransformerClassifier.pad_id",
                                "pad_id=")
    assert "✓ " + CRITERIA["TransformerClassifier.dropout"].text in message
    with pytest.raises(AssertionError) as info:
        checks.check_transformer_classifier(HardCodedPad)
    assert info.value.mistake_id == "classifier.pad_id_hardcoded"
    assert info.value.fraction == pytest.approx(1 - 0.25 / 2)


@pytest.mark.parametrize("cls, fragment", [(FixedDropout, "dropout=0.0"), (NoDropout, "dropout=0.5")])
def test_an_ignored_dropout_keeps_most_of_the_points(cls, fragment):
    V.fails_partially(checks.check_transformer_classifier, cls, "TransformerClassifier.dropout", fragment)


def test_an_ignored_max_len_fails_the_core():
    V.fails_plainly(checks.check_transformer_classifier, FixedMaxLen, "wrong shape")


def test_transformer_classifier_structure_messages():
    fails_with(checks.check_transformer_classifier, RenamedHead, "classifier")
    fails_with(checks.check_transformer_classifier, lambda **kw: None, "class deriving from nn.Module")

    class Stub(nn.Module):
        def __init__(self, vocab_size, num_classes=5, d_model=64, num_heads=4, d_ff=128, num_layers=2,
                     max_len=256, dropout=0.1, pad_id=0):
            raise NotImplementedError()
    fails_with(checks.check_transformer_classifier, Stub, "NotImplementedError")


# ------------------------------------------------------------------------------------------ train_one_epoch
def train_variant(model, loader, optimizer, device):
    """Correct, written differently: zero_grad after the step, log_softmax + nll_loss, a tensor running total."""
    model.train()
    total, count = torch.zeros(()), 0
    for ids, labels in loader:
        logits = model(ids.to(device))
        loss = F.nll_loss(F.log_softmax(logits, dim=-1), labels.to(device))
        loss.backward()
        optimizer.step()
        model.zero_grad(set_to_none=True)
        total += loss.detach().cpu()
        count += 1
    return (total / count).item()


def make_trainer(*, loss_fn=lambda logits, y: F.cross_entropy(logits, y), train=True, zero=True, step=True,
                 zero_late=False, result="mean", no_grad=False):
    def train_one_epoch(model, loader, optimizer, device):
        if train:
            model.train()
        losses = []
        for ids, labels in loader:
            if zero:
                optimizer.zero_grad()
            if no_grad:
                with torch.no_grad():
                    model(ids.to(device))
            loss = loss_fn(model(ids.to(device)), labels.to(device))
            loss.backward()
            if zero_late:
                optimizer.zero_grad()
            if step:
                optimizer.step()
            losses.append(loss.item())
        return {"mean": sum(losses) / len(losses), "sum": sum(losses), "last": losses[-1],
                "tensor": torch.tensor(losses).mean().numpy(), "string": "0.5"}[result]
    return train_one_epoch


@pytest.mark.parametrize("fn", [solutions.train_one_epoch, train_variant])
def test_train_one_epoch_accepts_correct_answers(fn):
    checks.check_train_one_epoch(fn)


@pytest.mark.parametrize("options, diagnosis", [
    (dict(zero=False), "training.no_zero_grad"),
    (dict(loss_fn=lambda logits, y: F.cross_entropy(logits.softmax(-1), y)), "training.softmax_before_loss"),
    (dict(loss_fn=lambda logits, y: F.nll_loss(logits, y)), "training.nll_on_logits"),
    (dict(loss_fn=lambda logits, y: F.cross_entropy(logits, y, reduction="sum")), "training.loss_summed"),
    (dict(step=False), "training.no_step"),
    (dict(zero_late=True), "training.no_step"),
    (dict(result="sum"), "training.returns_sum"),
    (dict(result="last"), "training.returns_last"),
])
def test_train_one_epoch_names_the_mistake(options, diagnosis):
    fails_with(checks.check_train_one_epoch, make_trainer(**options), "likely mistake", diagnosis)


def test_train_one_epoch_mode_and_type_messages():
    fails_with(checks.check_train_one_epoch, make_trainer(train=False), "training.no_train_mode")
    checks.check_train_one_epoch(make_trainer(no_grad=True))  # an extra forward pass under no_grad does no harm

    def no_grad_training(model, loader, optimizer, device):
        model.train()
        with torch.no_grad():
            losses = [F.cross_entropy(model(ids.to(device)), y.to(device)).item() for ids, y in loader]
        return sum(losses) / len(losses)
    fails_with(checks.check_train_one_epoch, no_grad_training, "every batch with gradients enabled")
    fails_with(checks.check_train_one_epoch, make_trainer(result="string"), "Python float")
    checks.check_train_one_epoch(make_trainer(result="tensor"))  # a NumPy 0-d value is a number: accepted


def test_train_one_epoch_and_evaluate_stubs_and_non_functions():
    def train_stub(model, loader, optimizer, device):
        raise NotImplementedError()

    def evaluate_stub(model, loader, device):
        raise NotImplementedError()
    fails_with(checks.check_train_one_epoch, train_stub, "not implemented yet", "NotImplementedError")
    fails_with(checks.check_evaluate, evaluate_stub, "not implemented yet", "NotImplementedError")
    fails_with(checks.check_train_one_epoch, 3, "must be a function")
    fails_with(checks.check_evaluate, "evaluate", "must be a function")


# ------------------------------------------------------------------------------------------ evaluate
def evaluate_variant(model, loader, device):
    model.eval()
    hits = []
    with torch.inference_mode():
        for ids, labels in loader:
            hits.append(model(ids.to(device)).softmax(-1).argmax(-1).eq(labels.to(device)).cpu())
    return torch.cat(hits).float().mean().item()


def make_evaluator(*, eval_mode=True, no_grad=True, result="fraction"):
    def evaluate(model, loader, device):
        if eval_mode:
            model.eval()
        correct, total, accuracies = 0, 0, []
        with torch.set_grad_enabled(not no_grad):
            for ids, labels in loader:
                hit = (model(ids.to(device)).argmax(-1) == labels.to(device))
                correct, total = correct + int(hit.sum()), total + len(labels)
                accuracies.append(hit.float().mean().item())
        return {"fraction": correct / total, "percent": 100 * correct / total, "count": correct,
                "batch_mean": sum(accuracies) / len(accuracies), "error": 1 - correct / total,
                "per_batch_count": correct / len(accuracies)}[result]
    return evaluate


@pytest.mark.parametrize("fn", [solutions.evaluate, evaluate_variant])
def test_evaluate_accepts_correct_answers(fn):
    checks.check_evaluate(fn)


@pytest.mark.parametrize("options, diagnosis", [
    (dict(eval_mode=False), "evaluate.no_eval_mode"),
    (dict(no_grad=False), "evaluate.grad_enabled"),
    (dict(result="percent"), "evaluate.percentage"),
    (dict(result="count"), "evaluate.count"),
    (dict(result="batch_mean"), "evaluate.mean_of_batches"),
    (dict(result="error"), "evaluate.error_rate"),
    (dict(result="per_batch_count"), "evaluate.divides_by_batches"),
])
def test_evaluate_names_the_mistake(options, diagnosis):
    fails_with(checks.check_evaluate, make_evaluator(**options), diagnosis)


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


# ------------------------------------------------------------------------------------------ forged records
def train_in_eval_mode_forging_records(model, loader, optimizer, device):
    """Trains, but in eval mode (forgot model.train()), then rewrites the model's record of its forward calls."""
    losses = []
    for ids, labels in loader:
        loss = F.cross_entropy(model(ids.to(device)), labels.to(device))
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
    model.calls[:] = [(True, True)] * len(model.calls)
    return sum(losses) / len(losses)


def no_training_forging_records(model, loader, optimizer, device):
    """Does no work: forges a training record for every batch and returns a loss that decreases."""
    model.calls.extend([(True, True)] * len(loader))
    return 3.0 / len(model.calls)


def test_forged_forward_records_do_not_pass_train_one_epoch():
    fails_with(checks.check_train_one_epoch, train_in_eval_mode_forging_records, "weights differ",
               "likely mistake", "training.no_train_mode")
    fails_with(checks.check_train_one_epoch, no_training_forging_records, "weights differ")

    def cleared(model, loader, optimizer, device):  # correct training, record list emptied: still a failure
        value = solutions.train_one_epoch(model, loader, optimizer, device)
        model.calls.clear()
        return value
    fails_with(checks.check_train_one_epoch, cleared, "every batch with gradients enabled")


def test_forged_forward_records_do_not_pass_evaluate():
    def train_mode_forging(model, loader, device):  # forgot model.eval(), hides it in the record
        correct, total = 0, 0
        with torch.no_grad():
            for ids, labels in loader:
                correct += int((model(ids.to(device)).argmax(-1) == labels.to(device)).sum())
                total += len(labels)
        model.calls[:] = [(False, False)] * len(model.calls)
        return correct / total
    fails_with(checks.check_evaluate, train_mode_forging, "wrong accuracy", "likely mistake", "evaluate.no_eval_mode")


# ------------------------------------------------------------------------------------------ what crosses the wire
class RecordingChannel(_remote.LoopbackChannel):
    """The in-process kernel side, keeping a copy of every request the grader sends."""

    def __init__(self):
        self.requests = []

    def request(self, request):
        self.requests.append(json.loads(json.dumps(request)))
        return super().request(request)


@pytest.fixture
def recorded():
    """hand_in(objects) -> (channel, RemoteObjects on a RecordingChannel); forgets what was handed in afterwards."""
    names = []

    def hand_in(*objects, **named):
        remote, remote_named = _remote.hand_in_locally(objects, named, "recorded")
        names.append(remote[0].target["subject"])
        channel = RecordingChannel()
        rebind = lambda r: _remote.RemoteObject(channel, r.target)  # noqa: E731
        return channel, tuple(rebind(r) for r in remote), {k: rebind(v) for k, v in remote_named.items()}

    yield hand_in
    for name in names:
        probe._State.subjects.pop(name, None)
    probe._State.handles.clear()


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
        probe._State.subjects.pop("accuracy_test", None)


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


def test_train_and_evaluate_lend_only_public_objects(recorded):
    channel, (remote_fn,), _ = recorded(solutions.train_one_epoch)
    checks.check_train_one_epoch(remote_fn)
    made = {r["target"]["new"] for r in channel.requests if "new" in r["target"]}
    assert made == {checks.PROBE_MODEL, "torch.optim.SGD"}
    assert "solutions" not in json.dumps(channel.requests)

    channel, (remote_fn,), _ = recorded(solutions.evaluate)
    checks.check_evaluate(remote_fn)
    assert {r["target"]["new"] for r in channel.requests if "new" in r["target"]} == {checks.PROBE_MODEL}
    assert "solutions" not in json.dumps(channel.requests)


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
        probe._State.subjects.pop("seed_test", None)
    assert seeds[0] == seeds[1] != seeds[2]
