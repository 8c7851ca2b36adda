"""Proofs for solutions/encoder.py (notebook 05): against nn.TransformerEncoderLayer and a hand-built stack."""
from __future__ import annotations

import math

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from solutions.attention import make_padding_mask
from solutions.encoder import Encoder, EncoderBlock, PositionwiseFeedForward
from solutions.positional import sinusoidal_positional_encoding
from solutions_compare import (
    B, D_FF, D_MODEL, H, T, assert_matches, assert_matches_where, random_ids, torch_encoder_layer_from,
)

VOCAB = 17
NUM_LAYERS = 2


def padded_ids(seed=0):
    ids = random_ids(B, T, VOCAB, torch.Generator().manual_seed(seed))
    ids[1, 3:] = 0                                      # second sequence: 3 tokens + 2 padding
    return ids


def make_block(device, norm_first, seed=0):
    torch.manual_seed(seed)
    block = EncoderBlock(D_MODEL, H, D_FF, dropout=0.0, norm_first=norm_first).to(device).eval()
    with torch.no_grad():  # non-trivial LayerNorm affine parameters, so swapped norms cannot hide
        for norm in (block.norm1, block.norm2):
            norm.weight.uniform_(0.5, 1.5)
            norm.bias.uniform_(-0.5, 0.5)
    return block


def make_encoder(device, norm_first, seed=0):
    torch.manual_seed(seed)
    return Encoder(VOCAB, D_MODEL, H, D_FF, NUM_LAYERS, max_len=16, norm_first=norm_first).to(device).eval()


def test_feed_forward(device):
    torch.manual_seed(0)
    ffn = PositionwiseFeedForward(D_MODEL, D_FF).to(device)
    assert ffn.linear1.weight.shape == (D_FF, D_MODEL) and ffn.linear2.weight.shape == (D_MODEL, D_FF)
    x = torch.randn(B, T, D_MODEL, device=device)
    assert_matches(ffn(x), ffn.linear2(torch.relu(ffn.linear1(x))), device)


@pytest.mark.parametrize("norm_first", [False, True], ids=["post-norm", "pre-norm"])
def test_block_matches_torch_layer(device, norm_first):
    block = make_block(device, norm_first)
    theirs = torch_encoder_layer_from(block, H, norm_first)
    x = torch.randn(B, T, D_MODEL, device=device)
    assert_matches(block(x), theirs(x), device, "encoder block")


@pytest.mark.parametrize("norm_first", [False, True], ids=["post-norm", "pre-norm"])
def test_block_with_padding_matches_torch_at_real_positions(device, norm_first):
    block = make_block(device, norm_first)
    theirs = torch_encoder_layer_from(block, H, norm_first)
    ids = padded_ids().to(device)
    x = torch.randn(B, T, D_MODEL, device=device)
    ours = block(x, make_padding_mask(ids))
    ref = theirs(x, src_key_padding_mask=ids == 0)     # PyTorch's fast path may zero the padded rows
    assert_matches_where(ours, ref, ids != 0, device, "encoder block (padded)")


@pytest.mark.parametrize("norm_first", [False, True], ids=["post-norm", "pre-norm"])
def test_teeth_swapped_norm_placement_is_rejected(device, norm_first):
    block = make_block(device, norm_first)
    theirs = torch_encoder_layer_from(block, H, not norm_first)
    x = torch.randn(B, T, D_MODEL, device=device)
    with pytest.raises(AssertionError):
        assert_matches(block(x), theirs(x), device)


@pytest.mark.parametrize("norm_first", [False, True], ids=["post-norm", "pre-norm"])
def test_encoder_equals_hand_composition(device, norm_first):
    encoder = make_encoder(device, norm_first)
    assert isinstance(encoder.norm, torch.nn.LayerNorm if norm_first else torch.nn.Identity)
    ids = padded_ids().to(device)
    keep = make_padding_mask(ids)
    # By hand: embedding table lookup * sqrt(d_model) + sinusoids, then PyTorch's layers, then the final norm.
    x = encoder.embedding.weight[ids] * math.sqrt(D_MODEL) + sinusoidal_positional_encoding(16, D_MODEL).to(device)[:T]
    for block in encoder.layers:
        x = torch_encoder_layer_from(block, H, norm_first)(x, src_key_padding_mask=ids == 0)
    if norm_first:
        x = torch.nn.functional.layer_norm(x, (D_MODEL,), encoder.norm.weight, encoder.norm.bias)
    out = encoder(ids, keep)
    assert out.shape == (B, T, D_MODEL)
    assert_matches_where(out, x, ids != 0, device, "encoder stack")


@settings(max_examples=25, deadline=None)
@given(extra=st.integers(1, 4), norm_first=st.booleans(), seed=st.integers(0, 1000))
def test_appending_padding_leaves_real_positions_unchanged(extra, norm_first, seed):
    encoder = make_encoder("cpu", norm_first)
    ids = padded_ids(seed)
    longer = torch.cat([ids, torch.zeros(B, extra, dtype=torch.long)], dim=1)  # (B, T + extra)
    out = encoder(ids, make_padding_mask(ids))
    out_longer = encoder(longer, make_padding_mask(longer))[:, :T]
    assert_matches_where(out_longer, out, ids != 0, "cpu")
