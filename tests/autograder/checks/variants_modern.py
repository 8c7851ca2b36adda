"""Student answers of notebook 09 for testing its hidden checks (see variants.py for the conventions).

CORRECT answers are written differently from the reference (F.rms_norm, a subclass of nn.RMSNorm, tables in
float32 from an outer product, rotation through complex numbers, x * sigmoid(x), F.scaled_dot_product_attention
with enable_gqa, a loop over heads that indexes kv head h // groups, recomputed tables instead of buffers) and must
pass. WRONG answers switch on one mistake (`MISTAKE`) and must fail with it named.
"""
from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn


# ------------------------------------------------------------------------------------------------------ RMSNorm
class RMSNormFunctional(nn.Module):
    def __init__(self, d_model, eps=1e-6):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(d_model))

    def forward(self, x):
        return F.rms_norm(x, (x.size(-1),), self.weight, self.eps)


class RMSNormSubclass(nn.RMSNorm):
    def __init__(self, d_model, eps=1e-6):
        super().__init__(d_model, eps=eps)


class RMSNormStudent(nn.Module):
    MISTAKE = None

    def __init__(self, d_model, eps=None):
        super().__init__()
        if eps is None:  # the default written another way, or (the mistake) a different default
            eps = 1e-5 if self.MISTAKE == "eps_default" else 1e-6
        self.eps = 1e-6 if self.MISTAKE == "eps_ignored" else eps   # eps_ignored: always the default
        init = torch.rand(d_model) if self.MISTAKE == "random_init" else torch.ones(d_model)
        self.weight = nn.Parameter(init)
        if self.MISTAKE == "bias":
            self.bias = nn.Parameter(torch.zeros(d_model))

    def forward(self, x):
        if self.MISTAKE == "center":
            x = x - x.mean(-1, keepdim=True)
        if self.MISTAKE == "axis":
            mean_square = (x ** 2).mean(dim=1, keepdim=True)
        else:
            mean_square = (x ** 2).mean(dim=-1, keepdim=True)
        if self.MISTAKE == "eps_outside":
            normed = x / (torch.sqrt(mean_square) + self.eps)
        else:
            normed = x / torch.sqrt(mean_square + self.eps)
        return normed if self.MISTAKE == "no_weight" else normed * self.weight


# ------------------------------------------------------------------------------------------------ rotary angles
def rotary_cos_sin_outer(max_len, d_head, base=10000.0):
    """Llama's way: inverse frequencies, an outer product, all in float32."""
    if d_head % 2:
        raise ValueError("d_head must be even")
    inv_freq = 1.0 / (base ** (torch.arange(0, d_head, 2, dtype=torch.float32) / d_head))
    angles = torch.outer(torch.arange(max_len, dtype=torch.float32), inv_freq)
    return angles.cos(), angles.sin()


def rotary_cos_sin_wrong(kind):
    def rotary_cos_sin(max_len, d_head, base=10000.0):
        if d_head % 2 and kind != "no_check":
            raise ValueError("odd")
        i = torch.arange(d_head // 2, dtype=torch.float32)
        power = i / d_head if kind == "no_two" else 2 * i / d_head
        b = 10000.0 if kind == "ignores_base" else base
        angles = torch.arange(max_len, dtype=torch.float32)[:, None] * b ** (-power)
        if kind == "swapped":
            return angles.sin(), angles.cos()
        return angles.cos(), angles.sin()

    return rotary_cos_sin


def apply_rotary_complex(x, cos, sin):
    pairs = torch.view_as_complex(x.float().reshape(*x.shape[:-1], -1, 2).contiguous())
    return torch.view_as_real(pairs * torch.complex(cos, sin)).reshape(x.shape).to(x.dtype)


def apply_rotary_unbind(x, cos, sin):
    x1, x2 = x.unflatten(-1, (-1, 2)).unbind(-1)
    return torch.stack((x1 * cos - x2 * sin, x1 * sin + x2 * cos), dim=-1).flatten(-2)


def apply_rotary_wrong(kind):
    def apply_rotary(x, cos, sin):
        if kind == "halves":
            half = x.size(-1) // 2
            x1, x2 = x[..., :half], x[..., half:]
            return torch.cat([x1 * cos - x2 * sin, x1 * sin + x2 * cos], dim=-1)
        if kind == "own_tables":   # ignores the tables it is given and makes its own (base 10000)
            cos, sin = (t.to(x.device) for t in rotary_cos_sin_outer(x.size(-2), x.size(-1)))
        x1, x2 = x[..., 0::2], x[..., 1::2]
        sign = -1.0 if kind == "negative" else 1.0
        return torch.stack((x1 * cos - sign * x2 * sin, sign * x1 * sin + x2 * cos), dim=-1).flatten(-2)

    return apply_rotary


# --------------------------------------------------------------------------------------------------------- SwiGLU
class SwiGLUSigmoid(nn.Module):
    def __init__(self, d_model, d_ff):
        super().__init__()
        self.w_gate = nn.Linear(d_model, d_ff, bias=False)
        self.w_up = nn.Linear(d_model, d_ff, bias=False)
        self.w_down = nn.Linear(d_ff, d_model, bias=False)

    def forward(self, x):
        gate = self.w_gate(x)
        return self.w_down(gate * torch.sigmoid(gate) * self.w_up(x))


class SwiGLUStudent(nn.Module):
    MISTAKE = None

    def __init__(self, d_model, d_ff):
        super().__init__()
        bias = self.MISTAKE == "bias"
        self.w_gate = nn.Linear(d_model, d_ff, bias=bias)
        self.w_up = nn.Linear(d_model, d_ff, bias=bias)
        self.w_down = nn.Linear(d_ff, d_model, bias=bias)

    def forward(self, x):
        gate, up = self.w_gate(x), self.w_up(x)
        if self.MISTAKE == "swapped":
            gate, up = up, gate
        act = torch.relu if self.MISTAKE == "relu" else F.silu
        return self.w_down(act(gate) * up)


# ------------------------------------------------------------------------------------------ grouped-query attention
class GQATorchSDPA(nn.Module):
    """F.scaled_dot_product_attention(enable_gqa=True), tables recomputed at every call (nothing stored).

    MISTAKE "no_length_check": the one thing wrong is the missing ValueError for T > max_len (it computes the
    tables for any T, so it runs and answers correctly on a sequence that is too long)."""
    MISTAKE = None

    def __init__(self, d_model, num_heads, num_kv_heads, max_len=512, rope_base=10000.0):
        super().__init__()
        if d_model % num_heads or num_heads % num_kv_heads or (d_model // num_heads) % 2:
            raise ValueError("bad sizes")
        self.h, self.kv, self.d_head = num_heads, num_kv_heads, d_model // num_heads
        self.max_len, self.base = max_len, 10000.0 if self.MISTAKE == "rope_base_ignored" else rope_base
        self.w_q = nn.Linear(d_model, d_model, bias=False)
        self.w_k = nn.Linear(d_model, num_kv_heads * self.d_head, bias=False)
        self.w_v = nn.Linear(d_model, num_kv_heads * self.d_head, bias=False)
        self.w_o = nn.Linear(d_model, d_model, bias=False)

    def forward(self, x, mask=None):
        B, T, _ = x.shape
        if T > self.max_len and self.MISTAKE != "no_length_check":
            raise ValueError("too long")
        cos, sin = (t.to(x.device) for t in rotary_cos_sin_outer(T, self.d_head, self.base))
        q = self.w_q(x).view(B, T, self.h, self.d_head).transpose(1, 2)
        k = self.w_k(x).view(B, T, self.kv, self.d_head).transpose(1, 2)
        v = self.w_v(x).view(B, T, self.kv, self.d_head).transpose(1, 2)
        q, k = apply_rotary_unbind(q, cos, sin), apply_rotary_unbind(k, cos, sin)
        out = F.scaled_dot_product_attention(q, k, v, attn_mask=None if mask is None else mask.bool(),
                                             enable_gqa=True)
        return self.w_o(out.transpose(1, 2).reshape(B, T, -1))


class GQAStudent(nn.Module):
    """A loop over query heads, each looking up its kv head; configurable mistakes."""
    MISTAKE = None

    def __init__(self, d_model, num_heads, num_kv_heads, max_len=512, rope_base=10000.0):
        super().__init__()
        if self.MISTAKE != "no_size_check" and (d_model % num_heads or num_heads % num_kv_heads
                                                or (d_model // num_heads) % 2):
            raise ValueError("bad sizes")
        self.h, self.kv, self.d_head, self.max_len = num_heads, num_kv_heads, d_model // num_heads, max_len
        self.w_q = nn.Linear(d_model, d_model, bias=False)
        self.w_k = nn.Linear(d_model, num_kv_heads * self.d_head, bias=False)
        self.w_v = nn.Linear(d_model, num_kv_heads * self.d_head, bias=False)
        self.w_o = nn.Linear(d_model, d_model, bias=False)
        if self.MISTAKE == "rope_base_ignored":   # the tables always use the default base
            rope_base = 10000.0
        cos, sin = rotary_cos_sin_outer(max_len, self.d_head, rope_base)
        persistent = self.MISTAKE == "persistent"
        self.register_buffer("cos", cos, persistent=persistent)
        self.register_buffer("sin", sin, persistent=persistent)

    def forward(self, x, mask=None):
        B, T, _ = x.shape
        if T > self.max_len and self.MISTAKE != "no_length_check":
            raise ValueError("too long")
        cos, sin = self.cos[:T], self.sin[:T]
        q = self.w_q(x).view(B, T, self.h, self.d_head).transpose(1, 2)
        k = self.w_k(x).view(B, T, self.kv, self.d_head).transpose(1, 2)
        v = self.w_v(x).view(B, T, self.kv, self.d_head).transpose(1, 2)
        if self.MISTAKE == "queries_only":
            q = apply_rotary_unbind(q, cos, sin)
        elif self.MISTAKE != "no_rotary":
            q, k = apply_rotary_unbind(q, cos, sin), apply_rotary_unbind(k, cos, sin)
        if self.MISTAKE == "rotates_values":
            v = apply_rotary_unbind(v, cos, sin)
        groups = self.h // self.kv
        heads = []
        for h in range(self.h):
            j = {"tile": h % self.kv, "mod_groups": h % groups}.get(self.MISTAKE, h // groups)
            scores = q[:, h] @ k[:, j].transpose(-1, -2) / math.sqrt(self.d_head)     # (B, T, T)
            if mask is not None:
                keep = mask.bool().expand(B, 1, T, T)[:, 0]
                scores = scores.masked_fill(~keep, float("-inf"))
            heads.append(torch.softmax(scores, dim=-1) @ v[:, j])
        return self.w_o(torch.cat(heads, dim=-1))


# ------------------------------------------------------------------------------------------------ block and model
class LlamaBlockStudent(nn.Module):
    MISTAKE = None
    ATTENTION = GQATorchSDPA

    def __init__(self, d_model, num_heads, num_kv_heads, d_ff, max_len=512, rope_base=1e4, eps=1e-6):
        super().__init__()
        # the arguments passed by keyword; "eps_ignored": neither norm gets eps, "eps_norm1_only": norm2 does not,
        # "rope_base_ignored": the attention keeps its default base
        self.norm1 = RMSNormFunctional(d_model, **({} if self.MISTAKE == "eps_ignored" else {"eps": eps}))
        attention_base = {} if self.MISTAKE == "rope_base_ignored" else {"rope_base": rope_base}
        if self.MISTAKE == "no_max_len":   # max_len not passed on: the attention takes its default, 512
            self.attn = self.ATTENTION(d_model, num_heads, num_kv_heads, **attention_base)
        else:
            self.attn = self.ATTENTION(d_model, num_heads, num_kv_heads, max_len=max_len, **attention_base)
        norm2_default = self.MISTAKE in ("eps_ignored", "eps_norm1_only")
        self.norm2 = RMSNormSubclass(d_model) if norm2_default else RMSNormSubclass(d_model, eps=eps)
        self.ffn = SwiGLUSigmoid(d_model, d_ff)

    def forward(self, x, mask=None):
        if self.MISTAKE == "post_norm":
            x = self.norm1(x + self.attn(x, mask))
            return self.norm2(x + self.ffn(x))
        a = self.attn(self.norm1(x), mask)
        x = a if self.MISTAKE == "no_attn_residual" else x + a
        f = self.ffn(self.norm2(x))
        return f if self.MISTAKE == "no_ffn_residual" else x + f


class ModernGPTStudent(nn.Module):
    MISTAKE = None

    def __init__(self, vocab_size, d_model=128, num_heads=4, num_kv_heads=2, d_ff=344, num_layers=4, max_len=256,
                 rope_base=10_000, eps=0.000001):
        super().__init__()
        self.max_len = max_len
        self.token_embedding = nn.Embedding(vocab_size, d_model)
        if self.MISTAKE == "positions":
            self.position_embedding = nn.Embedding(max_len, d_model)
        # "no_length_check": no ValueError of its own, and the blocks keep their default max_len (512)
        block_max_len = 512 if self.MISTAKE == "no_length_check" else max_len
        # the arguments not passed on: "rope_base_ignored" (no block gets rope_base), "rope_base_first_block" (only
        # the first does), "blocks_eps" (the blocks keep eps 1e-6, the final norm gets eps), "final_norm_eps" (the
        # blocks get eps, the final norm keeps 1e-6)
        kwargs = [{"rope_base": rope_base, "eps": eps} for _ in range(num_layers)]
        for layer, block_kwargs in enumerate(kwargs):
            if self.MISTAKE == "rope_base_ignored" or (self.MISTAKE == "rope_base_first_block" and layer > 0):
                del block_kwargs["rope_base"]
            if self.MISTAKE == "blocks_eps":
                del block_kwargs["eps"]
        self.blocks = nn.ModuleList(LlamaBlockStudent(d_model, num_heads, num_kv_heads, d_ff, block_max_len, **kw)
                                    for kw in kwargs)
        self.norm = RMSNormFunctional(d_model, **({} if self.MISTAKE == "final_norm_eps" else {"eps": eps}))
        self.lm_head = nn.Linear(d_model, vocab_size, bias=False)
        if self.MISTAKE != "untied":
            self.lm_head.weight = self.token_embedding.weight

    def forward(self, ids):
        T = ids.size(1)
        if T > self.max_len and self.MISTAKE != "no_length_check":
            raise ValueError("too long")
        x = self.token_embedding(ids)
        if self.MISTAKE == "scaled":
            x = x * math.sqrt(x.size(-1))
        mask = None if self.MISTAKE == "no_causal" else torch.tril(torch.ones(T, T, device=ids.device)).bool()
        for block in self.blocks:
            x = block(x, mask)
        return self.lm_head(x if self.MISTAKE == "no_final_norm" else self.norm(x))


# ----------------------------------------------------------------------------------------------------- stubs
def rotary_cos_sin_stub(max_len, d_head, base=10000.0):
    """The released notebook's unanswered exercise."""
    raise NotImplementedError()


def module_stub(name: str, where: str = "__init__"):
    """The released notebook's unanswered class (`where`: "__init__" as released, or "forward" only)."""
    def init(self, *args, **kwargs):
        nn.Module.__init__(self)
        if where == "__init__":
            raise NotImplementedError()

    def forward(self, *args, **kwargs):
        raise NotImplementedError()

    return type(name, (nn.Module,), {"__init__": init, "forward": forward})
