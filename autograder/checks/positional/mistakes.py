"""Known-mistake variants of notebook 02 (positional encoding), and the table of the mistakes they make.

`TABLE` = {mistake id: (variant, switches)}: the variant run with those switches on a check's own inputs gives that
mistake's answer (`kit.compare.from_table`); a check tries its rows in the table's order, the first match naming the
mistake. `FORMS` = {mistake id: [switches, ...]}: other switches of the same variant that make the same mistake, tried
right after its row.
"""
from __future__ import annotations

import torch


def sinusoidal(max_len, d_model, *, swap=False, exponent="pair", halves=False, base=10000.0):
    """Sinusoidal table; exponent "pair" (correct 2i/d), "column" (j/d for column j), "no_two" (i/d); `base` the
    frequency base (10000 in the course)."""
    position = torch.arange(max_len, dtype=torch.float64)[:, None]                           # (max_len, 1)
    column = torch.arange(d_model, dtype=torch.float64)                                      # (d_model,)
    pair = torch.div(column, 2, rounding_mode="floor")
    power = {"pair": 2 * pair / d_model, "column": column / d_model, "no_two": pair / d_model}[exponent]
    angle = position / (base ** power)                                                       # (max_len, d_model)
    even = (column % 2 == 0)
    first, second = (torch.cos, torch.sin) if swap else (torch.sin, torch.cos)
    if halves:
        pe = torch.cat([first(angle[:, 0::2]), second(angle[:, 0::2])], dim=1)              # (max_len, d_model)
    else:
        pe = torch.where(even, first(angle), second(angle))                                 # (max_len, d_model)
    return pe.float()


def add_positions(x, table, *, from_batch=False, without_x=False):
    """x (B, T, d) + table[:T] (T, d); or the batch-axis mistake table[:B] broadcast over T."""
    B, T, _ = x.shape
    positions = table[:B].unsqueeze(1) if from_batch else table[:T]                          # (B, 1, d) or (T, d)
    return positions.expand(x.shape).to(x) if without_x else x + positions.to(x)


TABLE = {
    # the sinusoidal table (sinusoidal_positional_encoding, PositionalEncoding.pe)
    "positional.sin_cos_swapped": (sinusoidal, {"swap": True}),
    "positional.exponent_per_column": (sinusoidal, {"exponent": "column"}),
    "positional.exponent_no_two": (sinusoidal, {"exponent": "no_two"}),
    "positional.halves": (sinusoidal, {"halves": True}),
    "positional.frequency_base": (sinusoidal, {"base": 1000.0}),
    # adding the positions (PositionalEncoding, LearnedPositionalEmbedding)
    "positional.from_batch_axis": (add_positions, {"from_batch": True}),
    "positional.x_not_added": (add_positions, {"without_x": True}),
}
FORMS = {"positional.sin_cos_swapped": [{"swap": True, "exponent": "column"}]}
