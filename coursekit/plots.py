"""Figures for the notebooks: attention maps, positional encodings, training curves, confusion matrices.

Every function accepts PyTorch tensors (on any device) or NumPy arrays, draws into `ax` when given (else into a
new Figure) and returns the Figure. Figures are created without pyplot, so nothing is shown or kept globally:
a returned Figure displays in Jupyter when it is the last expression of a cell (or with `display(fig)`), and
`fig.savefig("x.png")` works on a headless machine.
"""
from __future__ import annotations

import sys
from typing import Sequence

import numpy as np

__all__ = [
    "attention_heatmap", "positional_encoding_heatmap", "positional_encoding_curves", "training_curves",
    "confusion_matrix",
]


def _to_numpy(values) -> np.ndarray:
    """A float/int NumPy array from a tensor on any device, an array or a nested list."""
    try:
        import torch
    except ImportError:  # pragma: no cover - torch is a dependency of the course
        torch = None
    if torch is not None and isinstance(values, torch.Tensor):
        values = values.detach().cpu()
        if values.is_floating_point():
            values = values.float()  # bfloat16/half have no NumPy equivalent
        return values.numpy()
    return np.asarray(values)


def show_figures_in_jupyter() -> None:
    """Make a Figure that ends a Jupyter cell display as a picture.

    A Figure made without pyplot has no rich display of its own: IPython shows it as a picture only once matplotlib's
    inline backend has registered its PNG formatter, which happens when pyplot shows its first figure. Register that
    formatter here (once per kernel), so `plots.attention_heatmap(w)` on the last line of a cell draws the heatmap.
    Outside IPython this does nothing.
    """
    if "IPython" not in sys.modules:
        return
    from IPython import get_ipython

    shell = get_ipython()
    if shell is None:
        return
    from IPython.core.pylabtools import print_figure
    from matplotlib.figure import Figure

    png = shell.display_formatter.formatters["image/png"]
    try:
        png.lookup_by_type(Figure)  # already registered (by us or by the inline backend)
    except KeyError:
        png.for_type(Figure, lambda figure: print_figure(figure, "png", bbox_inches="tight"))


def _new_axes(ax, figsize):
    if ax is not None:
        return ax.figure, ax
    from matplotlib.figure import Figure

    show_figures_in_jupyter()
    figure = Figure(figsize=figsize, layout="constrained")
    return figure, figure.add_subplot()


def _matrix(values, name: str) -> np.ndarray:
    """Squeeze leading size-1 dimensions (e.g. a (1, 1, T_q, T_k) attention tensor) down to 2-D."""
    array = _to_numpy(values)
    while array.ndim > 2 and array.shape[0] == 1:
        array = array[0]
    if array.ndim != 2:
        raise ValueError(f"{name} must be 2-D (or have leading size-1 dims), got shape {tuple(array.shape)}; "
                         "pick one example and one head first, e.g. weights[0, h]")
    return array.astype(float)


# ------------------------------------------------------------------------------------- a heatmap, in matplotlib
def _label_step(count: int, most: int = 10) -> int:
    """Every how many rows/columns to label an axis: the smallest round step (1, 2, 5, 10, 20, ...) giving at most
    `most` labels, so that labels never crowd into each other."""
    return min(m * 10 ** e for e in range(10) for m in (1, 2, 5) if count <= most * m * 10 ** e)


def _overlapping(labels) -> bool:
    boxes = [label.get_window_extent() for label in labels if label.get_text()]
    return any(box.count_overlaps(boxes) > 1 for box in boxes)


def _heatmap(ax, matrix: np.ndarray, cmap: str, vmin=None, vmax=None, square: bool = False,
             colorbar: str | None = None, xticklabels="auto", yticklabels="auto", annotate: str | None = None):
    """matrix (rows, columns) as coloured cells, row 0 at the top, drawn with matplotlib alone.

    x/yticklabels: a list (one per column/row) or "auto" (every few indices, at most ten: `_label_step`).
    colorbar: its label (None: no colour bar). annotate: a format spec ("d") to write each value in its cell, dark
    or white to stand out from the cell's colour. Tick labels that overlap are turned: the x ones upright, the y
    ones level. (What the course used seaborn's heatmap for, without importing seaborn, pandas and scipy: 1.7 s of
    CPU in every kernel that drew one.)"""
    rows, columns = matrix.shape
    mesh = ax.pcolormesh(matrix, cmap=cmap, vmin=vmin, vmax=vmax)
    ax.set(xlim=(0, columns), ylim=(rows, 0))              # inverted: the matrix's first row on top
    for spine in ax.spines.values():
        spine.set_visible(False)
    if square:
        ax.set_aspect("equal")
    if colorbar is not None:
        ax.figure.colorbar(mesh, ax=ax, label=colorbar).outline.set_linewidth(0)
    placed = []
    for axis, (labels, count) in enumerate(((xticklabels, columns), (yticklabels, rows))):
        if isinstance(labels, str):                        # "auto"
            positions = np.arange(0, count, _label_step(count))
            labels = [str(p) for p in positions]
        else:
            positions = np.arange(count)
        target = ax.xaxis if axis == 0 else ax.yaxis
        target.set_ticks(positions + 0.5)
        placed.append(target.set_ticklabels(list(labels), rotation=0 if axis == 0 else "vertical",
                                            **({} if axis == 0 else {"va": "center"})))
    ax.figure.draw_without_rendering()
    if _overlapping(placed[0]):
        for label in placed[0]:
            label.set_rotation("vertical")
    if _overlapping(placed[1]):
        for label in placed[1]:
            label.set_rotation("horizontal")
    if annotate is not None:
        mesh.update_scalarmappable()
        for (row, column), value, color in zip(np.ndindex(rows, columns), matrix.flat, mesh.get_facecolors()):
            rgb = color[:3]                                                      # RGBA rows, 0..1
            rgb = np.where(rgb <= 0.03928, rgb / 12.92, ((rgb + 0.055) / 1.055) ** 2.4)
            luminance = float(rgb @ [0.2126, 0.7152, 0.0722])                  # W3C relative luminance
            ax.text(column + 0.5, row + 0.5, format(value, annotate), ha="center", va="center",
                    color=".15" if luminance > 0.408 else "w")
    return mesh


def attention_heatmap(weights, x_labels: Sequence[str] | None = None, y_labels: Sequence[str] | None = None,
                      ax=None, title: str | None = None):
    """Heatmap of attention weights (T_q, T_k): row = query position, column = key position."""
    matrix = _matrix(weights, "weights")  # (T_q, T_k)
    for labels, size, axis in ((x_labels, matrix.shape[1], "x_labels"), (y_labels, matrix.shape[0], "y_labels")):
        if labels is not None and len(labels) != size:
            raise ValueError(f"{axis} has {len(labels)} entries but the weights have {size} along that axis")
    figure, ax = _new_axes(ax, (1.2 + 0.45 * matrix.shape[1], 0.9 + 0.4 * matrix.shape[0]))
    _heatmap(ax, matrix, "viridis", vmin=0.0, square=True, colorbar="weight",
             xticklabels=list(x_labels) if x_labels is not None else "auto",
             yticklabels=list(y_labels) if y_labels is not None else "auto")
    ax.set_xlabel("key")
    ax.set_ylabel("query")
    if x_labels is not None:
        ax.tick_params(axis="x", labelrotation=90)
    if y_labels is not None:
        ax.tick_params(axis="y", labelrotation=0)
    if title:
        ax.set_title(title)
    return figure


def positional_encoding_heatmap(pe, ax=None):
    """Heatmap of a positional encoding table (max_len, d_model): rows are positions, columns dimensions."""
    matrix = _matrix(pe, "pe")  # (max_len, d_model)
    figure, ax = _new_axes(ax, (8, 5))
    limit = float(np.abs(matrix).max()) or 1.0  # symmetric colour scale: white is 0
    _heatmap(ax, matrix, "RdBu_r", vmin=-limit, vmax=limit, colorbar="value")  # every few indices labelled
    ax.tick_params(axis="y", labelrotation=0)
    ax.set_xlabel("dimension")
    ax.set_ylabel("position")
    ax.set_title("positional encoding")
    return figure


def positional_encoding_curves(pe, dims: Sequence[int], ax=None):
    """Value of the chosen dimensions of a positional encoding (max_len, d_model) along the positions."""
    matrix = _matrix(pe, "pe")  # (max_len, d_model)
    dims = [int(d) for d in dims]
    if not dims:
        raise ValueError("dims must name at least one dimension")
    bad = [d for d in dims if not 0 <= d < matrix.shape[1]]
    if bad:
        raise ValueError(f"dims {bad} are outside 0..{matrix.shape[1] - 1}")
    figure, ax = _new_axes(ax, (8, 4))
    positions = np.arange(matrix.shape[0])
    for d in dims:
        ax.plot(positions, matrix[:, d], label=f"dim {d}")
    ax.set_xlabel("position")
    ax.set_ylabel("value")
    ax.set_title("positional encoding by dimension")
    ax.legend(loc="upper right")
    return figure


def _curve_kind(name: str) -> str:
    """"loss" for a loss curve (its name says loss), else the name's kind: "accuracy" for accuracies, "value"."""
    lowered = name.lower()
    if "loss" in lowered:
        return "loss"
    return "accuracy" if "acc" in lowered else "value"


def training_curves(history: dict[str, Sequence[float]], ax=None):
    """One line per entry of history (e.g. {"train_loss": [...], "test_accuracy": [...]}) against the epoch.

    Losses and accuracies have different units, so each kind gets its own y axis: side by side in a new figure, or
    the accuracies on a twin axis (right) of `ax` when one is given. Epochs are whole numbers on the x axis."""
    from matplotlib.ticker import MaxNLocator

    if not isinstance(history, dict) or not history:
        raise ValueError("history must be a non-empty dict of name -> list of numbers per epoch")
    curves = {}
    for name, values in history.items():
        if isinstance(values, (list, tuple)):
            values = [float(value) for value in values]  # also 0-d tensors, on any device
        curves[str(name)] = _to_numpy(values).astype(float).reshape(-1)
    kinds = list(dict.fromkeys(_curve_kind(name) for name in curves))  # in the order of history
    if ax is not None:
        figure = ax.figure
        axes = {kind: (ax if i == 0 else ax.twinx()) for i, kind in enumerate(kinds)}
    elif len(kinds) == 1:
        figure, single = _new_axes(None, (6, 3.6))
        axes = {kinds[0]: single}
    else:
        from matplotlib.figure import Figure

        show_figures_in_jupyter()
        figure = Figure(figsize=(4.2 * len(kinds), 3.4), layout="constrained")
        axes = dict(zip(kinds, figure.subplots(1, len(kinds), squeeze=False)[0]))
    colors = iter(f"C{i}" for i in range(len(curves)))
    for name, values in curves.items():
        target = axes[_curve_kind(name)]
        target.plot(np.arange(1, len(values) + 1), values, marker="o", markersize=4, label=name, color=next(colors))
    for kind, target in axes.items():
        target.set_ylabel(kind)
        target.set_xlabel("epoch")
        target.xaxis.set_major_locator(MaxNLocator(integer=True, steps=[1, 2, 5, 10]))
        target.grid(alpha=0.3)
        if ax is None:
            target.set_title(", ".join(name for name in curves if _curve_kind(name) == kind))
    if ax is not None:
        handles = [line for target in axes.values() for line in target.get_lines()]
        ax.legend(handles, [line.get_label() for line in handles])
        ax.set_title("training curves")
    return figure


def confusion_matrix(y_true, y_pred, labels: Sequence[str] | None = None, ax=None):
    """Counts of (true class, predicted class) for integer classes 0..K-1, drawn as an annotated heatmap.

    labels: display names of the classes in class order (e.g. ["1 star", ..., "5 stars"]); K = len(labels),
    else K = the largest class seen + 1.
    """
    true = _to_numpy(y_true).reshape(-1)
    pred = _to_numpy(y_pred).reshape(-1)
    if true.shape != pred.shape:
        raise ValueError(f"y_true and y_pred differ in length: {true.size} vs {pred.size}")
    if true.size == 0:
        raise ValueError("y_true is empty")
    if not (np.issubdtype(true.dtype, np.integer) and np.issubdtype(pred.dtype, np.integer)):
        if not (np.all(np.mod(true, 1) == 0) and np.all(np.mod(pred, 1) == 0)):
            raise ValueError("y_true and y_pred must hold integer class ids (take the argmax of the logits)")
    true, pred = true.astype(int), pred.astype(int)
    num_classes = len(labels) if labels is not None else int(max(true.max(), pred.max())) + 1
    if min(true.min(), pred.min()) < 0 or max(true.max(), pred.max()) >= num_classes:
        raise ValueError(f"class ids must lie in 0..{num_classes - 1}")
    counts = np.zeros((num_classes, num_classes), dtype=int)  # (true, predicted)
    np.add.at(counts, (true, pred), 1)
    names = list(labels) if labels is not None else [str(k) for k in range(num_classes)]
    figure, ax = _new_axes(ax, (1.5 + 0.7 * num_classes, 1.0 + 0.6 * num_classes))
    _heatmap(ax, counts, "Blues", square=True, xticklabels=names, yticklabels=names, annotate="d")
    ax.set_xlabel("predicted")
    ax.set_ylabel("true")
    ax.set_title(f"confusion matrix (accuracy {np.mean(true == pred):.1%})")
    ax.tick_params(axis="y", labelrotation=0)
    return figure
