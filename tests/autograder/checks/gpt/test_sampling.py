"""Hidden checks of notebook 08's sampling and generation (`autograder/checks/gpt/sampling.py`): the reference and
differently written answers pass; each known mistake fails with its catalogue id named; hostile or broken answers
fail with a readable message; an answer failing only a stated edge case or ignoring only an argument keeps most
points."""
from __future__ import annotations

import torch

import solutions
import variants as V
import variants_gpt as G
from autograder.checks.gpt import sampling as checks
from part_suite import hidden_suite

APIS = ("sample_next_token", "generate")
MISTAKE_PREFIXES = ("sample.", "generate.")  # its catalogue ids
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


# the tests every part runs (tests/autograder/checks/part_suite.py), with this part's data
globals().update(hidden_suite(checks, APIS, correct=G.correct(APIS), wrong=WRONG,
                              mistake_prefixes=MISTAKE_PREFIXES, partial_mistakes=PARTIAL_MISTAKES,
                              edge_only=EDGE_ONLY, argument_only=ARGUMENT_ONLY))


def test_broken_answers_fail_readably():
    V.fails_plainly(checks.check_sample_next_token,  # the core's plain draws already show it
                    lambda logits, t=1.0, k=None, g=None: torch.zeros(len(logits), dtype=torch.long),
                    "not drawn from the right distribution")


def _scaled(logits, temperature, top_k):
    """The logits a draw at `temperature` (not 0) samples from, those outside the top_k masked with -inf."""
    scaled = logits / temperature
    if top_k is not None:
        kth = scaled.topk(min(top_k, scaled.size(-1)), -1).values[:, -1:]
        scaled = scaled.masked_fill(scaled < kth, float("-inf"))
    return scaled


def test_sampling_from_the_right_distribution_without_the_generator_fails_on_the_draw_only():
    """torch.distributions.Categorical draws from the right distribution (the frequency test passes) but ignores
    the generator: the failure is about the contract's draw, not a wrong distribution."""
    def categorical(logits, temperature=1.0, top_k=None, generator=None):
        if temperature == 0:
            return logits.argmax(-1)
        return torch.distributions.Categorical(logits=_scaled(logits, temperature, top_k)).sample()

    message = V.fails_with(checks.check_sample_next_token, categorical, "torch.multinomial", "sample.generator_ignored")
    assert "right distribution" not in message


def test_one_multinomial_call_per_row_draws_the_same_tokens_and_passes():
    def per_row(logits, temperature=1.0, top_k=None, generator=None):
        if temperature == 0:
            return logits.argmax(-1)
        return torch.cat([torch.multinomial(row.softmax(-1), 1, generator=generator)
                          for row in _scaled(logits, temperature, top_k)])

    checks.check_sample_next_token(per_row)


def _generate_ignoring_temperature(model, ids, max_new_tokens, temperature=1.0, top_k=None, generator=None):
    """Right in all but one thing: it always samples at temperature 1 (temperature 0 included)."""
    return solutions.generate(model, ids, max_new_tokens, 1.0, top_k, generator)


def test_a_generate_that_ignores_temperature_keeps_the_core_and_loses_that_argument():
    """The core is the defaults (temperature 1, torch's global generator seeded): the greedy tries belong to the
    temperature argument."""
    V.fails_partially(checks.check_generate, _generate_ignoring_temperature, "generate.temperature",
                      "temperature=0")
