"""Hidden checks of the course notebooks: `check_<api_name>(obj)` for every exercise.

A grade cell contains only, e.g.:

    from coursekit.probe import hand_in
    hand_in("multi_head_attention", MultiHeadAttention)

and the grader's judge step (autograder/grade/judge.py) then runs `check_multi_head_attention` HERE, in the
grader's process, with `RemoteObject`s standing for the handed-in objects (see `_remote.py`). A check passes
silently or raises `AssertionError` with a message for the student. The topic modules are imported lazily, on
first use of one of their checks.
"""
from __future__ import annotations

import importlib

# check name -> topic module (notebooks 01-06 here, 06's key/value cache in kv_cache.py; 07 in classifier.py)
_TOPIC_OF = {
    "check_build_vocab": "embeddings",
    "check_encode": "embeddings",
    "check_pad_batch": "embeddings",
    "check_token_embedding": "embeddings",
    "check_embedding_matrix_from_word2vec": "embeddings",
    "check_attention_over_words": "embeddings",
    "check_sinusoidal_positional_encoding": "positional",
    "check_positional_encoding": "positional",
    "check_learned_positional_embedding": "positional",
    "check_make_padding_mask": "attention",
    "check_make_causal_mask": "attention",
    "check_scaled_dot_product_attention": "attention",
    "check_split_heads": "multi_head",
    "check_merge_heads": "multi_head",
    "check_multi_head_attention": "multi_head",
    "check_positionwise_feed_forward": "encoder",
    "check_encoder_block": "encoder",
    "check_encoder": "encoder",
    "check_decoder_block": "transformer",
    "check_decoder": "transformer",
    "check_transformer": "transformer",
    "check_greedy_decode": "transformer",
    "check_cached_greedy_decode": "kv_cache",
    "check_masked_mean_pool": "classifier",
    "check_transformer_classifier": "classifier",
    "check_train_one_epoch": "classifier",
    "check_evaluate": "classifier",
    "check_trained_classifier": "classifier",
}

__all__ = sorted(_TOPIC_OF)


def __getattr__(name: str):
    topic = _TOPIC_OF.get(name)
    if topic is None:
        raise AttributeError(f"module 'autograder.checks' has no attribute {name!r}")
    module = importlib.import_module(f"autograder.checks.{topic}")
    return getattr(module, name)


def __dir__():
    return sorted(set(globals()) | set(__all__))
