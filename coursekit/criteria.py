"""The catalogue of stated edge cases: what an exercise asks for beyond its main behaviour, one id each.

Both check layers try each of them: the public self-check (`coursekit.checks.<topic>`, inside
`edge_case("<id>")` or with `criterion="<id>"`) and the hidden check of the grader (`autograder.checks`, the same),
where failing one costs only its share of the exercise's points (autograder/checks/criteria.py) instead of all of
them. Each is stated in its exercise's statement: `stated` is a phrase of the notebook's text
(tests/course/test_criteria.py compares the three lists: hidden checks, public checks, notebooks).

An id reads `<api name>.<case>`.
"""
from __future__ import annotations

import contextlib
from dataclasses import dataclass


@dataclass(frozen=True)
class Criterion:
    id: str      # e.g. "GroupedQueryAttention.too_long"
    api: str     # the course API name whose exercise states it
    text: str    # the edge case, as the feedback lists it
    stated: str  # a phrase of the notebook's statement of the exercise that asks for it


_CATALOGUE = [
    # 02 positional encoding
    ("sinusoidal_positional_encoding.odd_d_model", "sinusoidal_positional_encoding",
     "an odd d_model raises ValueError", "Raise `ValueError` for an odd `d_model`"),
    ("PositionalEncoding.too_long", "PositionalEncoding",
     "a sequence longer than max_len raises ValueError", "longer than `max_len` has no encoding: raise `ValueError`"),
    # 04 multi-head attention
    ("MultiHeadAttention.indivisible", "MultiHeadAttention",
     "d_model not divisible by num_heads raises ValueError", "is not divisible by `num_heads`"),
    # 05 and 06: max_len reaches the positional encoding
    ("Encoder.too_long", "Encoder",
     "a sequence longer than max_len raises ValueError (max_len reaches the positional encoding)",
     "longer than `max_len` raises `ValueError`"),
    ("Decoder.too_long", "Decoder",
     "a sequence longer than max_len raises ValueError (max_len reaches the positional encoding)",
     "longer than `max_len` raises `ValueError`"),
    ("Transformer.too_long", "Transformer",
     "a sequence longer than max_len raises ValueError (max_len reaches the positional encodings)",
     "longer than `max_len` raises `ValueError`"),
    # 08 GPT
    ("train_bpe.empty_text", "train_bpe", "an empty text gives no merges", "empty text"),
    ("GPT.too_long", "GPT", "T > max_len raises ValueError", "raise `ValueError` if `T > max_len`"),
    ("estimate_loss.too_short", "estimate_loss", "data too short for one window raises ValueError",
     "raise `ValueError` when no"),
    ("lr_at.bad_warmup", "lr_at", "warmup_steps outside [0, max_steps] raises ValueError", "raise `ValueError` unless"),
    ("sample_next_token.top_k_past_vocabulary", "sample_next_token",
     "a top_k equal to or larger than the vocabulary keeps every token", "equal to or larger than"),
    # 09 the modern block
    ("rotary_cos_sin.odd_d_head", "rotary_cos_sin", "an odd d_head raises ValueError",
     "an odd `d_head` raises `ValueError`"),
    ("GroupedQueryAttention.bad_sizes", "GroupedQueryAttention",
     "sizes that do not split into heads and groups raise ValueError",
     "`num_heads % num_kv_heads` or an odd `d_head` makes the sizes"),
    ("GroupedQueryAttention.too_long", "GroupedQueryAttention", "T > max_len raises ValueError", "T > max_len"),
    ("LlamaBlock.too_long", "LlamaBlock", "T > max_len raises ValueError (max_len reaches the attention)",
     "more than `max_len` positions raises `ValueError`"),
    ("ModernGPT.too_long", "ModernGPT", "T > max_len raises ValueError", "`T > max_len` raises `ValueError`"),
    # 10 translation
    ("label_smoothed_cross_entropy.bad_smoothing", "label_smoothed_cross_entropy",
     "a smoothing outside [0, 1) raises ValueError", "A `smoothing` outside `[0, 1)` raises"),
    ("noam_lr.bad_warmup", "noam_lr", "warmup_steps below 1 raises ValueError",
     "A `warmup_steps` below 1 raises `ValueError`"),
    ("corpus_bleu.length_mismatch", "corpus_bleu", "lists of different lengths raise ValueError",
     "Lists of different lengths raise"),
]

CRITERIA: dict[str, Criterion] = {}
for _id, _api, _text, _stated in _CATALOGUE:
    if _id in CRITERIA:
        raise ValueError(f"criterion {_id!r} is listed twice")
    CRITERIA[_id] = Criterion(_id, _api, _text, _stated)


@contextlib.contextmanager
def edge_case(criterion: str):
    """A public self-check's edge case: a failure inside says which stated edge case it was."""
    if criterion not in CRITERIA:
        raise KeyError(f"edge case {criterion!r} is not in the catalogue coursekit/criteria.py")
    try:
        yield
    except AssertionError as failure:
        failure.args = (f"{failure.args[0] if failure.args else ''}\n(an edge case the exercise states: "
                        f"{CRITERIA[criterion].text})",)
        raise
