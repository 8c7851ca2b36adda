"""The attention cost measurement compares like with like and reports what it measured."""
from __future__ import annotations

import torch

from coursekit.attention_cost import markdown, measure, score_bytes
from solutions.attention import scaled_dot_product_attention


def test_rows_hold_both_attentions_with_equal_outputs():
    rows = measure(scaled_dot_product_attention, [8, 32], "cpu", heads=2, d_head=4, repeats=1, memory=False)
    assert [r["T"] for r in rows] == [8, 32]
    for r in rows:
        assert r["max_difference"] < 1e-5                   # the same attention, two implementations
        assert r["plain_ms"] > 0 and r["fused_ms"] > 0
        assert r["plain_mb"] is None and r["fused_mb"] is None
    table = markdown(rows)
    assert table.count("\n") == 3 and "| 32 |" in table and "| - |" in table


def test_the_plain_attention_allocates_its_t_by_t_matrices_and_the_fused_one_does_not():
    (row,) = measure(scaled_dot_product_attention, [256], "cpu", heads=2, d_head=8, repeats=1)
    matrix = score_bytes(256, 2) / 2 ** 20
    assert row["plain_mb"] >= 2 * matrix                    # at least the scores and the weights
    assert row["fused_mb"] < matrix


def test_score_bytes():
    assert score_bytes(2048, 4) == 4 * 2048 * 2048 * 4
    assert score_bytes(10, 3, batch=2, dtype=torch.float16) == 2 * 3 * 100 * 2
