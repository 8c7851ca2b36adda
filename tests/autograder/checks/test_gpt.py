"""Hidden checks of notebook 08: the reference and differently written answers pass; each known mistake fails with
its catalogue id named; hostile or broken answers fail with a readable message."""
from __future__ import annotations

import pytest
import torch

import solutions
import variants as V
import variants_gpt as G
from autograder.checks import gpt as checks
from coursekit.api import by_name


def check_of(api_name: str):
    return getattr(checks, by_name(api_name).check_name)


@pytest.mark.parametrize("api_name, answer", [(name, answer) for name, answers in G.CORRECT.items()
                                               for answer in [getattr(solutions, name), *answers]])
def test_correct_answers_pass(api_name, answer):
    check_of(api_name)(answer)


@pytest.mark.parametrize("api_name, answer, diagnosis", G.WRONG, ids=[diagnosis for _, _, diagnosis in G.WRONG])
def test_each_known_mistake_is_named(api_name, answer, diagnosis):
    V.fails_with(check_of(api_name), answer, diagnosis)


def test_every_gpt_mistake_of_the_catalogue_is_made_by_a_wrong_answer():
    from coursekit.mistakes import MISTAKES

    topics = ("bpe.", "gpt.", "get_batch.", "lm_loss.", "estimate_loss.", "lr_at.", "train_step.", "sample.",
              "generate.")
    assert {m for m in MISTAKES if m.startswith(topics)} == {diagnosis for _, _, diagnosis in G.WRONG}


def test_stubs_and_broken_answers_fail_readably():
    def stub(*args, **kwargs):
        raise NotImplementedError()

    for name in ("train_bpe", "bpe_encode", "bpe_decode", "get_batch", "lm_loss", "estimate_loss", "lr_at",
                 "train_step", "sample_next_token", "generate"):
        V.fails_with(check_of(name), stub, "not implemented yet")
    V.fails_with(checks.check_train_bpe, lambda text, n: "not merges", "list of (int, int) pairs")
    V.fails_with(checks.check_bpe_encode, lambda text, merges: text, "list of int token ids")
    V.fails_with(checks.check_get_batch, lambda data, b, n, g=None: data, "pair (x, y)")
    V.fails_with(checks.check_lr_at, lambda *a, **k: "fast", "must return a float")
    V.fails_with(checks.check_sample_next_token,
                 lambda logits, t=1.0, k=None, g=None: torch.zeros(len(logits), dtype=torch.long), "values differ")


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

    message = V.fails_with(checks.check_sample_next_token, categorical, "the drawn tokens", "torch.multinomial")
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
