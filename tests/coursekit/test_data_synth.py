"""coursekit.data.synth and the shipped data/yelp_synthetic set."""
import importlib.util
import re
from collections import Counter
from pathlib import Path

import pytest

from coursekit.data import load_yelp
from coursekit.data.__main__ import main
from coursekit.data.synth import LABEL_NOISE, generate_reviews, generate_splits, score_to_stars, synthesize

ROOT = Path(__file__).resolve().parents[2]
SHIPPED = ROOT / "data" / "yelp_synthetic"
ROW = re.compile(r'^"[1-5]","(?:[^"\n]|"")+"$')


def test_regenerating_gives_byte_identical_files(tmp_path):
    assert main(["synthesize", "--seed", "0", "--dest", str(tmp_path / "out")]) == 0
    for name in ("train.csv", "test.csv", "README.md"):
        assert (tmp_path / "out" / name).read_bytes() == (SHIPPED / name).read_bytes(), name


def test_shipped_files_follow_the_yelp_format():
    total = 0
    for name, rows in (("train.csv", 8000), ("test.csv", 2000)):
        data = (SHIPPED / name).read_bytes()
        total += len(data)
        lines = data.decode("utf-8").split("\n")
        assert lines[-1] == "" and len(lines) - 1 == rows
        bad = [line for line in lines[:-1] if not ROW.match(line)]
        assert not bad, bad[:3]
        assert '""' in data.decode() and "\\n" in data.decode()  # quotes and line breaks are exercised
    assert total < 5 * 1024 * 1024


def test_readme_says_synthetic():
    readme = (SHIPPED / "README.md").read_text()
    assert "SYNTHETIC" in readme and "not real Yelp reviews" in readme


def test_balanced_and_no_overlap():
    train_texts, train_labels = load_yelp("synthetic", "train")
    test_texts, test_labels = load_yelp("synthetic", "test")
    assert Counter(train_labels) == {label: 1600 for label in range(5)}
    assert Counter(test_labels) == {label: 400 for label in range(5)}
    assert len(set(train_texts)) == len(train_texts) and len(set(test_texts)) == len(test_texts)
    assert not set(train_texts) & set(test_texts)


def test_label_noise_rate_and_size_of_the_shift():
    train, _ = generate_splits(seed=0)
    moved = [review for review in train if review.label != review.clean_label]
    assert 0.05 <= len(moved) / len(train) <= 0.10
    assert abs(len(moved) / len(train) - LABEL_NOISE) < 0.015
    assert all(abs(review.label - review.clean_label) == 1 for review in moved)


def test_deterministic_by_seed():
    first = generate_reviews(40, seed=5)
    assert generate_reviews(40, seed=5) == first
    assert generate_reviews(40, seed=6) != first


def test_score_to_stars_is_monotone_and_covers_every_rating():
    scores = [x / 100 for x in range(-300, 301)]
    stars = [score_to_stars(score) for score in scores]
    assert stars == sorted(stars) and set(stars) == {1, 2, 3, 4, 5}


def test_refuses_to_overwrite_foreign_csv(tmp_path):
    (tmp_path / "train.csv").write_text("real data, not ours")
    with pytest.raises(FileExistsError, match="--force"):
        synthesize(tmp_path, train_size=10, test_size=5)
    assert (tmp_path / "train.csv").read_text() == "real data, not ours"
    assert main(["synthesize", "--dest", str(tmp_path), "--train", "10", "--test", "5"]) == 1
    synthesize(tmp_path, train_size=10, test_size=5, force=True)
    assert load_yelp(tmp_path, "train")[1] and sorted(p.name for p in tmp_path.iterdir()) == [
        "README.md", "test.csv", "train.csv"]
    synthesize(tmp_path, train_size=10, test_size=5)  # its own output may be rewritten


def _bench_module():
    spec = importlib.util.spec_from_file_location("tfidf_baseline", ROOT / "bench" / "tfidf_baseline.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_bag_of_ngrams_baseline_is_clearly_imperfect_and_clearly_above_chance():
    pytest.importorskip("sklearn")
    bench = _bench_module()
    train = load_yelp("synthetic", "train")
    test = load_yelp("synthetic", "test")
    result = bench.tfidf_logreg_baseline(*train, *test)
    assert 0.45 <= result["accuracy"] <= 0.72, result
    assert 0.4 <= result["macro_f1"] <= 0.75, result
    majority = bench.majority_baseline(train[1], test[1])
    assert majority["accuracy"] == pytest.approx(0.2)
    table = bench.markdown_table({"tfidf": result, "majority": majority}, "t")
    assert "| tfidf |" in table and "| majority | 0.200 |" in table


def test_winning_clause_comes_first_about_as_often_as_last():
    # "awful ," (a word ending the first clause) must not tell a bag of n-grams whether that clause counts
    text = "\n".join(load_yelp("synthetic", "train")[0])
    main_last = text.count(", but ") - text.count(", but honestly ") + text.count("Although ")
    main_first = text.count(", even though ") + text.count(", although ") + text.count("In the end ")
    assert main_last > 2000 and main_first > 2000
    assert 0.8 <= main_last / main_first <= 1.25, (main_last, main_first)

