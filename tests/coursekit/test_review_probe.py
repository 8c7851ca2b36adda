"""coursekit.review_probe (notebook 11, section 7): the provided loops, on a small random ModernGPT and a byte
tokenizer.

Nothing here reads the real model: a 2-block ModernGPT of 64 tokens stands in for SmolLM2, `encode` maps bytes into
its vocabulary, and the test's own `final_hidden` (the model's forward without lm_head) stands in for the student's.
"""
from __future__ import annotations

import csv
import math
from collections import Counter

import pytest
import torch

from coursekit import review_probe as rp
from coursekit.bundled_data import find_data
from solutions.attention import make_causal_mask
from solutions.modern import ModernGPT

VOCAB = 64
HE, SHE = 1, 2                       # the only two word tokens of the test tokenizer
TEXTS = ["good food", "The soup was cold and the waiter never came back.", "ok", "Great!",
         "a" * 40, "Nice place, friendly staff, fair prices.", "meh", "Terrible service; we left after an hour."]


def encode(text: str) -> list[int]:
    """Bytes mapped into 3..VOCAB-1 (0 is left to padding, 1 and 2 to " he" and " she")."""
    if text in (" he", " she"):
        return [HE if text == " he" else SHE]
    return [3 + byte % (VOCAB - 3) for byte in text.encode("utf-8")]


def final_hidden(model, ids):
    """ModernGPT.forward without lm_head: (B, T) -> (B, T, d_model)."""
    x = model.token_embedding(ids)
    mask = make_causal_mask(ids.size(1), ids.device)
    for block in model.blocks:
        x = block(x, mask)
    return model.norm(x)


@pytest.fixture(scope="module", autouse=True)
def one_thread():
    """Tiny tensors: a second thread only adds hand-offs (and waits, on a busy machine)."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


@pytest.fixture(scope="module")
def model():
    torch.manual_seed(0)
    return ModernGPT(VOCAB, d_model=32, num_heads=4, num_kv_heads=2, d_ff=64, num_layers=2, max_len=256)


def test_the_test_final_hidden_is_the_forward_before_lm_head(model):
    ids = torch.tensor([encode("hello there")])
    with torch.no_grad():
        torch.testing.assert_close(model.lm_head(final_hidden(model, ids)), model(ids))


# ------------------------------------------------------------------------------------------------ features
def test_right_padding_gives_the_features_of_each_review_alone(model):
    features = rp.last_token_features(model, encode, TEXTS, final_hidden, batch_size=3, max_tokens=32)
    assert features.shape == (len(TEXTS), 32) and features.dtype == torch.float32
    with torch.no_grad():
        for row, text in enumerate(TEXTS):
            ids = torch.tensor([encode(text)[:32]])                                  # (1, T), no padding at all
            torch.testing.assert_close(features[row], final_hidden(model, ids)[0, -1], atol=1e-5, rtol=1e-5)


def test_features_come_back_in_input_order_whatever_the_batches(model):
    one_by_one = rp.last_token_features(model, encode, TEXTS, final_hidden, batch_size=1)
    together = rp.last_token_features(model, encode, TEXTS, final_hidden, batch_size=16)
    torch.testing.assert_close(together, one_by_one, atol=1e-5, rtol=1e-5)
    permutation = [5, 2, 7, 0, 1, 6, 3, 4]
    shuffled = rp.last_token_features(model, encode, [TEXTS[i] for i in permutation], final_hidden, batch_size=3)
    torch.testing.assert_close(shuffled, one_by_one[permutation], atol=1e-5, rtol=1e-5)


def test_features_read_the_truncated_review(model):
    long_text = "b" * 50 + "c" * 10
    features = rp.last_token_features(model, encode, [long_text], final_hidden, max_tokens=50)
    alone = rp.last_token_features(model, encode, ["b" * 50], final_hidden)
    torch.testing.assert_close(features, alone)
    with pytest.raises(ValueError, match="no tokens"):
        rp.last_token_features(model, encode, ["fine", ""], final_hidden)


def test_features_run_in_eval_mode_without_gradients_and_restore_every_mode(model):
    seen = []

    def spying_final_hidden(m, ids):
        seen.append((m.training, m.blocks[0].training, torch.is_grad_enabled()))
        return final_hidden(m, ids)

    model.train()
    model.blocks[1].eval()                                                           # a mixed state to put back
    try:
        features = rp.last_token_features(model, encode, TEXTS[:4], spying_final_hidden, batch_size=2)
        assert seen == [(False, False, False)] * 2 and not features.requires_grad
        assert model.training and model.blocks[0].training and not model.blocks[1].training
        assert model.blocks[1].attn.training is False and model.blocks[0].attn.training is True
    finally:
        model.eval()


# ------------------------------------------------------------------------------------------------ the probe
def _separable(n_per_class=40, d=12, classes=5, seed=0):
    generator = torch.Generator().manual_seed(seed)
    centres = torch.randn(classes, d, generator=generator) * 6
    labels = torch.arange(classes).repeat_interleave(n_per_class)                    # (N,)
    features = centres[labels] + 0.3 * torch.randn(len(labels), d, generator=generator) + 50.0   # far from 0
    return features, labels.tolist()


def test_fit_probe_separates_separable_features_and_is_deterministic():
    features, labels = _separable()
    head = rp.fit_probe(features, labels)
    assert rp.accuracy(head.predict(features), labels) == 1.0
    again = rp.fit_probe(features, labels, seed=1)
    for name in ("mean", "std", "weight", "bias"):
        assert torch.equal(getattr(head, name), getattr(again, name)), name
        assert getattr(head, name).dtype == torch.float32
    assert head.weight.shape == (5, 12) and head.bias.shape == (5,) and head.mean.shape == head.std.shape == (12,)
    torch.testing.assert_close(head.mean, features.mean(0))
    assert head.predict(features).dtype == torch.long


def test_fit_probe_default_strength_is_the_prior_over_the_number_of_rows():
    features, labels = _separable(n_per_class=6, d=5, classes=5)
    default = rp.fit_probe(features, labels)
    explicit = rp.fit_probe(features, labels, weight_decay=rp.PROBE_PRIOR / len(labels))
    assert torch.equal(default.weight, explicit.weight) and torch.equal(default.bias, explicit.bias)
    weaker = rp.fit_probe(features, labels, weight_decay=1e-3)
    assert weaker.weight.norm() > default.weight.norm()
    with pytest.raises(ValueError, match="weight_decay"):
        rp.fit_probe(features, labels, weight_decay=-1.0)


def test_fit_probe_keeps_every_class_and_checks_its_input():
    features, labels = _separable(n_per_class=10, classes=3)
    head = rp.fit_probe(features, labels, num_classes=5)                             # classes 3 and 4 unseen
    assert head.weight.shape == (5, 12) and torch.isfinite(head.weight).all() and torch.isfinite(head.bias).all()
    assert set(head.predict(features).tolist()) <= {0, 1, 2}
    with pytest.raises(ValueError, match="0..4"):
        rp.fit_probe(features, [5] * len(labels))
    with pytest.raises(ValueError, match="one per feature row"):
        rp.fit_probe(features, labels[:-1])
    bad = features.clone()
    bad[0, 0] = math.nan
    with pytest.raises(ValueError, match="NaN"):
        rp.fit_probe(bad, labels)


def test_accuracy():
    assert rp.accuracy(torch.tensor([0, 1, 2, 3]), [0, 1, 0, 3]) == 0.75
    with pytest.raises(ValueError):
        rp.accuracy([0, 1], [0])


def _head(d=6, C=5):
    features, labels = _separable(n_per_class=8, d=d, classes=C)
    return rp.fit_probe(features, labels, num_classes=C)


def test_probe_head_round_trips_through_plain_lists():
    head = _head()
    exported = head.to_dict()
    assert set(exported) == {"mean", "std", "weight", "bias"}
    assert sum(len(v) if k != "weight" else len(v) * len(v[0]) for k, v in exported.items()) == 2 * 6 + 5 * 6 + 5
    back = rp.ProbeHead.from_dict(exported, d_model=6, num_classes=5)
    for name in ("mean", "std", "weight", "bias"):
        assert torch.equal(getattr(back, name), getattr(head, name)), name
    ints = dict(exported, bias=[0, 1, 2, 3, 4])                                      # ints are numbers too
    assert rp.ProbeHead.from_dict(ints).bias.tolist() == [0.0, 1.0, 2.0, 3.0, 4.0]


@pytest.mark.parametrize("change, message", [
    (lambda e: dict(e, weight=e["weight"][:-1]), "weight must be C x d"),
    (lambda e: dict(e, weight=[row[:-1] for row in e["weight"]]), "weight must be C x d"),
    (lambda e: dict(e, std=e["std"][:-1]), "same length"),
    (lambda e: dict(e, mean=[]), "same length"),
    (lambda e: dict(e, bias=[0.0], weight=e["weight"][:1]), "C >= 2"),
    (lambda e: dict(e, mean=[math.nan] + e["mean"][1:]), "finite"),
    (lambda e: dict(e, bias=[math.inf] + e["bias"][1:]), "finite"),
    (lambda e: dict(e, bias=[1e300] + e["bias"][1:]), "finite float32"),
    (lambda e: dict(e, bias=[10 ** 400] + e["bias"][1:]), "finite"),
    (lambda e: dict(e, std=[0.0] + e["std"][1:]), "std must be > 0"),
    (lambda e: dict(e, bias=["1"] + e["bias"][1:]), "must be a number"),
    (lambda e: dict(e, bias=[True] + e["bias"][1:]), "must be a number"),
    (lambda e: dict(e, weight=[[None] * 6] + e["weight"][1:]), "must be a number"),
    (lambda e: dict(e, mean="0.1,0.2"), "must be a list"),
    (lambda e: dict(e, weight=[{"a": 1}] * 5), "must be a list"),
    (lambda e: dict(e, weight=[[0.0] * 200_000] * 5), "too many numbers"),
    (lambda e: dict(e, weight=[[0.0]] * 200_000), "too many numbers"),
    (lambda e: dict(e, extra=[1.0]), "exactly the keys"),
    (lambda e: {k: v for k, v in e.items() if k != "std"}, "exactly the keys"),
    (lambda e: [e], "expected a dict"),
])
def test_from_dict_refuses_anything_but_a_sound_head(change, message):
    with pytest.raises(ValueError, match=message):
        rp.ProbeHead.from_dict(change(_head().to_dict()))


def test_from_dict_checks_the_expected_sizes_and_the_bound():
    exported = _head().to_dict()
    with pytest.raises(ValueError, match="expected d = 576"):
        rp.ProbeHead.from_dict(exported, d_model=576, num_classes=5)
    with pytest.raises(ValueError, match="too many numbers"):
        rp.ProbeHead.from_dict(exported, max_numbers=2 * 6 + 5 * 6 + 5 - 1)
    rp.ProbeHead.from_dict(exported, max_numbers=2 * 6 + 5 * 6 + 5)


# ------------------------------------------------------------------------------------------------ comparisons
def test_balanced_subset_is_balanced_and_depends_on_the_seed():
    labels = [i % 5 for i in range(500)]
    subset = rp.balanced_subset(labels, 52, seed=0)
    assert len(subset) == len(set(subset)) == 52 and subset == sorted(subset)
    assert sorted(Counter(labels[i] for i in subset).values()) == [10, 10, 10, 11, 11]
    assert rp.balanced_subset(labels, 52, seed=0) == subset
    assert rp.balanced_subset(labels, 52, seed=1) != subset
    with pytest.raises(ValueError, match="class 4 has"):
        rp.balanced_subset([0] * 50 + [1] * 50 + [2] * 50 + [3] * 50 + [4] * 5, 50, seed=0)


GOOD = ["great food", "wonderful staff", "great service and wonderful food", "lovely place, great prices"]
BAD = ["awful food", "terrible staff", "awful service and terrible food", "dirty place, awful prices"]


def _toy_reviews(repeat):
    texts = [t for _ in range(repeat) for t in GOOD + BAD]
    labels = [y for _ in range(repeat) for y in [4] * len(GOOD) + [0] * len(BAD)]
    return texts, labels


def test_tfidf_baseline_on_a_separable_toy_set():
    train_texts, train_labels = _toy_reviews(5)
    test_texts = ["the food was great", "terrible, awful", "wonderful prices", "dirty and awful"]
    assert rp.tfidf_baseline(train_texts, train_labels, test_texts, [4, 0, 4, 0]) > 0.9


def test_sample_efficiency_rows(model):
    texts, labels = _toy_reviews(5)                                                  # 40 reviews, labels 0 and 4
    features, _ = _separable(n_per_class=20, d=8, classes=2)
    # row i of the features belongs to review i: class 0 rows for label 0, class 1 rows for label 4
    order = sorted(range(40), key=lambda i: labels[i])
    train_features = torch.empty(40, 8)
    train_features[torch.tensor(order)] = features
    rows = rp.sample_efficiency(train_features, labels, texts, train_features, labels, texts,
                                label_counts=(10, 20), seeds=(0, 1))
    assert [(r["labels"], r["seed"]) for r in rows] == [(10, 0), (10, 1), (20, 0), (20, 1)]
    assert all(r["probe"] == 1.0 and 0.0 <= r["tfidf"] <= 1.0 for r in rows)


def test_by_labels_gives_mean_and_spread_per_label_count():
    rows = [{"labels": 50, "tfidf": 0.2, "probe": 0.4}, {"labels": 50, "tfidf": 0.4, "probe": 0.4},
            {"labels": 200, "tfidf": 0.5, "probe": 0.7}]
    summary = rp.by_labels(rows)
    assert list(summary) == [50, 200]
    assert summary[50]["tfidf"] == pytest.approx((0.3, 0.1)) and summary[50]["probe"] == pytest.approx((0.4, 0.0))
    assert summary[200] == {"tfidf": pytest.approx((0.5, 0.0)), "probe": pytest.approx((0.7, 0.0))}


def _write_real_format(folder, per_class: int, seed: int) -> None:
    """yelp_review_full_csv/{train,test}.csv as 07's download unpacks: "stars","text", one word set per rating."""
    import random

    words = {1: "awful rude", 2: "bland slow", 3: "okay plain", 4: "good tasty", 5: "superb wonderful"}
    for split, count in (("train", per_class), ("test", per_class // 2)):
        rng = random.Random(f"{seed}-{split}")
        lines = [f'"{stars}","We ate there on day {rng.randint(1, 99)}. It was {words[stars]}, {i} times."\n'
                 for stars in words for i in range(count)]
        rng.shuffle(lines)
        (folder / f"{split}.csv").write_text("".join(lines), encoding="utf-8")


def test_real_yelp_sample_efficiency_runs_section_7_on_a_real_format_set(model, tmp_path):
    folder = tmp_path / "yelp_review_full_csv"
    folder.mkdir()
    _write_real_format(folder, per_class=8, seed=0)
    calls = []

    def counted_final_hidden(m, ids):
        calls.append(tuple(ids.shape))
        return final_hidden(m, ids)

    result = rp.real_yelp_sample_efficiency(model, encode, counted_final_hidden, folder, label_counts=(20, 10),
                                            test_reviews=10, seeds=(0, 1), seed=3)
    assert (result["train"], result["test"]) == (20, 10) and result["feature_seconds"] >= 0
    assert [(r["labels"], r["seed"]) for r in result["rows"]] == [(10, 0), (10, 1), (20, 3)]
    assert all(0.0 <= r[key] <= 1.0 for r in result["rows"] for key in ("tfidf", "probe"))
    assert sum(shape[0] for shape in calls) == 30                       # every review's features, once
    again = rp.real_yelp_sample_efficiency(model, encode, final_hidden, folder, label_counts=(10, 20),
                                           test_reviews=10, seeds=(0, 1), seed=3)
    assert again["rows"] == result["rows"]                              # repeatable with its seeds
    with pytest.raises(ValueError, match="label_counts"):
        rp.real_yelp_sample_efficiency(model, encode, final_hidden, folder, label_counts=(), test_reviews=10)


# ------------------------------------------------------------------------------------------------ the model itself
def chat_prompt(user_text: str) -> str:
    return f"<u>{user_text}</u><a>"


def test_zero_shot_rating_is_the_argmax_over_the_digit_logits_at_the_answer_position(model):
    digit_ids = [encode(str(k))[0] for k in range(1, 6)]
    reviews = ["good", "bad food", "The soup was cold.", "x"]
    got = rp.zero_shot_rating(model, encode, chat_prompt, reviews, digit_ids, batch_size=3)
    want = []
    with torch.no_grad():
        for review in reviews:
            ids = torch.tensor([encode(chat_prompt(rp.RATING_QUESTION.format(review=review)))])
            want.append(int(model(ids)[0, -1, digit_ids].argmax()))
    assert got == want and all(0 <= r <= 4 for r in got)
    as_ids = rp.zero_shot_rating(model, encode, lambda q: encode(chat_prompt(q)), reviews, digit_ids)
    assert as_ids == want                                                            # a chat_prompt giving ids


def test_pronoun_gap_is_the_log_probability_difference_of_the_next_token(model):
    occupations = ["nurse", "engineer", "chef"]
    got = rp.pronoun_gap(model, encode, occupations)
    assert [name for name, _ in got] == occupations
    with torch.no_grad():
        for (_, gap), occupation in zip(got, occupations):
            ids = torch.tensor([encode(f"The {occupation} said that")])
            log_probs = torch.log_softmax(model(ids)[0, -1], dim=-1)
            assert gap == pytest.approx(float(log_probs[HE] - log_probs[SHE]), abs=1e-5)
    with pytest.raises(ValueError, match="one token"):
        rp.pronoun_gap(model, lambda text: [3 + b % 60 for b in text.encode()], occupations)
    with pytest.raises(ValueError, match="occupation"):
        rp.pronoun_gap(model, encode, occupations, template="The {job} said")


# ------------------------------------------------------------------------------------------------ the data
@pytest.mark.parametrize("split, per_class", [("train", 1600), ("test", 400)])
def test_load_synthetic_yelp_has_five_balanced_classes(split, per_class):
    texts, labels = rp.load_synthetic_yelp(split)
    path = find_data(f"yelp_synthetic/{split}.csv", "the synthetic set")
    with open(path, newline="", encoding="utf-8") as handle:
        rows = [row for row in csv.reader(handle) if row]
    stars = Counter(int(star) for star, _ in rows)
    assert stars == {1: per_class, 2: per_class, 3: per_class, 4: per_class, 5: per_class}
    assert Counter(labels) == {star - 1: count for star, count in stars.items()}
    assert len(texts) == len(rows) and labels == [int(star) - 1 for star, _ in rows]
    assert texts == [text.replace("\\n", "\n") for _, text in rows]
    with pytest.raises(ValueError, match="split"):
        rp.load_synthetic_yelp("validation")


# ------------------------------------------------------------------------------------------------ train_lora_head

def _lora_model(seed=0):
    from solutions.pretrained import add_lora

    torch.manual_seed(seed)
    model = ModernGPT(VOCAB, d_model=32, num_heads=4, num_kv_heads=2, d_ff=64, num_layers=3, max_len=256)
    add_lora(model, rank=4, alpha=8.0, targets=("w_q", "w_v"), blocks=[1, 2])
    return model


LORA_LABELS = [0, 1, 2, 3, 4, 0, 1, 2]       # one per TEXTS


def test_with_one_batch_and_no_steps_taken_the_loss_is_that_of_each_review_alone():
    """lr=0: nothing moves, so every step's loss is the head's cross-entropy on the final hidden state of each
    review's last token, each review run alone (no padding), through every block (the kept ones included)."""
    model = _lora_model()
    head, losses, _ = rp.train_lora_head(model, encode, TEXTS, LORA_LABELS, first_block=1, steps=3,
                                         batch_size=len(TEXTS), lr=0.0)
    with torch.no_grad():
        last = torch.stack([final_hidden(model, torch.tensor([encode(t)]))[0, -1] for t in TEXTS])   # (N, d)
        expected = torch.nn.functional.cross_entropy(head(last), torch.tensor(LORA_LABELS)).item()
    assert losses == pytest.approx([expected] * 3, rel=1e-5, abs=1e-6)


def test_the_blocks_before_first_block_run_once_per_batch_and_nothing_of_them_trains():
    model = _lora_model()
    calls = []
    model.blocks[0].register_forward_hook(lambda *args: calls.append(1))
    frozen = {name: p.detach().clone() for name, p in model.named_parameters() if not p.requires_grad}
    adapters = {name: p.detach().clone() for name, p in model.named_parameters() if p.requires_grad}
    rp.train_lora_head(model, encode, TEXTS, LORA_LABELS, first_block=1, steps=6, batch_size=4, lr=1e-2)
    assert len(calls) <= 2                           # two batches of 4 reviews, each through block 0 at most once
    assert all(torch.equal(p, frozen[n]) for n, p in model.named_parameters() if n in frozen)
    assert any(not torch.equal(p, adapters[n]) for n, p in model.named_parameters() if n in adapters)


def test_training_learns_the_labels_and_repeats_with_its_seed():
    runs = []
    for _ in range(2):
        model = _lora_model()
        _, losses, seconds = rp.train_lora_head(model, encode, TEXTS, LORA_LABELS, first_block=1, steps=40,
                                                batch_size=len(TEXTS), lr=2e-2, seed=3)
        runs.append(losses)
        assert seconds >= 0
    assert runs[0] == runs[1]
    assert sum(runs[0][-5:]) / 5 < 0.5 * runs[0][0], runs[0]


@pytest.mark.parametrize("change, message", [
    (dict(steps=0), "steps"), (dict(first_block=3), "first_block=3"), (dict(first_block=-1), "first_block"),
    (dict(labels=[0, 5] + LORA_LABELS[2:]), "labels must lie"), (dict(labels=LORA_LABELS[:3]), "one label per review"),
    (dict(batch_size=True), "batch_size")])
def test_train_lora_head_refuses_bad_arguments(change, message):
    arguments = dict(texts=TEXTS, labels=LORA_LABELS, first_block=1, steps=2)
    arguments.update(change)
    with pytest.raises(ValueError, match=message):
        rp.train_lora_head(_lora_model(), encode, **arguments)
