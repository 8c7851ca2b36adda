"""Hidden checks of notebook 08's sampling and generation (`autograder/checks/gpt/sampling.py`): the reference and
differently written answers pass; each known mistake fails with its catalogue id named; hostile or broken answers
fail with a readable message; an answer failing only a stated edge case or ignoring only an argument keeps most
points."""
from __future__ import annotations

import pytest
import torch

import solutions
import variants as V
import variants_gpt as G
from autograder.checks.gpt import sampling as checks
from coursekit.api import by_name

APIS = G.apis_of("sampling")  # sample_next_token, generate
WRONG = G.wrong(APIS)


# ------------------------------------------ the answers that fail only a stated edge case or ignore only an argument
def _sample_with_plain_topk(logits, temperature=1.0, top_k=None, generator=None):
    """The reference, but torch.topk(top_k) without min(top_k, V): raises for a top_k past the vocabulary."""
    if top_k is not None and top_k > logits.size(-1):
        torch.topk(logits, top_k)                 # RuntimeError: selected index k out of range
    return solutions.sample_next_token(logits, temperature, top_k if top_k is None or top_k < logits.size(-1)
                                       else None, generator)


def _sample_greedy_or_plain(logits, temperature=1.0, top_k=None, generator=None):
    """temperature is ignored: always the draw at temperature 1 (not even the argmax at 0)."""
    return solutions.sample_next_token(logits, 1.0, top_k, generator)


def _sample_without_top_k(logits, temperature=1.0, top_k=None, generator=None):
    return solutions.sample_next_token(logits, temperature, None, generator)


def _sample_without_generator(logits, temperature=1.0, top_k=None, generator=None):
    return solutions.sample_next_token(logits, temperature, top_k, None)


def _generate_temperature_as_a_switch(model, ids, max_new_tokens, temperature=1.0, top_k=None, generator=None):
    """temperature only switches greedy decoding on (0): any other temperature samples at 1."""
    return solutions.generate(model, ids, max_new_tokens, 0.0 if temperature == 0 else 1.0, top_k, generator)


def _generate_without_top_k(model, ids, max_new_tokens, temperature=1.0, top_k=None, generator=None):
    return solutions.generate(model, ids, max_new_tokens, temperature, None, generator)


def _generate_without_generator(model, ids, max_new_tokens, temperature=1.0, top_k=None, generator=None):
    return solutions.generate(model, ids, max_new_tokens, temperature, top_k, None)


EDGE_ONLY = [  # (api name, a correct answer that fails only this stated edge case, criterion)
    ("sample_next_token", _sample_with_plain_topk, "sample_next_token.top_k_past_vocabulary"),
]
ARGUMENT_ONLY = [  # (api name, a correct answer that ignores only this argument, criterion)
    ("sample_next_token", _sample_greedy_or_plain, "sample_next_token.temperature"),
    ("sample_next_token", _sample_without_top_k, "sample_next_token.top_k"),
    ("sample_next_token", _sample_without_generator, "sample_next_token.generator"),
    ("generate", _generate_temperature_as_a_switch, "generate.temperature"),
    ("generate", _generate_without_top_k, "generate.top_k"),
    ("generate", _generate_without_generator, "generate.generator"),
]

PARTIAL_MISTAKES = {
    "sample.temperature_after_softmax": (("sample_next_token.temperature",), 1 - 0.25 / 3),
    "sample.temperature_multiplied": (("sample_next_token.temperature",), 1 - 0.25 / 3),
    "sample.top_k_drops_ties": (("sample_next_token.top_k",), 1 - 0.25 / 3),
    # k - 1 tokens kept also at top_k = V: the stated edge case fails too
    "sample.top_k_minus_one": (("sample_next_token.top_k", "sample_next_token.top_k_past_vocabulary"),
                               1 - 0.25 / 3 - 0.2),
    "sample.generator_ignored": (("sample_next_token.generator",), 1 - 0.25 / 3),
}


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
    assert {m for m in MISTAKES if m.startswith(G.PART_PREFIXES["sampling"])} == named


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
    V.fails_plainly(checks.check_sample_next_token,  # the core's plain draws already show it
                    lambda logits, t=1.0, k=None, g=None: torch.zeros(len(logits), dtype=torch.long),
                    "not drawn from the right distribution")


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


def test_sampling_from_the_right_distribution_without_the_generator_fails_on_the_draw_only():
    """torch.distributions.Categorical draws from the right distribution (the frequency test passes) but ignores
    the generator: the failure is about the contract's draw, not a wrong distribution."""
    def categorical(logits, temperature=1.0, top_k=None, generator=None):
        if temperature == 0:
            return logits.argmax(-1)
        scaled = logits / temperature
        if top_k is not None:
            kth = scaled.topk(min(top_k, scaled.size(-1)), -1).values[:, -1:]
            scaled = scaled.masked_fill(scaled < kth, float("-inf"))
        return torch.distributions.Categorical(logits=scaled).sample()

    message = V.fails_with(checks.check_sample_next_token, categorical, "torch.multinomial", "sample.generator_ignored")
    assert "right distribution" not in message


def test_one_multinomial_call_per_row_draws_the_same_tokens_and_passes():
    def per_row(logits, temperature=1.0, top_k=None, generator=None):
        if temperature == 0:
            return logits.argmax(-1)
        scaled = logits / temperature
        if top_k is not None:
            kth = scaled.topk(min(top_k, scaled.size(-1)), -1).values[:, -1:]
            scaled = scaled.masked_fill(scaled < kth, float("-inf"))
        return torch.cat([torch.multinomial(row.softmax(-1), 1, generator=generator) for row in scaled])

    checks.check_sample_next_token(per_row)


def _generate_ignoring_temperature(model, ids, max_new_tokens, temperature=1.0, top_k=None, generator=None):
    """Right in all but one thing: it always samples at temperature 1 (temperature 0 included)."""
    return solutions.generate(model, ids, max_new_tokens, 1.0, top_k, generator)


def test_a_generate_that_ignores_temperature_keeps_the_core_and_loses_that_argument():
    """The core is the defaults (temperature 1, torch's global generator seeded): the greedy tries belong to the
    temperature argument."""
    V.fails_partially(checks.check_generate, _generate_ignoring_temperature, "generate.temperature",
                      "temperature=0")
