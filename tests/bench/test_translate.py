"""bench/translate.py trains, decodes and records end to end on a few hundred real Multi30k pairs (a tiny budget)."""
from __future__ import annotations

import importlib.util
import json
import math
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


def _tiny_data(bench):
    full = bench.reference_data()
    sizes = {"train": 200, "val": 30, "test_2016_flickr": 6}
    return TranslationData(full.de_vocab, full.en_vocab,
                           {s: (full.tokens[s][0][:n], full.tokens[s][1][:n]) for s, n in sizes.items()},
                           {s: full.pairs[s][:n] for s, n in sizes.items()})


def test_the_warmup_demo_and_the_calibration_are_recorded_beside_the_runs(tmp_path, monkeypatch, capsys):
    bench = load_bench()
    tiny = _tiny_data(bench)
    monkeypatch.setattr(bench, "reference_data", lambda: tiny)
    runs = tmp_path / "runs"
    assert bench.main(["--warmup-demo", "--steps", "20", "--seeds", "3", "--device", "cpu", "--out", str(runs)]) == 0
    assert bench.main(["--calibration", "--budget", "grading", "--steps", "3", "--max-tokens", "300",
                       "--smoothing", "0", "--seeds", "0", "--device", "cpu", "--out", str(runs)]) == 0
    out = capsys.readouterr().out
    assert "without warm-up" in out and "expected calibration error" in out, out
    (warmup,) = [json.loads(p.read_text()) for p in runs.glob("warmup_*.json")]
    assert warmup["seed"] == 3 and warmup["config"]["warmup_steps"] == 20 and warmup["val_captions"] == 30
    for curve in warmup["schedules"].values():
        assert curve["val_step"] == [10, 20] and len(curve["lr"]) == 20
        assert len(curve["spread"]) == len(curve["residual_norm"]) == 2
        assert all(0.0 <= s <= 1.0 for s in curve["spread"])
    rates = {name: curve["lr"] for name, curve in warmup["schedules"].items()}
    assert rates["without warm-up"][0] == rates["without warm-up"][19] == rates["with warm-up"][19]  # the peak
    assert rates["with warm-up"][0] < rates["with warm-up"][19]                                      # the rise
    (calibration,) = [json.loads(p.read_text()) for p in runs.glob("calibration_*.json")]
    bins = calibration["bins"]
    assert len(bins["count"]) == bench.CALIBRATION_BINS and sum(bins["count"]) > 0
    assert all(0 <= k <= n and n * b / 10 - 1e-9 <= f <= n * (b + 1) / 10 + 1e-9
               for b, (n, k, f) in enumerate(zip(bins["count"], bins["correct"], bins["confidence"])))
    assert abs(calibration["val_ppl"] - math.exp(bins["loss"])) < 1e-4 * calibration["val_ppl"]   # float32 and 64

    target = tmp_path / "translation_runs.json"
    target.write_text(json.dumps({"meta": {"recorded": ["earlier"]}, "runs": [{"seed": 9}]}))
    monkeypatch.setattr(bench, "RUNS_FILE", target)
    assert bench.main(["--collect", str(runs)]) == 0
    recorded = load_translation_runs(target)
    assert recorded["runs"] == [{"seed": 9}] and recorded["meta"]["recorded"] == ["earlier"]   # the other part kept
    assert [r["seed"] for r in recorded["warmup"]["runs"]] == [3]
    assert "--warmup-demo" in recorded["warmup"]["meta"]["command"]
    assert [r["label_smoothing"] for r in recorded["calibration"]["runs"]] == [0.0]


def test_the_calibration_bins_count_a_model_whose_answers_are_known():
    """A model that puts probability 0.85 on token 5 at every position: every position lands in the bin [0.8, 0.9)
    with confidence 0.85, and is correct exactly where the reference's token is 5."""
    import torch

    bench = load_bench()

    class Fixed(torch.nn.Module):
        def forward(self, src, tgt):
            logits = torch.full((*tgt.shape, 8), math.log(0.15 / 7))
            logits[..., 5] = math.log(0.85)
            return logits

    pairs = [([4, 4], [2, 5, 6, 3]), ([4], [2, 5, 3])]              # targets after <bos>: 5 6 3 and 5 3
    bins = bench.calibration_bins(Fixed(), pairs, max_tokens=100, device="cpu")
    assert bins["count"][8] == 5 and sum(bins["count"]) == 5
    assert abs(bins["confidence"][8] - 5 * 0.85) < 1e-6 and bins["correct"][8] == 2
    assert abs(bench.expected_calibration_error(bins) - abs(2 / 5 - 0.85)) < 1e-6
    expected_loss = -(2 * math.log(0.85) + 3 * math.log(0.15 / 7)) / 5
    assert abs(bins["loss"] - expected_loss) < 1e-6       # float32 logits
