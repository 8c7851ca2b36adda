"""coursekit.bias: counterfactual probes and WEAT-style association tests, checked against direct computations."""
from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
import torch

from coursekit import bias, tokenize
from coursekit.probe.models import BagOfEmbeddingsClassifier

VOCAB = {"<pad>": 0, "<unk>": 1, "the": 2, "waiter": 3, "hostess": 4, "was": 5, "rude": 6, ".": 7, "my": 8,
         "sister": 9, "pad": 10, "picked": 11}


def test_vocabulary_status():
    assert bias.vocabulary_status("hostess", VOCAB) == "known"
    assert bias.vocabulary_status("Maria", VOCAB) == "unknown"
    assert bias.vocabulary_status("pad thai", VOCAB) == "partly known"
    with pytest.raises(ValueError, match="no tokens"):
        bias.vocabulary_status("   ", VOCAB)


def test_fill_capitalises_at_a_sentence_start_and_needs_one_slot():
    assert bias.fill("{} was rude.", "the waiter") == "The waiter was rude."
    assert bias.fill("Fine. {} was rude.", "maria") == "Fine. Maria was rude."
    assert bias.fill("my {} picked it.", "sister") == "my sister picked it."
    with pytest.raises(ValueError, match="exactly one"):
        bias.fill("no slot", "x")


def _model_score(model):
    @torch.no_grad()
    def score(texts):
        ids = [[VOCAB.get(t, VOCAB["<unk>"]) for t in tokenize(text)] for text in texts]
        batch = torch.nn.utils.rnn.pad_sequence([torch.tensor(i) for i in ids], batch_first=True)
        probabilities = model(batch).softmax(-1)                                      # (N, 5)
        return (probabilities * torch.arange(1, 6)).sum(-1).tolist()
    return score


def test_counterfactual_shifts_of_a_real_model():
    torch.manual_seed(0)
    model = BagOfEmbeddingsClassifier(len(VOCAB), dropout=0.0).eval()
    probes = {"people": (["{} was rude.", "The {} was rude."], ["waiter", "hostess", "Maria", "John"]),
              "family": (["My {} picked the place."], ["sister", "brother"])}
    table = bias.counterfactual_shifts(_model_score(model), probes, VOCAB)
    assert len(table) == 2 * 4 + 2
    assert table.loc[table.word == "Maria", "status"].iloc[0] == "unknown"
    # the shift is the score minus the mean of its template's group: they sum to zero per template
    for _, rows in table.groupby(["group", "template"]):
        assert abs(rows["shift"].sum()) < 1e-9
        assert np.allclose(rows["shift"], rows["score"] - rows["score"].mean())
    # two unknown names both become <unk>: identical ids, identical scores
    people = table[(table.group == "people") & (table.template == 0)].set_index("word")
    assert people.loc["Maria", "score"] == people.loc["John", "score"]
    assert people.loc["waiter", "score"] != people.loc["hostess", "score"]  # known words: different vectors
    assert table.loc[table.word == "waiter", "text"].iloc[0] == "Waiter was rude."


def test_counterfactual_shifts_reject_bad_probes():
    with pytest.raises(ValueError, match="two words"):
        bias.counterfactual_shifts(lambda texts: [0.0] * len(texts), {"g": (["{}"], ["one"])}, VOCAB)
    with pytest.raises(ValueError, match="returned 1 values for 2 texts"):
        bias.counterfactual_shifts(lambda texts: [0.0], {"g": (["{}"], ["a", "b"])}, VOCAB)


# ------------------------------------------------------------------------------------------------ WEAT
def _vectors(seed=0, d=8):
    rng = np.random.default_rng(seed)
    words = ["x1", "x2", "x3", "y1", "y2", "y3", "a1", "a2", "b1", "b2"]
    return {w: rng.normal(size=d) for w in words}


def _cos(u, v):
    return float(np.dot(u, v) / (np.linalg.norm(u) * np.linalg.norm(v)))


def _by_hand(X, Y, A, B, vectors):
    """Caliskan et al. 2017, written out word by word."""
    def s(w):
        return (sum(_cos(vectors[w], vectors[a]) for a in A) / len(A)
                - sum(_cos(vectors[w], vectors[b]) for b in B) / len(B))
    values = [s(w) for w in X + Y]
    mean_x, mean_y = np.mean(values[:len(X)]), np.mean(values[len(X):])
    d = (mean_x - mean_y) / np.std(values, ddof=1)
    def stat(xs):
        return sum(s(w) for w in xs) - sum(s(w) for w in X + Y if w not in xs)
    observed = stat(X)
    splits = list(itertools.combinations(X + Y, len(X)))
    p = sum(stat(list(c)) >= observed - 1e-12 for c in splits) / len(splits)
    return d, p, observed


def test_weat_matches_the_paper_formulas():
    vectors = _vectors()
    X, Y, A, B = ["x1", "x2", "x3"], ["y1", "y2", "y3"], ["a1", "a2"], ["b1", "b2"]
    d, p, observed = _by_hand(X, Y, A, B, vectors)
    result = bias.weat(X, Y, A, B, vectors)
    assert result.effect_size == pytest.approx(d, abs=1e-9)
    assert bias.weat_effect_size(X, Y, A, B, vectors) == pytest.approx(d, abs=1e-9)
    assert result.p_value == pytest.approx(p, abs=1e-12)
    assert result.statistic == pytest.approx(observed, abs=1e-9)
    assert result.exact and result.partitions == math.comb(6, 3)
    swapped = bias.weat(Y, X, A, B, vectors)
    assert swapped.effect_size == pytest.approx(-d, abs=1e-9)


def test_weat_finds_a_planted_association_and_its_smallest_p_value():
    rng = np.random.default_rng(1)
    a_dir, b_dir = rng.normal(size=16), rng.normal(size=16)
    vectors = {}
    for i in range(4):
        vectors[f"x{i}"] = a_dir + 0.1 * rng.normal(size=16)
        vectors[f"y{i}"] = b_dir + 0.1 * rng.normal(size=16)
        vectors[f"a{i}"] = a_dir + 0.1 * rng.normal(size=16)
        vectors[f"b{i}"] = b_dir + 0.1 * rng.normal(size=16)
    X, Y, A, B = ([f"{k}{i}" for i in range(4)] for k in "xyab")
    result = bias.weat(X, Y, A, B, vectors)
    assert result.effect_size > 1.5
    assert result.p_value == pytest.approx(1 / math.comb(8, 4))  # only the observed split is that extreme
    sampled = bias.weat(X, Y, A, B, vectors, max_partitions=60, seed=3)
    assert not sampled.exact and sampled.partitions == 60
    assert 1 / 61 <= sampled.p_value <= 0.1


def test_weat_works_on_gensim_vectors_and_names_missing_words():
    from gensim.models import KeyedVectors

    vectors = _vectors()
    keyed = KeyedVectors(vector_size=8)
    keyed.add_vectors(list(vectors), np.stack(list(vectors.values())).astype(np.float32))
    X, Y, A, B = ["x1", "x2"], ["y1", "y2"], ["a1", "a2"], ["b1", "b2"]
    assert bias.weat(X, Y, A, B, keyed).effect_size == pytest.approx(
        bias.weat(X, Y, A, B, vectors).effect_size, abs=1e-5)
    assert bias.missing_words(["x1", "maria"], keyed) == ["maria"]
    with pytest.raises(KeyError, match="maria"):
        bias.weat(X + ["maria"], Y, A, B, keyed)


def test_weat_rejects_bad_sets():
    vectors = _vectors()
    with pytest.raises(ValueError, match="share words"):
        bias.weat(["x1", "x2"], ["x2", "y1"], ["a1"], ["b1"], vectors)
    with pytest.raises(ValueError, match="non-empty list"):
        bias.weat("x1", ["y1", "y2"], ["a1"], ["b1"], vectors)
    with pytest.raises(ValueError, match="three words"):
        bias.weat(["x1"], ["y1"], ["a1"], ["b1"], vectors)
