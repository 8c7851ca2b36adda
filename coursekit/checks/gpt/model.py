"""Public self-check of notebook 08's `GPT`: its wiring composed here from your module's own submodules (embeddings,
blocks, norm, head), its causality tested by changing a future token, its tables' scale, max_len and dropout.
Shapes: B batch, T length, V vocabulary."""
from __future__ import annotations

import math

import torch
from torch import nn

from coursekit.checks.toolkit import expect_close, expect_shape, expect_type, fail, first_matching_hint, mistake_hint, \
    passed, run
from coursekit.criteria import argument, edge_case
from coursekit.tolerance import CPU_FLOAT32, GPT_TABLE_STD_RTOL


def _randomize(module: nn.Module, seed: int) -> None:
    generator = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, parameter in sorted(module.named_parameters()):
            parameter.copy_(torch.randn(parameter.shape, generator=generator) * 0.3
                            + (1.0 if "norm" in name and name.endswith("weight") else 0.0))


def check_gpt(GPT) -> None:
    vocab, d_model, heads, d_ff, layers, max_len = 11, 8, 2, 16, 2, 12
    model = run("GPT", GPT, vocab, d_model, heads, d_ff, layers, max_len)
    _expect_structure(model, layers, max_len)
    _expect_position_init(GPT)
    model.eval()
    _randomize(model, 8)
    ids = torch.tensor([[1, 5, 2, 9, 3, 3, 7], [4, 0, 10, 6, 8, 2, 1]])                      # (B=2, T=7)
    out = _expect_logits(model, ids, vocab, d_model)
    with edge_case("GPT.too_long"):
        try:
            model(torch.zeros(1, max_len + 1, dtype=torch.long))
        except ValueError:
            pass
        except Exception as error:  # noqa: BLE001
            fail(f"GPT on {max_len + 1} tokens (max_len={max_len}) should raise ValueError, got "
                 f"{type(error).__name__}.", "check T > self.max_len at the start of forward.")
        else:
            fail(f"GPT on {max_len + 1} tokens (max_len={max_len}) should raise ValueError.")
    with argument("GPT.dropout"):  # the same weights with dropout=0.5: eval mode as before, training mode differs
        dropped = run("GPT", GPT, vocab, d_model, heads, d_ff, layers, max_len, 0.5)
        run("load_state_dict", dropped.load_state_dict, model.state_dict())
        with torch.no_grad():
            same = torch.allclose(run("GPT.forward", dropped.eval(), ids), out, **CPU_FLOAT32)
            torch.manual_seed(0)
            noisy = run("GPT.forward", dropped.train(), ids)
        if not same:
            fail("GPT(..., dropout=0.5) in eval mode gives other logits than the same weights with dropout=0.0.",
                 "dropout must act in training mode only (nn.Dropout does that by itself).")
        if torch.allclose(noisy, out, **CPU_FLOAT32):
            fail("GPT(..., dropout=0.5) in training mode gives the logits of eval mode: nothing is dropped.",
                 "pass dropout on to self.drop = nn.Dropout(dropout) and to every EncoderBlock.")
    passed("GPT", "(tied head, pre-norm blocks, causal: a future token changes no earlier logit)")


def _expect_structure(model, layers: int, max_len: int) -> None:
    """The exercise's submodules, max_len, pre-norm blocks and the tied head."""
    expect_type(model, nn.Module, "GPT(...)", "subclass nn.Module.")
    for sub in ("token_embedding", "position_embedding", "drop", "blocks", "norm", "lm_head"):
        if not isinstance(getattr(model, sub, None), nn.Module):
            fail(f"GPT needs a submodule `{sub}`.", "use exactly the names of the exercise.")
    if getattr(model, "max_len", None) != max_len:
        fail(f"GPT(..., max_len={max_len}).max_len should be {max_len}, got {getattr(model, 'max_len', None)}.")
    if len(model.blocks) != layers or not all(getattr(b, "norm_first", None) is True for b in model.blocks):
        fail(f"GPT.blocks should hold {layers} EncoderBlocks with norm_first=True.",
             mistake_hint("gpt.post_norm") if len(model.blocks) == layers else None)
    if model.lm_head.weight is not model.token_embedding.weight:
        fail("lm_head.weight is not the token embedding's weight.", mistake_hint("gpt.untied_head"))


def _expect_position_init(GPT) -> None:
    """The position table at the tokens' scale, std d_model ** -0.5 (a large table: a tight estimate)."""
    big = run("GPT", GPT, 50, 64, 4, 32, 1, 256)
    std = big.position_embedding.embedding.weight.std().item()
    if not (1 - GPT_TABLE_STD_RTOL) * 64 ** -0.5 < std < (1 + GPT_TABLE_STD_RTOL) * 64 ** -0.5:
        fail(f"GPT(50, d_model=64, ...): the position table has std {std:.3f}, expected about {64 ** -0.5:.3f}.",
             mistake_hint("gpt.position_init"))


def _expect_logits(model, ids: torch.Tensor, vocab: int, d_model: int) -> torch.Tensor:
    """The logits (eval mode) against the model's own submodules composed here; then causality: changing the token
    at position 4 changes no logit before it. Returns the logits."""
    with torch.no_grad():
        out = run("GPT.forward", model, ids)
        expect_type(out, torch.Tensor, "GPT's output")
        expect_shape(out, (*ids.shape, vocab), "GPT's output (logits)")
        causal = torch.ones(ids.size(1), ids.size(1), dtype=torch.bool).tril()

        def compose(scale=1.0, mask=causal, final=True):
            x = model.position_embedding(model.token_embedding(ids) * scale)
            for block in model.blocks:
                x = block(x, mask)
            return model.lm_head(model.norm(x) if final else x)

        expected = compose()
        hint = first_matching_hint(out, [
            (compose(mask=None), mistake_hint("gpt.no_causal_mask")),
            (compose(mask=causal.T), mistake_hint("gpt.mask_inverted")),
            (compose(scale=math.sqrt(d_model)), mistake_hint("gpt.embedding_scaled")),
            (compose(final=False), mistake_hint("gpt.no_final_norm")),
        ])
        expect_close(out, expected, "GPT's logits", hint)
        changed = ids.clone()
        changed[:, 4] = (changed[:, 4] + 1) % vocab
        after = model(changed)
        if not torch.allclose(after[:, :4], out[:, :4], **CPU_FLOAT32):
            fail("changing the token at position 4 changed the logits at positions 0..3: future tokens leak.",
                 mistake_hint("gpt.no_causal_mask"))
    return out
