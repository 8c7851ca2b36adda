"""Stand-ins: the course's own working parts, lent to a student's composite so that it is judged on its own work.

A hidden check judges one exercise. When the object under test uses another exercise of the same notebook (a
function it calls by name, like `PositionalEncoding` calling `sinusoidal_positional_encoding`, or a submodule its
constructor builds, like `EncoderBlock` building a `PositionwiseFeedForward`) and the student's part FAILED its own
check, the check lends the stand-in below for that part (`autograder/checks/kit/parts.py`): the student's composite
is then judged given working parts, and an unfinished or wrong part costs only its own points.

These are public implementations of the contract's formulas (`coursekit/api.py`), written for this purpose, with
the contract's attribute and parameter names (so the grader's weights load into them); they are not code from
`solutions/`. They live here, with the grader, and not in `coursekit`: `coursekit` is in every student's hands
and kernel, and a working `PositionwiseFeedForward` there would be the answer of an open exercise. The grader
sends the parts one check needs into the kernel (`coursekit.probe` op `define`) only after every exercise they hold
has been scored in this run (`parts.safe_to_lend`; the grader runs the grade cells in the released order), and
switches them off when the check is over (`LENT = False`): a stand-in kept by the student's code stops working.
They travel compiled, never as text (`compiled_for`): the kernel runs their code but never holds their source (no
audit "compile" event carries it, `inspect.getsource` finds none). Their text, handed in later, is reported by the
similarity check (`autograder/publish/similarity.py`); an output that carries their source or code is taken out of
the graded notebook before anyone sees it (`autograder/grade/stand_in_leaks.py`).

`source_for(names)` is the text of the module: this module's header, then the named stand-ins and what they need,
in order; `compiled_for(names)` is what the kernel receives: that text compiled here.
"""
from __future__ import annotations

import functools
import inspect
import marshal
import math

import torch
from torch import nn

LENT = True  # the grader sets it to False in the kernel's copy once the check that borrowed these is over


def _in_use() -> None:
    if not LENT:
        raise RuntimeError("this is a stand-in the grader lent to one hidden check; it does not work outside it")


# ------------------------------------------------------------------------------------------------ notebook 02
def sinusoidal_positional_encoding(max_len, d_model):
    """(max_len, d_model) float32: column 2i is sin(p * w_i), column 2i+1 cos(p * w_i), w_i = 10000**(-2i/d_model)."""
    _in_use()
    if d_model % 2:
        raise ValueError(f"d_model must be even, got {d_model}")
    rate = torch.exp(torch.arange(0, d_model, 2, dtype=torch.float64) * (-math.log(10000.0) / d_model))  # (d/2,)
    angle = torch.outer(torch.arange(max_len, dtype=torch.float64), rate)                     # (max_len, d/2)
    return torch.stack([angle.sin(), angle.cos()], dim=-1).reshape(max_len, d_model).float()


class PositionalEncoding(nn.Module):
    """x (B, T, d_model) -> dropout(x + pe[:T]); pe is a buffer."""

    def __init__(self, d_model, max_len=512, dropout=0.0):
        _in_use()
        super().__init__()
        self.register_buffer("pe", sinusoidal_positional_encoding(max_len, d_model))
        self.dropout = nn.Dropout(dropout)

    def forward(self, x):
        _in_use()
        if x.shape[1] > self.pe.shape[0]:
            raise ValueError(f"{x.shape[1]} positions, but max_len is {self.pe.shape[0]}")
        return self.dropout(x + self.pe[: x.shape[1]].to(x.dtype))


# ------------------------------------------------------------------------------------------------ notebook 01
class TokenEmbedding(nn.Module):
    """ids (B, T) -> rows of `weight` (vocab_size, d_model)."""

    def __init__(self, vocab_size, d_model, padding_idx=None):
        _in_use()
        super().__init__()
        if padding_idx is not None and not 0 <= padding_idx < vocab_size:
            raise ValueError(f"padding_idx {padding_idx} is not a row of a table of {vocab_size}")
        self.padding_idx = padding_idx
        table = torch.randn(vocab_size, d_model) / math.sqrt(d_model)                          # (V, d_model)
        if padding_idx is not None:
            table[padding_idx] = 0.0
        self.weight = nn.Parameter(table)

    def forward(self, ids):
        _in_use()
        return nn.functional.embedding(ids, self.weight)


# ------------------------------------------------------------------------------------------------ notebook 04
def split_heads(x, num_heads):
    """(B, T, d_model) -> (B, H, T, d_model // H), head h holding features h*d_head .. (h+1)*d_head - 1."""
    _in_use()
    B, T, d_model = x.shape
    if d_model % num_heads:
        raise ValueError(f"d_model {d_model} is not divisible by {num_heads} heads")
    return x.view(B, T, num_heads, d_model // num_heads).permute(0, 2, 1, 3)


def merge_heads(x):
    """(B, H, T, d_head) -> (B, T, H * d_head)."""
    _in_use()
    B, H, T, d_head = x.shape
    return x.permute(0, 2, 1, 3).reshape(B, T, H * d_head)


def _attend(q, k, v, mask):
    """softmax(q k^T / sqrt(d_k)) v with mask True = may attend; (out, weights)."""
    scores = torch.einsum("...qd,...kd->...qk", q, k) / math.sqrt(q.shape[-1])
    if mask is not None:
        scores = scores.masked_fill(~mask.bool(), float("-inf"))
    weights = scores.softmax(dim=-1)
    return weights @ v, weights


class MultiHeadAttention(nn.Module):
    """forward(query, key, value, mask=None) -> (output (B, T_q, d_model), weights (B, H, T_q, T_k))."""

    def __init__(self, d_model, num_heads, dropout=0.0, bias=True):
        _in_use()
        super().__init__()
        if d_model % num_heads:
            raise ValueError(f"d_model {d_model} is not divisible by {num_heads} heads")
        self.d_model, self.num_heads = d_model, num_heads
        self.w_q, self.w_k, self.w_v, self.w_o = (nn.Linear(d_model, d_model, bias=bias) for _ in range(4))
        self.dropout = nn.Dropout(dropout)

    def forward(self, query, key, value, mask=None):
        _in_use()
        q, k, v = (split_heads(w(t), self.num_heads) for w, t in ((self.w_q, query), (self.w_k, key),
                                                                   (self.w_v, value)))
        heads, weights = _attend(q, k, v, mask)
        if self.training and self.dropout.p > 0:
            heads = self.dropout(weights) @ v
        return self.w_o(merge_heads(heads)), weights


# ------------------------------------------------------------------------------------------------ notebook 05
class PositionwiseFeedForward(nn.Module):
    """x -> linear2(dropout(relu(linear1(x)))), the same at every position."""

    def __init__(self, d_model, d_ff, dropout=0.0):
        _in_use()
        super().__init__()
        self.linear1, self.linear2 = nn.Linear(d_model, d_ff), nn.Linear(d_ff, d_model)
        self.dropout = nn.Dropout(dropout)

    def forward(self, x):
        _in_use()
        return self.linear2(self.dropout(self.linear1(x).clamp(min=0)))


class EncoderBlock(nn.Module):
    """Self-attention then feed-forward, residual + LayerNorm around each (post-norm, or pre-norm)."""

    def __init__(self, d_model, num_heads, d_ff, dropout=0.0, norm_first=False):
        _in_use()
        super().__init__()
        self.norm_first = norm_first
        self.self_attn = MultiHeadAttention(d_model, num_heads, dropout)
        self.ffn = PositionwiseFeedForward(d_model, d_ff, dropout)
        self.norm1, self.norm2 = nn.LayerNorm(d_model), nn.LayerNorm(d_model)
        self.dropout1, self.dropout2 = nn.Dropout(dropout), nn.Dropout(dropout)

    def forward(self, x, mask=None):
        _in_use()
        sublayers = ((self.norm1, lambda h: self.dropout1(self.self_attn(h, h, h, mask)[0])),
                     (self.norm2, lambda h: self.dropout2(self.ffn(h))))
        for norm, sublayer in sublayers:
            x = x + sublayer(norm(x)) if self.norm_first else norm(x + sublayer(x))
        return x


class Encoder(nn.Module):
    """ids (B, T) -> embedding * sqrt(d_model) + positions -> num_layers blocks -> final norm (pre-norm only)."""

    def __init__(self, vocab_size, d_model, num_heads, d_ff, num_layers, max_len=512, dropout=0.0,
                 norm_first=False):
        _in_use()
        super().__init__()
        self.d_model = d_model
        self.embedding = TokenEmbedding(vocab_size, d_model)
        self.pos_encoding = PositionalEncoding(d_model, max_len, dropout)
        self.layers = nn.ModuleList(EncoderBlock(d_model, num_heads, d_ff, dropout, norm_first)
                                    for _ in range(num_layers))
        self.norm = nn.LayerNorm(d_model) if norm_first else nn.Identity()

    def forward(self, src_ids, src_mask=None):
        _in_use()
        x = self.pos_encoding(self.embedding(src_ids) * math.sqrt(self.d_model))
        for layer in self.layers:
            x = layer(x, src_mask)
        return self.norm(x)


# ------------------------------------------------------------------------------------------------ notebook 06
class DecoderBlock(nn.Module):
    """Masked self-attention, cross-attention over memory, feed-forward; residual + LayerNorm around each."""

    def __init__(self, d_model, num_heads, d_ff, dropout=0.0, norm_first=False):
        _in_use()
        super().__init__()
        self.norm_first = norm_first
        self.self_attn = MultiHeadAttention(d_model, num_heads, dropout)
        self.cross_attn = MultiHeadAttention(d_model, num_heads, dropout)
        self.ffn = PositionwiseFeedForward(d_model, d_ff, dropout)
        self.norm1, self.norm2, self.norm3 = (nn.LayerNorm(d_model) for _ in range(3))
        self.dropout1, self.dropout2, self.dropout3 = (nn.Dropout(dropout) for _ in range(3))

    def forward(self, x, memory, tgt_mask=None, memory_mask=None):
        _in_use()
        sublayers = ((self.norm1, lambda h: self.dropout1(self.self_attn(h, h, h, tgt_mask)[0])),
                     (self.norm2, lambda h: self.dropout2(self.cross_attn(h, memory, memory, memory_mask)[0])),
                     (self.norm3, lambda h: self.dropout3(self.ffn(h))))
        for norm, sublayer in sublayers:
            x = x + sublayer(norm(x)) if self.norm_first else norm(x + sublayer(x))
        return x


class Decoder(nn.Module):
    """Target ids (B, T), memory (B, S, d_model) -> (B, T, d_model)."""

    def __init__(self, vocab_size, d_model, num_heads, d_ff, num_layers, max_len=512, dropout=0.0,
                 norm_first=False):
        _in_use()
        super().__init__()
        self.d_model = d_model
        self.embedding = TokenEmbedding(vocab_size, d_model)
        self.pos_encoding = PositionalEncoding(d_model, max_len, dropout)
        self.layers = nn.ModuleList(DecoderBlock(d_model, num_heads, d_ff, dropout, norm_first)
                                    for _ in range(num_layers))
        self.norm = nn.LayerNorm(d_model) if norm_first else nn.Identity()

    def forward(self, tgt_ids, memory, tgt_mask=None, memory_mask=None):
        _in_use()
        x = self.pos_encoding(self.embedding(tgt_ids) * math.sqrt(self.d_model))
        for layer in self.layers:
            x = layer(x, memory, tgt_mask, memory_mask)
        return self.norm(x)


class Transformer(nn.Module):
    """(src_ids (B, S), tgt_ids (B, T)) -> logits (B, T, tgt_vocab_size); builds its masks from pad_id."""

    def __init__(self, src_vocab_size, tgt_vocab_size, d_model=64, num_heads=4, d_ff=128, num_layers=2,
                 max_len=512, dropout=0.0, pad_id=0, norm_first=False):
        _in_use()
        super().__init__()
        self.pad_id = pad_id
        self.encoder = Encoder(src_vocab_size, d_model, num_heads, d_ff, num_layers, max_len, dropout, norm_first)
        self.decoder = Decoder(tgt_vocab_size, d_model, num_heads, d_ff, num_layers, max_len, dropout, norm_first)
        self.generator = nn.Linear(d_model, tgt_vocab_size)

    def encode(self, src_ids):
        _in_use()
        src_mask = (src_ids != self.pad_id)[:, None, None, :]                                   # (B, 1, 1, S)
        return self.encoder(src_ids, src_mask), src_mask

    def decode(self, tgt_ids, memory, src_mask):
        _in_use()
        T = tgt_ids.shape[1]
        causal = torch.ones(T, T, dtype=torch.bool, device=tgt_ids.device).tril()               # (T, T)
        tgt_mask = (tgt_ids != self.pad_id)[:, None, None, :] & causal                          # (B, 1, T, T)
        return self.generator(self.decoder(tgt_ids, memory, tgt_mask, src_mask))

    def forward(self, src_ids, tgt_ids):
        memory, src_mask = self.encode(src_ids)
        return self.decode(tgt_ids, memory, src_mask)


# ------------------------------------------------------------------------------------------------ notebook 07
def masked_mean_pool(x, mask):
    """(B, T, d), (B, T) bool -> (B, d): the mean over the positions where mask is True (zeros if none)."""
    _in_use()
    if mask.shape != x.shape[:2]:
        raise ValueError(f"mask shape {tuple(mask.shape)} does not match x's (B, T) = {tuple(x.shape[:2])}")
    weights = mask.to(x.dtype)                                                                   # (B, T)
    return torch.einsum("btd,bt->bd", x, weights) / weights.sum(dim=1, keepdim=True).clamp(min=1.0)


# ------------------------------------------------------------------------------------------------ notebook 08
def lm_loss(logits, targets):
    """(B, T, V), (B, T) -> scalar: minus the mean log-probability of the target token over all B * T positions."""
    _in_use()
    log_probs = torch.log_softmax(logits, dim=-1)                                                # (B, T, V)
    return -log_probs.gather(-1, targets.unsqueeze(-1)).mean()


def sample_next_token(logits, temperature=1.0, top_k=None, generator=None):
    """(B, V) -> (B,): the argmax at temperature 0, else one draw from softmax(logits / temperature), top-k kept."""
    _in_use()
    if temperature == 0:
        return torch.argmax(logits, dim=-1)
    scaled = logits / temperature                                                                # (B, V)
    if top_k is not None and top_k < scaled.shape[-1]:
        kth = scaled.topk(top_k, dim=-1).values[..., -1:]                                        # (B, 1)
        scaled = scaled.masked_fill(scaled < kth, float("-inf"))
    return torch.multinomial(scaled.softmax(dim=-1), 1, generator=generator).squeeze(-1)


# ------------------------------------------------------------------------------------------------ notebook 09
class RMSNorm(nn.Module):
    """x (..., d) -> x / sqrt(mean(x ** 2 over d) + eps) * weight; weight (d,) starts as ones."""

    def __init__(self, d_model, eps=1e-6):
        _in_use()
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(d_model))

    def forward(self, x):
        _in_use()
        return x * torch.rsqrt(x.pow(2).mean(dim=-1, keepdim=True) + self.eps) * self.weight


def rotary_cos_sin(max_len, d_head, base=10000.0):
    """(cos, sin) of angle[p, i] = p * base ** (-2i / d_head), each (max_len, d_head // 2) float32."""
    _in_use()
    if d_head % 2:
        raise ValueError(f"d_head must be even, got {d_head}")
    rate = base ** (-torch.arange(0, d_head, 2, dtype=torch.float64) / d_head)                   # (d_head/2,)
    angle = torch.outer(torch.arange(max_len, dtype=torch.float64), rate)                     # (max_len, d_head/2)
    return angle.cos().float(), angle.sin().float()


def apply_rotary(x, cos, sin):
    """x (..., T, d_head): each pair (x[..., 2i], x[..., 2i+1]) at position p turned by angle[p, i]."""
    _in_use()
    pairs = x.unflatten(-1, (-1, 2))                                                      # (..., T, d_head/2, 2)
    a, b = pairs[..., 0], pairs[..., 1]
    cos, sin = cos.to(x.dtype), sin.to(x.dtype)                                            # (T, d_head/2)
    return torch.stack((a * cos - b * sin, a * sin + b * cos), dim=-1).flatten(-2)


class SwiGLU(nn.Module):
    """x -> w_down(silu(w_gate(x)) * w_up(x)), three matrices without bias."""

    def __init__(self, d_model, d_ff):
        _in_use()
        super().__init__()
        self.w_gate = nn.Linear(d_model, d_ff, bias=False)
        self.w_up = nn.Linear(d_model, d_ff, bias=False)
        self.w_down = nn.Linear(d_ff, d_model, bias=False)

    def forward(self, x):
        _in_use()
        gate = self.w_gate(x)
        return self.w_down(gate * torch.sigmoid(gate) * self.w_up(x))


class GroupedQueryAttention(nn.Module):
    """Rotary self-attention; query head h reads key/value head h // (num_heads // num_kv_heads)."""

    def __init__(self, d_model, num_heads, num_kv_heads, max_len=512, rope_base=10000.0):
        _in_use()
        super().__init__()
        if d_model % num_heads or num_heads % num_kv_heads or (d_model // num_heads) % 2:
            raise ValueError(f"d_model {d_model}, num_heads {num_heads}, num_kv_heads {num_kv_heads}: d_model must "
                             f"split into heads of even width, and the query heads into equal groups")
        d_head = d_model // num_heads
        self.num_heads, self.num_kv_heads, self.max_len = num_heads, num_kv_heads, max_len
        self.w_q = nn.Linear(d_model, d_model, bias=False)
        self.w_k = nn.Linear(d_model, num_kv_heads * d_head, bias=False)
        self.w_v = nn.Linear(d_model, num_kv_heads * d_head, bias=False)
        self.w_o = nn.Linear(d_model, d_model, bias=False)
        cos, sin = rotary_cos_sin(max_len, d_head, rope_base)                                 # (max_len, d_head/2)
        self.register_buffer("cos", cos, persistent=False)
        self.register_buffer("sin", sin, persistent=False)

    def forward(self, x, mask=None):
        _in_use()
        T = x.shape[1]
        if T > self.max_len:
            raise ValueError(f"{T} positions, but max_len is {self.max_len}")
        q = apply_rotary(split_heads(self.w_q(x), self.num_heads), self.cos[:T], self.sin[:T])  # (B, H, T, d)
        k = apply_rotary(split_heads(self.w_k(x), self.num_kv_heads), self.cos[:T], self.sin[:T])  # (B, Hkv, T, d)
        v = split_heads(self.w_v(x), self.num_kv_heads)                                          # (B, Hkv, T, d)
        group = torch.arange(self.num_heads, device=x.device) // (self.num_heads // self.num_kv_heads)   # (H,)
        heads, _ = _attend(q, k[:, group], v[:, group], mask)                                    # (B, H, T, d)
        return self.w_o(merge_heads(heads))


class LlamaBlock(nn.Module):
    """Pre-norm: x + attn(norm1(x), mask), then x + ffn(norm2(x))."""

    def __init__(self, d_model, num_heads, num_kv_heads, d_ff, max_len=512, rope_base=10000.0, eps=1e-6):
        _in_use()
        super().__init__()
        self.norm1, self.norm2 = RMSNorm(d_model, eps), RMSNorm(d_model, eps)
        self.attn = GroupedQueryAttention(d_model, num_heads, num_kv_heads, max_len, rope_base)
        self.ffn = SwiGLU(d_model, d_ff)

    def forward(self, x, mask=None):
        _in_use()
        x = x + self.attn(self.norm1(x), mask)
        return x + self.ffn(self.norm2(x))


# -------------------------------------------------------------------------------------------------- the source
# what each stand-in needs of the others (the module sent holds them all, each once, needs first)

class ModernGPT(nn.Module):
    """09's ModernGPT, for notebook 11's checks, which build the grader's small models with it in the kernel (it
    runs here too): ids -> embedding -> LlamaBlocks under the causal mask -> final RMSNorm -> the embedding's own
    matrix as the output layer."""

    def __init__(self, vocab_size, d_model=128, num_heads=4, num_kv_heads=2, d_ff=344, num_layers=4, max_len=256,
                 rope_base=10000.0, eps=1e-6):
        _in_use()
        super().__init__()
        sizes = (d_model, num_heads, num_kv_heads, d_ff, max_len, rope_base, eps)
        self.max_len, self.token_embedding = max_len, nn.Embedding(vocab_size, d_model)
        self.blocks = nn.ModuleList([LlamaBlock(*sizes) for _layer in range(num_layers)])
        self.norm, self.lm_head = RMSNorm(d_model, eps), nn.Linear(d_model, vocab_size, bias=False)
        self.lm_head.weight = self.token_embedding.weight                    # tied: one (V, d_model) matrix

    def forward(self, ids):
        _in_use()
        length = ids.shape[-1]
        if length > self.max_len:
            raise ValueError(f"{length} positions do not fit in max_len {self.max_len}")
        causal = torch.ones(length, length, dtype=torch.bool, device=ids.device).tril()   # True = may attend
        hidden = self.token_embedding(ids)                                   # (B, T, d_model)
        for layer in self.blocks:
            hidden = layer(hidden, causal)
        return self.lm_head(self.norm(hidden))                               # (B, T, V)


def _output_requires_grad(function, *args):
    """Whether `function(*args)` returns a tensor that carries gradients (run in the kernel, gradients on)."""
    _in_use()
    return bool(getattr(function(*args), "requires_grad", False))


# ------------------------------------------------------------------------------------------------ notebook 11
def cached_forward(model, ids, cache=None):
    """Logits of new tokens ids (B, T) at positions T_past.., and the per-block (k, v) cache extended by them."""
    _in_use()
    B, T = ids.shape
    T_past = 0 if cache is None else cache[0][0].size(2)
    if T_past + T > model.max_len:
        raise ValueError(f"{T_past} cached + {T} new positions is longer than max_len {model.max_len}")
    allowed = torch.ones(T, T_past + T, dtype=torch.bool, device=ids.device).tril(diagonal=T_past)  # (T, T_past+T)
    x = model.token_embedding(ids)                                                       # (B, T, d_model)
    extended = []
    for i, block in enumerate(model.blocks):
        attn, h = block.attn, block.norm1(x)
        q = split_heads(attn.w_q(h), attn.num_heads)                                     # (B, H, T, d_head)
        k = split_heads(attn.w_k(h), attn.num_kv_heads)                                  # (B, H_kv, T, d_head)
        v = split_heads(attn.w_v(h), attn.num_kv_heads)
        cos, sin = attn.cos[T_past:T_past + T], attn.sin[T_past:T_past + T]
        q, k = apply_rotary(q, cos, sin), apply_rotary(k, cos, sin)
        if cache is not None:
            k, v = torch.cat([cache[i][0], k], dim=2), torch.cat([cache[i][1], v], dim=2)  # (B, H_kv, T_past+T, d)
        extended.append((k, v))
        groups = attn.num_heads // attn.num_kv_heads
        out, _ = _attend(q, k.repeat_interleave(groups, dim=1), v.repeat_interleave(groups, dim=1), allowed)
        x = x + attn.w_o(merge_heads(out))
        x = x + block.ffn(block.norm2(x))
    return model.lm_head(model.norm(x)), extended


class LoRALinear(nn.Module):
    """base(x) + (alpha / rank) * x A^T B^T, with base frozen, A (rank, in) Kaiming-uniform and B (out, rank) zeros."""

    def __init__(self, base, rank=8, alpha=16.0):
        _in_use()
        super().__init__()
        if rank < 1:
            raise ValueError(f"rank must be at least 1, got {rank}")
        self.base = base
        for parameter in base.parameters():
            parameter.requires_grad_(False)
        self.scaling = alpha / rank
        like = {"device": base.weight.device, "dtype": base.weight.dtype}
        self.lora_A = nn.Parameter(torch.empty(rank, base.in_features, **like))
        nn.init.kaiming_uniform_(self.lora_A, a=math.sqrt(5))
        self.lora_B = nn.Parameter(torch.zeros(base.out_features, rank, **like))

    def forward(self, x):
        _in_use()
        return self.base(x) + self.scaling * (x @ self.lora_A.T) @ self.lora_B.T

    def merged(self):
        _in_use()
        base = self.base
        layer = nn.Linear(base.in_features, base.out_features, bias=base.bias is not None,
                          device=base.weight.device, dtype=base.weight.dtype)
        with torch.no_grad():
            layer.weight.copy_(base.weight + self.scaling * self.lora_B @ self.lora_A)
            if base.bias is not None:
                layer.bias.copy_(base.bias)
        return layer

NEEDS = {
    "sinusoidal_positional_encoding": (),
    "PositionalEncoding": ("sinusoidal_positional_encoding",),
    "TokenEmbedding": (),
    "split_heads": (),
    "merge_heads": (),
    "MultiHeadAttention": ("split_heads", "merge_heads", "_attend"),
    "_attend": (),
    "PositionwiseFeedForward": (),
    "EncoderBlock": ("MultiHeadAttention", "PositionwiseFeedForward"),
    "Encoder": ("TokenEmbedding", "PositionalEncoding", "EncoderBlock"),
    "DecoderBlock": ("MultiHeadAttention", "PositionwiseFeedForward"),
    "Decoder": ("TokenEmbedding", "PositionalEncoding", "DecoderBlock"),
    "Transformer": ("Encoder", "Decoder"),
    "masked_mean_pool": (),
    "lm_loss": (),
    "sample_next_token": (),
    "RMSNorm": (),
    "rotary_cos_sin": (),
    "apply_rotary": (),
    "SwiGLU": (),
    "GroupedQueryAttention": ("rotary_cos_sin", "apply_rotary", "split_heads", "merge_heads", "_attend"),
    "LlamaBlock": ("RMSNorm", "GroupedQueryAttention", "SwiGLU"),
    "ModernGPT": ("LlamaBlock", "RMSNorm"),
    "_output_requires_grad": (),
    "cached_forward": ("split_heads", "merge_heads", "apply_rotary", "_attend"),
    "LoRALinear": (),
}
STAND_INS = frozenset(name for name in NEEDS if not name.startswith("_"))


def with_needs(names) -> list[str]:
    """`names` and everything they need, each once, needs first."""
    order: list[str] = []

    def visit(name):
        if name in order:
            return
        if name not in NEEDS:
            raise KeyError(f"no stand-in named {name!r}")
        for need in NEEDS[name]:
            visit(need)
        order.append(name)

    for name in names:
        visit(name)
    return order


def source_for(names) -> str:
    """The text of a module holding the stand-ins `names` (and what they need), ready to run in a kernel."""
    header = "import math\n\nimport torch\nfrom torch import nn\n\nLENT = True\n\n\n"
    pieces = [_source_of("_in_use"), *map(_source_of, with_needs(names))]
    return header + "\n\n".join(pieces)


@functools.cache
def _source_of(name: str) -> str:
    """The source of one stand-in (or `_in_use`), read once per process: `inspect.getsource` parses this whole file
    for every class it finds (0.1 CPU-s for the stand-ins of one notebook of 06, which every grading repeated)."""
    return inspect.getsource(globals()[name])


KERNEL_FILENAME = "<course stand-ins>"  # the file name the kernel's tracebacks show for a stand-in (no such file)


def compiled_for(names) -> bytes:
    """What the kernel receives for the stand-ins `names`: `source_for(names)` compiled here, without docstrings,
    and marshalled (the kernel runs the same Python: its jail binds this interpreter, autograder/sandbox/jail.py)."""
    return marshal.dumps(compile(source_for(names), KERNEL_FILENAME, "exec", dont_inherit=True, optimize=2))


def code_for(assignment: str) -> str:
    """The source of the stand-ins of this assignment's exercises, as a student would paste them: what the
    similarity check compares submissions with (a student's code that contains them kept what a check lent)."""
    from coursekit.api import by_name

    names = sorted(name for name in STAND_INS if by_name(name).notebook == assignment)
    return source_for(names) if names else ""
