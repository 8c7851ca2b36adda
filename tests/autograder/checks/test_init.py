"""Every API name of notebooks 01-06 (the key/value cache included) has its hidden check exported from `autograder.checks`."""
from __future__ import annotations

import pytest

import autograder.checks

API_NAMES = [
    "build_vocab", "encode", "pad_batch", "token_embedding", "embedding_matrix_from_word2vec",
    "attention_over_words", "sinusoidal_positional_encoding", "positional_encoding", "learned_positional_embedding",
    "make_padding_mask", "make_causal_mask", "scaled_dot_product_attention", "split_heads", "merge_heads",
    "multi_head_attention", "positionwise_feed_forward", "encoder_block", "encoder", "decoder_block", "decoder",
    "transformer", "greedy_decode", "cached_greedy_decode",
]


@pytest.mark.parametrize("name", API_NAMES)
def test_check_is_exported(name):
    from autograder.checks import __all__ as exported

    assert f"check_{name}" in exported
    assert callable(getattr(autograder.checks, f"check_{name}"))


def test_unknown_name_is_an_attribute_error():
    with pytest.raises(AttributeError):
        autograder.checks.check_does_not_exist  # noqa: B018
