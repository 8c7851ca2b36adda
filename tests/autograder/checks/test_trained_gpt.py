"""Hidden check of notebook 08's trained model: it reads the validation text through the kernel and judges the loss
here; a model no better than the bigram fails, a good one passes, broken hand-ins fail readably."""
from __future__ import annotations

import math

import pytest
import torch
from torch import nn

from autograder.checks import trained_gpt as checks
from coursekit.lm_training import bigram_loss
from coursekit.shakespeare import CharVocabulary, load_shakespeare, split_text


class CountingModel(nn.Module):
    """An n-gram model as a module: logits at t from counts of what followed the last `order - 1` characters."""

    def __init__(self, ids: torch.Tensor, vocab_size: int, order: int, max_len: int = 64):
        super().__init__()
        self.max_len, self.order, self.vocab_size = max_len, order, vocab_size
        self.weight = nn.Parameter(torch.zeros(1))                     # so that it has parameters
        keys = self.keys(ids[None])[0, order - 2:-1]                    # context of each next token
        unique, rows = torch.unique(keys, return_inverse=True)
        counts = torch.zeros(len(unique), vocab_size)
        counts.index_put_((rows, ids[order - 1:]), torch.ones(len(rows)), accumulate=True)
        self.row_of = {int(k): i for i, k in enumerate(unique)}
        self.log_probs = ((counts + 0.01) / (counts.sum(1, keepdim=True) + 0.01 * vocab_size)).log()

    def keys(self, ids):
        """(B, T) -> (B, T): the last order - 1 ids up to t as one integer (-1 where the window is too short)."""
        key = torch.zeros_like(ids)
        for back in range(self.order - 1):
            shifted = torch.full_like(ids, -10 ** 6)
            shifted[:, back:] = ids[:, :ids.size(1) - back]
            key = key * self.vocab_size + shifted
        return torch.where(key < 0, torch.full_like(key, -1), key)

    def forward(self, ids):
        keys = self.keys(ids)
        rows = torch.tensor([self.row_of.get(int(k), -1) for k in keys.flatten()]).view(ids.shape)
        uniform = torch.full((self.vocab_size,), -math.log(self.vocab_size))
        out = torch.where((rows >= 0)[..., None], self.log_probs[rows.clamp(min=0)], uniform)
        return out


@pytest.fixture(scope="module")
def data():
    text = load_shakespeare()
    chars = CharVocabulary(text)
    train, val = split_text(text)
    return chars, torch.tensor(chars.encode(train)), torch.tensor(chars.encode(val[:checks.EVAL_CHARS + 1]))


def test_the_bar_lies_between_a_good_model_and_the_bigram(data):
    chars, train_ids, val_ids = data
    assert bigram_loss(train_ids, val_ids, len(chars)) > checks.TRAINED_MAX_LOSS + 0.1
    bigram = CountingModel(train_ids, len(chars), order=2)
    with pytest.raises(AssertionError, match="not predict the validation text well enough"):
        checks.check_trained_gpt(bigram, chars.chars, 64)
    memorised = CountingModel(torch.cat([train_ids, val_ids]), len(chars), order=5)   # has seen the validation text
    checks.check_trained_gpt(memorised, chars.chars, 64)


def test_the_loss_is_computed_outside_on_the_validation_windows(data):
    chars, _, val_ids = data
    uniform = CountingModel(torch.tensor([0, 1]), len(chars), order=2)           # never matches: uniform
    uniform.row_of.clear()
    with pytest.raises(AssertionError) as info:
        checks.check_trained_gpt(uniform, chars.chars, 64)
    assert f"{math.log(len(chars)):.3f}" in str(info.value)


def test_broken_hand_ins_fail_readably(data):
    chars, train_ids, _ = data
    model = CountingModel(train_ids[:1000], len(chars), order=2)
    with pytest.raises(AssertionError, match="needs your trained model"):
        checks.check_trained_gpt("not a model", chars.chars, 64)
    with pytest.raises(AssertionError, match="characters of the vocabulary"):
        checks.check_trained_gpt(model, [1, 2, 3], 64)
    with pytest.raises(AssertionError, match="misses characters"):
        checks.check_trained_gpt(model, chars.chars[:-3] + ["#", "%", "+"], 64)
    with pytest.raises(AssertionError, match="block size"):
        checks.check_trained_gpt(model, chars.chars, 65)
