"""Door 2 for notebooks 01-04: the hidden checks probe each submission with its own inputs (sizes, lengths, texts,
pad ids, seeds), the fixed inputs with no salt (autograder/checks/kit/draws.py)."""
from __future__ import annotations

import pytest
import torch

import solutions
from autograder.checks import attention, embeddings, multi_head, positional
from autograder.checks.kit.draws import salted


def _summary(value):
    if isinstance(value, torch.Tensor):
        return ("tensor", tuple(value.shape), round(float(value.double().sum()), 4))
    if isinstance(value, dict):
        return ("dict", tuple(sorted(value.items())))
    if isinstance(value, (list, tuple)):
        return tuple(_summary(v) for v in value)
    return value if isinstance(value, (int, float, str, type(None))) else type(value).__name__


def _recording(reference, calls: list):
    if isinstance(reference, type):
        def __init__(self, *args, **kwargs):
            calls.append(("init", _summary(args), _summary(sorted(kwargs.items()))))
            reference.__init__(self, *args, **kwargs)

        def forward(self, *args, **kwargs):
            calls.append(("forward", _summary(args), _summary(sorted(kwargs.items()))))
            return reference.forward(self, *args, **kwargs)

        return type(reference.__name__, (reference,), {"__init__": __init__, "forward": forward})

    def recorded(*args, **kwargs):
        calls.append((_summary(args), _summary(sorted(kwargs.items()))))
        return reference(*args, **kwargs)

    recorded.__name__ = reference.__name__
    return recorded


SUBJECTS = {
    "build_vocab": embeddings.check_build_vocab, "encode": embeddings.check_encode,
    "pad_batch": embeddings.check_pad_batch, "TokenEmbedding": embeddings.check_token_embedding,
    "attention_over_words": embeddings.check_attention_over_words,
    "embedding_matrix_from_word2vec": embeddings.check_embedding_matrix_from_word2vec,
    "sinusoidal_positional_encoding": positional.check_sinusoidal_positional_encoding,
    "PositionalEncoding": positional.check_positional_encoding,
    "LearnedPositionalEmbedding": positional.check_learned_positional_embedding,
    "make_padding_mask": attention.check_make_padding_mask, "make_causal_mask": attention.check_make_causal_mask,
    "scaled_dot_product_attention": attention.check_scaled_dot_product_attention,
    "split_heads": multi_head.check_split_heads, "merge_heads": multi_head.check_merge_heads,
    "MultiHeadAttention": multi_head.check_multi_head_attention,
}


def _probes(api: str, salt: int) -> list:
    calls: list = []
    with salted(salt):
        SUBJECTS[api](_recording(getattr(solutions, api), calls))
    assert calls
    return calls


@pytest.mark.fixed_inputs
@pytest.mark.parametrize("api", list(SUBJECTS))
def test_each_submission_is_probed_with_its_own_inputs(api):
    fixed = _probes(api, 0)
    assert _probes(api, 0) == fixed                           # no salt: the same (fixed) inputs every time
    assert _probes(api, 12345) == _probes(api, 12345)         # a submission: the same inputs at every regrade
    others = [_probes(api, salt) for salt in (12345, 987654321, 0x5eed2026)]
    assert all(probes != fixed for probes in others)          # other submissions: other inputs
    assert len({repr(probes) for probes in others}) > 1
