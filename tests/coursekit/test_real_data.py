"""coursekit.real_data on a small sample written exactly in the yelp_review_full format (no network, no real set).

The files have no header, two quoted fields "label","text", labels 1..5, a quote doubled ("") and line breaks stored
as a literal backslash + n, as in the real CSV files. The models, loops and vocabulary are the course's reference
ones, the classifier the real notebook 07 architecture (made small).
"""
from __future__ import annotations

import dataclasses

import io
import random
import tarfile
from collections import Counter
from pathlib import Path

import pytest

from coursekit import real_data

WORDS = {1: ["awful", "rude", "filthy"], 2: ["bland", "slow", "cramped"], 3: ["okay", "average", "plain"],
         4: ["good", "friendly", "tasty"], 5: ["amazing", "superb", "wonderful"]}
FILLER = ["we came on a friday", "parking was easy", "my sister picked it", "the menu is long"]


def real_format_lines(per_class: int, seed: int) -> str:
    rng = random.Random(seed)
    lines = []
    for stars in range(1, 6):
        for _ in range(per_class):
            word = rng.choice(WORDS[stars])
            text = (f'{rng.choice(FILLER).capitalize()}.\\nThe food was {word} and the staff said "{rng.choice(["hi", "hello"])}"'
                    f", {rng.choice(WORDS[stars])} overall. Visit {seed}-{stars}-{len(lines)}.")
            lines.append(f'"{stars}","{text.replace(chr(34), chr(34) * 2)}"\n')
    rng.shuffle(lines)
    return "".join(lines)


def write_unpacked(data_dir: Path, per_class: int = 30) -> Path:
    folder = data_dir / real_data.REAL_FOLDER
    folder.mkdir(parents=True)
    (folder / "train.csv").write_text(real_format_lines(per_class, seed=0), encoding="utf-8")
    (folder / "test.csv").write_text(real_format_lines(max(2, per_class // 3), seed=1), encoding="utf-8")
    return folder


def write_tarball(data_dir: Path, per_class: int = 12) -> Path:
    data_dir.mkdir(parents=True, exist_ok=True)
    path = data_dir / real_data.REAL_TARBALL
    with tarfile.open(path, "w:gz") as archive:
        for split, seed in (("test", 3), ("train", 2)):  # the real archive stores test.csv first
            payload = real_format_lines(per_class, seed).encode("utf-8")
            info = tarfile.TarInfo(f"{real_data.REAL_FOLDER}/{split}.csv")
            info.size = len(payload)
            archive.addfile(info, io.BytesIO(payload))
    return path


def test_nothing_found_when_the_real_set_is_absent(tmp_path, monkeypatch):
    monkeypatch.delenv("COURSE_DATA_DIR", raising=False)
    assert real_data.find_real_yelp([tmp_path, tmp_path / "data"]) is None


def test_finds_the_download_via_course_data_dir_and_the_working_folder(tmp_path, monkeypatch):
    tarball = write_tarball(tmp_path / "shared")
    monkeypatch.setenv("COURSE_DATA_DIR", str(tmp_path / "shared"))
    monkeypatch.chdir(tmp_path)
    assert real_data.search_folders()[:2] == [tmp_path / "shared", tmp_path / "data"]
    assert real_data.find_real_yelp() == tarball
    # an unpacked copy in the notebook's data/ folder comes after $COURSE_DATA_DIR, before the parents
    unpacked = write_unpacked(tmp_path / "data")
    monkeypatch.delenv("COURSE_DATA_DIR")
    assert real_data.find_real_yelp() == unpacked


def test_budget_follows_the_device():
    assert real_data.budget_for("cpu") is real_data.CPU_BUDGET
    assert real_data.budget_for("cuda") is real_data.GPU_BUDGET
    assert real_data.GPU_BUDGET.train_limit > real_data.CPU_BUDGET.train_limit


def test_the_sample_is_class_balanced_and_keeps_test_apart(tmp_path):
    source = write_tarball(tmp_path / "data", per_class=12)
    budget = dataclasses.replace(real_data.CPU_BUDGET, train_limit=25, unlabelled_limit=20, test_limit=10)
    sample = real_data.load_real_sample(source, budget, seed=0)
    assert sorted(Counter(sample.train_labels).values()) == [5] * 5
    assert len(sample.unlabelled_texts) == 20 and len(sample.test_texts) == 10
    assert not set(sample.unlabelled_texts) & set(sample.train_texts)
    assert all("\n" in text for text in sample.train_texts)  # the literal \n was decoded
    assert any('"hi"' in text or '"hello"' in text for text in sample.test_texts)  # "" read back as one quote
    again = real_data.load_real_sample(source, budget, seed=0)
    assert again.train_texts == sample.train_texts  # deterministic


def test_compare_on_real_data_runs_the_whole_path(tmp_path):
    import solutions

    source = write_unpacked(tmp_path / "data", per_class=30)
    budget = dataclasses.replace(real_data.CPU_BUDGET, train_limit=100, unlabelled_limit=40, test_limit=30,
                               epochs=2, max_len=32, batch_size=16)

    def make_model(vocab_size, max_len):
        return solutions.TransformerClassifier(vocab_size, num_classes=5, d_model=16, num_heads=2, d_ff=32,
                                               num_layers=1, max_len=max_len, dropout=0.1)

    messages = []
    results = real_data.compare_on_real_data(source, make_model, solutions.train_one_epoch, solutions.evaluate,
                                             solutions.build_vocab, solutions.encode,
                                             solutions.embedding_matrix_from_word2vec, device="cpu", budget=budget,
                                             progress=False, log=messages.append)
    assert list(results) == ["data", "TF-IDF + logistic regression", "Transformer, random start",
                             "Transformer, word2vec start"]
    assert results["data"]["train"] == 100 and results["data"]["test"] == 30 and results["data"]["unlabelled"] == 40
    # one word per review names its class here, so the n-gram baseline must find it
    assert results["TF-IDF + logistic regression"]["accuracy"] >= 0.9
    for name in ("Transformer, random start", "Transformer, word2vec start"):
        assert len(results[name]["history"]["test accuracy"]) == 2
        assert 0.0 <= results[name]["accuracy"] <= 1.0 and results[name]["seconds"] > 0
    # same seed, same batches: the two runs differ only by the start of the embedding
    assert results["Transformer, random start"]["history"] != results["Transformer, word2vec start"]["history"]
    assert any(m.startswith("real sample: 100 labelled") for m in messages)


def test_tokenize_all_in_processes_matches_one_process():
    texts = [f"The food wasn't great, review {i}.\\nFine!" for i in range(200)]
    one = real_data.tokenize_all(texts, processes=1)
    assert one[0] == ["the", "food", "was", "n't", "great", ",", "review", "0", ".", "fine", "!"]
    assert real_data.tokenize_all(texts, processes=2, min_parallel=100) == one
