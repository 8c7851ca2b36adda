"""What the position demos of notebook 02 show: the point the prose makes must be what the cells compute. (Notebook
01's sub-word demo became a pointer to notebook 08, where byte-level BPE is an exercise with its own checks.)

Each test runs cells of the source notebook (taken from the .ipynb, so an edit of the notebook is tested) with the
reference implementation, on the notebook's own data, and checks the numbers behind the figure or table.
"""
from __future__ import annotations

import math

import numpy as np
import pytest
from notebook_cells import notebook_cell, plt, run_showing


def _run(assignment: str, cell_ids: list[str], namespace: dict) -> list:
    """Execute cells in order; plt.show() records the open figures instead of showing them."""
    return run_showing([(cell_id, notebook_cell(assignment, cell_id)) for cell_id in cell_ids], namespace)


def test_02_projections_make_the_score_depend_on_more_than_the_distance():
    import torch

    from solutions import sinusoidal_positional_encoding

    namespace = {"torch": torch, "np": np, "math": math, "pe": sinusoidal_positional_encoding(100, 64)}
    try:
        figures = _run("02_positional_encoding", ["02-011", "02-proj"], namespace)
        assert len(figures) == 2
        dots, projected = namespace["dots"], namespace["projected"]
        assert float(dots.max() - dots.min()) < 1e-3, "raw PE[p]·PE[p+k] is the same at every p"
        spread = float(projected.max() - projected.min())
        assert spread > float(namespace["scores"].std()), f"q·k at a fixed distance varies too little: {spread}"
    finally:
        plt.close("all")


def test_02_trained_table_has_a_band_and_untrained_rows_stay_noise():
    import torch
    from torch import nn

    from solutions import LearnedPositionalEmbedding, sinusoidal_positional_encoding

    namespace = {"torch": torch, "nn": nn, "np": np, "math": math, "FAST": False,
                 "LearnedPositionalEmbedding": LearnedPositionalEmbedding,
                 "sinusoidal_positional_encoding": sinusoidal_positional_encoding}
    try:
        (figure,) = _run("02_positional_encoding", ["02-022", "02-learned-compare"], namespace)
        assert len(figure.axes[0].get_images()) == 1 and len(figure.axes[1].get_images()) == 1
        losses = namespace["losses"]
        assert losses[-1] < 0.1 * losses[0], f"the table did not learn the task: {losses[0]:.3f} -> {losses[-1]:.3f}"
        similarity, train_len = namespace["similarity"], namespace["TRAIN_LEN"]
        trained = np.mean([similarity[p, p + 1].item() for p in range(train_len - 1)])
        far = np.mean([similarity[p, p + 10].item() for p in range(train_len - 10)])
        untrained = np.mean([similarity[p, p + 1].item() for p in range(train_len, similarity.shape[0] - 1)])
        assert trained > 0.8 and far < trained - 0.5, f"no band: neighbours {trained:.2f}, distance 10 {far:.2f}"
        assert abs(untrained) < 0.3, f"rows never trained should be unrelated noise, got {untrained:.2f}"
    finally:
        plt.close("all")
