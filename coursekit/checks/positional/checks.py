"""Public checks for notebook 02 (positional encoding).

The expected sinusoidal table is computed here with plain Python loops and `math`, entry by entry.
"""
from __future__ import annotations

import math

import torch
from torch import nn

from coursekit.checks.toolkit import (
    CheckFailed, expect_close, expect_dtype, expect_shape, expect_type, fail, first_matching_hint, mistake_hint, passed,
    run,
)
from coursekit.checks.toolkit import uses_parts
from coursekit.criteria import argument, edge_case
from coursekit.tolerance import CPU_FLOAT32, SINUSOID_BOUND_SLACK, WRONG_TABLE_ATOL


def _table_by_loops(max_len: int, d_model: int, rule: str = "correct") -> torch.Tensor:
    """PE computed entry by entry; `rule` builds the known wrong variants used for hints."""
    pe = torch.zeros(max_len, d_model, dtype=torch.float64)
    for p in range(max_len):
        for j in range(d_model):
            pair = j - j % 2                                    # 2i for both columns of pair i
            exponent = {"column_index": j, "pair_index": j // 2}.get(rule, pair)
            angle = p / 10000 ** (exponent / d_model)
            if rule == "multiplied":
                angle = p * 10000 ** (pair / d_model)
            use_sin = (j % 2 == 0)
            pe[p, j] = math.sin(angle) if use_sin else math.cos(angle)
    return pe


def _swapped(pe: torch.Tensor) -> torch.Tensor:
    out = pe.clone()
    out[:, 0::2], out[:, 1::2] = pe[:, 1::2], pe[:, 0::2]
    return out


def _halves(pe: torch.Tensor) -> torch.Tensor:
    return torch.cat([pe[:, 0::2], pe[:, 1::2]], dim=1)


def check_sinusoidal_positional_encoding(sinusoidal_positional_encoding) -> None:
    max_len, d_model = 6, 8
    expected = _table_by_loops(max_len, d_model)
    pe = run("sinusoidal_positional_encoding", sinusoidal_positional_encoding, max_len, d_model)
    expect_type(pe, torch.Tensor, "sinusoidal_positional_encoding(6, 8)")
    if tuple(pe.shape) == (d_model, max_len):
        fail("the result has shape (d_model, max_len): it is transposed.", "rows are positions: (max_len, d_model).")
    expect_shape(pe, (max_len, d_model), "sinusoidal_positional_encoding(6, 8)")
    expect_dtype(pe, torch.float32, "the encoding", "build it from float32 tensors (torch.arange(..., "
                 "dtype=torch.float32)).")
    hint = first_matching_hint(pe, [
        (_swapped(expected), mistake_hint("positional.sin_cos_swapped")),
        (_halves(expected), mistake_hint("positional.halves")),
        (_table_by_loops(max_len, d_model, "column_index"), mistake_hint("positional.exponent_per_column")),
        (_table_by_loops(max_len, d_model, "pair_index"), mistake_hint("positional.exponent_no_two")),
        (_table_by_loops(max_len, d_model, "multiplied"),
         "divide the position by 10000**(2i/d_model); do not multiply."),
    ], atol=WRONG_TABLE_ATOL)
    expect_close(pe, expected, "sinusoidal_positional_encoding(6, 8)", hint, **CPU_FLOAT32)
    first_row = pe[0].tolist()
    if first_row[0::2] != [0.0] * 4 or first_row[1::2] != [1.0] * 4:
        fail("position 0 should be [0, 1, 0, 1, ...].", "sin(0) = 0 and cos(0) = 1.")
    with edge_case("sinusoidal_positional_encoding.odd_d_model"):
        try:
            sinusoidal_positional_encoding(4, 5)
        except ValueError:
            pass
        except NotImplementedError:
            raise
        except Exception as error:
            fail(f"an odd d_model should raise ValueError, got {type(error).__name__}: {error}",
                 "check `d_model % 2` first and raise ValueError with a message.")
        else:
            fail("sinusoidal_positional_encoding(4, 5) should raise ValueError (d_model must be even).",
                 "check `d_model % 2` first and raise ValueError with a message.")
    long = run("sinusoidal_positional_encoding", sinusoidal_positional_encoding, 2000, 16)
    if not torch.isfinite(long).all() or long.abs().max() > 1.0 + SINUSOID_BOUND_SLACK:
        fail("for 2000 positions some values are not finite or outside [-1, 1].",
             "compute 10000**(2i/d_model) in floating point, not with integer powers.")
    passed("sinusoidal_positional_encoding")


@uses_parts("PositionalEncoding")
def check_positional_encoding(PositionalEncoding) -> None:
    d_model, max_len = 6, 10
    module = run("PositionalEncoding", PositionalEncoding, d_model, max_len=max_len)
    expect_type(module, nn.Module, "PositionalEncoding(...)", "subclass nn.Module and call super().__init__().")
    buffers = dict(module.named_buffers())
    if "pe" not in buffers:
        hint = ("`pe` is a parameter, so the optimizer would train it: use self.register_buffer('pe', table)."
                if "pe" in dict(module.named_parameters()) else
                "store the table with self.register_buffer('pe', table) so it follows .to(device) and is saved.")
        fail("PositionalEncoding needs a buffer named `pe`.", hint)
    expected_table = _table_by_loops(max_len, d_model)
    expect_shape(buffers["pe"], (max_len, d_model), "the buffer pe", "(max_len, d_model), no batch dimension.")
    expect_close(buffers["pe"], expected_table, "the buffer pe", "fill it with sinusoidal_positional_encoding.")
    if sum(p.numel() for p in module.parameters()) != 0:
        fail("PositionalEncoding should have no trainable parameters.", "the table is fixed: use a buffer.")

    torch.manual_seed(0)
    x = torch.randn(2, 4, d_model)                        # (B=2, T=4, d_model)
    out = run("PositionalEncoding.forward", module, x)
    expect_shape(out, (2, 4, d_model), "the output for x of shape (2, 4, 6)", "return x + pe[:T] (same shape).")
    expected = x.double() + expected_table[:4]
    hint = first_matching_hint(out.detach(), [
        (expected_table[:4].expand(2, 4, d_model), mistake_hint("positional.x_not_added")),
        (x, "the output equals x: the encoding was not added."),
        (x.double() + expected_table[:2, None, :], mistake_hint("positional.from_batch_axis")),
    ])
    expect_close(out, expected, "PositionalEncoding(x)", hint)

    short = run("PositionalEncoding.forward", module, torch.zeros(3, 2, d_model))
    expect_close(short, expected_table[:2].expand(3, 2, d_model), "the output for T=2",
                 mistake_hint("positional.from_batch_axis"))

    with argument("PositionalEncoding.dropout"):
        with_dropout = run("PositionalEncoding", PositionalEncoding, d_model, max_len=max_len, dropout=0.5)
        with_dropout.eval()
        expect_close(with_dropout(x), expected, "the output in eval mode with dropout=0.5",
                     "use nn.Dropout, which does nothing in eval mode.")
        with_dropout.train()
        torch.manual_seed(1)
        dropped = with_dropout(torch.ones(4, 8, d_model))
        if not (dropped == 0).any():
            fail("with dropout=0.5 in train mode no value was zeroed.", mistake_hint("positional.dropout_ignored"))
    with edge_case("PositionalEncoding.too_long"):
        try:
            module(torch.zeros(1, max_len + 1, d_model))
        except ValueError:
            pass
        except Exception as error:
            fail(f"T > max_len should raise ValueError, got {type(error).__name__}: {error}",
                 "compare x.size(1) with self.pe.size(0) and raise ValueError with a clear message.")
        else:
            fail("a sequence longer than max_len should raise ValueError.",
                 "compare x.size(1) with self.pe.size(0) before adding.")
    passed("PositionalEncoding")


def check_learned_positional_embedding(LearnedPositionalEmbedding) -> None:
    max_len, d_model = 8, 4
    torch.manual_seed(0)
    module = run("LearnedPositionalEmbedding", LearnedPositionalEmbedding, max_len, d_model)
    expect_type(module, nn.Module, "LearnedPositionalEmbedding(...)")
    embedding = getattr(module, "embedding", None)
    if not isinstance(embedding, nn.Embedding):
        fail("LearnedPositionalEmbedding needs a submodule `embedding` = nn.Embedding(max_len, d_model).",
             "name it exactly `self.embedding`.")
    expect_shape(embedding.weight, (max_len, d_model), "embedding.weight",
                 "one row per position: nn.Embedding(max_len, d_model), in this order.")
    x = torch.randn(3, 5, d_model)                        # (B=3, T=5, d_model)
    try:
        out = run("LearnedPositionalEmbedding.forward", module, x)
    except CheckFailed as failure:
        if "IndexError" in str(failure) or "expected" in str(failure).lower():
            fail(str(failure), "look up the positions torch.arange(T), not x itself (x holds vectors, not ids).")
        raise
    expect_shape(out, (3, 5, d_model), "the output for x of shape (3, 5, 4)")
    table = embedding.weight.detach()
    hint = first_matching_hint(out.detach(), [
        (table[:5].expand(3, 5, d_model), "you returned the position vectors alone: add them to x."),
        (x + table[:3, None, :], "index by positions 0..T-1 (T = x.size(1)), not by the batch."),
    ])
    expect_close(out, x + table[:5], "LearnedPositionalEmbedding(x)", hint)
    out.sum().backward()
    if embedding.weight.grad is None or embedding.weight.grad[:5].abs().sum() == 0:
        fail("no gradient reached the position table.", "the result must come from self.embedding(positions).")
    if embedding.weight.grad[5:].abs().sum() != 0:
        fail("positions beyond T received gradient.", "use only the first T positions.")
    passed("LearnedPositionalEmbedding")
