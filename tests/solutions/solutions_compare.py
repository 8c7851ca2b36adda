"""Comparison helpers for the proofs: copy reference weights into PyTorch's own modules, and compare tensors.

Every helper here is also used by a "teeth" test that feeds it a deliberately broken component and checks that it
raises, so a helper that could never fail would be caught.
"""
from __future__ import annotations

import torch
from torch import nn

from autograder.checks.kit.tolerance import tolerance

# Non-degenerate sizes: batch, lengths, heads and head width all differ, so a transposed axis cannot hide.
B, T, T_K, H, D_HEAD = 2, 5, 7, 3, 4
D_MODEL = H * D_HEAD  # 12
D_FF = 20


def assert_matches(actual: torch.Tensor, expected: torch.Tensor, device, what: str = "output") -> None:
    """Raise AssertionError unless `actual` equals `expected` within the course tolerance for `device`."""
    torch.testing.assert_close(actual, expected.to(actual.dtype), **tolerance(device, actual.dtype),
                               msg=lambda m: f"{what} differs from the reference: {m}")


def assert_matches_where(actual, expected, keep: torch.Tensor, device, what: str = "output") -> None:
    """Compare (B, T, ...) tensors only at the positions where `keep` (B, T) is True."""
    assert_matches(actual[keep], expected[keep], device, what)


def torch_mha_from(mha, num_heads: int) -> nn.MultiheadAttention:
    """nn.MultiheadAttention with the weights of our MultiHeadAttention (w_q, w_k, w_v stacked; w_o as out_proj)."""
    d_model = mha.w_q.in_features
    bias = mha.w_q.bias is not None
    theirs = nn.MultiheadAttention(d_model, num_heads, bias=bias, batch_first=True)
    theirs = theirs.to(mha.w_q.weight.device)
    with torch.no_grad():
        theirs.in_proj_weight.copy_(torch.cat([mha.w_q.weight, mha.w_k.weight, mha.w_v.weight]))
        theirs.out_proj.weight.copy_(mha.w_o.weight)
        if bias:
            theirs.in_proj_bias.copy_(torch.cat([mha.w_q.bias, mha.w_k.bias, mha.w_v.bias]))
            theirs.out_proj.bias.copy_(mha.w_o.bias)
    return theirs.eval()


def _copy_ffn_and_norms(ours, theirs, norm_names) -> None:
    with torch.no_grad():
        theirs.linear1.load_state_dict(ours.ffn.linear1.state_dict())
        theirs.linear2.load_state_dict(ours.ffn.linear2.state_dict())
        for name in norm_names:
            getattr(theirs, name).load_state_dict(getattr(ours, name).state_dict())


def _copy_attention(ours_mha, theirs_mha) -> None:
    num_heads = theirs_mha.num_heads
    theirs_mha.load_state_dict(torch_mha_from(ours_mha, num_heads).state_dict())


def torch_encoder_layer_from(block, num_heads: int, norm_first: bool) -> nn.TransformerEncoderLayer:
    d_model, d_ff = block.ffn.linear1.in_features, block.ffn.linear1.out_features
    theirs = nn.TransformerEncoderLayer(d_model, num_heads, d_ff, dropout=0.0, activation="relu",
                                        batch_first=True, norm_first=norm_first)
    theirs = theirs.to(block.norm1.weight.device)
    _copy_attention(block.self_attn, theirs.self_attn)
    _copy_ffn_and_norms(block, theirs, ["norm1", "norm2"])
    return theirs.eval()


def torch_decoder_layer_from(block, num_heads: int, norm_first: bool) -> nn.TransformerDecoderLayer:
    d_model, d_ff = block.ffn.linear1.in_features, block.ffn.linear1.out_features
    theirs = nn.TransformerDecoderLayer(d_model, num_heads, d_ff, dropout=0.0, activation="relu",
                                        batch_first=True, norm_first=norm_first)
    theirs = theirs.to(block.norm1.weight.device)
    _copy_attention(block.self_attn, theirs.self_attn)
    _copy_attention(block.cross_attn, theirs.multihead_attn)
    _copy_ffn_and_norms(block, theirs, ["norm1", "norm2", "norm3"])
    return theirs.eval()


def random_ids(batch: int, length: int, vocab: int, generator: torch.Generator, low: int = 4) -> torch.Tensor:
    """Token ids drawn from low..vocab-1 (so no special token appears unless a test puts it there)."""
    return torch.randint(low, vocab, (batch, length), generator=generator)
