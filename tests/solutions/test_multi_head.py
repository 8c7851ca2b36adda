"""Proofs for solutions/multi_head.py (notebook 04): against nn.MultiheadAttention and an explicit loop over heads."""
from __future__ import annotations

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from solutions.attention import make_causal_mask, make_padding_mask, scaled_dot_product_attention
from solutions.multi_head import MultiHeadAttention, merge_heads, split_heads
from solutions_compare import B, D_HEAD, D_MODEL, H, T, T_K, assert_matches, assert_matches_where, torch_mha_from


def make_mha(device, bias=True, seed=0):
    torch.manual_seed(seed)
    return MultiHeadAttention(D_MODEL, H, dropout=0.0, bias=bias).to(device).eval()


def inputs(device, t_k=T, seed=1):
    g = torch.Generator().manual_seed(seed)
    query = torch.randn(B, T, D_MODEL, generator=g).to(device)
    memory = torch.randn(B, t_k, D_MODEL, generator=g).to(device)
    return query, memory


def key_ids(t_k):
    ids = torch.ones(B, t_k, dtype=torch.long)
    ids[0, t_k - 2:] = 0                       # both rows have some padding, different amounts
    ids[1, t_k - 3:] = 0
    return ids


def run_torch(mha, query, key, keep_pad=None, keep_attn=None):
    """nn.MultiheadAttention with our keep-masks turned into its blocked-masks (True = blocked)."""
    theirs = torch_mha_from(mha, H)
    out, weights = theirs(query, key, key,
                          key_padding_mask=None if keep_pad is None else ~keep_pad,
                          attn_mask=None if keep_attn is None else ~keep_attn,
                          need_weights=True, average_attn_weights=False)
    return out, weights


def loop_over_heads(mha, query, key, value, mask=None):
    """The definition: each head gets its own slice of the projections, attends, and the results are concatenated."""
    heads = []
    for h in range(H):
        rows = slice(h * D_HEAD, (h + 1) * D_HEAD)

        def project(linear, x):
            bias = None if linear.bias is None else linear.bias[rows]
            return torch.nn.functional.linear(x, linear.weight[rows], bias)  # (B, T, d_head)

        out, _ = scaled_dot_product_attention(project(mha.w_q, query), project(mha.w_k, key),
                                              project(mha.w_v, value), mask)
        heads.append(out)
    return mha.w_o(torch.cat(heads, dim=-1))


class HeadsSplitWrongly(MultiHeadAttention):
    """Broken copy: takes every H-th feature for a head instead of a contiguous block."""

    def forward(self, query, key, value, mask=None):
        def split(x):
            B_, T_, _ = x.shape
            return x.view(B_, T_, D_HEAD, H).permute(0, 3, 1, 2)

        q, k, v = split(self.w_q(query)), split(self.w_k(key)), split(self.w_v(value))
        out, weights = scaled_dot_product_attention(q, k, v, mask)
        return self.w_o(merge_heads(out)), weights


def test_split_and_merge_heads_are_inverse():
    x = torch.randn(B, T, D_MODEL)
    heads = split_heads(x, H)
    assert heads.shape == (B, H, T, D_HEAD)
    assert torch.equal(heads[:, 1], x[..., D_HEAD:2 * D_HEAD])
    assert torch.equal(merge_heads(heads), x)


def test_indivisible_d_model_raises():
    with pytest.raises(ValueError, match="divisible"):
        MultiHeadAttention(10, 3)


def test_submodules_follow_the_contract():
    mha = MultiHeadAttention(D_MODEL, H, bias=False)
    for name in ("w_q", "w_k", "w_v", "w_o"):
        linear = getattr(mha, name)
        assert isinstance(linear, torch.nn.Linear) and linear.weight.shape == (D_MODEL, D_MODEL)
        assert linear.bias is None


@pytest.mark.parametrize("bias", [True, False])
def test_self_attention_matches_torch(device, bias):
    mha = make_mha(device, bias)
    x, _ = inputs(device)
    causal = make_causal_mask(T, device)
    out, weights = mha(x, x, x, causal)
    assert out.shape == (B, T, D_MODEL) and weights.shape == (B, H, T, T)
    ref_out, ref_weights = run_torch(mha, x, x, keep_attn=causal)
    assert_matches(out, ref_out, device, "self-attention output")
    assert_matches(weights, ref_weights, device, "self-attention weights")


@pytest.mark.parametrize("bias", [True, False])
def test_cross_attention_with_padding_matches_torch(device, bias):
    mha = make_mha(device, bias)
    query, memory = inputs(device, t_k=T_K)
    keep = make_padding_mask(key_ids(T_K)).to(device)           # (B, 1, 1, T_K)
    out, weights = mha(query, memory, memory, keep)
    assert out.shape == (B, T, D_MODEL) and weights.shape == (B, H, T, T_K)
    ref_out, ref_weights = run_torch(mha, query, memory, keep_pad=keep[:, 0, 0])
    assert_matches(out, ref_out, device, "cross-attention output")
    assert_matches(weights, ref_weights, device, "cross-attention weights")


def test_self_attention_with_padding_matches_torch_at_real_positions(device):
    mha = make_mha(device)
    x, _ = inputs(device)
    ids = key_ids(T)
    keep = make_padding_mask(ids).to(device)
    out, _ = mha(x, x, x, keep)
    ref_out, _ = run_torch(mha, x, x, keep_pad=keep[:, 0, 0])
    assert_matches_where(out, ref_out, (ids != 0).to(device), device)


def test_equals_explicit_loop_over_heads(device):
    mha = make_mha(device)
    query, memory = inputs(device, t_k=T_K)
    keep = make_padding_mask(key_ids(T_K)).to(device)[:, 0]   # (B, 1, T_K) for the 3-D per-head call
    out, _ = mha(query, memory, memory, keep[:, None])
    assert_matches(out, loop_over_heads(mha, query, memory, memory, keep), device)


def test_teeth_wrong_head_split_is_rejected(device):
    mha = make_mha(device)
    broken = HeadsSplitWrongly(D_MODEL, H).to(device).eval()
    broken.load_state_dict(mha.state_dict())
    x, _ = inputs(device)
    with pytest.raises(AssertionError):
        assert_matches(broken(x, x, x)[0], run_torch(mha, x, x)[0], device)


def test_dropout_is_on_the_weights_and_off_in_eval(device):
    torch.manual_seed(0)
    mha = MultiHeadAttention(D_MODEL, H, dropout=0.5).to(device)
    x, _ = inputs(device)
    mha.train()
    assert not torch.allclose(mha(x, x, x)[0], mha(x, x, x)[0])
    mha.eval()
    assert torch.equal(mha(x, x, x)[0], mha(x, x, x)[0])


@settings(max_examples=25, deadline=None)
@given(perm_seed=st.integers(0, 10_000))
def test_permutation_equivariance_without_positions(perm_seed):
    """Self-attention has no notion of order: permuting the tokens permutes the outputs the same way."""
    mha = make_mha("cpu")
    x, _ = inputs("cpu")
    perm = torch.randperm(T, generator=torch.Generator().manual_seed(perm_seed))
    out, _ = mha(x, x, x)
    out_perm, _ = mha(x[:, perm], x[:, perm], x[:, perm])
    assert_matches(out_perm, out[:, perm], "cpu")
