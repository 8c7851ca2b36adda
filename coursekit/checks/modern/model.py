"""Public self-checks for notebook 09's block and model: LlamaBlock and ModernGPT.

The expected answers are worked out in float64 NumPy with plain loops (`answers.py`), block by block, from your
module's own weights after the check has set them to fixed values.
"""
from __future__ import annotations

import math

import numpy as np
import torch
from torch import nn

from coursekit.criteria import argument, edge_case
from coursekit.checks.modern.answers import DEFAULT_EPS, llama_block, randomize, rms_norm
from coursekit.checks.toolkit import (expect_close, expect_shape, expect_type, expect_value_error, fail,
                                     first_matching_hint, mistake_hint, passed, run, uses_parts)
from coursekit.tolerance import ROTARY_ATOL


# ------------------------------------------------------------------------------------------------ block and model
def _block_argument(LlamaBlock, d_model, d_ff, x, causal, extra: dict, default_hint: str) -> None:
    """LlamaBlock(d_model, 2, 1, d_ff, max_len=8, **extra) against the loop with that rotary base or eps; the
    answer with the default instead gets `default_hint` (the catalogue's hint of that mistake)."""
    shown = ", ".join(f"{k}={v}" for k, v in extra.items())
    label = f"LlamaBlock({d_model}, 2, 1, {d_ff}, max_len=8, {shown})"
    block = run("LlamaBlock", LlamaBlock, d_model, 2, 1, d_ff, max_len=8, **extra)
    block.eval()
    params = randomize(block, seed=101)
    with torch.no_grad():
        out = run(f"{label}.forward", block, x.clone(), causal)
    xs, keep = x.double().numpy(), causal.numpy()
    base, eps = extra.get("rope_base", 10000.0), extra.get("eps", DEFAULT_EPS)
    default = llama_block(params, "", xs, 2, 1, keep, base=10000.0 if "rope_base" in extra else base,
                          eps=DEFAULT_EPS if "eps" in extra else eps)
    hint = first_matching_hint(out, [(default, default_hint)], atol=ROTARY_ATOL)
    expect_close(out, llama_block(params, "", xs, 2, 1, keep, base=base, eps=eps), f"{label}(x, causal mask)", hint,
                 atol=ROTARY_ATOL)


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
    # the arguments, on 2 heads over 1 (d_head 6: 3 pairs of features, so that the base matters) and inputs of size
    # about 1 (where eps=0.1 matters)
    with argument("LlamaBlock.rope_base"):
        _block_argument(LlamaBlock, d_model, d_ff, x, causal, {"rope_base": 100.0},
                        mistake_hint("llama.rope_base_ignored"))
    with argument("LlamaBlock.eps"):
        _block_argument(LlamaBlock, d_model, d_ff, x, causal, {"eps": 0.1}, mistake_hint("llama.eps_ignored"))
    with edge_case("LlamaBlock.too_long"):
        short = run("LlamaBlock", LlamaBlock, d_model, num_heads, num_kv_heads, d_ff, max_len=T - 1)
        expect_value_error(f"LlamaBlock(..., max_len={T - 1}) on a sequence of {T}", lambda: short(x),
                           "pass max_len on to GroupedQueryAttention, whose forward raises ValueError when "
                           "T > max_len.")
    passed("LlamaBlock", "(rope_base=100, eps=0.1 too)")


def _gpt_answer(params, ids, num_heads, num_kv_heads, num_layers, base=10000.0, eps=DEFAULT_EPS, final_eps=None):
    """ModernGPT's logits by the loops: the blocks with rotary base `base` and norms' `eps`, the final norm with
    `final_eps` (default: `eps`)."""
    T = ids.shape[1]
    x = params["token_embedding.weight"][ids]                                          # (B, T, d_model)
    keep = np.tril(np.ones((T, T), dtype=bool))
    for layer in range(num_layers):
        x = llama_block(params, f"blocks.{layer}.", x, num_heads, num_kv_heads, keep, base=base, eps=eps)
    x = rms_norm(x, params["norm.weight"], eps if final_eps is None else final_eps)
    return x @ params["token_embedding.weight"].T


def _model_argument(ModernGPT, vocab, d_model, d_ff, num_layers, max_len, ids, extra: dict) -> None:
    """ModernGPT(vocab, d_model, 2, 1, d_ff, num_layers, max_len, **extra) against the loops; an answer that leaves
    the argument at its default somewhere (every block, the final norm) gets its mistake's hint."""
    shown = ", ".join(f"{k}={v}" for k, v in extra.items())
    label = f"ModernGPT({vocab}, {d_model}, 2, 1, {d_ff}, {num_layers}, {max_len}, {shown})"
    model = run("ModernGPT", ModernGPT, vocab, d_model=d_model, num_heads=2, num_kv_heads=1, d_ff=d_ff,
                num_layers=num_layers, max_len=max_len, **extra)
    model.eval()
    params = randomize(model, seed=102)
    with torch.no_grad():
        logits = run(f"{label}.forward", model, ids.clone())
    ids_np = ids.numpy()
    answer = lambda **kw: _gpt_answer(params, ids_np, 2, 1, num_layers, **kw)  # noqa: E731
    if "rope_base" in extra:
        right, wrong = answer(base=extra["rope_base"]), [(answer(), mistake_hint("modern_gpt.rope_base_ignored"))]
    else:
        eps, hint = extra["eps"], mistake_hint("modern_gpt.eps_ignored")
        right = answer(eps=eps)
        wrong = [(answer(), hint), (answer(eps=eps, final_eps=DEFAULT_EPS), hint),
                 (answer(final_eps=eps), hint)]
    hint = first_matching_hint(logits, wrong, atol=ROTARY_ATOL)
    expect_close(logits, right, f"{label}(ids)", hint, atol=ROTARY_ATOL)


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
    # the arguments, each in a model of 2 heads over 1 (d_head 6: the base matters); eps=0.1 matters on embeddings
    # of size about 1
    with argument("ModernGPT.rope_base"):
        _model_argument(ModernGPT, vocab, d_model, d_ff, num_layers, max_len, ids, {"rope_base": 100.0})
    with argument("ModernGPT.eps"):
        _model_argument(ModernGPT, vocab, d_model, d_ff, num_layers, max_len, ids, {"eps": 0.1})
    with edge_case("ModernGPT.too_long"):
        expect_value_error(f"ModernGPT(..., max_len={max_len}) on ids of length {max_len + 1}",
                           lambda: model(torch.zeros(1, max_len + 1, dtype=torch.long)),
                           "compare T = ids.size(1) with self.max_len at the start of forward.")
    passed("ModernGPT", "(tied, no position table, causal; rope_base=100, eps=0.1 too)")
