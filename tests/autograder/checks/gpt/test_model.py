"""Hidden check of notebook 08's GPT (`autograder/checks/gpt/model.py`): the reference and differently written answers
pass; each known mistake fails with its catalogue id named; an answer that ignores only the dropout argument or the
length limit keeps most points."""
from __future__ import annotations

import pytest
import torch

import solutions
import variants as V
import variants_gpt as G
from autograder.checks.gpt import model as checks
from coursekit.api import by_name

APIS = G.apis_of("model")  # GPT
WRONG = G.wrong(APIS)


# ------------------------------------------ the answers that fail only a stated edge case or ignore only an argument
class _GPTWithoutLengthCheck(solutions.GPT):
    """The reference GPT, but a sequence longer than max_len is cropped instead of raising ValueError."""

    def forward(self, ids):
        return super().forward(ids[:, -self.max_len:])


class _GPTWithoutDropout(solutions.GPT):
    """The reference GPT, but its dropout argument is ignored (always the default 0.0)."""

    def __init__(self, vocab_size, d_model=128, num_heads=4, d_ff=512, num_layers=4, max_len=256, dropout=0.0):
        super().__init__(vocab_size, d_model, num_heads, d_ff, num_layers, max_len, 0.0)


EDGE_ONLY = [  # (api name, a correct answer that fails only this stated edge case, criterion)
    ("GPT", _GPTWithoutLengthCheck, "GPT.too_long"),
]
ARGUMENT_ONLY = [  # (api name, a correct answer that ignores only this argument, criterion)
    ("GPT", _GPTWithoutDropout, "GPT.dropout"),
]

# The catalogue's mistakes that lie in an argument's non-default values (or a stated edge case): the core passes,
# so they keep a fraction of the points (the criteria they cross, and what they keep). The others get 0.
PARTIAL_MISTAKES = {}


def check_of(api_name: str):
    return getattr(checks, by_name(api_name).check_name)


@pytest.mark.parametrize("api_name, answer", G.correct(APIS))
def test_correct_answers_pass(api_name, answer):
    check_of(api_name)(answer)


@pytest.mark.parametrize("api_name, answer, diagnosis", WRONG, ids=[diagnosis for _, _, diagnosis in WRONG])
def test_each_known_mistake_is_named(api_name, answer, diagnosis):
    V.fails_with(check_of(api_name), answer, diagnosis)


def test_every_mistake_of_the_catalogue_is_made_by_a_wrong_answer():
    from coursekit.mistakes import MISTAKES

    named = {diagnosis for _, _, diagnosis in WRONG}
    assert {m for m in MISTAKES if m.startswith(G.PART_PREFIXES["model"])} == named


@pytest.mark.parametrize("api_name, answer, diagnosis", WRONG, ids=[diagnosis for _, _, diagnosis in WRONG])
def test_a_mistake_in_an_argument_keeps_its_share_and_a_core_mistake_none(api_name, answer, diagnosis):
    from autograder.checks.kit.criteria import PartialCredit

    with pytest.raises(AssertionError) as info:
        check_of(api_name)(answer)
    assert info.value.mistake_id == diagnosis, str(info.value)
    if diagnosis not in PARTIAL_MISTAKES:
        assert not isinstance(info.value, PartialCredit), str(info.value)
        return
    failed, fraction = PARTIAL_MISTAKES[diagnosis]
    assert isinstance(info.value, PartialCredit), str(info.value)
    assert set(info.value.failed) == set(failed), str(info.value)
    assert info.value.fraction == pytest.approx(fraction), str(info.value)


def test_every_criterion_is_tried_by_a_test():
    from coursekit.criteria import CRITERIA

    assert {c.id for c in CRITERIA.values() if c.api in APIS} == {
        criterion for _, _, criterion in EDGE_ONLY + ARGUMENT_ONLY}


# ------------------------------------------------------------------------------ stated edge cases: partial credit
@pytest.mark.parametrize("api_name, answer, criterion", EDGE_ONLY, ids=[c for _, _, c in EDGE_ONLY])
def test_an_answer_failing_only_a_stated_edge_case_keeps_most_points(api_name, answer, criterion):
    from autograder.checks.kit.criteria import PartialCredit
    from coursekit.criteria import CRITERIA

    with pytest.raises(PartialCredit) as info:
        check_of(api_name)(answer)
    assert info.value.fraction >= 0.8
    assert f"✗ {CRITERIA[criterion].text}" in str(info.value)


@pytest.mark.parametrize("api_name", [name for name, _, _ in EDGE_ONLY])
def test_a_stub_gets_no_partial_credit(api_name):
    from autograder.checks.kit.criteria import PartialCredit

    def stub(*args, **kwargs):
        raise NotImplementedError()

    class StubGPT(torch.nn.Module):
        def __init__(self, *args, **kwargs):
            raise NotImplementedError()

    def always_value_error(*args, **kwargs):
        raise ValueError("no")

    for answer in ((StubGPT,) if api_name == "GPT" else (stub, always_value_error)):
        with pytest.raises(AssertionError) as info:
            check_of(api_name)(answer)
        assert not isinstance(info.value, PartialCredit), str(info.value)


# ------------------------------------------------------------------------------ arguments with teeth: partial credit
@pytest.mark.parametrize("api_name, answer, criterion", ARGUMENT_ONLY, ids=[c for _, _, c in ARGUMENT_ONLY])
def test_an_answer_ignoring_only_an_argument_keeps_most_points(api_name, answer, criterion):
    V.fails_partially(check_of(api_name), answer, criterion)
