"""Proofs for solutions/attention.py (notebook 03): against torch.nn.functional.scaled_dot_product_attention."""
from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F

from solutions.attention import make_causal_mask, make_padding_mask, scaled_dot_product_attention
from solutions_compare import B, D_HEAD, H, T, T_K, assert_matches


def torch_attention(q, k, v, keep=None):
    """PyTorch's kernel; its boolean mask also means True = may attend, so it is passed as is."""
    return F.scaled_dot_product_attention(q, k, v, attn_mask=keep)


def torch_weights(q, k, keep=None):
    """Attention weights the textbook way, with -inf for blocked scores (only for rows with some key allowed)."""
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.size(-1))
    if keep is not None:
        scores = scores.masked_fill(~keep, float("-inf"))
    return scores.softmax(dim=-1)


def attention_without_scaling(q, k, v, mask=None):
    """Broken copy #1: forgets 1/sqrt(d_k)."""
    return scaled_dot_product_attention(q * math.sqrt(q.size(-1)), k, v, mask)


def attention_inverted_mask(q, k, v, mask=None):
    """Broken copy #2: treats True as blocked."""
    return scaled_dot_product_attention(q, k, v, None if mask is None else ~mask)


def qkv(shape_prefix, device, seed=0, d_v=6):
    g = torch.Generator().manual_seed(seed)
    q = torch.randn(*shape_prefix, T, D_HEAD, generator=g)
    k = torch.randn(*shape_prefix, T_K, D_HEAD, generator=g)
    v = torch.randn(*shape_prefix, T_K, d_v, generator=g)
    return q.to(device), k.to(device), v.to(device)


def padding_keep(device):
    ids = torch.ones(B, T_K, dtype=torch.long)
    ids[1, 4:] = 0                           # second sequence: 4 real keys, 3 padding
    return make_padding_mask(ids).to(device)  # (B, 1, 1, T_K)


def causal_keep(device):
    # causal over keys when T_q != T_k: query i may see keys j <= i + (T_K - T)
    return make_causal_mask(T_K, device)[T_K - T:]  # (T, T_K)


def mask_case(name, device):
    if name == "none":
        return None
    if name == "padding":
        return padding_keep(device)
    if name == "causal":
        return causal_keep(device)
    return padding_keep(device) & causal_keep(device)


MASKS = ["none", "padding", "causal", "padding+causal"]


def test_make_padding_mask():
    ids = torch.tensor([[5, 6, 0], [7, 0, 0]])
    mask = make_padding_mask(ids)
    assert mask.dtype == torch.bool and mask.shape == (2, 1, 1, 3)
    assert mask[:, 0, 0].tolist() == [[True, True, False], [True, False, False]]
    assert make_padding_mask(ids, pad_id=7)[1, 0, 0].tolist() == [False, True, True]


def test_make_causal_mask(device):
    mask = make_causal_mask(4, device=device)
    assert mask.dtype == torch.bool and mask.device.type == device.type
    assert torch.equal(mask.cpu(), torch.ones(4, 4).tril().bool())


@pytest.mark.parametrize("mask_name", MASKS)
@pytest.mark.parametrize("batch_shape", [(B,), (B, H)], ids=["3d", "4d"])
def test_matches_torch(device, batch_shape, mask_name):
    q, k, v = qkv(batch_shape, device)
    keep = mask_case(mask_name, device)
    if keep is not None and len(batch_shape) == 1 and keep.dim() == 4:
        keep = keep[:, 0]                     # (B, 1, T_K) for 3-D inputs
    out, weights = scaled_dot_product_attention(q, k, v, keep)
    assert out.shape == (*batch_shape, T, 6) and weights.shape == (*batch_shape, T, T_K)
    assert_matches(out, torch_attention(q, k, v, keep), device, "attention output")
    assert_matches(weights, torch_weights(q, k, keep), device, "attention weights")
    assert_matches(weights.sum(-1), torch.ones_like(weights.sum(-1)), device, "row sums")
    if keep is not None:
        assert torch.all(weights.masked_select(~keep.expand_as(weights)) == 0)


@pytest.mark.parametrize("broken", [attention_without_scaling, attention_inverted_mask], ids=["no-scale", "inverted"])
def test_teeth_broken_attention_is_rejected(device, broken):
    q, k, v = qkv((B, H), device)
    keep = mask_case("padding+causal", device)
    out, _ = broken(q, k, v, keep)
    with pytest.raises(AssertionError):
        assert_matches(out, torch_attention(q, k, v, keep), device)


def test_fully_blocked_row_is_finite(device):
    q, k, v = qkv((B, H), device)
    keep = torch.ones(T, T_K, dtype=torch.bool, device=device)
    keep[2] = False
    out, weights = scaled_dot_product_attention(q, k, v, keep)
    assert torch.isfinite(out).all() and torch.isfinite(weights).all()


def test_works_in_float64_and_keeps_dtype(device):
    q, k, v = (t.double() for t in qkv((B,), device))
    out, weights = scaled_dot_product_attention(q, k, v)
    assert out.dtype == weights.dtype == torch.float64
    assert_matches(out, torch_attention(q, k, v), device)
