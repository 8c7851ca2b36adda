"""Follow-through credit (autograder/checks/kit/parts.py): a composite is judged given working parts.

Every "student" here is the reference module's source run in a fresh namespace (so that its classes look up their
parts by global name, as a notebook's do), with one part broken: left unfinished (it raises NotImplementedError,
as released) or wrong with a mistake of the catalogue. The composite's own check, told that the part failed its
check (`assume_verdicts`, as the judge records it), passes: the stand-in is lent. Without the verdict the part's
failure cascades, as before. A composite that is itself wrong still fails, and says it was judged with a stand-in.
"""
from __future__ import annotations

import importlib
import inspect
import re
import sys
import types

import pytest
import torch

import autograder.checks as checks
from autograder.checks import stand_ins
from autograder.checks.kit.parts import INTENDED_CASCADES, MAX_CASCADE_POINTS, PARTS, assume_verdicts
from coursekit.api import snake_case

# part -> (module of solutions/ whose source holds it and its composites, a catalogue mistake as a source edit)
WRONG = {
    "sinusoidal_positional_encoding": ("positional", "positional.frequency_base", [("10000.0", "1000.0")]),
    "split_heads": ("multi_head", "multi_head.split_no_transpose",
                    [("reshape(B, T, num_heads, d_model // num_heads).transpose(1, 2)",
                      "reshape(B, num_heads, T, d_model // num_heads)")]),
    "merge_heads": ("multi_head", "multi_head.merge_no_transpose",
                    [("x.transpose(1, 2).reshape(B, T, H * d_head)", "x.reshape(B, T, H * d_head)")]),
    "PositionwiseFeedForward": ("encoder", "encoder.no_relu",
                                [("torch.relu(self.linear1(x))", "self.linear1(x)")]),
    "EncoderBlock": ("encoder", "encoder.missing_residual_ffn",
                     [("x = self.norm2(x + self.dropout2(self.ffn(x)))", "x = self.norm2(self.dropout2(self.ffn(x)))"),
                      ("x = x + self.dropout2(self.ffn(self.norm2(x)))", "x = self.dropout2(self.ffn(self.norm2(x)))")]),
    "DecoderBlock": ("transformer", "decoder.missing_residual_cross",
                     [("x = self.norm2(x + self._cross_attend(x, memory, memory_mask))",
                       "x = self.norm2(self._cross_attend(x, memory, memory_mask))"),
                      ("x = x + self._cross_attend(self.norm2(x), memory, memory_mask)",
                       "x = self._cross_attend(self.norm2(x), memory, memory_mask)")]),
    "Decoder": ("transformer", "encoder.no_embedding_scale",
                [("self.embedding(tgt_ids) * math.sqrt(self.d_model)", "self.embedding(tgt_ids)")]),
    "Transformer": ("transformer", "transformer.no_causal_mask",
                    [("make_padding_mask(tgt_ids, self.pad_id) & make_causal_mask(T, device=tgt_ids.device)",
                      "make_padding_mask(tgt_ids, self.pad_id)")]),
    "masked_mean_pool": ("classifier", "pool.includes_padding",
                         [("total = (x * keep).sum(dim=1)", "total = x.sum(dim=1)"),
                          ("count = keep.sum(dim=1).clamp(min=1.0)", "count = torch.full_like(keep.sum(dim=1), x.shape[1])")]),
    "lm_loss": ("gpt", "lm_loss.sum", [("F.cross_entropy(logits.reshape(-1, V), targets.reshape(-1))",
                                        'F.cross_entropy(logits.reshape(-1, V), targets.reshape(-1), reduction="sum")')]),
    "sample_next_token": ("gpt", "sample.temperature_after_softmax",
                          [("    logits = logits / temperature\n", ""),
                           ("probs = torch.softmax(logits, dim=-1)",
                            "probs = torch.softmax(logits, dim=-1) / temperature")]),
    "RMSNorm": ("modern", "rms_norm.subtracts_mean",
                [("return x * torch.rsqrt(",
                  "x = x - x.mean(dim=-1, keepdim=True)\n        return x * torch.rsqrt(")]),
    "rotary_cos_sin": ("modern", "rotary.cos_sin_swapped",
                       [("return torch.cos(angle).float(), torch.sin(angle).float()",
                         "return torch.sin(angle).float(), torch.cos(angle).float()")]),
    "apply_rotary": ("modern", "rotary.wrong_direction",
                     [("[even * cos - odd * sin, even * sin + odd * cos]",
                       "[even * cos + odd * sin, odd * cos - even * sin]")]),
    "SwiGLU": ("modern", "swiglu.relu", [("F.silu(self.w_gate(x))", "F.relu(self.w_gate(x))")]),
    "GroupedQueryAttention": ("modern", "gqa.kv_heads_tiled",
                              [("k = k.repeat_interleave(groups, dim=1)", "k = k.repeat(1, groups, 1, 1)"),
                               ("v = v.repeat_interleave(groups, dim=1)", "v = v.repeat(1, groups, 1, 1)")]),
    "LlamaBlock": ("modern", "llama.missing_residual",
                   [("return x + self.ffn(self.norm2(x))", "return self.ffn(self.norm2(x))")]),
    "cached_forward": ("pretrained", "kv.no_rotary_offset",
                       [("attn.cos[T_past:T_past + T], attn.sin[T_past:T_past + T]", "attn.cos[:T], attn.sin[:T]")]),
    "LoRALinear": ("pretrained", "lora.scaling_alpha", [("self.scaling = alpha / rank", "self.scaling = alpha")]),
}


def _student(module: str, part: str, how: str) -> types.ModuleType:
    """The reference module `solutions.<module>` as a student's namespace, with `part` unfinished or wrong."""
    source = inspect.getsource(importlib.import_module(f"solutions.{module}"))
    if how == "wrong":
        for old, new in WRONG[part][2]:
            assert old in source, (part, old)
            source = source.replace(old, new)
    name = f"student_{module}_{part}_{how}"
    namespace = types.ModuleType(name)
    sys.modules[name] = namespace  # dataclasses and inspect look modules up by name
    exec(compile(source, name, "exec"), namespace.__dict__)
    if how == "unfinished":  # as released: calling it (or building it) raises NotImplementedError
        original = namespace.__dict__[part]
        if isinstance(original, type):
            namespace.__dict__[part] = type(part, (original,), {"__init__": _unfinished, "forward": _unfinished})
        else:
            namespace.__dict__[part] = _unfinished
    return namespace


def _unfinished(*args, **kwargs):
    raise NotImplementedError()


def _check(name: str):
    return getattr(checks, f"check_{name}")


def _composite_cases():
    for composite, parts in PARTS.items():
        for part in parts:
            for how in ("unfinished", "wrong"):
                yield pytest.param(composite, part, how, id=f"{composite}-{part.name}-{how}")


def _objects(composite: str, namespace):
    handed = {"positional_encoding": ["PositionalEncoding"], "multi_head_attention": ["MultiHeadAttention"],
              "encoder_block": ["EncoderBlock"], "encoder": ["Encoder"], "decoder": ["Decoder"],
              "transformer": ["Transformer"], "cached_greedy_decode": ["cached_greedy_decode", "Transformer"],
              "transformer_classifier": ["TransformerClassifier"], "generate": ["generate"],
              "train_step": ["train_step"],
              "grouped_query_attention": ["GroupedQueryAttention"], "llama_block": ["LlamaBlock"],
              "modern_gpt": ["ModernGPT"], "cached_generate": ["cached_generate"], "add_lora": ["add_lora"]}[composite]
    return [getattr(namespace, name) for name in handed]


@pytest.mark.parametrize("name", sorted(stand_ins.STAND_INS))
def test_every_stand_in_passes_its_own_exercise_check(name):
    module = types.ModuleType("lent")
    exec(compile(stand_ins.source_for([name]), "lent", "exec"), module.__dict__)
    _check(snake_case(name))(getattr(module, name))


def test_the_source_sent_holds_only_what_was_asked_and_its_needs():
    source = stand_ins.source_for(["PositionwiseFeedForward"])
    assert "class PositionwiseFeedForward" in source
    assert "EncoderBlock" not in source and "MultiHeadAttention" not in source
    assert "solutions" not in stand_ins.source_for(sorted(stand_ins.STAND_INS))


@pytest.mark.parametrize("composite, part, how", list(_composite_cases()))
def test_a_composite_is_judged_given_working_parts(composite, part, how):
    module = WRONG[part.name][0]
    namespace = _student(module, part.name, how)
    with pytest.raises(AssertionError):  # the part fails its own check
        _check(part.check)(getattr(namespace, part.name))
    with assume_verdicts({part.check: False}):
        _check(composite)(*_objects(composite, namespace))   # the composite gets full marks
    # the stand-in was lent for the check only: the student's names are theirs again
    assert getattr(namespace, part.name).__module__ != "course_stand_ins"


@pytest.mark.parametrize("composite", ["encoder_block", "multi_head_attention"])
def test_without_the_verdicts_a_broken_part_still_cascades(composite):
    part = PARTS[composite][0]
    namespace = _student(WRONG[part.name][0], part.name, "unfinished")
    with pytest.raises(AssertionError):
        _check(composite)(*_objects(composite, namespace))


def test_a_wrong_composite_still_fails_and_says_it_was_judged_with_a_stand_in():
    namespace = _student("encoder", "PositionwiseFeedForward", "unfinished")
    source = inspect.getsource(importlib.import_module("solutions.encoder"))
    wrong = source.replace("x = self.norm2(x + self.dropout2(self.ffn(x)))", "x = self.norm2(self.dropout2(self.ffn(x)))")
    exec(compile(wrong, namespace.__name__, "exec"), namespace.__dict__)        # EncoderBlock without its residual
    namespace.PositionwiseFeedForward = type("PositionwiseFeedForward", (namespace.PositionwiseFeedForward,),
                                             {"forward": _unfinished})
    with assume_verdicts({"positionwise_feed_forward": False}), pytest.raises(AssertionError) as failure:
        checks.check_encoder_block(namespace.EncoderBlock)
    message = str(failure.value)
    assert getattr(failure.value, "mistake_id", None) == "encoder.missing_residual_ffn"
    assert "judged with the course's working `PositionwiseFeedForward` in place of yours" in message


def test_a_part_that_passed_is_the_students_own():
    """Follow-through: a part that passed its check is not replaced (a wrong composite fails with it)."""
    namespace = _student("encoder", "PositionwiseFeedForward", "wrong")
    with assume_verdicts({"positionwise_feed_forward": True}), pytest.raises(AssertionError):
        checks.check_encoder_block(namespace.EncoderBlock)


def test_lent_stand_ins_stop_working_after_the_check():
    namespace = _student("encoder", "PositionwiseFeedForward", "unfinished")
    exec("kept = {}\n"                               # a student's block that keeps the feed-forward it was given
         "class KeepingBlock(EncoderBlock):\n"
         "    def __init__(self, *args, **kwargs):\n"
         "        kept['ffn'] = PositionwiseFeedForward\n"
         "        super().__init__(*args, **kwargs)\n", namespace.__dict__)
    with assume_verdicts({"positionwise_feed_forward": False}):
        checks.check_encoder_block(namespace.KeepingBlock)
    kept = namespace.kept
    assert kept["ffn"].__module__ == "course_stand_ins"
    with pytest.raises(RuntimeError, match="stand-in"):
        kept["ffn"](4, 8)


def test_a_sampler_kept_from_generates_check_stops_working():
    """08's path: the stand-in `sample_next_token` lent while `generate` is judged, kept by the student's generate
    for later cells (the trained GPT's cell comes after), no longer works once the check is over."""
    namespace = _student("gpt", "sample_next_token", "unfinished")
    exec("kept = {}\n"
         "_generate = generate\n"
         "def generate(*args, **kwargs):\n"
         "    kept['sample'] = sample_next_token\n"
         "    return _generate(*args, **kwargs)\n", namespace.__dict__)
    with assume_verdicts({"sample_next_token": False}):
        checks.check_generate(namespace.generate)
    assert namespace.kept["sample"].__module__ == "course_stand_ins"
    assert namespace.sample_next_token.__module__ != "course_stand_ins"
    with pytest.raises(RuntimeError, match="stand-in"):
        namespace.kept["sample"](torch.zeros(2, 5))


def test_intended_cascades_are_few_and_name_checks_of_their_notebook():
    api_checks = set(checks.__all__)
    for dependent, parts in INTENDED_CASCADES.items():
        assert f"check_{dependent}" in api_checks and all(f"check_{p}" in api_checks for p in parts)
    assert MAX_CASCADE_POINTS <= 10


def test_every_part_named_has_a_stand_in_and_a_check():
    for composite, parts in PARTS.items():
        assert f"check_{composite}" in checks.__all__
        for part in parts:
            assert part.name in stand_ins.STAND_INS and f"check_{part.check}" in checks.__all__
            assert re.fullmatch(r"[a-z_]+", part.check)


def test_the_judge_records_verdicts_that_later_checks_read():
    """judge.verdict: a failed part is recorded, and the composite's check of the same notebook lends a stand-in."""
    from autograder.checks.kit.remote import LoopbackChannel
    from autograder.grade.judge import verdict
    from coursekit import probe

    class NotebookChannel(LoopbackChannel):
        verdicts: dict = {}

    channel = NotebookChannel()
    channel.verdicts = {}
    namespace = _student("encoder", "PositionwiseFeedForward", "unfinished")
    try:
        probe.ProbeState.subjects["positionwise_feed_forward"] = ((namespace.PositionwiseFeedForward,), {})
        probe.ProbeState.subjects["encoder_block"] = ((namespace.EncoderBlock,), {})
        message, _, _ = verdict(channel, [("positionwise_feed_forward", [0], [])])
        assert message and channel.verdicts == {"positionwise_feed_forward": False}
        message, _, _ = verdict(channel, [("encoder_block", [0], [])])
        assert message is None, message
        assert channel.verdicts == {"positionwise_feed_forward": False, "encoder_block": True}
    finally:
        for name in ("positionwise_feed_forward", "encoder_block"):
            probe.ProbeState.subjects.pop(name, None)
        probe.ProbeState.handles.clear()
