"""Public self-checks for notebook 09's block and model: LlamaBlock and ModernGPT.

The expected answers are worked out in float64 NumPy with plain loops (`answers.py`), block by block, from your
module's own weights after the check has set them to fixed values.
"""
from __future__ import annotations

import math

import numpy as np
import torch
from torch import nn

from coursekit.criteria import edge_case
from coursekit.checks.modern.answers import DEFAULT_EPS, llama_block, randomize, rms_norm
from coursekit.checks.modern.checks import expect_value_error
from coursekit.checks.toolkit import (expect_close, expect_shape, expect_type, fail, first_matching_hint, mistake_hint,
                                     passed, run, uses_parts)
from coursekit.tolerance import ROTARY_ATOL


# ------------------------------------------------------------------------------------------------ block and model
@uses_parts("LlamaBlock")
def check_llama_block(LlamaBlock) -> None:
    d_model, num_heads, num_kv_heads, d_ff, T = 12, 6, 3, 10, 4
    block = run("LlamaBlock", LlamaBlock, d_model, num_heads, num_kv_heads, d_ff, max_len=8)
    expect_type(block, nn.Module, "LlamaBlock(...)", "subclass nn.Module.")
    for name in ("norm1", "norm2", "attn", "ffn"):
        if not isinstance(getattr(block, name, None), nn.Module):
            fail(f"LlamaBlock needs a submodule `{name}`.", "norm1, norm2 (RMSNorm), attn (GroupedQueryAttention), "
                                                            "ffn (SwiGLU), with exactly these names.")
    block.eval()
    params = randomize(block, seed=98)
    x = torch.randn(2, T, d_model, generator=torch.Generator().manual_seed(99))
    causal = torch.tril(torch.ones(T, T, dtype=torch.bool))
    with torch.no_grad():
        out = run("LlamaBlock.forward", block, x.clone(), causal)
    xs, keep = x.double().numpy(), causal.numpy()
    answer = lambda m=None: llama_block(params, "", xs, num_heads, num_kv_heads, keep, m)  # noqa: E731
    hint = first_matching_hint(out, [
        (answer("post_norm"), mistake_hint("llama.post_norm")),
        (answer("no_attn_residual"), mistake_hint("llama.missing_residual")),
        (answer("no_ffn_residual"), mistake_hint("llama.missing_residual")),
    ], atol=ROTARY_ATOL)
    expect_close(out, answer(), "LlamaBlock(x, causal mask)", hint, atol=ROTARY_ATOL)
    with edge_case("LlamaBlock.too_long"):
        short = run("LlamaBlock", LlamaBlock, d_model, num_heads, num_kv_heads, d_ff, max_len=T - 1)
        expect_value_error(f"LlamaBlock(..., max_len={T - 1}) on a sequence of {T}", lambda: short(x),
                           "pass max_len on to GroupedQueryAttention, whose forward raises ValueError when "
                           "T > max_len.")
    passed("LlamaBlock")


@uses_parts("ModernGPT")
def check_modern_gpt(ModernGPT) -> None:
    vocab, d_model, num_heads, num_kv_heads, d_ff, num_layers, max_len = 11, 12, 6, 3, 10, 2, 8
    model = run("ModernGPT", ModernGPT, vocab, d_model=d_model, num_heads=num_heads, num_kv_heads=num_kv_heads,
                d_ff=d_ff, num_layers=num_layers, max_len=max_len)
    expect_type(model, nn.Module, "ModernGPT(...)", "subclass nn.Module.")
    if getattr(model, "max_len", None) != max_len:
        fail("ModernGPT should keep the attribute `max_len` (08's generate reads it).", "self.max_len = max_len")
    head, embedding = getattr(model, "lm_head", None), getattr(model, "token_embedding", None)
    if not isinstance(head, nn.Linear) or embedding is None or head.weight is not getattr(embedding, "weight", None):
        fail("ModernGPT.lm_head should be tied to the token embedding (one shared Parameter).",
             "self.lm_head.weight = self.token_embedding.weight")
    if any("position" in name for name, _ in model.named_parameters()):
        fail("ModernGPT has a position table; positions enter through the rotary angles only.")
    blocks = getattr(model, "blocks", None)
    if not isinstance(blocks, nn.ModuleList) or len(blocks) != num_layers:
        fail(f"ModernGPT needs `blocks`, an nn.ModuleList of {num_layers} LlamaBlocks.")
    model.eval()
    params = randomize(model, seed=100)
    ids = torch.tensor([[1, 4, 2, 7, 3, 0], [5, 5, 9, 10, 2, 6]])                      # (B=2, T=6)
    with torch.no_grad():
        logits = run("ModernGPT.forward", model, ids.clone())
    expect_shape(logits, (2, 6, vocab), "ModernGPT(ids of shape (2, 6))", "logits are (B, T, vocab_size).")
    T = ids.size(1)

    def answer(causal=True, final_norm=True, scaled=False):
        x = params["token_embedding.weight"][ids.numpy()]                              # (B, T, d_model)
        if scaled:
            x = x * math.sqrt(d_model)
        keep = np.tril(np.ones((T, T), dtype=bool)) if causal else None
        for layer in range(num_layers):
            x = llama_block(params, f"blocks.{layer}.", x, num_heads, num_kv_heads, keep)
        if final_norm:
            x = rms_norm(x, params["norm.weight"], DEFAULT_EPS)
        return x @ params["token_embedding.weight"].T

    hint = first_matching_hint(logits, [
        (answer(causal=False), mistake_hint("modern_gpt.no_causal_mask")),
        (answer(final_norm=False), mistake_hint("modern_gpt.no_final_norm")),
        (answer(scaled=True), mistake_hint("modern_gpt.embedding_scaled")),
    ], atol=ROTARY_ATOL)
    expect_close(logits, answer(), "ModernGPT(ids)", hint, atol=ROTARY_ATOL)
    with edge_case("ModernGPT.too_long"):
        expect_value_error(f"ModernGPT(..., max_len={max_len}) on ids of length {max_len + 1}",
                           lambda: model(torch.zeros(1, max_len + 1, dtype=torch.long)),
                           "compare T = ids.size(1) with self.max_len at the start of forward.")
    passed("ModernGPT", "(tied, no position table, causal)")
