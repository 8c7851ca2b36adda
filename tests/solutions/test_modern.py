"""Proofs for solutions/modern.py (notebook 09) against independent implementations: torch.nn.RMSNorm, rotation
as multiplication by complex numbers, F.scaled_dot_product_attention(..., enable_gqa=True), 04's
MultiHeadAttention, and the models written out by hand."""
from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F
from hypothesis import given, settings
from hypothesis import strategies as st
from torch import nn

from solutions.attention import make_causal_mask, make_padding_mask
from solutions.encoder import PositionwiseFeedForward
from solutions.modern import (
    GroupedQueryAttention, LlamaBlock, ModernGPT, RMSNorm, SwiGLU, apply_rotary, rotary_cos_sin,
)
from solutions.multi_head import MultiHeadAttention
from solutions_compare import assert_matches, random_ids

B, T, H, D_HEAD, D_FF, VOCAB = 2, 6, 4, 6, 20, 17
D_MODEL = H * D_HEAD  # 24
ROTARY = {"atol": 1e-4, "rtol": 1e-4}  # the contract's tolerance for rotary outputs


def randn(*shape, seed, device):
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed)).to(device)


# ------------------------------------------------------------------------------------------------------ RMSNorm
@pytest.mark.parametrize("eps", [1e-6, 0.5])
def test_rms_norm_equals_torch(device, eps):
    ours, theirs = RMSNorm(D_MODEL, eps=eps).to(device), nn.RMSNorm(D_MODEL, eps=eps).to(device)
    assert torch.equal(ours.weight.detach().cpu(), torch.ones(D_MODEL))
    with torch.no_grad():
        ours.weight.uniform_(0.5, 1.5)
        theirs.weight.copy_(ours.weight)
    x = randn(B, T, D_MODEL, seed=1, device=device) * 0.3       # small values: eps = 0.5 matters
    assert_matches(ours(x), theirs(x), device, "RMSNorm")
    assert [name for name, _ in ours.named_parameters()] == ["weight"]


def test_rms_norm_is_scale_invariant_and_keeps_the_mean(device):
    norm = RMSNorm(D_MODEL, eps=0.0).to(device)
    x = randn(B, T, D_MODEL, seed=2, device=device) + 3.0        # a large mean that LayerNorm would remove
    assert_matches(norm(x), norm(7.0 * x), device)
    rms = norm(x).pow(2).mean(-1).sqrt()
    assert_matches(rms, torch.ones_like(rms), device)
    assert norm(x).mean(-1).abs().min() > 0.5, "RMSNorm does not centre"


# -------------------------------------------------------------------------------------------------- rotary angles
def test_rotary_tables_entry_by_entry():
    max_len, d_head, base = 9, 6, 500.0
    cos, sin = rotary_cos_sin(max_len, d_head, base)
    assert cos.shape == sin.shape == (max_len, d_head // 2) and cos.dtype == sin.dtype == torch.float32
    for p in range(max_len):
        for i in range(d_head // 2):
            angle = p / base ** (2 * i / d_head)
            assert math.isclose(cos[p, i].item(), math.cos(angle), abs_tol=1e-6)
            assert math.isclose(sin[p, i].item(), math.sin(angle), abs_tol=1e-6)
    default_cos, _ = rotary_cos_sin(max_len, d_head)
    assert math.isclose(default_cos[5, 1].item(), math.cos(5 / 10000 ** (2 / 6)), abs_tol=1e-6)


@pytest.mark.parametrize("d_head", [5, 7])
def test_rotary_tables_refuse_an_odd_width(d_head):
    with pytest.raises(ValueError, match="even"):
        rotary_cos_sin(8, d_head)


def _rotate_as_complex(x, max_len_base=10000.0):
    """The RoFormer rotation as multiplication of complex numbers x[2i] + i x[2i+1] by exp(i angle)."""
    T, d_head = x.shape[-2:]
    pairs = torch.view_as_complex(x.double().reshape(*x.shape[:-1], d_head // 2, 2).contiguous())
    p = torch.arange(T, dtype=torch.float64)[:, None]
    i = torch.arange(d_head // 2, dtype=torch.float64)
    turn = torch.polar(torch.ones(T, d_head // 2, dtype=torch.float64), p * max_len_base ** (-2 * i / d_head))
    return torch.view_as_real(pairs * turn.to(pairs.device)).reshape(x.shape)


@pytest.mark.parametrize("base", [10000.0, 100.0])
def test_apply_rotary_is_multiplication_by_complex_numbers(device, base):
    x = randn(B, H, T, D_HEAD, seed=3, device=device)
    cos, sin = rotary_cos_sin(T, D_HEAD, base)
    got = apply_rotary(x, cos.to(device), sin.to(device))
    torch.testing.assert_close(got.double(), _rotate_as_complex(x, base), **ROTARY)
    # any number of leading axes
    torch.testing.assert_close(apply_rotary(x[0, 0], cos.to(device), sin.to(device)), got[0, 0])


def test_apply_rotary_keeps_lengths_and_leaves_position_zero_alone(device):
    x = randn(3, T, D_HEAD, seed=4, device=device)
    cos, sin = (t.to(device) for t in rotary_cos_sin(T, D_HEAD))
    out = apply_rotary(x, cos, sin)
    assert torch.equal(out[:, 0], x[:, 0])
    pair_lengths = lambda t: t.reshape(3, T, D_HEAD // 2, 2).norm(dim=-1)  # noqa: E731
    assert_matches(pair_lengths(out), pair_lengths(x), device)


@settings(max_examples=25, deadline=None)
@given(m=st.integers(0, 40), n=st.integers(0, 40), shift=st.integers(1, 40))
def test_rotated_scores_depend_on_the_offset_only(m, n, shift):
    """q_m . k_n after rotation equals q_{m+s} . k_{n+s}: the score sees m - n, not m and n."""
    q, k = torch.randn(2, D_HEAD, generator=torch.Generator().manual_seed(m * 97 + n)).double()
    cos, sin = (t.double() for t in rotary_cos_sin(100, D_HEAD))

    def score(a, b):
        qs = apply_rotary(q.expand(100, D_HEAD), cos, sin)[a]
        ks = apply_rotary(k.expand(100, D_HEAD), cos, sin)[b]
        return float(qs @ ks)

    assert math.isclose(score(m, n), score(m + shift, n + shift), rel_tol=1e-6, abs_tol=1e-6)  # float32 tables


def test_apply_rotary_refuses_tables_of_the_wrong_length():
    cos, sin = rotary_cos_sin(T + 1, D_HEAD)
    with pytest.raises(ValueError, match="cos and sin"):
        apply_rotary(torch.randn(T, D_HEAD), cos, sin)


# --------------------------------------------------------------------------------------------------------- SwiGLU
def test_swiglu_is_the_gated_formula(device):
    torch.manual_seed(0)
    ffn = SwiGLU(D_MODEL, D_FF).to(device)
    assert {n: tuple(p.shape) for n, p in ffn.named_parameters()} == {
        "w_gate.weight": (D_FF, D_MODEL), "w_up.weight": (D_FF, D_MODEL), "w_down.weight": (D_MODEL, D_FF)}
    x = randn(B, T, D_MODEL, seed=5, device=device)
    gate, up = x @ ffn.w_gate.weight.T, x @ ffn.w_up.weight.T
    assert_matches(ffn(x), (gate * torch.sigmoid(gate) * up) @ ffn.w_down.weight.T, device)


def test_swiglu_width_344_matches_the_relu_feed_forward_of_08():
    """2/3 of 08's d_ff = 512 is 341.3, rounded up to a multiple of 8: 344. Three matrices of 128 x 344 hold as many
    numbers as 08's two 128 x 512 matrices with their biases, within 0.3%."""
    count = lambda m: sum(p.numel() for p in m.parameters())  # noqa: E731
    relu, swiglu = count(PositionwiseFeedForward(128, 512)), count(SwiGLU(128, 344))
    assert (relu, swiglu) == (131_712, 132_096)
    assert abs(swiglu - relu) / relu < 0.003
    assert 344 == 8 * math.ceil(2 / 3 * 512 / 8)


# ------------------------------------------------------------------------------------------ grouped-query attention
def make_gqa(device, num_kv_heads, seed=0, base=10000.0, max_len=16):
    torch.manual_seed(seed)
    return GroupedQueryAttention(D_MODEL, H, num_kv_heads, max_len=max_len, rope_base=base).to(device).eval()


def torch_gqa(attn, x, mask, base):
    """The same attention through F.scaled_dot_product_attention(enable_gqa=True) (its bool mask: True = attend)."""
    Bx, Tx, _ = x.shape
    kv = attn.w_k.out_features // D_HEAD
    q = attn.w_q(x).view(Bx, Tx, H, D_HEAD).transpose(1, 2)
    k = attn.w_k(x).view(Bx, Tx, kv, D_HEAD).transpose(1, 2)
    v = attn.w_v(x).view(Bx, Tx, kv, D_HEAD).transpose(1, 2)
    q, k = _rotate_as_complex(q, base).float(), _rotate_as_complex(k, base).float()
    out = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, enable_gqa=True)
    return attn.w_o(out.transpose(1, 2).reshape(Bx, Tx, D_MODEL))


def masks(device):
    ids = torch.ones(B, T, dtype=torch.long)
    ids[1, T - 2:] = 0
    padding = make_padding_mask(ids.to(device))                                   # (B, 1, 1, T)
    return {"none": None, "causal": make_causal_mask(T, device), "causal+padding": padding & make_causal_mask(T, device)}


@pytest.mark.parametrize("num_kv_heads", [1, 2, H])
@pytest.mark.parametrize("mask_name", ["none", "causal", "causal+padding"])
@pytest.mark.parametrize("base", [10000.0, 50.0])
def test_gqa_equals_torch_sdpa_with_enable_gqa(device, num_kv_heads, mask_name, base):
    attn = make_gqa(device, num_kv_heads, base=base)
    assert attn.w_k.weight.shape == attn.w_v.weight.shape == (num_kv_heads * D_HEAD, D_MODEL)
    x = randn(B, T, D_MODEL, seed=6, device=device)
    mask = masks(device)[mask_name]
    with torch.no_grad():
        torch.testing.assert_close(attn(x, mask), torch_gqa(attn, x, mask, base), **ROTARY)


def test_gqa_with_as_many_kv_heads_as_heads_is_04s_attention_plus_rotary(device):
    attn = make_gqa(device, H)
    mha = MultiHeadAttention(D_MODEL, H, bias=False).to(device).eval()
    mha.load_state_dict(attn.state_dict())
    x = randn(B, T, D_MODEL, seed=7, device=device)
    causal = make_causal_mask(T, device)
    with torch.no_grad():
        # without the rotation (angle 0 everywhere) it is 04's multi-head attention exactly ...
        flat = make_gqa(device, H)
        flat.load_state_dict(attn.state_dict())
        flat.cos.fill_(1.0)
        flat.sin.zero_()
        assert_matches(flat(x, causal), mha(x, x, x, causal)[0], device, "GQA without rotation")
        # ... and with it, 04's attention fed rotated queries and keys: the rotation at position p is a linear map,
        # so rotating the rows of x @ W_q^T equals 04's attention whose projections are followed by the rotation.
        cos, sin = (t.to(device) for t in rotary_cos_sin(T, D_HEAD))

        class Rotated(nn.Module):
            def __init__(self, linear):
                super().__init__()
                self.linear = linear

            def forward(self, t):
                return _rotated_heads(self.linear(t), cos, sin)

        rotary_mha = MultiHeadAttention(D_MODEL, H, bias=False).to(device).eval()
        rotary_mha.load_state_dict(attn.state_dict())
        rotary_mha.w_q, rotary_mha.w_k = Rotated(rotary_mha.w_q), Rotated(rotary_mha.w_k)
        torch.testing.assert_close(attn(x, causal), rotary_mha(x, x, x, causal)[0], **ROTARY)


def _rotated_heads(projected, cos, sin):
    """(B, T, d_model) projections whose every head's slice is rotated: what split_heads then sees."""
    Bx, Tx, _ = projected.shape
    heads = projected.view(Bx, Tx, H, D_HEAD).transpose(1, 2)
    return apply_rotary(heads, cos, sin).transpose(1, 2).reshape(Bx, Tx, D_MODEL)


def test_query_head_h_uses_kv_head_h_over_groups(device):
    """Give each kv head values that say which head it is: head h's output must come from kv head h // 2."""
    attn = make_gqa(device, 2)
    with torch.no_grad():
        attn.w_v.weight.zero_()
        attn.w_v.weight[:D_HEAD, 0] = 1.0           # kv head 0 outputs x[..., 0] in every feature
        attn.w_v.weight[D_HEAD:, 0] = -1.0          # kv head 1 outputs -x[..., 0]
        attn.w_o.weight.copy_(torch.eye(D_MODEL))
        x = randn(B, T, D_MODEL, seed=8, device=device).abs() + 0.1
        heads = attn(x, make_causal_mask(T, device)).view(B, T, H, D_HEAD)
    signs = torch.sign(heads[..., 0]).amax(dim=(0, 1)).tolist()
    assert signs == [1.0, 1.0, -1.0, -1.0], signs


def test_gqa_rotary_tables_are_buffers_outside_the_state_dict(device):
    attn = make_gqa(device, 2, max_len=11)
    assert set(attn.state_dict()) == {"w_q.weight", "w_k.weight", "w_v.weight", "w_o.weight"}
    assert {n for n, _ in attn.named_buffers()} == {"cos", "sin"} and attn.cos.shape == (11, D_HEAD // 2)
    assert attn.cos.device.type == device.type
    assert all(lin.bias is None for lin in (attn.w_q, attn.w_k, attn.w_v, attn.w_o))


def test_gqa_scores_depend_on_offsets_so_shifted_windows_agree(device):
    """Without a mask, a position's output depends on its neighbours' offsets only: the same tokens at positions
    3..8 give the same outputs as at 0..5 (learned or sinusoidal positions would not)."""
    attn = make_gqa(device, 2)
    x = randn(1, T, D_MODEL, seed=9, device=device)
    with torch.no_grad():
        direct = attn(x)
        q, k, v = attn.w_q(x), attn.w_k(x), attn.w_v(x)
        cos, sin = attn.cos[3:3 + T], attn.sin[3:3 + T]
        qh = apply_rotary(q.view(1, T, H, D_HEAD).transpose(1, 2), cos, sin)
        kh = apply_rotary(k.view(1, T, 2, D_HEAD).transpose(1, 2), cos, sin)
        vh = v.view(1, T, 2, D_HEAD).transpose(1, 2)
        shifted = F.scaled_dot_product_attention(qh, kh, vh, enable_gqa=True)
        shifted = attn.w_o(shifted.transpose(1, 2).reshape(1, T, D_MODEL))
    torch.testing.assert_close(direct, shifted, **ROTARY)


@pytest.mark.parametrize("args, what", [
    ((25, 4, 2), "not divisible by num_heads"), ((24, 4, 3), "not divisible by num_kv_heads"),
    ((20, 4, 2), "must be even"), ((12, 4, 4), "must be even")])
def test_gqa_refuses_bad_sizes(args, what):
    with pytest.raises(ValueError, match=what):
        GroupedQueryAttention(*args)


def test_gqa_and_the_model_refuse_sequences_longer_than_max_len():
    with pytest.raises(ValueError, match="max_len"):
        GroupedQueryAttention(D_MODEL, H, 2, max_len=4)(torch.randn(1, 5, D_MODEL))
    with pytest.raises(ValueError, match="max_len"):
        ModernGPT(VOCAB, D_MODEL, H, 2, D_FF, num_layers=1, max_len=4)(torch.zeros(1, 5, dtype=torch.long))


# ---------------------------------------------------------------------------------------------- block and model
def _llama_block_by_hand(block, x, mask):
    def rms(norm, t):
        theirs = nn.RMSNorm(D_MODEL, eps=1e-6).to(t.device)
        theirs.weight.data.copy_(norm.weight)
        return theirs(t)

    x = x + torch_gqa(block.attn, rms(block.norm1, x), mask, 10000.0)
    h = rms(block.norm2, x)
    return x + block.ffn.w_down(F.silu(block.ffn.w_gate(h)) * block.ffn.w_up(h))


def test_llama_block_is_pre_norm_with_the_pieces_above(device):
    torch.manual_seed(0)
    block = LlamaBlock(D_MODEL, H, 2, D_FF, max_len=16).to(device).eval()
    with torch.no_grad():
        block.norm1.weight.uniform_(0.5, 1.5)
        block.norm2.weight.uniform_(0.5, 1.5)
        x = randn(B, T, D_MODEL, seed=10, device=device)
        mask = masks(device)["causal+padding"]
        torch.testing.assert_close(block(x, mask), _llama_block_by_hand(block, x, mask), **ROTARY)
    assert isinstance(block.norm1, RMSNorm) and isinstance(block.attn, GroupedQueryAttention)
    assert block.attn.cos.shape[0] == 16


def test_modern_gpt_by_hand_tied_and_without_positions(device):
    torch.manual_seed(0)
    model = ModernGPT(VOCAB, D_MODEL, H, 2, D_FF, num_layers=2, max_len=16).to(device).eval()
    assert model.lm_head.weight is model.token_embedding.weight
    assert model.max_len == 16 and len(model.blocks) == 2 and model.blocks[0].attn.num_kv_heads == 2
    assert not any("position" in name for name, _ in model.named_parameters())
    ids = random_ids(B, T, VOCAB, torch.Generator().manual_seed(11)).to(device)
    with torch.no_grad():
        x = model.token_embedding.weight[ids]
        for block in model.blocks:
            x = _llama_block_by_hand(block, x, make_causal_mask(T, device))
        expected = F.rms_norm(x, (D_MODEL,), model.norm.weight, eps=1e-6) @ model.token_embedding.weight.T
        torch.testing.assert_close(model(ids), expected, **ROTARY)
        # causal: changing the last token changes nothing before it
        changed = ids.clone()
        changed[:, -1] = (changed[:, -1] + 1) % VOCAB
        torch.testing.assert_close(model(changed)[:, :-1], model(ids)[:, :-1])


def test_modern_gpt_default_size():
    """The contract's ModernGPT on 08's 65 characters: 734,464 parameters (the embedding counted once)."""
    model = ModernGPT(65)
    assert sum(p.numel() for p in model.parameters()) == 734_464
    assert len(model.blocks) == 4 and model.blocks[0].ffn.w_up.out_features == 344
    assert model.blocks[0].attn.w_k.out_features == 64    # 2 kv heads of 32
