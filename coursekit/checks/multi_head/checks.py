"""Public self-checks for notebook 04 (multi-head attention).

The expected answers are worked out here with NumPy, head by head in plain loops, so they do not share code (or
mistakes) with a tensor implementation. Shapes: B batch, H heads, T_q / T_k query / key lengths, d_head = d_model // H.
"""
from __future__ import annotations

import numpy as np
import torch
from torch import nn

from coursekit.checks.toolkit import (close, expect_close, expect_shape, expect_type, fail, first_matching_hint,
                                     mistake_hint, passed, run, softmax_rows)
from coursekit.checks.toolkit import uses_parts
from coursekit.criteria import argument, edge_case

# A small example where every size differs, so a swapped axis cannot hide: B=2, H=3, T=4, d_head=2 (d_model=6).
_B, _H, _T, _D_HEAD = 2, 3, 4, 2
_D_MODEL = _H * _D_HEAD
_T_K = 5  # keys/values of another length, as in cross-attention


def _numbered(*shape: int) -> torch.Tensor:
    """0, 1, 2, ... laid out in `shape`: every entry tells where it came from."""
    return torch.arange(int(np.prod(shape)), dtype=torch.float32).reshape(shape)


# --------------------------------------------------------------------------------------------- split / merge heads

def _split_by_loops(x: np.ndarray, num_heads: int) -> np.ndarray:
    """(B, T, d_model) -> (B, H, T, d_head): out[b, h, t, j] = x[b, t, h * d_head + j]."""
    B, T, d_model = x.shape
    d_head = d_model // num_heads
    out = np.zeros((B, num_heads, T, d_head))
    for b in range(B):
        for h in range(num_heads):
            for t in range(T):
                out[b, h, t] = x[b, t, h * d_head:(h + 1) * d_head]
    return out


def _merge_by_loops(x: np.ndarray) -> np.ndarray:
    """(B, H, T, d_head) -> (B, T, H * d_head): the heads' features side by side, head 0 first."""
    B, H, T, d_head = x.shape
    out = np.zeros((B, T, H * d_head))
    for b in range(B):
        for t in range(T):
            out[b, t] = np.concatenate([x[b, h, t] for h in range(H)])
    return out


def check_split_heads(split_heads) -> None:
    x = _numbered(_B, _T, _D_MODEL)                                                   # (2, 4, 6)
    out = run("split_heads", split_heads, x.clone(), _H)
    expect_type(out, torch.Tensor, "split_heads(x, num_heads)")
    shape = (_B, _H, _T, _D_HEAD)
    expect_shape(out, shape, f"split_heads(x of shape {tuple(x.shape)}, num_heads={_H})",
                 "the result is (B, num_heads, T, d_model // num_heads): split the last axis, then move heads "
                 "in front of the time axis.")
    expected = _split_by_loops(x.numpy(), _H)
    hint = first_matching_hint(out, [
        (x.reshape(shape), mistake_hint("multi_head.split_no_transpose")),
        (x.reshape(_B, _T, _D_HEAD, _H).permute(0, 3, 1, 2), mistake_hint("multi_head.split_interleaved")),
    ])
    expect_close(out, expected, f"split_heads(x, num_heads={_H})", hint)
    passed("split_heads")


def check_merge_heads(merge_heads) -> None:
    x = _numbered(_B, _H, _T, _D_HEAD)                                                # (2, 3, 4, 2)
    out = run("merge_heads", merge_heads, x.clone())
    expect_type(out, torch.Tensor, "merge_heads(x)")
    shape = (_B, _T, _H * _D_HEAD)
    expect_shape(out, shape, f"merge_heads(x of shape {tuple(x.shape)})",
                 "the result is (B, T, H * d_head): one row of features per time step.")
    hint = first_matching_hint(out, [
        (x.reshape(shape), mistake_hint("multi_head.merge_no_transpose")),
    ])
    expect_close(out, _merge_by_loops(x.numpy()), "merge_heads(x)", hint)
    passed("merge_heads")


# ------------------------------------------------------------------------------------------------ MultiHeadAttention

def _mha_by_loops(params: dict, query, key, value, mask, num_heads: int, mistake: str | None = None):
    """Multi-head attention head by head in float64 NumPy; `mistake` makes one known wrong version."""
    def linear(x, name):
        return x @ params[name + ".weight"].T + params.get(name + ".bias", 0.0)

    q, k, v = linear(query, "w_q"), linear(key, "w_k"), linear(value, "w_v")          # (B, T, d_model)
    B, T_q, d_model = q.shape
    T_k = k.shape[1]
    d_head = d_model // num_heads
    if mistake == "split_without_transpose":
        heads_of = lambda x: x.reshape(B, num_heads, x.shape[1], d_head)              # noqa: E731
    else:
        heads_of = lambda x: _split_by_loops(x, num_heads)                            # noqa: E731
    qh, kh, vh = heads_of(q), heads_of(k), heads_of(v)                                 # (B, H, T, d_head)
    scale = {"no_scale": 1.0, "sqrt_d_model": np.sqrt(d_model)}.get(mistake, np.sqrt(d_head))
    weights = np.zeros((B, num_heads, T_q, T_k))
    heads = np.zeros((B, num_heads, T_q, d_head))
    keep = np.ones((B, 1, T_q, T_k), dtype=bool) if mask is None else np.broadcast_to(mask, (B, 1, T_q, T_k))
    if mistake == "inverted_mask" and mask is not None:
        keep = ~keep
    for b in range(B):
        for h in range(num_heads):
            scores = qh[b, h] @ kh[b, h].T / scale                                     # (T_q, T_k)
            scores = np.where(keep[b, 0], scores, -1e30)
            w = softmax_rows(scores.T).T if mistake == "softmax_over_queries" else softmax_rows(scores)
            weights[b, h] = w
            heads[b, h] = w @ vh[b, h]
    merged = heads.transpose(0, 2, 1, 3).reshape(B, T_q, d_model)                     # (B, T_q, d_model)
    if mistake == "merge_without_transpose":
        merged = heads.reshape(B, T_q, d_model)
    if mistake == "no_output_projection":
        return merged, weights
    return linear(merged, "w_o"), weights


_MHA_MISTAKES = {
    "no_scale": mistake_hint("attention.missing_scale"),
    "sqrt_d_model": mistake_hint("multi_head.scale_d_model"),
    "inverted_mask": mistake_hint("attention.mask_inverted"),
    "softmax_over_queries": mistake_hint("attention.softmax_dim"),
    "split_without_transpose": mistake_hint("multi_head.split_no_transpose"),
    "merge_without_transpose": mistake_hint("multi_head.merge_no_transpose"),
    "no_output_projection": "the heads are merged but not passed through the output projection w_o.",
}


def _fixed_params(module: nn.Module, seed: int) -> dict:
    """Give w_q, w_k, w_v, w_o fixed random values; return them as float64 NumPy arrays."""
    generator = torch.Generator().manual_seed(seed)
    params = {}
    with torch.no_grad():
        for name in ("w_q", "w_k", "w_v", "w_o"):
            linear = getattr(module, name)
            linear.weight.copy_(torch.randn(linear.weight.shape, generator=generator) * 0.6)
            params[name + ".weight"] = linear.weight.detach().cpu().double().numpy()
            if linear.bias is not None:
                linear.bias.copy_(torch.randn(linear.bias.shape, generator=generator) * 0.2)
                params[name + ".bias"] = linear.bias.detach().cpu().double().numpy()
    return params


def _check_linear_submodules(module: nn.Module, d_model: int, bias: bool) -> None:
    for name in ("w_q", "w_k", "w_v", "w_o"):
        linear = getattr(module, name, None)
        if not isinstance(linear, nn.Linear):
            fail(f"MultiHeadAttention needs a submodule `{name}` that is an nn.Linear, got {type(linear).__name__}.",
                 f"in __init__ write self.{name} = nn.Linear(d_model, d_model, bias=bias).")
        if (linear.in_features, linear.out_features) != (d_model, d_model):
            fail(f"`{name}` should map {d_model} -> {d_model} features, got "
                 f"{linear.in_features} -> {linear.out_features}.")
        if (linear.bias is not None) != bias:
            fail(f"with bias={bias}, `{name}` should {'have' if bias else 'have no'} bias.",
                 "pass bias=bias to every nn.Linear.")


def _run_case(module, params, case: str, query, key, value, mask) -> None:
    result = run("MultiHeadAttention.forward", module, query, key, value, mask)
    if not (isinstance(result, tuple) and len(result) == 2):
        fail(f"MultiHeadAttention should return a pair (output, weights), got {type(result).__name__}.",
             "end forward with `return output, weights`.")
    output, weights = result
    B, T_q, d_model = query.shape
    T_k = key.shape[1]
    expect_shape(weights, (B, _H, T_q, T_k), f"the attention weights ({case})",
                 "keep one weight matrix per head: (B, H, T_q, T_k).")
    expect_shape(output, (B, T_q, d_model), f"the output ({case})")
    as_np = [t.double().numpy() for t in (query, key, value)]
    np_mask = None if mask is None else mask.numpy()
    want_out, want_weights = _mha_by_loops(params, *as_np, np_mask, _H)
    candidates = [(_mha_by_loops(params, *as_np, np_mask, _H, mistake)[1], hint)
                  for mistake, hint in _MHA_MISTAKES.items() if mistake not in ("merge_without_transpose",
                                                                              "no_output_projection")]
    expect_close(weights, want_weights, f"the attention weights ({case})", first_matching_hint(weights, candidates))
    candidates = [(_mha_by_loops(params, *as_np, np_mask, _H, mistake)[0], hint)
                  for mistake, hint in _MHA_MISTAKES.items()]
    expect_close(output, want_out, f"the output ({case})", first_matching_hint(output, candidates))


@uses_parts("MultiHeadAttention")
def check_multi_head_attention(MultiHeadAttention) -> None:
    module = run("MultiHeadAttention", MultiHeadAttention, _D_MODEL, _H)
    expect_type(module, nn.Module, f"MultiHeadAttention({_D_MODEL}, {_H})", "subclass nn.Module.")
    _check_linear_submodules(module, _D_MODEL, bias=True)
    with edge_case("MultiHeadAttention.indivisible"):
        try:
            MultiHeadAttention(7, 2)
        except ValueError:
            pass
        except NotImplementedError:
            fail("MultiHeadAttention is not implemented yet (it still raises NotImplementedError).")
        except Exception as error:
            fail(f"MultiHeadAttention(7, 2) raised {type(error).__name__}, expected ValueError.",
                 "check `d_model % num_heads != 0` at the start of __init__ and raise ValueError with a message.")
        else:
            fail("MultiHeadAttention(7, 2) should raise ValueError: 7 features cannot be split into 2 equal heads.",
                 "check `d_model % num_heads != 0` at the start of __init__ and raise ValueError with a message.")

    module.eval()
    params = _fixed_params(module, seed=4)
    generator = torch.Generator().manual_seed(40)
    x = torch.randn(_B, _T, _D_MODEL, generator=generator)                            # (2, 4, 6)
    memory = torch.randn(_B, _T_K, _D_MODEL, generator=generator)                     # (2, 5, 6)
    padding = torch.tensor([[True] * _T_K, [True] * (_T_K - 2) + [False] * 2])[:, None, None, :]  # (2, 1, 1, 5)
    causal = torch.tril(torch.ones(_T, _T, dtype=torch.bool))                          # (4, 4)
    with torch.no_grad():
        _run_case(module, params, "self-attention, no mask", x, x, x, None)
        _run_case(module, params, "cross-attention with a padding mask", x, memory, memory, padding)
        _run_case(module, params, "self-attention with a causal mask", x, x, x, causal)
    with argument("MultiHeadAttention.bias"):
        plain = run("MultiHeadAttention", MultiHeadAttention, _D_MODEL, _H, bias=False)
        _check_linear_submodules(plain, _D_MODEL, bias=False)
        plain.eval()
        with torch.no_grad():
            _run_case(plain, _fixed_params(plain, seed=5), "bias=False, cross-attention with a padding mask", x,
                      memory, memory, padding)
    with argument("MultiHeadAttention.dropout"):
        _check_dropout(MultiHeadAttention, x, memory, padding)
    passed("MultiHeadAttention", "(self- and cross-attention, padding and causal masks, bias=False, dropout)")


def _check_dropout(MultiHeadAttention, x, memory, padding, p: float = 0.5) -> None:
    """dropout=p: nothing in eval mode; in training mode it drops attention weights (the output changes), and
    forward still returns the weights before dropout."""
    name = f"MultiHeadAttention({_D_MODEL}, {_H}, dropout={p})"
    module = run("MultiHeadAttention", MultiHeadAttention, _D_MODEL, _H, dropout=p)
    module.eval()
    params = _fixed_params(module, seed=4)
    case = f"{name}, cross-attention with a padding mask"
    with torch.no_grad():
        _run_case(module, params, case + ", eval mode", x, memory, memory, padding)
        want_out, want_weights = _mha_by_loops(params, *(t.double().numpy() for t in (x, memory, memory)),
                                               padding.numpy(), _H)
        module.train()
        torch.manual_seed(0)
        try:
            result = run(f"{name}.forward", module, x, memory, memory, padding)
        finally:
            module.eval()
    if not (isinstance(result, tuple) and len(result) == 2):
        fail(f"{name} in training mode should return a pair (output, weights), got {type(result).__name__}.")
    output, weights = result
    expect_shape(output, want_out.shape, f"the output ({case}, training mode)")
    expect_close(weights, want_weights, f"the attention weights ({case}, training mode)",
                 "return the weights before dropout; dropout only changes what multiplies v.")
    if close(output, want_out):
        fail(f"{name} in training mode gives the same output as in eval mode: its dropout does not act.",
             "self.dropout = nn.Dropout(dropout) in __init__; in forward apply it to the attention weights before "
             "multiplying by v.")
