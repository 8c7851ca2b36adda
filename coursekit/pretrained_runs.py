"""Notebook 11's recorded runs: what `bench/pretrained.py --record` measured on the real SmolLM2-135M-Instruct and
the notebook has no time for (three seeds, 1,000 test reviews, label budgets up to the whole training set, LoRA
fine-tuning), kept in `data/pretrained_runs.json` with the date and the machine. The notebook plots them beside its
own, smaller measurements:

    runs = load_pretrained_runs()
    runs["meta"]                  # {"recorded": "...", "command": "...", "test_reviews": 1000, "seeds": [0, 1, 2]}
    runs["sample_efficiency"]     # [{"labels": 50, "seed": 0, "tfidf": 0.25, "probe": 0.33}, ...]
    runs["lora"]                  # {"labels": 1000, "rank": 8, ..., "runs": [{"seed": 0, "accuracy": ..., ...}]}
"""
from __future__ import annotations

import json
import os
from pathlib import Path

from .bundled_data import BUNDLED_DATA, find_data

__all__ = ["RUNS_FILE", "pretrained_runs_path", "load_pretrained_runs", "mean_by_labels"]

RUNS_FILE = "pretrained_runs.json"


def pretrained_runs_path() -> Path:
    """$COURSE_DATA_DIR/pretrained_runs.json, else the student wheel's copy, else the repository's data/, else a data/
    folder in the working directory or one of its parents."""
    return find_data(RUNS_FILE, "notebook 11's recorded runs", bundled=BUNDLED_DATA, package_file=__file__)


def load_pretrained_runs(path: str | os.PathLike | None = None) -> dict:
    """The recorded runs (see the module docstring)."""
    return json.loads(Path(path or pretrained_runs_path()).read_text(encoding="utf-8"))


def mean_by_labels(rows: list[dict], key: str) -> dict[int, float]:
    """{labels: mean of row[key] over the seeds}, label budgets in increasing order."""
    values: dict[int, list[float]] = {}
    for row in rows:
        values.setdefault(int(row["labels"]), []).append(float(row[key]))
    return {n: sum(v) / len(v) for n, v in sorted(values.items())}
