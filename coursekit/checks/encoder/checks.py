"""Public self-checks for notebook 05 (feed-forward, encoder block, encoder).

The feed-forward is recomputed in NumPy. The block and the stack are checked for their wiring: the expected output
is composed here from your module's own submodules (attention, feed-forward, norms, embedding), in the order the
notebook describes, so these checks point at how the pieces are connected. Shapes: B batch, T length, d_model width.
"""
from __future__ import annotations

import contextlib

import numpy as np
import torch
from torch import nn

from coursekit.checks.toolkit import (expect_close, expect_shape, expect_stack_submodules, expect_too_long,
                                     expect_type, fail, first_matching_hint, mistake_hint, norm_swapped_hint,
                                     padding_mask, passed, randomize, require_submodule, run, stack_variants,
                                     to_tensor, uses_parts)
from coursekit.criteria import argument
from coursekit.tolerance import CPU_FLOAT32

_D_MODEL, _H, _D_FF = 6, 3, 10
_B, _T = 2, 4
_P = 0.5  # the dropout the checks of the argument dropout use


def expect_dropout_acts(module: nn.Module, name: str, forward, hint: str) -> None:
    """`forward()` (a call of `module` or of one of its submodules, made with dropout > 0) gives another output in
    training mode than in eval mode: the dropout acts there. `module` is left in eval mode."""
    def first(out):
        return out[0] if isinstance(out, tuple) else out                              # attention: (output, weights)

    with torch.no_grad():
        module.eval()
        calm = to_tensor(first(run(f"{name} in eval mode", forward)), f"the output of {name}")
        module.train()
        torch.manual_seed(0)
        try:
            noisy = to_tensor(first(run(f"{name} in training mode", forward)), f"the output of {name}")
        finally:
            module.eval()
    if noisy.shape == calm.shape and torch.allclose(noisy, calm, **CPU_FLOAT32):
        fail(f"{name} gives the same output in training mode as in eval mode: its dropout does not act.", hint)


# -------------------------------------------------------------------------------------------- feed-forward

def check_positionwise_feed_forward(PositionwiseFeedForward) -> None:
    d_model, d_ff = 5, 7
    ffn = run("PositionwiseFeedForward", PositionwiseFeedForward, d_model, d_ff)
    expect_type(ffn, nn.Module, f"PositionwiseFeedForward({d_model}, {d_ff})", "subclass nn.Module.")
    for name, (n_in, n_out), sizes in (("linear1", (d_model, d_ff), "d_model, d_ff"),
                                       ("linear2", (d_ff, d_model), "d_ff, d_model")):
        linear = require_submodule(ffn, "PositionwiseFeedForward", name, nn.Linear,
                                   f"in __init__ write self.{name} = nn.Linear({sizes}).")
        if (linear.in_features, linear.out_features) != (n_in, n_out):
            fail(f"`{name}` should map {n_in} -> {n_out} features (d_model={d_model}, d_ff={d_ff}), got "
                 f"{linear.in_features} -> {linear.out_features}.")
    ffn.eval()
    randomize(ffn, seed=5)
    x = torch.randn(2, 3, d_model, generator=torch.Generator().manual_seed(50))       # (B=2, T=3, d_model)
    with torch.no_grad():
        out = run("PositionwiseFeedForward.forward", ffn, x)
    expect_type(out, torch.Tensor, "the feed-forward output")
    expect_shape(out, (2, 3, d_model), "the feed-forward output", "linear2 brings the d_ff features back to d_model.")
    w1, b1 = (p.detach().double().numpy() for p in (ffn.linear1.weight, ffn.linear1.bias))
    w2, b2 = (p.detach().double().numpy() for p in (ffn.linear2.weight, ffn.linear2.bias))
    xs = x.double().numpy()
    hidden = xs @ w1.T + b1                                                           # (B, T, d_ff)
    expected = np.maximum(hidden, 0) @ w2.T + b2                                      # (B, T, d_model)
    hint = first_matching_hint(out, [
        (hidden @ w2.T + b2, mistake_hint("encoder.no_relu")),
        (np.maximum(hidden @ w2.T + b2, 0), mistake_hint("encoder.relu_after_linear2")),
    ])
    expect_close(out, expected, "the feed-forward output", hint)
    with argument("PositionwiseFeedForward.dropout"):
        name = f"PositionwiseFeedForward({d_model}, {d_ff}, dropout={_P})"
        dropped = run("PositionwiseFeedForward", PositionwiseFeedForward, d_model, d_ff, dropout=_P)
        randomize(dropped, seed=5)
        dropped.eval()
        with torch.no_grad():
            expect_close(run(f"{name}.forward", dropped, x), expected, f"the output of {name} in eval mode",
                         "dropout does nothing in eval mode: use nn.Dropout (or F.dropout(..., "
                         "training=self.training)).")
        expect_dropout_acts(dropped, name, lambda: dropped(x),
                            "self.dropout = nn.Dropout(dropout), applied to the hidden layer: "
                            "linear2(dropout(relu(linear1(x)))).")
    passed("PositionwiseFeedForward", "(dropout too)")


# ------------------------------------------------------------------------------------------------ encoder block

def _block_variants(block: nn.Module, x, mask, norm_first: bool) -> dict:
    """The right output and known wrong ones, composed from the block's own submodules."""
    attn = lambda h, m=mask: block.self_attn(h, h, h, m)[0]                           # noqa: E731
    ffn, n1, n2 = block.ffn, block.norm1, block.norm2

    def post(x, attn=attn, n1=n1, n2=n2, res_attn=True, res_ffn=True):
        x = n1((x if res_attn else 0) + attn(x))
        return n2((x if res_ffn else 0) + ffn(x))

    def pre(x, attn=attn, n1=n1, n2=n2, res_attn=True, res_ffn=True):
        x = (x if res_attn else 0) + attn(n1(x))
        return (x if res_ffn else 0) + ffn(n2(x))

    right, other = (pre, post) if norm_first else (post, pre)
    return {
        "right": right(x),
        norm_swapped_hint(norm_first): other(x),
        mistake_hint("encoder.missing_residual_attn"): right(x, res_attn=False),
        mistake_hint("encoder.missing_residual_ffn"): right(x, res_ffn=False),
        "the mask is not passed to self-attention: call self.self_attn(x, x, x, mask).":
            right(x, attn=lambda h: block.self_attn(h, h, h, None)[0]),
        "norm1 and norm2 are swapped: norm1 goes with self-attention, norm2 with the feed-forward.":
            right(x, n1=n2, n2=n1),
    }


@uses_parts("EncoderBlock")
def check_encoder_block(EncoderBlock) -> None:
    generator = torch.Generator().manual_seed(60)
    x = torch.randn(_B, _T, _D_MODEL, generator=generator)                            # (2, 4, 6)
    mask = padding_mask(torch.tensor([[5, 6, 7, 8], [5, 6, 0, 0]]))                   # (2, 1, 1, 4)
    for norm_first in (False, True):   # post-norm, the default, then the argument norm_first
        with argument("EncoderBlock.norm_first") if norm_first else contextlib.nullcontext():
            _try_block(EncoderBlock, x, mask, norm_first)
    with argument("EncoderBlock.dropout"):
        name = f"EncoderBlock({_D_MODEL}, {_H}, {_D_FF}, dropout={_P})"
        block = _try_block(EncoderBlock, x, mask, False, dropout=_P)                # eval mode: no dropout
        hint = ("pass dropout on to self_attn = MultiHeadAttention(d_model, num_heads, dropout) and to "
                "ffn = PositionwiseFeedForward(d_model, d_ff, dropout).")
        expect_dropout_acts(block, name, lambda: block(x, mask), hint)
        expect_dropout_acts(block, f"{name}.self_attn", lambda: block.self_attn(x, x, x, mask), hint)
        expect_dropout_acts(block, f"{name}.ffn", lambda: block.ffn(x), hint)
    passed("EncoderBlock", "(post-norm and pre-norm, dropout)")


def _try_block(EncoderBlock, x, mask, norm_first: bool, **kwargs) -> nn.Module:
    """An EncoderBlock (norm_first as given, the default when False) in eval mode, its output composed from its
    own submodules; returns the block."""
    extra = {"norm_first": True} if norm_first else {}
    shown = "".join(f", {k}={v}" for k, v in {**extra, **kwargs}.items())
    name = f"EncoderBlock({_D_MODEL}, {_H}, {_D_FF}{shown})"
    block = run("EncoderBlock", EncoderBlock, _D_MODEL, _H, _D_FF, **extra, **kwargs)
    expect_type(block, nn.Module, name, "subclass nn.Module.")
    for sub in ("self_attn", "ffn"):
        require_submodule(block, "EncoderBlock", sub)
    for sub in ("norm1", "norm2"):
        require_submodule(block, "EncoderBlock", sub, nn.LayerNorm, f"self.{sub} = nn.LayerNorm(d_model)")
    block.eval()
    randomize(block, seed=6)
    with torch.no_grad():
        out = run(f"{name}.forward", block, x, mask)
        expect_type(out, torch.Tensor, f"the output of {name}",
                    "return only x; self.self_attn(...) returns (output, weights), keep [0].")
        expect_shape(out, (_B, _T, _D_MODEL), f"the output of {name}")
        variants = _block_variants(block, x, mask, norm_first)
    right = variants.pop("right")
    hint = first_matching_hint(out, [(wrong, hint) for hint, wrong in variants.items()])
    expect_close(out, right, f"the output of {name} (with a padding mask)"
                 + (", eval mode" if kwargs.get("dropout") else ""), hint)
    return block


# ------------------------------------------------------------------------------------------------------ encoder

@uses_parts("Encoder")
def check_encoder(Encoder) -> None:
    vocab_size = 11
    ids = torch.tensor([[4, 9, 5, 10, 7], [6, 8, 4, 0, 0]])                           # (B=2, T=5), 0 = <pad>
    mask = padding_mask(ids)                                                          # (2, 1, 1, 5)
    encoder = _try_encoder(Encoder, ids, mask, False)                                  # post-norm, the default
    expect_too_long(encoder, "Encoder(max_len=16)", 16,
                    lambda T: (torch.randint(1, vocab_size, (2, T), generator=torch.Generator().manual_seed(T)),),
                    criterion="Encoder.too_long")
    with argument("Encoder.norm_first"):
        _try_encoder(Encoder, ids, mask, True)
    with argument("Encoder.dropout"):
        name = f"Encoder(dropout={_P})"
        encoder = _try_encoder(Encoder, ids, mask, False, dropout=_P)                  # eval mode: no dropout
        x = torch.randn(2, 5, _D_MODEL, generator=torch.Generator().manual_seed(70))
        expect_dropout_acts(encoder, name, lambda: encoder(ids, mask),
                            "pass dropout on to PositionalEncoding(d_model, max_len, dropout) and to every block.")
        expect_dropout_acts(encoder, f"{name}.pos_encoding", lambda: encoder.pos_encoding(x),
                            "self.pos_encoding = PositionalEncoding(d_model, max_len, dropout).")
        for i, layer in enumerate(encoder.layers):
            expect_dropout_acts(encoder, f"{name}.layers[{i}]", lambda layer=layer: layer(x, mask),
                                "build every block as EncoderBlock(d_model, num_heads, d_ff, dropout, norm_first).")
    passed("Encoder", "(post-norm and pre-norm stacks, dropout)")


def _try_encoder(Encoder, ids, mask, norm_first: bool, **kwargs) -> nn.Module:
    """An Encoder (vocab 11, 2 layers, max_len 16; norm_first as given, the default when False) in eval mode, its
    output composed from its own submodules; returns it."""
    vocab_size, num_layers = 11, 2
    extra = {"norm_first": True} if norm_first else {}
    name = "Encoder(" + ", ".join(f"{k}={v}" for k, v in {"norm_first": norm_first, **kwargs}.items()) + ")"
    encoder = run("Encoder", Encoder, vocab_size, _D_MODEL, _H, _D_FF, num_layers, max_len=16, **extra, **kwargs)
    expect_type(encoder, nn.Module, name, "subclass nn.Module.")
    expect_stack_submodules(encoder, "Encoder", num_layers, "EncoderBlock", norm_first)
    encoder.eval()
    randomize(encoder, seed=7)
    with torch.no_grad():
        out = run(f"{name}.forward", encoder, ids, mask)
        expect_type(out, torch.Tensor, f"the output of {name}")
        expect_shape(out, (2, 5, _D_MODEL), f"the output of {name}")

        def run_layers(x, use_mask):
            for layer in encoder.layers:
                x = layer(x, mask if use_mask else None)
            return x

        variants = stack_variants(encoder, ids, run_layers, _D_MODEL)
    right = variants.pop("right")
    hint = first_matching_hint(out, [(wrong, hint) for hint, wrong in variants.items()])
    expect_close(out, right, f"the output of {name} (ids with padding, and their padding mask)", hint)
    return encoder
