"""Known-mistake variants of notebook 04 (multi-head attention), and the tables of the mistakes they make.

`TABLE` (MultiHeadAttention) and `HEADS_TABLE` (split_heads, merge_heads; the same ids, other variants) =
{mistake id: (variant, switches)}: the variant run with those switches on a check's own inputs gives that mistake's
answer (`kit.compare.from_table`); a check tries its rows in the table's order, the first match naming the mistake.
`FORMS` = {mistake id: [switches, ...]}: other switches of the same variant that make the same mistake, tried right
after its row.
"""
from __future__ import annotations

from autograder.checks.attention.mistakes import sdpa
from autograder.checks.attention.mistakes import ATTENTION_MISTAKES


def split(x, num_heads, how="ok"):
    B, T, d_model = x.shape
    d_head = d_model // num_heads
    if how == "no_transpose":
        return x.reshape(B, num_heads, T, d_head)
    if how == "interleaved":
        return x.reshape(B, T, d_head, num_heads).permute(0, 3, 1, 2)
    return x.reshape(B, T, num_heads, d_head).transpose(1, 2)                                # (B, H, T, d_head)


def merge(x, how="ok"):
    B, H, T, d_head = x.shape
    if how == "no_transpose":
        return x.reshape(B, T, H * d_head)
    return x.transpose(1, 2).reshape(B, T, H * d_head)                                      # (B, T, H*d_head)


def mha(attn, query, key, value, mask=None, *, split_how="ok", merge_how="ok", scale_width="d_head", inputs="ok",
        **sdpa_flags):
    """Multi-head attention with the weights of the reference module `attn`, and switches.

    scale_width: "d_head" (correct) or "d_model" (the sqrt(d_model) mistake).
    inputs: "ok", or which inputs are mixed up: "kv_swapped" (w_k(value), w_v(key)), "value_from_key" (w_v(key)),
    "key_from_value" (w_k(value)), "query_from_key" (w_q(key)).
    """
    if inputs == "kv_swapped":
        key, value = value, key
    elif inputs == "value_from_key":
        value = key
    elif inputs == "key_from_value":
        key = value
    elif inputs == "query_from_key":
        query = key
    H = attn.num_heads
    d_model = attn.w_q.weight.shape[0]
    q = split(attn.w_q(query), H, split_how)                                                # (B, H, T_q, d_head)
    k = split(attn.w_k(key), H, split_how)                                                  # (B, H, T_k, d_head)
    v = split(attn.w_v(value), H, split_how)                                                # (B, H, T_k, d_head)
    d_scale = d_model if scale_width == "d_model" else None
    heads, weights = sdpa(q, k, v, mask, d_scale=d_scale, **sdpa_flags)                     # (B, H, T_q, d_head)
    return attn.w_o(merge(heads, merge_how)), weights


TABLE = {
    **{mistake_id: (mha, switches) for mistake_id, switches in ATTENTION_MISTAKES.items()},
    "multi_head.inputs_mixed": (mha, {"inputs": "kv_swapped"}),
}
FORMS = {"multi_head.inputs_mixed": [{"inputs": "value_from_key"}, {"inputs": "key_from_value"},
                                     {"inputs": "query_from_key"}]}
HEADS_TABLE = {
    "multi_head.split_no_transpose": (split, {"how": "no_transpose"}),
    "multi_head.split_interleaved": (split, {"how": "interleaved"}),
    "multi_head.merge_no_transpose": (merge, {"how": "no_transpose"}),
}
