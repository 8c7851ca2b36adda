"""coursekit.diagrams: the map of the Transformer families is drawn legibly and says what each family uses."""
import io
import itertools
import subprocess
import sys

import matplotlib
import pytest
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.colors import to_hex
from matplotlib.figure import Figure
from matplotlib.patches import FancyBboxPatch
from matplotlib.text import Annotation

from coursekit import diagrams

matplotlib.use("Agg")


@pytest.fixture(scope="module")
def drawn():
    """The map, drawn once: (figure, its axes, renderer)."""
    figure = diagrams.model_family_map()
    canvas = FigureCanvasAgg(figure)   # a Figure made without pyplot has no renderer of its own
    canvas.draw()
    return figure, figure.axes[0], canvas.get_renderer()


def _boxes(ax):
    return {patch.get_gid(): patch for patch in ax.patches if isinstance(patch, FancyBboxPatch) and patch.get_gid()}


def _box_texts(ax):
    return {text.get_gid(): text for text in ax.texts if text.get_gid()}


def test_returns_a_figure_that_renders_to_png(drawn):
    figure, ax, _ = drawn
    assert isinstance(figure, Figure) and figure.axes == [ax]
    buffer = io.BytesIO()
    figure.savefig(buffer, format="png")
    assert buffer.getvalue().startswith(b"\x89PNG")


def test_every_box_has_its_text_and_the_text_fits_inside(drawn):
    _, ax, renderer = drawn
    boxes, texts = _boxes(ax), _box_texts(ax)
    expected = {f"{family.key}:{box.part}" for family in diagrams.FAMILIES for box in family.boxes}
    assert set(boxes) == expected and set(texts) == expected
    for gid, patch in boxes.items():
        box, text = patch.get_window_extent(renderer), texts[gid].get_window_extent(renderer)
        assert (box.x0 < text.x0 and text.x1 < box.x1 and box.y0 < text.y0 and text.y1 < box.y1), \
            f"the text of {gid} spills out of its box: text {text}, box {box}"


def test_no_two_boxes_overlap(drawn):
    _, ax, renderer = drawn
    extents = {gid: patch.get_window_extent(renderer) for gid, patch in _boxes(ax).items()}
    for (a, box_a), (b, box_b) in itertools.combinations(extents.items(), 2):
        assert not box_a.overlaps(box_b), f"{a} and {b} overlap"


def test_every_arrow_runs_from_one_box_edge_to_another(drawn):
    _, ax, _ = drawn
    arrows = [child for child in ax.texts if isinstance(child, Annotation)]
    wanted = sum(len(f.arrows) + (1 if f.cross else 0) for f in diagrams.FAMILIES)
    assert len(arrows) == wanted
    extents = [patch.get_bbox() for patch in _boxes(ax).values()]   # data coordinates

    def on_an_edge(x, y):
        return any((abs(y - e.y0) < 1e-9 or abs(y - e.y1) < 1e-9) and e.x0 <= x <= e.x1
                   or (abs(x - e.x0) < 1e-9 or abs(x - e.x1) < 1e-9) and e.y0 <= y <= e.y1 for e in extents)

    for arrow in arrows:
        assert on_an_edge(*arrow.xy) and on_an_edge(*arrow.xyann), f"arrow {arrow.xyann} -> {arrow.xy} is loose"


def test_the_edge_colour_of_each_attention_stack_is_its_mask(drawn):
    _, ax, _ = drawn
    boxes = _boxes(ax)
    expected = {"bert:blocks": "padding", "gpt:blocks": "causal", "t5:encoder": "padding", "t5:decoder": "causal"}
    for gid, mask in expected.items():
        assert to_hex(boxes[gid].get_edgecolor()) == to_hex(diagrams.MASK_COLORS[mask]), gid
    others = set(boxes) - set(expected)
    colours = {to_hex(boxes[gid].get_edgecolor()) for gid in others}
    assert not colours & {to_hex(c) for c in diagrams.MASK_COLORS.values()}, "only attention stacks get mask colours"


def test_each_family_names_the_course_blocks_and_its_objective(drawn):
    _, ax, _ = drawn
    texts = {gid: text.get_text() for gid, text in _box_texts(ax).items()}
    assert "EncoderBlock" in texts["bert:blocks"] and "causal" not in texts["bert:blocks"]
    assert "DecoderBlock" in texts["gpt:blocks"] and "causal" in texts["gpt:blocks"]
    assert "cross_attn" in texts["gpt:blocks"], "GPT's block is a DecoderBlock without its cross-attention"
    assert "Encoder" in texts["t5:encoder"] and "cross-attention" in texts["t5:decoder"]
    assert "masked-token" in texts["bert:objective"]
    assert "next-token" in texts["gpt:objective"]
    assert "span corruption" in texts["t5:objective"]
    titles = " ".join(t.get_text() for t in ax.texts if not t.get_gid())
    for name in ("BERT", "GPT", "T5"):
        assert name in titles


def test_draws_into_a_given_axes():
    figure = Figure()
    ax = figure.add_subplot()
    assert diagrams.model_family_map(ax=ax) is figure
    assert len(_boxes(ax)) == sum(len(f.boxes) for f in diagrams.FAMILIES)


def test_rejects_something_that_is_not_an_axes():
    with pytest.raises(TypeError, match="matplotlib Axes"):
        diagrams.model_family_map(ax="left")


def test_import_does_not_load_matplotlib():
    code = "import sys, coursekit.diagrams; print('matplotlib' in sys.modules)"
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert result.stdout.strip() == "False"
