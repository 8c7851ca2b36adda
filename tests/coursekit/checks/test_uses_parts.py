"""Public self-checks of exercises built of parts (`coursekit.checks.toolkit.uses_parts`).

A composite whose part fails its own check says "fix that first" instead of a confusing mismatch deeper down; a
composite that is right given working parts says so. Students are the reference's source run in a fresh namespace
(its classes look their parts up by global name, as a notebook's do), with one part broken.
"""
from __future__ import annotations

import importlib
import inspect
import types

import pytest
import torch

from coursekit.checks import classifier, encoder, multi_head, positional
from coursekit.checks.toolkit import CheckFailed


def _student(module: str, edits=(), unfinished: str | None = None) -> types.ModuleType:
    source = inspect.getsource(importlib.import_module(f"solutions.{module}"))
    for old, new in edits:
        assert old in source
        source = source.replace(old, new)
    namespace = types.ModuleType(f"student_{module}")
    exec(compile(source, namespace.__name__, "exec"), namespace.__dict__)
    if unfinished:
        def not_yet(*args, **kwargs):
            raise NotImplementedError()
        original = namespace.__dict__[unfinished]
        namespace.__dict__[unfinished] = (type(unfinished, (original,), {"forward": not_yet})
                                          if isinstance(original, type) else not_yet)
    return namespace


@pytest.mark.parametrize("module, part, check, composite", [
    ("encoder", "PositionwiseFeedForward", encoder.check_encoder_block, "EncoderBlock"),
    ("multi_head", "split_heads", multi_head.check_multi_head_attention, "MultiHeadAttention"),
    ("positional", "sinusoidal_positional_encoding", positional.check_positional_encoding, "PositionalEncoding"),
    ("classifier", "masked_mean_pool", classifier.check_transformer_classifier, "TransformerClassifier"),
])
def test_an_unfinished_part_is_named_first(module, part, check, composite):
    namespace = _student(module, unfinished=part)
    torch.manual_seed(0)
    with pytest.raises(CheckFailed) as failure:
        check(getattr(namespace, composite))
    assert f"your {composite} uses your {part}, which fails its own check: fix that first" in str(failure.value)


def test_a_composite_right_given_working_parts_says_so(capsys):
    namespace = _student("encoder", [("torch.relu(self.linear1(x))", "self.linear1(x)")])   # no ReLU
    with pytest.raises(CheckFailed):
        encoder.check_positionwise_feed_forward(namespace.PositionwiseFeedForward)
    encoder.check_encoder_block(namespace.EncoderBlock)
    out = capsys.readouterr().out
    assert "EncoderBlock: all public checks passed" in out
    assert "EncoderBlock is right given working parts, but your PositionwiseFeedForward still fails" in out


def test_a_composite_with_working_parts_says_nothing_more(capsys):
    namespace = _student("encoder")
    encoder.check_encoder_block(namespace.EncoderBlock)
    assert "given working parts" not in capsys.readouterr().out
