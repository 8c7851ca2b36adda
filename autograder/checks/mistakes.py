"""Known-mistake variants of the reference, used to name the likely error when a student's numbers differ.

Each function recomputes a reference result with one deliberate, common error switched on, using the reference's
own weights. With every switch at its default, each function reproduces the reference exactly (the tests check
this), so a match with a switch on really points at that error.

The mistakes' ids and texts live in `coursekit.mistakes` (the catalogue); here they only key the variants.
Mask convention as in the course: True = may attend.
"""
from __future__ import annotations

import math
from collections import Counter

import torch
from torch import nn


# ---------------------------------------------------------------------------------------------- 01 data prep
def build_vocab(tokenized_texts, min_freq=1, specials=("<pad>", "<unk>", "<bos>", "<eos>"), *, ties="alpha",
                specials_first=True, strict_min=False, dedupe_specials=True, descending=True):
    """Vocabulary with switches: ties "alpha" / "first_seen" (Counter.most_common) / "reverse_alpha", specials
    last, count > min_freq, a special re-assigned a new id (`vocab[token] = len(vocab)`), ascending counts."""
    counts = Counter()
    for tokens in tokenized_texts:
        counts.update(tokens)                       # insertion order = order of first appearance
    tokens = list(counts)
    if ties == "alpha":
        tokens.sort()
    elif ties == "reverse_alpha":
        tokens.sort(reverse=True)
    tokens.sort(key=lambda t: -counts[t] if descending else counts[t])  # stable: ties keep the order above
    kept = [t for t in tokens if (counts[t] > min_freq if strict_min else counts[t] >= min_freq)]
    vocab: dict[str, int] = {}
    first, second = (specials, kept) if specials_first else (kept, specials)
    for group in (first, second):
        for token in group:
            if token not in vocab:
                vocab[token] = len(vocab)
            elif not dedupe_specials and group is kept:
                vocab[token] = len(vocab)           # overwrites the special's id
    return vocab


def encode(tokens, vocab, *, unk_id=None):
    unk = vocab["<unk>"] if unk_id is None else unk_id
    return [vocab.get(t, unk) for t in tokens]


def pad_batch(sequences, pad_id=0, max_len=None, *, pre_padding=False, truncate_front=False, ignore_pad_id=False):
    longest = max((len(s) for s in sequences), default=0)
    T = longest if max_len is None else max_len
    fill = 0 if ignore_pad_id else pad_id
    batch = torch.full((len(sequences), T), fill, dtype=torch.long)  # (B, T)
    for row, seq in enumerate(sequences):
        kept = list(seq)[-T:] if truncate_front and len(seq) > T else list(seq)[:T]
        if kept:
            if pre_padding:
                batch[row, T - len(kept):] = torch.tensor(kept)
            else:
                batch[row, :len(kept)] = torch.tensor(kept)
    return batch


def embedding_matrix_from_word2vec(vocab, keyed_vectors, *, by_iteration=False, random_missing=False):
    matrix = torch.zeros(len(vocab), keyed_vectors.vector_size)
    for position, (word, index) in enumerate(vocab.items()):
        row = position if by_iteration else index
        if word in keyed_vectors.key_to_index:
            matrix[row] = torch.tensor(keyed_vectors[word], dtype=torch.float32)
        elif random_missing:
            matrix[row] = float("nan")  # never equal: "not zero" is diagnosed by a dedicated comparison
    return matrix


def attention_over_words(query, keys, keyed_vectors, *, scale="sqrt"):
    """(weights, value) as float64 tensors, with the scale switched: "sqrt", "none", "mul_sqrt", "d"."""
    q = torch.tensor(keyed_vectors[query], dtype=torch.float64)                               # (d,)
    K = torch.stack([torch.tensor(keyed_vectors[w], dtype=torch.float64) for w in keys])      # (n, d)
    d = keyed_vectors.vector_size
    factor = {"sqrt": 1 / math.sqrt(d), "none": 1.0, "mul_sqrt": math.sqrt(d), "d": 1 / d}[scale]
    weights = torch.softmax(K @ q * factor, dim=0)                                            # (n,)
    return weights, weights @ K                                                               # (n,), (d,)


# ----------------------------------------------------------------------------------------------- 02 positions
def sinusoidal(max_len, d_model, *, swap=False, exponent="pair", halves=False, base=10000.0):
    """Sinusoidal table; exponent "pair" (correct 2i/d), "column" (j/d for column j), "no_two" (i/d); `base` the
    frequency base (10000 in the course)."""
    position = torch.arange(max_len, dtype=torch.float64)[:, None]                           # (max_len, 1)
    column = torch.arange(d_model, dtype=torch.float64)                                      # (d_model,)
    pair = torch.div(column, 2, rounding_mode="floor")
    power = {"pair": 2 * pair / d_model, "column": column / d_model, "no_two": pair / d_model}[exponent]
    angle = position / (base ** power)                                                       # (max_len, d_model)
    even = (column % 2 == 0)
    first, second = (torch.cos, torch.sin) if swap else (torch.sin, torch.cos)
    if halves:
        pe = torch.cat([first(angle[:, 0::2]), second(angle[:, 0::2])], dim=1)              # (max_len, d_model)
    else:
        pe = torch.where(even, first(angle), second(angle))                                 # (max_len, d_model)
    return pe.float()


def add_positions(x, table, *, from_batch=False, without_x=False):
    """x (B, T, d) + table[:T] (T, d); or the batch-axis mistake table[:B] broadcast over T."""
    B, T, _ = x.shape
    positions = table[:B].unsqueeze(1) if from_batch else table[:T]                          # (B, 1, d) or (T, d)
    return positions.expand(x.shape).to(x) if without_x else x + positions.to(x)


# ---------------------------------------------------------------------------------------------- 03 attention
def sdpa(query, key, value, mask=None, *, scale="sqrt", softmax_dim=-1, invert_mask=False, ignore_mask=False,
         mask_after_softmax=False, d_scale=None):
    """Scaled dot-product attention with switches. `d_scale` overrides the width used in the scale."""
    d = query.size(-1) if d_scale is None else d_scale
    factor = {"sqrt": 1 / math.sqrt(d), "none": 1.0, "mul_sqrt": math.sqrt(d), "d": 1 / d}[scale]
    scores = query @ key.transpose(-2, -1) * factor                                         # (..., T_q, T_k)
    keep = None
    if mask is not None and not ignore_mask:
        keep = mask.to(torch.bool)
        if invert_mask:
            keep = ~keep
    if keep is not None and not mask_after_softmax:
        scores = scores.masked_fill(~keep, torch.finfo(scores.dtype).min)
    weights = torch.softmax(scores, dim=softmax_dim)
    if keep is not None and mask_after_softmax:
        weights = weights * keep
    return weights @ value, weights


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


ATTENTION_MISTAKES = {
    "attention.missing_scale": {"scale": "none"},
    "multi_head.scale_d_model": {"scale_width": "d_model"},
    "attention.scale_multiplied": {"scale": "mul_sqrt"},
    "attention.scale_by_d": {"scale": "d"},
    "attention.softmax_dim": {"softmax_dim": -2},
    "attention.mask_inverted": {"invert_mask": True},
    "attention.mask_ignored": {"ignore_mask": True},
    "attention.mask_after_softmax": {"mask_after_softmax": True},
    "multi_head.split_no_transpose": {"split_how": "no_transpose"},
    "multi_head.split_interleaved": {"split_how": "interleaved"},
    "multi_head.merge_no_transpose": {"merge_how": "no_transpose"},
}
SDPA_FLAGS = ("scale", "softmax_dim", "invert_mask", "ignore_mask", "mask_after_softmax")


# ------------------------------------------------------------------------------------------ 05 encoder stack
def feed_forward(ffn, x, *, relu=True, relu_after=False):
    h = ffn.linear1(x)                                                                      # (B, T, d_ff)
    h = torch.relu(h) if relu else h
    out = ffn.linear2(h)                                                                    # (B, T, d_model)
    return torch.relu(out) if relu_after else out


def encoder_block(block, x, mask=None, *, norm_first=None, attn_residual=True, ffn_residual=True, attn_flags=None):
    """EncoderBlock with switches; `norm_first=None` keeps the block's own arrangement."""
    norm_first = block.norm_first if norm_first is None else norm_first
    flags = attn_flags or {}

    def attend(h):
        return mha(block.self_attn, h, h, h, mask, **flags)[0]

    if norm_first:
        a = attend(block.norm1(x))
        x = x + a if attn_residual else a
        f = block.ffn(block.norm2(x))
        return x + f if ffn_residual else f
    a = attend(x)
    x = block.norm1(x + a if attn_residual else a)
    f = block.ffn(x)
    return block.norm2(x + f if ffn_residual else f)


def _embed(stack, ids, *, scale_embeddings=True, positions=True):
    d_model = stack.embedding.weight.shape[1]
    x = stack.embedding.weight[ids] * (math.sqrt(d_model) if scale_embeddings else 1.0)    # (B, T, d_model)
    if positions:
        x = x + stack.pos_encoding.pe[: ids.size(1)].to(x)
    return x


def _final_norm(stack, x, final_norm):
    """final_norm None: as the reference (norm only for pre-norm); True/False force it on/off."""
    has_norm = isinstance(stack.norm, nn.LayerNorm)
    if final_norm is None:
        return stack.norm(x)
    if final_norm and has_norm:
        return stack.norm(x)
    if final_norm and not has_norm:
        return nn.functional.layer_norm(x, x.shape[-1:])
    return x


def encoder(stack, ids, mask=None, *, scale_embeddings=True, positions=True, final_norm=None, **block_flags):
    x = _embed(stack, ids, scale_embeddings=scale_embeddings, positions=positions)
    for layer in stack.layers:
        x = encoder_block(layer, x, mask, **block_flags)
    return _final_norm(stack, x, final_norm)


# --------------------------------------------------------------------------------------- 06 decoder and model
def decoder_block(block, x, memory, tgt_mask=None, memory_mask=None, *, norm_first=None, attn_residual=True,
                  cross_residual=True, ffn_residual=True, cross_from_decoder=False, swap_masks=False,
                  ignore_tgt_mask=False, attn_flags=None):
    norm_first = block.norm_first if norm_first is None else norm_first
    flags = attn_flags or {}
    if swap_masks:
        tgt_mask, memory_mask = memory_mask, tgt_mask
    self_mask = None if ignore_tgt_mask else tgt_mask

    def self_attend(h):
        return mha(block.self_attn, h, h, h, self_mask, **flags)[0]

    def cross_attend(h):
        source = h if cross_from_decoder else memory
        return mha(block.cross_attn, h, source, source, memory_mask, **flags)[0]

    def residual(x, y, keep):
        return x + y if keep else y

    if norm_first:
        x = residual(x, self_attend(block.norm1(x)), attn_residual)
        x = residual(x, cross_attend(block.norm2(x)), cross_residual)
        return residual(x, block.ffn(block.norm3(x)), ffn_residual)
    x = block.norm1(residual(x, self_attend(x), attn_residual))
    x = block.norm2(residual(x, cross_attend(x), cross_residual))
    return block.norm3(residual(x, block.ffn(x), ffn_residual))


def decoder(stack, ids, memory, tgt_mask=None, memory_mask=None, *, scale_embeddings=True, positions=True,
            final_norm=None, **block_flags):
    x = _embed(stack, ids, scale_embeddings=scale_embeddings, positions=positions)
    for layer in stack.layers:
        x = decoder_block(layer, x, memory, tgt_mask, memory_mask, **block_flags)
    return _final_norm(stack, x, final_norm)


def transformer(model, src_ids, tgt_ids, *, causal=True, src_mask=True, pad_id=None, invert_src_mask=False,
                **decoder_flags):
    """Transformer.forward with switches; pad_id overrides model.pad_id (the hard-coded-0 mistake)."""
    pad = model.pad_id if pad_id is None else pad_id
    source_keep = (src_ids != pad)[:, None, None, :]                                        # (B, 1, 1, S)
    if invert_src_mask:
        source_keep = ~source_keep
    T = tgt_ids.size(1)
    target_keep = (tgt_ids != pad)[:, None, None, :]                                        # (B, 1, 1, T)
    if causal:
        target_keep = target_keep & torch.tril(torch.ones(T, T, dtype=torch.bool, device=tgt_ids.device))
    memory_mask = source_keep if src_mask else None
    memory = encoder(model.encoder, src_ids, memory_mask)
    x = decoder(model.decoder, tgt_ids, memory, target_keep, memory_mask, **decoder_flags)
    return model.generator(x)                                                               # (B, T, V)


@torch.no_grad()
def greedy(model, src_ids, max_len, bos_id=2, eos_id=3, *, keep_bos=False, early_stop=True, stop_any=False,
           pad_after_eos=True, keep_eos=True):
    """Greedy decoding through model.decode, with switches."""
    memory, src_mask = model.encode(src_ids)
    B = src_ids.size(0)
    ys = torch.full((B, 1), bos_id, dtype=torch.long, device=src_ids.device)                # (B, 1)
    finished = torch.zeros(B, dtype=torch.bool, device=src_ids.device)
    for _ in range(max_len):
        token = model.decode(ys, memory, src_mask)[:, -1].argmax(dim=-1)                    # (B,)
        if pad_after_eos:
            token = token.masked_fill(finished, model.pad_id)
        ys = torch.cat([ys, token[:, None]], dim=1)
        finished |= token == eos_id
        if early_stop and (finished.any() if stop_any else finished.all()):
            break
    out = ys if keep_bos else ys[:, 1:]
    if not keep_eos:
        out = out.masked_fill(out == eos_id, model.pad_id)
    return out


# ------------------------------------------------------------------------------------------ 09 the modern block
def rms_norm(weight, x, eps, *, axis=-1, eps_outside=False, center=False, use_weight=True):
    """RMSNorm with switches: the mean over another axis (`axis`), eps outside the root, LayerNorm's centring,
    the weight left out."""
    if center:
        x = x - x.mean(dim=-1, keepdim=True)
    mean_square = x.pow(2).mean(dim=axis, keepdim=True) if axis is not None else x.pow(2).mean()
    scaled = x / (mean_square.sqrt() + eps) if eps_outside else x * torch.rsqrt(mean_square + eps)
    return scaled * weight if use_weight else scaled


def rotary_tables(max_len, d_head, base=10000.0, *, exponent="two", swap=False):
    """(cos, sin) with the exponent switched: "two" (correct, -2i/d_head), "no_two" (-i/d_head), "four"."""
    position = torch.arange(max_len, dtype=torch.float64)[:, None]                          # (max_len, 1)
    pair = torch.arange(d_head // 2, dtype=torch.float64)                                   # (d_head/2,)
    factor = {"two": 2.0, "no_two": 1.0, "four": 4.0}[exponent]
    angle = position * base ** (-factor * pair / d_head)                                    # (max_len, d_head/2)
    cos, sin = torch.cos(angle).float(), torch.sin(angle).float()
    return (sin, cos) if swap else (cos, sin)


def rotate(x, cos, sin, *, halves=False, negative=False):
    """The rotation of apply_rotary; `halves`: pairs (x[i], x[i + d/2]) (the GPT-NeoX layout) instead of
    (x[2i], x[2i+1]); `negative`: rotated by minus the angle."""
    cos, sin = cos.to(x), (-sin if negative else sin).to(x)
    half = x.size(-1) // 2
    first, second = (x[..., :half], x[..., half:]) if halves else (x[..., 0::2], x[..., 1::2])
    out_first, out_second = first * cos - second * sin, first * sin + second * cos
    if halves:
        return torch.cat([out_first, out_second], dim=-1)
    return torch.stack([out_first, out_second], dim=-1).flatten(-2)


def swiglu(ffn, x, *, swap=False, activation="silu"):
    gate, up = ffn.w_gate(x), ffn.w_up(x)                                                   # (B, T, d_ff)
    if swap:
        gate, up = up, gate
    act = {"silu": nn.functional.silu, "relu": torch.relu, "gelu": nn.functional.gelu,
           "sigmoid": torch.sigmoid}[activation]
    return ffn.w_down(act(gate) * up)


def gqa(attn, x, mask=None, *, kv_map="interleave", rotary="qk", halves=False, exponent="two", base=None,
        **sdpa_flags):
    """GroupedQueryAttention with the reference module's weights and switches.

    kv_map: which kv head query head h uses: "interleave" (correct, h // groups), "tile" (h % num_kv_heads),
    "mod_groups" (h % groups). rotary: "qk" (correct), "qkv" (values rotated too), "none", "q" (queries only).
    """
    B, T, _ = x.shape
    H, H_kv = attn.num_heads, attn.num_kv_heads
    groups = H // H_kv
    q, k, v = split(attn.w_q(x), H), split(attn.w_k(x), H_kv), split(attn.w_v(x), H_kv)   # (B, *, T, d_head)
    d_head = q.size(-1)
    if exponent == "two" and base is None:
        cos, sin = attn.cos[:T], attn.sin[:T]
    else:  # another exponent, or another base than the module's (`base`)
        base = _base_of(attn, d_head) if base is None else base
        cos, sin = (t.to(x.device) for t in rotary_tables(T, d_head, base, exponent=exponent))
    turn = lambda t: rotate(t, cos, sin, halves=halves)  # noqa: E731
    if "q" in rotary:
        q = turn(q)
    if "k" in rotary:
        k = turn(k)
    if "v" in rotary:
        v = turn(v)
    index = {"interleave": torch.arange(H) // groups, "tile": torch.arange(H) % H_kv,
             "mod_groups": torch.arange(H) % groups}[kv_map].to(x.device)
    k, v = k[:, index], v[:, index]                                                         # (B, H, T, d_head)
    heads, _ = sdpa(q, k, v, mask, **sdpa_flags)
    return attn.w_o(merge(heads))                                                           # (B, T, d_model)


def _base_of(attn, d_head):
    """The rope base a module's tables were made with (angle[1, 1] = base ** (-2 / d_head))."""
    angle = float(torch.atan2(attn.sin[1, 1], attn.cos[1, 1]))
    return angle ** (-d_head / 2)


def llama_block(block, x, mask=None, *, post_norm=False, attn_residual=True, ffn_residual=True, attn_flags=None):
    flags = attn_flags or {}
    attend = lambda h: gqa(block.attn, h, mask, **flags)  # noqa: E731
    if post_norm:
        x = block.norm1(x + attend(x) if attn_residual else attend(x))
        return block.norm2(x + block.ffn(x) if ffn_residual else block.ffn(x))
    a = attend(block.norm1(x))
    x = x + a if attn_residual else a
    f = block.ffn(block.norm2(x))
    return x + f if ffn_residual else f


def modern_gpt(model, ids, *, causal=True, final_norm=True, scale_embeddings=False, **block_flags):
    T = ids.size(1)
    x = model.token_embedding.weight[ids]                                                   # (B, T, d_model)
    if scale_embeddings:
        x = x * math.sqrt(x.size(-1))
    mask = torch.tril(torch.ones(T, T, dtype=torch.bool, device=ids.device)) if causal else None
    for block in model.blocks:
        x = llama_block(block, x, mask, **block_flags)
    if final_norm:
        x = model.norm(x)
    return model.lm_head(x)                                                                 # (B, T, V)
