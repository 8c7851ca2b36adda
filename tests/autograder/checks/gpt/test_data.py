"""Hidden checks of notebook 08's data and loss helpers (`autograder/checks/gpt/data.py`): the reference and
differently written answers pass; each known mistake fails with its catalogue id named; hostile or broken answers
fail with a readable message; an answer failing only a stated edge case or ignoring only an argument keeps most
points."""
from __future__ import annotations

import pytest
import torch

import solutions
import variants as V
import variants_gpt as G
from autograder.checks.gpt import data as checks
from coursekit.api import by_name

APIS = G.apis_of("data")  # get_batch, lm_loss, estimate_loss
WRONG = G.wrong(APIS)


# ------------------------------------------ the answers that fail only a stated edge case or ignore only an argument
def _estimate_loss_without_check(model, data, block_size, device):
    if len(data) < block_size + 1:
        return 0.0
    return solutions.estimate_loss(model, data, block_size, device)


def _get_batch_without_generator(data, block_size, batch_size, generator=None):
    return solutions.get_batch(data, block_size, batch_size)          # torch's global generator


EDGE_ONLY = [  # (api name, a correct answer that fails only this stated edge case, criterion)
    ("estimate_loss", _estimate_loss_without_check, "estimate_loss.too_short"),
]
ARGUMENT_ONLY = [  # (api name, a correct answer that ignores only this argument, criterion)
    ("get_batch", _get_batch_without_generator, "get_batch.generator"),
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
    assert {m for m in MISTAKES if m.startswith(G.PART_PREFIXES["data"])} == named


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


def test_stubs_and_broken_answers_fail_readably():
    def stub(*args, **kwargs):
        raise NotImplementedError()

    for name in APIS:
        V.fails_with(check_of(name), stub, "not implemented yet")
    V.fails_with(checks.check_get_batch, lambda data, b, n, g=None: data, "pair (x, y)")


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


def test_the_variants_with_their_switches_off_are_the_reference():
    """A known mistake's variant with no switch on reproduces the reference, so a match names that one mistake."""
    from autograder.checks.gpt import mistakes as M
    from coursekit.probe.models import LanguageModelProbe

    generator = torch.Generator().manual_seed(5)
    logits, targets = torch.randn(3, 6, 11, generator=generator), torch.randint(11, (3, 6), generator=generator)
    torch.testing.assert_close(M.lm_loss_variant(logits, targets), solutions.lm_loss(logits, targets))
    torch.manual_seed(6)
    model = LanguageModelProbe(13, d_model=8, max_len=16, dropout=0.5).train()
    for n, block_size in ((75, 8), (73, 8), (40, 13)):
        data = torch.randint(13, (n,), generator=generator)
        expected = solutions.estimate_loss(model, data, block_size, "cpu")
        assert M.estimate_loss_variant(model, data, block_size, "cpu") == pytest.approx(expected, rel=1e-5)
