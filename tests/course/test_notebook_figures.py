"""What the notebooks' figures show: the point a figure makes must be visible in it.

Each test runs one figure cell of a source notebook (taken from the .ipynb, so an edit of the notebook is tested)
with the reference implementation and inspects the drawn figure.
"""
from __future__ import annotations

import math

import matplotlib
import numpy as np
import pytest
from notebook_cells import notebook_cell, plt, run_showing


def _run_cell(assignment: str, cell_id: str, namespace: dict) -> list:
    return run_showing([(cell_id, notebook_cell(assignment, cell_id))], namespace)


def _luminance(rgb) -> float:
    def channel(c):
        return c / 12.92 if c <= 0.03928 else ((c + 0.055) / 1.055) ** 2.4
    r, g, b = (channel(c) for c in rgb[:3])
    return 0.2126 * r + 0.7152 * g + 0.0722 * b


def _contrast(a, b) -> float:
    la, lb = sorted((_luminance(a), _luminance(b)), reverse=True)
    return (la + 0.05) / (lb + 0.05)


def test_01_padded_batch_labels_are_readable_on_padding():
    """Every id written on the padded-batch picture has WCAG AA contrast (4.5:1) with its cell."""
    import torch

    from solutions import encode, pad_batch

    words = ["<pad>", "<unk>", "the", "food", "was", "great", "not", "bad"]
    vocab = {w: i for i, w in enumerate(words)}
    tokenized = [words[2:2 + n] for n in (6, 3, 5, 1, 2, 6, 4, 3)]
    namespace = {"np": np, "torch": torch, "vocab": vocab, "tokenized": tokenized, "encode": encode,
                 "pad_batch": pad_batch}
    try:
        (figure,) = _run_cell("01_tokens_and_embeddings", "01-019", namespace)
        ax = figure.axes[0]
        (image,) = ax.get_images()
        cells = np.asarray(image.get_array())
        assert cells.any(), "the batch has padding"
        worst = min(
            _contrast(image.cmap(image.norm(cells[int(round(t.get_position()[1])), int(round(t.get_position()[0]))])),
                      matplotlib.colors.to_rgb(t.get_color()))
            for t in ax.texts)
        assert worst >= 4.5, f"an id label has contrast {worst:.2f}:1 with its cell (needs 4.5:1)"
    finally:
        plt.close("all")


def test_03_look_ahead_mask_visibly_changes_the_heat_map():
    """With the look-ahead mask the weights above the diagonal vanish: they must be large enough to see before."""
    import torch

    from coursekit import plots
    from solutions import make_causal_mask, make_padding_mask, scaled_dot_product_attention

    namespace = {"torch": torch, "plots": plots, "device": torch.device("cpu"),
                 "make_padding_mask": make_padding_mask, "make_causal_mask": make_causal_mask,
                 "scaled_dot_product_attention": scaled_dot_product_attention}
    try:
        (figure,) = _run_cell("03_attention", "03-021", namespace)
        assert len(figure.axes) >= 2
        w_pad, w_causal = namespace["w_pad"][0].cpu(), namespace["w_causal"][0].cpu()  # (6, 6)
        real = 4  # "the food was great"
        future = w_pad[:real, :real].triu(1).sum(-1)  # weight each real word gives to later words
        assert future.max() > 0.5 and future.mean() > 0.25, f"weights on later words too small to see: {future}"
        assert torch.allclose(w_causal[:real, :real].triu(1), torch.zeros(real, real))
        # most of the weight is NOT on the diagonal (random self-attention would put it there)
        assert w_pad[:real, :real].diagonal().mean() < 0.5
    finally:
        plt.close("all")


def test_09_rotated_scores_are_constant_along_diagonals():
    """The rotary figure makes its point: the score of rotated q and k is the same for every pair of positions with
    the same offset (each diagonal of the picture is one colour), and differs between offsets."""
    import torch

    from solutions import apply_rotary, rotary_cos_sin

    figures = _run_cell("09_modern_block", "locked_03", {"torch": torch, "rotary_cos_sin": rotary_cos_sin,
                                                          "apply_rotary": apply_rotary})
    (figure,) = figures
    scores = np.asarray(figure.axes[0].images[0].get_array())
    T = scores.shape[0]
    assert scores.shape == (T, T) and T >= 16
    assert max(np.diagonal(scores, offset).std() for offset in range(-T + 1, T)) < 1e-4
    assert np.std([np.diagonal(scores, offset).mean() for offset in range(-T + 1, T)]) > 0.1


def test_10_schedules_peak_at_their_warm_up_and_08s_cosine_shares_the_base_peak():
    """The schedule figure makes its point: each of the paper-scale curves rises to its peak at its own warm-up step
    (the wider model and the longer warm-up peak lower), 08's warm-up + cosine reaches the base model's peak and
    ends at its floor, and the right panel peaks at the notebook's warm-up."""
    from coursekit.translation_training import BUDGETS
    from solutions import noam_lr

    budget = BUDGETS["student"]
    try:
        (figure,) = _run_cell("10_translation", "locked_08", {"np": np, "math": math, "noam_lr": noam_lr,
                                                              "BUDGET": budget})
    finally:
        plt.close("all")
    left, right = figure.axes
    peaks = {}
    for line in left.get_lines():
        x, y = (np.asarray(v, dtype=float) for v in line.get_data())
        peaks[line.get_label()] = (x[np.argmax(y)], y.max(), y[-1])
    for label, (at, peak, _) in peaks.items():
        if label.startswith("d_model"):
            d_model, warmup = int(label.split()[1].rstrip(",")), int(label.split()[-1])
            assert abs(at - warmup) <= 50, f"{label}: peaks at step {at}"
            assert peak == pytest.approx((d_model * warmup) ** -0.5, rel=0.02), label
    assert peaks["d_model 256, warm-up 4000"][1] > peaks["d_model 512, warm-up 4000"][1] > \
        peaks["d_model 512, warm-up 8000"][1]
    cosine = peaks["08's lr_at, same peak"]
    assert cosine[1] == pytest.approx(peaks["d_model 512, warm-up 4000"][1], rel=0.01) and cosine[2] < 1e-6
    x, y = (np.asarray(v, dtype=float) for v in right.get_lines()[0].get_data())
    assert x[np.argmax(y)] == budget.warmup_steps
