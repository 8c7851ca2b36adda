"""Public self-check of notebook 11's features part: final_hidden; and the small model that the part's checks (and
the LoRA part's, `lora.py`) hand to your functions.

The model is not 09's ModernGPT but a stand-in with its shape, built here so that the self-checks need nothing from
your notebook: the same attribute names (`token_embedding`, `blocks`, each with `norm1`, `attn` holding the linears
`w_q`, `w_k`, `w_v`, `w_o` -- `w_k` and `w_v` narrower, as with grouped-query attention --, `norm2` and `ffn`, then
`norm` and an `lm_head` tied to the embedding), blocks called as `block(x, mask)` with a (T, T) mask, True where a
position may look. Its blocks mix the positions more simply than 09's attention does (a masked mean), which is all a
check of final_hidden or add_lora needs. What final_hidden must give is caught on the model's own forward pass (a hook
on `model.norm`), so the check shares no code with an answer.
"""
from __future__ import annotations

import torch
from torch import nn

from coursekit.checks.toolkit import (
    expect_close, expect_shape, expect_type, fail, first_matching_hint, mistake_hint, passed, run,
)

PROBE_CONFIG = {"vocab_size": 13, "d_model": 16, "d_kv": 8, "d_ff": 20, "num_layers": 2, "max_len": 10, "eps": 0.1}


# ================================================================================================ the probe model
class _MaskedMixing(nn.Module):
    """Shaped like 09's attention (w_q, w_k and w_o d_model wide, w_k and w_v d_kv wide), mixing positions by a mean
    over the positions the mask allows (all of them without a mask), gated by the queries."""

    def __init__(self, d_model: int, d_kv: int):
        super().__init__()
        self.w_q = nn.Linear(d_model, d_model, bias=False)
        self.w_k = nn.Linear(d_model, d_kv, bias=False)
        self.w_v = nn.Linear(d_model, d_kv, bias=False)
        self.w_o = nn.Linear(d_model, d_model, bias=False)

    def forward(self, x, mask=None):
        B, T, d_model = x.shape
        keep = torch.ones(T, T, dtype=torch.bool, device=x.device) if mask is None else mask.bool()
        while keep.dim() > 3:                                                     # (B, 1, T, T) -> (B, T, T)
            keep = keep[:, 0]
        weights = keep.expand(B, T, T).to(x.dtype)
        weights = weights / weights.sum(dim=-1, keepdim=True).clamp(min=1.0)      # (B, T, T)
        mixed = weights @ (self.w_v(x) * torch.tanh(self.w_k(x)))                 # (B, T, d_kv)
        mixed = mixed.repeat_interleave(d_model // mixed.size(-1), dim=-1)        # (B, T, d_model)
        return self.w_o(torch.sigmoid(self.w_q(x)) * mixed)


class _Block(nn.Module):
    def __init__(self, d_model: int, d_kv: int, d_ff: int, eps: float):
        super().__init__()
        self.norm1, self.norm2 = nn.RMSNorm(d_model, eps=eps), nn.RMSNorm(d_model, eps=eps)
        self.attn = _MaskedMixing(d_model, d_kv)
        self.ffn = nn.Sequential(nn.Linear(d_model, d_ff, bias=False), nn.Tanh(), nn.Linear(d_ff, d_model, bias=False))

    def forward(self, x, mask=None):
        x = x + self.attn(self.norm1(x), mask)
        return x + self.ffn(self.norm2(x))


class ProbeGPT(nn.Module):
    """A small model shaped like ModernGPT (see the module's docstring); `forward(ids, causal=True)` gives the
    logits, `causal=False` runs the blocks without a mask."""

    def __init__(self, vocab_size: int, d_model: int, d_kv: int, d_ff: int, num_layers: int, max_len: int,
                 eps: float):
        super().__init__()
        self.max_len = max_len
        self.token_embedding = nn.Embedding(vocab_size, d_model)
        self.blocks = nn.ModuleList(_Block(d_model, d_kv, d_ff, eps) for _ in range(num_layers))
        self.norm = nn.RMSNorm(d_model, eps=eps)
        self.lm_head = nn.Linear(d_model, vocab_size, bias=False)
        self.lm_head.weight = self.token_embedding.weight

    def forward(self, ids, causal: bool = True):
        T = ids.size(1)
        if T > self.max_len:
            raise ValueError(f"sequence length {T} is longer than max_len {self.max_len}")
        mask = torch.ones(T, T, dtype=torch.bool, device=ids.device).tril() if causal else None
        x = self.token_embedding(ids)
        for block in self.blocks:
            x = block(x, mask)
        return self.lm_head(self.norm(x))


def probe_model(seed: int, num_layers: int | None = None) -> ProbeGPT:
    """A ProbeGPT of PROBE_CONFIG with fixed random weights: norms' weights around 1, the embedding and the matrices
    large enough that every block and the final norm change the result; in eval mode."""
    config = dict(PROBE_CONFIG, **({} if num_layers is None else {"num_layers": num_layers}))
    generator = torch.Generator().manual_seed(seed)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        model = ProbeGPT(**config)
    with torch.no_grad():
        for name, parameter in sorted(model.named_parameters()):
            values = torch.randn(parameter.shape, generator=generator)
            scale = 2.0 if name == "token_embedding.weight" else 0.6
            parameter.copy_(1.0 + 0.3 * values if parameter.dim() == 1 else scale * values)
    return model.eval()


def forward_states(model: ProbeGPT, ids, causal: bool = True) -> tuple[torch.Tensor, torch.Tensor]:
    """(the input of model.norm, its output) during model(ids): the hidden states before and after the final norm,
    caught by a hook on the model's own forward pass."""
    caught = []
    handle = model.norm.register_forward_hook(lambda module, inputs, output: caught.append((inputs[0], output)))
    try:
        with torch.no_grad():
            model(ids, causal=causal)
    finally:
        handle.remove()
    return caught[-1]


# =================================================================================================== final_hidden
def check_final_hidden(final_hidden) -> None:
    """final_hidden(model, ids) on a small model shaped like ModernGPT: (B, T, d_model), what model(ids) hands to
    lm_head (after the final norm), causal, and the model's mode and gradients left to the caller."""
    model = probe_model(seed=111)
    ids = torch.tensor([[3, 7, 1, 12, 5, 9], [8, 8, 2, 0, 11, 4]])                 # (B=2, T=6)
    d_model = PROBE_CONFIG["d_model"]
    with torch.no_grad():
        got = run("final_hidden", final_hidden, model, ids.clone())
    expect_type(got, torch.Tensor, "final_hidden(model, ids)")
    expect_shape(got, (2, 6, d_model), "final_hidden(model, ids of shape (2, 6))",
                 "the hidden states (B, T, d_model) after model.norm, before lm_head (not the logits).")
    before_norm, expected = forward_states(model, ids)
    with torch.no_grad():
        prefix = run("final_hidden", final_hidden, model, ids[:, :3].clone())
    expect_shape(prefix, (2, 3, d_model), "final_hidden(model, ids[:, :3])")
    expect_close(prefix, got[:, :3], "final_hidden(model, ids[:, :3]) against final_hidden(model, ids)[:, :3]",
                 mistake_hint("final_hidden.no_causal_mask"))
    hint = first_matching_hint(got.detach(), [
        (before_norm, mistake_hint("final_hidden.no_final_norm")),
        (forward_states(model, ids, causal=False)[1], mistake_hint("final_hidden.no_causal_mask")),
    ])
    expect_close(got, expected, "final_hidden(model, ids)", hint or "embed the ids, run every block with the causal "
                 "mask, then apply model.norm: exactly what model(ids) does before lm_head.")
    with torch.no_grad():
        expect_close(model.lm_head(got), model(ids), "model.lm_head(final_hidden(model, ids))",
                     "lm_head applied to final_hidden's result must give model(ids).")
    model.train()
    out = run("final_hidden", final_hidden, model, ids.clone())
    if not model.training:
        fail("final_hidden(model, ids) switched the model to eval mode.", mistake_hint("final_hidden.sets_mode"))
    if not (isinstance(out, torch.Tensor) and out.requires_grad):
        fail("final_hidden(model, ids) returned hidden states without gradients, with gradients on and a model "
             "whose parameters require them.", mistake_hint("final_hidden.no_grad"))
    passed("final_hidden", "(the states before lm_head, causal, mode and gradients left to the caller)")
