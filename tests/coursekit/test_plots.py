"""coursekit.plots: every function returns a Figure with the right axes and renders to PNG."""
import io

import matplotlib
import numpy as np
import pytest
import torch
from matplotlib.figure import Figure

from coursekit import plots

matplotlib.use("Agg")


def _png(figure):
    buffer = io.BytesIO()
    figure.savefig(buffer, format="png")
    data = buffer.getvalue()
    assert data.startswith(b"\x89PNG") and len(data) > 1000
    return data


def _tick_texts(labels):
    return [label.get_text() for label in labels]


def test_attention_heatmap_with_labels_and_title():
    weights = torch.softmax(torch.randn(1, 2, 3, 4, requires_grad=True), dim=-1)[0, 1]  # (3, 4), needs grad
    figure = plots.attention_heatmap(weights, x_labels=list("abcd"), y_labels=list("xyz"), title="head 1")
    assert isinstance(figure, Figure)
    ax = figure.axes[0]
    assert ax.get_xlabel() == "key" and ax.get_ylabel() == "query" and ax.get_title() == "head 1"
    assert _tick_texts(ax.get_xticklabels()) == list("abcd")
    assert _tick_texts(ax.get_yticklabels()) == list("xyz")
    _png(figure)


def test_attention_heatmap_squeezes_and_checks_shapes():
    figure = plots.attention_heatmap(np.full((1, 1, 2, 2), 0.5))
    _png(figure)
    with pytest.raises(ValueError, match="2-D"):
        plots.attention_heatmap(np.ones((2, 3, 3)))
    with pytest.raises(ValueError, match="x_labels"):
        plots.attention_heatmap(np.ones((2, 3)), x_labels=["a"])


def test_attention_heatmap_draws_into_given_axes():
    figure = Figure()
    axes = figure.subplots(1, 2)
    assert plots.attention_heatmap(np.eye(3), ax=axes[1]) is figure
    assert axes[1].get_xlabel() == "key"


def test_positional_encoding_plots():
    pe = torch.randn(40, 8)
    heat = plots.positional_encoding_heatmap(pe)
    assert heat.axes[0].get_xlabel() == "dimension" and heat.axes[0].get_ylabel() == "position"
    _png(heat)
    curves = plots.positional_encoding_curves(pe, dims=[0, 3])
    ax = curves.axes[0]
    assert [line.get_label() for line in ax.get_lines()] == ["dim 0", "dim 3"]
    np.testing.assert_allclose(ax.get_lines()[1].get_ydata(), pe[:, 3].numpy())
    _png(curves)
    with pytest.raises(ValueError, match="outside"):
        plots.positional_encoding_curves(pe, dims=[8])


def test_training_curves():
    history = {"train_loss": [torch.tensor(1.2), 0.8, 0.5], "test_accuracy": torch.tensor([0.3, 0.5, 0.6])}
    figure = plots.training_curves(history)
    loss, accuracy = figure.axes  # one y axis per unit
    assert loss.get_xlabel() == accuracy.get_xlabel() == "epoch"
    assert (loss.get_ylabel(), accuracy.get_ylabel()) == ("loss", "accuracy")
    assert [line.get_label() for line in loss.get_lines()] == ["train_loss"]
    assert [line.get_label() for line in accuracy.get_lines()] == ["test_accuracy"]
    assert list(loss.get_lines()[0].get_xdata()) == [1, 2, 3]
    _png(figure)
    ticks = [t for t in loss.get_xticks() if 1 <= t <= 3]
    assert ticks and all(float(t).is_integer() for t in ticks), ticks  # whole epochs, no 2.5
    from matplotlib.figure import Figure

    own = Figure().add_subplot()
    plots.training_curves(history, ax=own)  # into a given axes: accuracies on a twin axis
    assert [line.get_label() for line in own.get_lines()] == ["train_loss"]
    assert own.get_ylabel() == "loss" and len(own.figure.axes) == 2
    with pytest.raises(ValueError):
        plots.training_curves({})


def test_confusion_matrix_counts_and_labels():
    names = ["1 star", "2 stars", "3 stars"]
    figure = plots.confusion_matrix(torch.tensor([0, 1, 2, 2]), np.array([0, 2, 2, 2]), labels=names)
    ax = figure.axes[0]
    assert ax.get_xlabel() == "predicted" and ax.get_ylabel() == "true"
    assert _tick_texts(ax.get_xticklabels()) == names
    annotations = [text.get_text() for text in ax.texts]
    assert annotations == ["1", "0", "0", "0", "0", "1", "0", "0", "2"]  # row = true class
    assert "75.0%" in ax.get_title()
    _png(figure)


def test_confusion_matrix_rejects_bad_input():
    with pytest.raises(ValueError, match="length"):
        plots.confusion_matrix([0, 1], [0])
    with pytest.raises(ValueError, match="integer"):
        plots.confusion_matrix([0.5, 1.0], [0, 1])
    with pytest.raises(ValueError, match="0..1"):
        plots.confusion_matrix([0, 2], [0, 1], labels=["a", "b"])


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
def test_accepts_cuda_tensors():
    _png(plots.attention_heatmap(torch.rand(3, 3, device="cuda")))
    _png(plots.confusion_matrix(torch.tensor([0, 1], device="cuda"), torch.tensor([1, 1], device="cuda")))


def test_returned_figure_displays_as_a_picture_in_a_jupyter_kernel():
    """A plot on the last line of a cell must show as an image, not as `<Figure size ...>` text."""
    import nbformat
    from nbclient import NotebookClient

    notebook = nbformat.v4.new_notebook()
    notebook.cells = [nbformat.v4.new_code_cell(
        "import numpy as np\nfrom coursekit import plots\nplots.attention_heatmap(np.eye(3), x_labels=list('abc'))")]
    NotebookClient(notebook, kernel_name="python3", timeout=120).execute()
    (output,) = notebook.cells[0].outputs
    assert "image/png" in output["data"]


def test_heatmaps_draw_without_seaborn_pandas_or_scipy():
    """The heatmaps are matplotlib's alone: a kernel that draws one does not import seaborn, pandas and scipy (1.7 s
    of CPU in every kernel of 01-06, 08 and 10, graded or not)."""
    import subprocess
    import sys

    code = ("import sys, numpy as np, matplotlib; matplotlib.use('Agg'); from coursekit import plots\n"
            "plots.attention_heatmap(np.eye(3), x_labels=list('abc'), y_labels=list('xyz')).savefig('/dev/null')\n"
            "plots.positional_encoding_heatmap(np.ones((20, 8))).savefig('/dev/null')\n"
            "plots.confusion_matrix([0, 1, 1], [0, 1, 0]).savefig('/dev/null')\n"
            "print(sorted(m for m in ('seaborn', 'pandas', 'scipy') if m in sys.modules))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]", done.stdout


def test_a_heatmap_turns_crowded_labels_and_writes_counts_that_stand_out():
    long_names = [f"class number {k}" for k in range(6)]
    crowded = plots.confusion_matrix(list(range(6)) * 4, list(range(6)) * 3 + [0] * 6, labels=long_names,
                                     ax=Figure(figsize=(3, 3)).add_subplot())
    ax = crowded.axes[0]
    assert {label.get_rotation() for label in ax.get_xticklabels()} == {90.0}   # upright: they would overlap
    assert {label.get_rotation() for label in ax.get_yticklabels()} == {0.0}
    roomy = plots.confusion_matrix([0, 1, 1], [0, 1, 0], labels=["a", "b"]).axes[0]
    assert {label.get_rotation() for label in roomy.get_xticklabels()} == {0.0}
    darkest, lightest = ax.texts[0], ax.texts[1]  # the cell counted most (4) and one counted 0
    assert (darkest.get_text(), lightest.get_text()) == ("4", "0")
    assert darkest.get_color() == "w" and lightest.get_color() == ".15"
    top, bottom = ax.get_ylim()
    assert (top, bottom) == (6, 0) and ax.get_xlim() == (0, 6)  # the first row on top, one unit per cell
