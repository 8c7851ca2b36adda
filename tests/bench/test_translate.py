"""bench/translate.py trains, decodes and records end to end on a few hundred real Multi30k pairs (a tiny budget)."""
from __future__ import annotations

import importlib.util
import json
from pathlib import Path

from coursekit.translation_training import TranslationData, load_translation_runs

BENCH = Path(__file__).resolve().parents[2] / "bench" / "translate.py"


def load_bench():
    spec = importlib.util.spec_from_file_location("bench_translate", BENCH)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_a_tiny_run_is_measured_recorded_and_collected(tmp_path, monkeypatch, capsys):
    bench = load_bench()
    full = bench.reference_data()
    sizes = {"train": 200, "val": 20, "test_2016_flickr": 6}
    small = TranslationData(full.de_vocab, full.en_vocab,
                            {s: (full.tokens[s][0][:n], full.tokens[s][1][:n]) for s, n in sizes.items()},
                            {s: full.pairs[s][:n] for s, n in sizes.items()})
    monkeypatch.setattr(bench, "reference_data", lambda: small)
    runs = tmp_path / "runs"
    code = bench.main(["--budget", "grading", "--steps", "4", "--max-tokens", "300", "--test-sentences", "6",
                       "--max-decode-len", "8",
                       "--smoothing", "0", "0.1", "--seeds", "0", "--beams", "1", "2", "--device", "cpu",
                       "--out", str(runs)])
    out = capsys.readouterr().out
    assert code == 0, out
    assert "| grading | 0.0 | 1 |" in out and "| grading | 0.1 | 1 |" in out
    rows = [json.loads(p.read_text()) for p in sorted(runs.glob("*.json"))]
    assert [(r["budget"], r["label_smoothing"], r["seed"]) for r in rows] == [("grading", 0.0, 0), ("grading", 0.1, 0)]
    for row in rows:
        assert set(row["decoding"]) == {"greedy", "beam 4", "beam 1", "beam 2"}
        assert row["decoding"]["beam 1"]["bleu"] == row["decoding"]["greedy"]["bleu"]   # beam 1 = greedy
        assert all(0 <= d["bleu"] <= 100 and d["seconds"] > 0 for d in row["decoding"].values())
        assert row["steps"] == 4 and len(row["train_loss"]) == 4 and row["val_step"] == [4]
        assert row["test_sentences"] == 6 and len(row["examples"]) == 5 and row["steps_per_second"] > 0
    target = tmp_path / "translation_runs.json"
    monkeypatch.setattr(bench, "RUNS_FILE", target)
    assert bench.main(["--collect", str(runs)]) == 0
    recorded = load_translation_runs(target)
    assert len(recorded["runs"]) == 2 and len(recorded["meta"]["recorded"]) == 1
