"""Diagrams for the notebooks, drawn with matplotlib (boxes and arrows; no image files).

`model_family_map()` draws how the three Transformer families are built from the course's own blocks:
encoder-only (BERT), decoder-only (GPT) and encoder-decoder (T5), each with its attention masks and its
pretraining objective. Like `coursekit.plots`, it draws into `ax` when given (else into a new Figure, made without
pyplot) and returns the Figure.

Every box and the text written in it share a `gid` ("<family>:<part>", e.g. "gpt:blocks"), so a test can find
them and check that each text fits inside its box.
"""
from __future__ import annotations

from dataclasses import dataclass

__all__ = ["model_family_map", "FAMILIES", "MASK_COLORS"]

# Edge colours of the attention blocks: which mask their self-attention uses. Cross-attention arrows are green.
MASK_COLORS = {"padding": "#1f77b4", "causal": "#d62728", "cross": "#2ca02c"}
_FILL = {"input": "#f2f2f2", "embed": "#e8f0fb", "block": "#ffffff", "head": "#f6eefb", "objective": "#fff4d6"}

# Rows, bottom to top: (y of the box centre, box height), in data units of the diagram's axes.
_ROWS = {"input": (0.55, 0.7), "embed": (1.85, 0.95), "block": (4.05, 2.4), "head": (6.05, 0.7),
         "objective": (7.55, 1.3)}
_BOX_WIDTH = 0.94
_FONT_SIZE = 8


@dataclass(frozen=True)
class Box:
    """One box of the map: where it sits (stack centre x, row), what it says, and which mask its attention uses."""
    part: str                 # short name, unique within a family: "input", "embed", "blocks", "head", "objective"
    x: float                  # centre of the stack it belongs to
    row: str                  # a key of _ROWS
    text: str
    mask: str | None = None   # "padding" or "causal" for attention blocks, else None


@dataclass(frozen=True)
class Family:
    key: str                  # "bert", "gpt", "t5"
    title: str
    centre: float             # x of the column title
    boxes: tuple[Box, ...]
    arrows: tuple[tuple[str, str], ...]     # (from part, to part), drawn bottom to top
    cross: tuple[str, str] | None = None    # (encoder part, decoder part): the memory feeding cross-attention
    note: str | None = None                 # written (without a box) above the `cross` encoder part


_EMBED = "TokenEmbedding (01)\n× √d_model\n+ positions (02)"

FAMILIES = (
    Family(
        key="bert", title="encoder-only · BERT", centre=0.5,
        boxes=(
            Box("input", 0.5, "input", "[CLS] the food was [MASK] ."),
            Box("embed", 0.5, "embed", _EMBED),
            Box("blocks", 0.5, "block",
                "Encoder (05):\nN × EncoderBlock\nself-attention\n(MultiHeadAttention, 04):\n"
                "every token sees every token\npadding mask (03)\n+ PositionwiseFeedForward", mask="padding"),
            Box("head", 0.5, "head", "Linear → vocabulary"),
            Box("objective", 0.5, "objective",
                "masked-token prediction:\npick ~15% of the tokens (most\nshown as [MASK]) and predict\n"
                "them from both sides\n"
                "[MASK] → great"),
        ),
        arrows=(("input", "embed"), ("embed", "blocks"), ("blocks", "head"), ("head", "objective")),
    ),
    Family(
        key="gpt", title="decoder-only · GPT", centre=1.5,
        boxes=(
            Box("input", 1.5, "input", "<bos> the food was"),
            Box("embed", 1.5, "embed", _EMBED),
            Box("blocks", 1.5, "block",
                "N × DecoderBlock (06)\nwithout cross_attn, i.e.\nan EncoderBlock (05) with\na causal mask (03):\n"
                "masked self-attention\n+ PositionwiseFeedForward", mask="causal"),
            Box("head", 1.5, "head", "generator:\nLinear → vocabulary"),
            Box("objective", 1.5, "objective",
                "next-token prediction:\nat every position predict\nthe token after it\n(teacher forcing)\n"
                "→ the food was great"),
        ),
        arrows=(("input", "embed"), ("embed", "blocks"), ("blocks", "head"), ("head", "objective")),
    ),
    Family(
        key="t5", title="encoder-decoder · T5 (our Transformer, 06)", centre=3.0,
        boxes=(
            Box("enc_input", 2.47, "input", "source:\nthe food <X> great ."),
            Box("enc_embed", 2.47, "embed", _EMBED),
            Box("encoder", 2.47, "block",
                "Encoder (05):\nN × EncoderBlock\nself-attention over\nthe source: every token\n"
                "sees every token\npadding mask (03)\n+ PositionwiseFeedForward", mask="padding"),
            Box("dec_input", 3.53, "input", "target in:\n<bos> <X> was really"),
            Box("dec_embed", 3.53, "embed", _EMBED),
            Box("decoder", 3.53, "block",
                "Decoder (06):\nN × DecoderBlock\nmasked self-attention\n(causal)\n"
                "cross-attention: queries\nhere, keys/values from\nthe memory\n+ PositionwiseFeedForward",
                mask="causal"),
            Box("head", 3.53, "head", "generator:\nLinear → vocabulary"),
            Box("objective", 3.53, "objective",
                "span corruption: drop spans\nof the source, mark each\nwith a sentinel; write the\ndropped spans\n"
                "→ <X> was really <Y>"),
        ),
        arrows=(("enc_input", "enc_embed"), ("enc_embed", "encoder"), ("dec_input", "dec_embed"),
                ("dec_embed", "decoder"), ("decoder", "head"), ("head", "objective")),
        cross=("encoder", "decoder"),
        note=("the encoder has no\noutput layer: its memory\n(B, S, d_model), green arrow,\n"
              "is read by the cross_attn\nof every DecoderBlock"),
    ),
)


def _box_extent(box: Box) -> tuple[float, float, float, float]:
    """(left, bottom, width, height) of a box in data units."""
    y, height = _ROWS[box.row]
    return box.x - _BOX_WIDTH / 2, y - height / 2, _BOX_WIDTH, height


def _draw_box(ax, family: Family, box: Box) -> None:
    from matplotlib.patches import FancyBboxPatch

    left, bottom, width, height = _box_extent(box)
    kind = "block" if box.mask else box.row
    edge = MASK_COLORS[box.mask] if box.mask else "#555555"
    patch = FancyBboxPatch((left, bottom), width, height, boxstyle="round,pad=0,rounding_size=0.04",
                           facecolor=_FILL[kind], edgecolor=edge, linewidth=2.2 if box.mask else 1.0)
    patch.set_gid(f"{family.key}:{box.part}")
    ax.add_patch(patch)
    text = ax.text(box.x, bottom + height / 2, box.text, ha="center", va="center", fontsize=_FONT_SIZE,
                   family="monospace" if box.row == "input" else None, linespacing=1.3)
    text.set_gid(f"{family.key}:{box.part}")


def _draw_arrow(ax, start: Box, end: Box, color: str = "#555555", label: str | None = None) -> None:
    """An arrow from `start` to `end`: upwards between rows of one stack, sideways between two stacks."""
    s_left, s_bottom, s_width, s_height = _box_extent(start)
    e_left, e_bottom, e_width, e_height = _box_extent(end)
    if start.x == end.x:                                    # same stack: top edge -> bottom edge
        tail, head = (start.x, s_bottom + s_height), (end.x, e_bottom)
    else:                                                   # side by side: right edge -> left edge
        y = s_bottom + s_height / 2
        tail, head = (s_left + s_width, y), (e_left, y)
    ax.annotate("", xy=head, xytext=tail,
                arrowprops={"arrowstyle": "-|>", "color": color, "linewidth": 1.6, "shrinkA": 0, "shrinkB": 0})
    if label:
        ax.text((tail[0] + head[0]) / 2, tail[1] + 0.08, label, ha="center", va="bottom", fontsize=_FONT_SIZE,
                color=color)


def model_family_map(ax=None):
    """Three columns: encoder-only (BERT), decoder-only (GPT), encoder-decoder (T5), built from the course's blocks.

    Each column shows, bottom to top: an example input, the embedding, the attention blocks (edge colour = the mask
    of their self-attention), the output layer and the pretraining objective. Returns the Figure.
    """
    from matplotlib.axes import Axes
    from matplotlib.lines import Line2D

    if ax is None:
        from matplotlib.figure import Figure

        from .plots import show_figures_in_jupyter

        show_figures_in_jupyter()
        figure = Figure(figsize=(8.4, 9.6), layout="constrained")
        ax = figure.add_subplot()
    elif not isinstance(ax, Axes):
        raise TypeError(f"ax must be a matplotlib Axes (e.g. from plt.subplots()), got {type(ax).__name__}")
    figure = ax.figure

    for family in FAMILIES:
        parts = {box.part: box for box in family.boxes}
        for box in family.boxes:
            _draw_box(ax, family, box)
        for start, end in family.arrows:
            _draw_arrow(ax, parts[start], parts[end])
        if family.cross:
            _draw_arrow(ax, parts[family.cross[0]], parts[family.cross[1]], color=MASK_COLORS["cross"])
            if family.note:
                encoder = parts[family.cross[0]]
                ax.text(encoder.x, _ROWS["head"][0], family.note, ha="center", va="center", fontsize=_FONT_SIZE,
                        color=MASK_COLORS["cross"], linespacing=1.3)
        ax.text(family.centre, 8.6, family.title, ha="center", va="center", fontsize=9.5, fontweight="bold")
    for x in (1.0, 2.0):                                      # thin separators between the columns
        ax.plot([x, x], [0.0, 8.9], color="#cccccc", linewidth=0.8)

    legend = [Line2D([], [], color=MASK_COLORS["padding"], linewidth=2.2,
                     label="self-attention with a padding mask: each token sees both sides"),
              Line2D([], [], color=MASK_COLORS["causal"], linewidth=2.2,
                     label="self-attention with a causal (+ padding) mask: each token sees only its left"),
              Line2D([], [], color=MASK_COLORS["cross"], linewidth=1.6, marker=">",
                     label="cross-attention: the encoder's memory gives the keys and values")]
    ax.legend(handles=legend, loc="lower center", bbox_to_anchor=(0.5, -0.02), ncol=1, fontsize=_FONT_SIZE,
              frameon=False)
    ax.set_xlim(-0.02, 4.02)
    ax.set_ylim(-0.75, 8.9)
    ax.set_axis_off()
    return figure
