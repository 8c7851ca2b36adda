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

from coursekit.checks import classifier, encoder, gpt, modern, multi_head, positional
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
    ("gpt", "sample_next_token", gpt.check_generate, "generate"),
    ("gpt", "lm_loss", gpt.check_train_step, "train_step"),
    ("modern", "rotary_cos_sin", modern.check_grouped_query_attention, "GroupedQueryAttention"),
    ("modern", "apply_rotary", modern.check_grouped_query_attention, "GroupedQueryAttention"),
    ("modern", "SwiGLU", modern.check_llama_block, "LlamaBlock"),
    ("modern", "RMSNorm", modern.check_llama_block, "LlamaBlock"),
    ("modern", "GroupedQueryAttention", modern.check_llama_block, "LlamaBlock"),
    ("modern", "LlamaBlock", modern.check_modern_gpt, "ModernGPT"),
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


def test_a_part_that_fails_is_named_before_the_composites_built_on_it():
    """A wrong rotation breaks 09's attention, block and model: ModernGPT's self-check names the rotation first."""
    namespace = _student("modern", [("[even * cos - odd * sin, even * sin + odd * cos]",
                                     "[even * cos + odd * sin, odd * cos - even * sin]")])
    with pytest.raises(CheckFailed) as failure:
        modern.check_modern_gpt(namespace.ModernGPT)
    message = str(failure.value)
    assert message.startswith("your ModernGPT uses your apply_rotary and your GroupedQueryAttention and your "
                              "LlamaBlock, which fail its own check")
    assert "run the self-check of apply_rotary above" in message


def test_generate_right_given_working_parts_says_so(capsys):
    """08's public generate check draws greedily, so a wrong temperature in sample_next_token does not touch it."""
    namespace = _student("gpt", [("    logits = logits / temperature\n", ""),
                                 ("probs = torch.softmax(logits, dim=-1)",
                                  "probs = torch.softmax(logits, dim=-1) / temperature")])
    with pytest.raises(CheckFailed):
        gpt.check_sample_next_token(namespace.sample_next_token)
    gpt.check_generate(namespace.generate)
    out = capsys.readouterr().out
    assert "generate is right given working parts, but your sample_next_token still fails its own check" in out
