"""Hidden checks of notebook 11's LoRA part (LoRALinear, add_lora): the reference and differently written answers
pass; each known mistake fails with its catalogue id named (add_lora's mistakes in an argument keep their share);
answers that break what the contract states without a catalogue id fail readably; the known-mistake variants with
their switches off are the reference; add_lora is judged with the adapters of a working LoRALinear when the
student's failed its own check."""
from __future__ import annotations

import copy

import pytest
import torch
from torch import nn

import solutions
import variants as V
import variants_pretrained_lora as L
from autograder.checks import stand_ins
from autograder.checks.kit.criteria import PartialCredit
from autograder.checks.kit.parts import assume_verdicts
from autograder.checks.pretrained import lora as checks
from autograder.checks.pretrained import mistakes_lora as M
from part_suite import hidden_suite

APIS = ("LoRALinear", "add_lora")
MISTAKE_PREFIXES = ("lora.", "add_lora.")  # its catalogue ids
ADD_LORA_ARGUMENTS = 4                     # rank, alpha, targets, blocks

EDGE_ONLY = [  # (api name, a correct answer that fails only this stated edge case, criterion)
    ("LoRALinear", L.lora_mistake("no_rank_check"), "LoRALinear.bad_rank"),
    ("add_lora", L.make_add_lora("no_target_check"), "add_lora.unknown_target"),
    ("add_lora", L.make_add_lora("no_block_check"), "add_lora.bad_block"),
]
ARGUMENT_ONLY = [  # (api name, a correct answer that ignores only this argument, criterion)
    ("LoRALinear", L.lora_mistake("rank_ignored"), "LoRALinear.rank"),
    ("LoRALinear", L.lora_mistake("alpha_ignored"), "LoRALinear.alpha"),
    ("add_lora", L.make_add_lora("rank_not_passed"), "add_lora.rank"),
    ("add_lora", L.make_add_lora("alpha_not_passed"), "add_lora.alpha"),
    ("add_lora", L.make_add_lora("targets_ignored"), "add_lora.targets"),
    ("add_lora", L.make_add_lora("blocks_ignored"), "add_lora.blocks"),
]
# The catalogue's mistakes that lie in an argument's non-default values: the core passes, so they keep a fraction of
# the points (the criteria they cross, and what they keep). The others get 0.
PARTIAL_MISTAKES = {
    mistake_id: ((criterion,), 1 - 0.25 / ADD_LORA_ARGUMENTS) for mistake_id, criterion in (
        ("add_lora.blocks_ignored", "add_lora.blocks"), ("add_lora.targets_ignored", "add_lora.targets"),
        ("add_lora.rank_not_passed", "add_lora.rank"), ("add_lora.alpha_not_passed", "add_lora.alpha"))
}

# the tests every part runs (tests/autograder/checks/part_suite.py), with this part's data
globals().update(hidden_suite(checks, APIS, correct=L.correct(APIS), wrong=L.of(APIS, L.WRONG),
                              unnamed=L.of(APIS, L.UNNAMED), mistake_prefixes=MISTAKE_PREFIXES,
                              partial_mistakes=PARTIAL_MISTAKES, edge_only=EDGE_ONLY,
                              edge_says=("should raise ValueError",), argument_only=ARGUMENT_ONLY))


# ------------------------------------------------------------------------------------------- readable failures
def test_broken_answers_fail_readably():
    class Plain(nn.Module):                              # no adapter at all: base's forward, nothing else
        def __init__(self, base, rank=8, alpha=16.0):
            super().__init__()
            self.base = base

        def forward(self, x):
            return self.base(x)

    V.fails_with(checks.check_lora_linear, Plain, "needs the parameter `lora_A`")
    V.fails_with(checks.check_add_lora, lambda model, **kwargs: float(solutions.add_lora(model, **kwargs)),
                 "an int")

    class Folded(nn.Module):                             # an adapter that keeps the weight itself, not `base`
        def __init__(self, linear, rank, alpha):
            super().__init__()
            self.weight = nn.Parameter(linear.weight.detach().clone(), requires_grad=False)
            self.lora_A = nn.Parameter(torch.randn(rank, linear.in_features) / linear.in_features ** 0.5)
            self.lora_B = nn.Parameter(torch.zeros(linear.out_features, rank))
            self.scaling = alpha / rank

        def forward(self, x):
            return x @ (self.weight + self.scaling * self.lora_B @ self.lora_A).T

    def folded(model, rank=8, alpha=16.0, targets=("w_q", "w_v"), blocks=None):
        return _add_lora_on(Folded)(model, rank, alpha, targets, blocks)
    V.fails_with(checks.check_add_lora, folded, "not those of LoRALinear adapters", "first difference")

    def merged_tensor(self):
        return self.base.weight + self.scaling * self.lora_B @ self.lora_A
    V.fails_with(checks.check_lora_linear, type("LoRALinear", (L.LoRAEinsum,), {"merged": merged_tensor}),
                 "must return an nn.Linear")


def test_a_mistake_in_the_core_with_a_missing_edge_case_gets_nothing():
    """A core mistake (the model not frozen) and no ValueError for unknown targets: a plain failure naming it."""
    def wrong(model, rank=8, alpha=16.0, targets=("w_q", "w_v"), blocks=None):
        for block in model.blocks if blocks is None else [model.blocks[i] for i in blocks]:
            for name in targets:
                if hasattr(block.attn, name):
                    setattr(block.attn, name, L.LoRALinear(getattr(block.attn, name), rank, alpha))
        return sum(p.numel() for p in model.parameters() if p.requires_grad)

    with pytest.raises(AssertionError) as info:
        checks.check_add_lora(wrong)
    assert not isinstance(info.value, PartialCredit), str(info.value)
    assert getattr(info.value, "mistake_id", None) == "add_lora.not_frozen", str(info.value)


# ------------------------------------------------------------------------ add_lora judged given a working part
STUDENT_ADD_LORA = """
def add_lora(model, rank=8, alpha=16.0, targets=("w_q", "w_v"), blocks=None):
    indices = range(len(model.blocks)) if blocks is None else blocks
    if any(name not in ("w_q", "w_k", "w_v", "w_o") for name in targets):
        raise ValueError("unknown target")
    if any(not 0 <= i < len(model.blocks) for i in indices):
        raise ValueError("no such block")
    model.requires_grad_(False)
    for i in indices:
        attn = model.blocks[i].attn
        for name in targets:
            setattr(attn, name, LoRALinear(getattr(attn, name), rank, alpha))
    return sum(p.numel() for p in model.parameters() if p.requires_grad)
"""


def _add_lora_on(lora_class):
    """A student's add_lora whose adapters are its namespace's LoRALinear, here `lora_class`."""
    namespace = {"LoRALinear": lora_class, "__name__": "student"}
    exec(compile(STUDENT_ADD_LORA, "student", "exec"), namespace)
    return namespace["add_lora"]


def test_without_the_verdict_a_wrong_lora_linear_costs_add_lora_too():
    """The adapters are the student's: a LoRALinear that scales by alpha makes add_lora's adapted logits wrong."""
    with pytest.raises(AssertionError) as info:
        checks.check_add_lora(_add_lora_on(L.lora_mistake("scaling_alpha")))
    assert "adapted model's logits" in str(info.value), str(info.value)


@pytest.mark.skipif("LoRALinear" not in stand_ins.STAND_INS,
                    reason="the course's LoRALinear stand-in (autograder/checks/stand_ins.py) is not there yet")
def test_add_lora_is_judged_with_a_working_lora_linear_when_the_students_failed():
    with assume_verdicts({"lora_linear": False}):
        checks.check_add_lora(_add_lora_on(L.lora_mistake("scaling_alpha")))


# ----------------------------------------------------------------------------------- the variants themselves
def test_the_variants_with_every_switch_off_are_the_reference():
    torch.manual_seed(0)
    base = nn.Linear(12, 7)
    lora = solutions.LoRALinear(base, rank=3, alpha=6.0)
    with torch.no_grad():
        lora.lora_B.normal_()
        x = torch.randn(2, 5, 12)
        torch.testing.assert_close(M.lora_forward(base.weight, base.bias, lora.lora_A, lora.lora_B, x, 3, 6.0),
                                   lora(x), atol=1e-6, rtol=1e-6)
        torch.testing.assert_close(M.lora_merged_weight(base.weight, lora.lora_A, lora.lora_B, 3, 6.0),
                                   lora.merged().weight, atol=1e-6, rtol=1e-6)
    config = checks.add_lora_config()
    plain = checks.reference_model(3, config)
    ids = torch.randint(0, config["vocab_size"], (2, 7))
    for kwargs in [{}, *checks.add_lora_arguments().values()]:
        ours, theirs = copy.deepcopy(plain), copy.deepcopy(plain)
        assert M.add_lora_variant(ours, **kwargs) == solutions.add_lora(theirs, **kwargs)
        layout = M.lora_layout(theirs.state_dict(keep_vars=True))
        assert M.lora_layout(ours.state_dict(keep_vars=True)) == layout
        values = {k: torch.randn(v.shape) for k, v in theirs.state_dict().items() if ".lora_" in k}
        torch.testing.assert_close(M.adapted_logits(ours, ids, values), M.adapted_logits(theirs, ids, values),
                                   atol=1e-6, rtol=1e-6)
        assert layout["adapted"] and layout["trainable"] == {k for k in values}


def test_each_add_lora_argument_is_tried_alone_away_from_its_default():
    defaults = {"rank": 8, "alpha": 16.0, "targets": ("w_q", "w_v"), "blocks": None}
    for criterion, kwargs in checks.add_lora_arguments().items():
        (name, value), = kwargs.items()
        assert criterion == f"add_lora.{name}" and value != defaults[name]
    config = checks.add_lora_config()
    assert config["num_layers"] == 3 and config["num_kv_heads"] < config["num_heads"]
