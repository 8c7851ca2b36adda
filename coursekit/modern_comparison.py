"""Notebook 09's comparison of 08's GPT with ModernGPT: the matched sizes and the recorded three-seed results.

Both models train with 08's loop and budget (`coursekit.lm_training`) on 08's data. ModernGPT gets the feed-forward
width that gives it the same number of parameters as 08's GPT (`matched_d_ff`). Training both over three seeds
takes longer than the notebook's budget, so `bench/modern.py` records the runs in `data/modern_vs_gpt.json` (with
the date and the machine) and the notebook shows them next to the model the student trains:

    results = load_results()            # {"meta": {...}, "runs": [{"model": "GPT", "seed": 0, ...}, ...]}
"""
from __future__ import annotations

import json
import os
from pathlib import Path

from .bundled_data import BUNDLED_DATA, find_data

__all__ = ["RESULTS_FILE", "parameter_count", "gpt_parameters", "modern_parameters", "matched_d_ff",
           "results_path", "load_results"]

RESULTS_FILE = "modern_vs_gpt.json"


def parameter_count(model) -> int:
    """Parameters of a module, a tied matrix counted once (as `model.parameters()` yields it once)."""
    return sum(p.numel() for p in model.parameters())


def gpt_parameters(vocab_size: int, d_model: int, d_ff: int, num_layers: int, max_len: int) -> int:
    """08's GPT: tied token table, position table, per block 4 biased d x d projections, a biased ReLU MLP and two
    LayerNorms, then a final LayerNorm."""
    block = 4 * (d_model * d_model + d_model) + (2 * d_model * d_ff + d_ff + d_model) + 2 * 2 * d_model
    return vocab_size * d_model + max_len * d_model + num_layers * block + 2 * d_model


def modern_parameters(vocab_size: int, d_model: int, num_heads: int, num_kv_heads: int, d_ff: int,
                      num_layers: int) -> int:
    """ModernGPT: tied token table, per block w_q and w_o (d x d), w_k and w_v (d x kv * d_head), SwiGLU's three
    d x d_ff matrices and two RMSNorm weights, then a final RMSNorm; no biases, no position table."""
    kv_width = num_kv_heads * (d_model // num_heads)
    block = 2 * d_model * d_model + 2 * d_model * kv_width + 3 * d_model * d_ff + 2 * d_model
    return vocab_size * d_model + num_layers * block + d_model


def matched_d_ff(target: int, vocab_size: int, d_model: int, num_heads: int, num_kv_heads: int,
                 num_layers: int) -> int:
    """The SwiGLU width whose ModernGPT has the parameter count closest to `target`."""
    base = modern_parameters(vocab_size, d_model, num_heads, num_kv_heads, 0, num_layers)
    return max(1, round((target - base) / (3 * d_model * num_layers)))


def results_path() -> Path:
    """$COURSE_DATA_DIR/modern_vs_gpt.json, else the student wheel's copy, else the repository's data/, else a data/ folder in the working
    directory or one of its parents (where coursekit.shakespeare looks for the text too)."""
    return find_data(RESULTS_FILE, "the recorded comparison", bundled=BUNDLED_DATA, package_file=__file__)


def load_results(path: str | os.PathLike | None = None) -> dict:
    """The recorded runs of bench/modern.py (see the module docstring)."""
    return json.loads(Path(path or results_path()).read_text(encoding="utf-8"))
