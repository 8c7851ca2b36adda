"""Hidden check of notebook 08's trained model: the handed-in weights are loaded into the contract's GPT and its loss
is computed here, on a slice of the validation text the jail does not show the kernel; a model no better than the
bigram fails, a trained one passes, a lookup model earns nothing, broken hand-ins fail readably."""
from __future__ import annotations

import math
import os
from pathlib import Path

import pytest
import torch
from torch import nn

import solutions
from autograder.checks.kit import remote as _remote
from autograder.checks.gpt import trained as checks
from autograder.course import heldout
from autograder.sandbox import jail
from jailed import run_in_jail
from coursekit import probe
from coursekit.lm_training import BUDGETS, bigram_loss, model_config, train_language_model
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


def test_a_lookup_model_that_read_the_validation_text_earns_nothing(data):
    """Issue #31 door 3: a counting 'model' of the validation text itself (readable in the jail before) predicts it
    almost perfectly when asked; the check no longer asks it: its weights do not make the contract's GPT."""
    chars, train_ids, val_ids = data
    memorised = CountingModel(torch.cat([train_ids, val_ids]), len(chars), order=5)   # has seen the validation text
    window = val_ids[:65]
    assert float(torch.nn.functional.cross_entropy(memorised(window[None, :64])[0], window[1:])) < checks.TRAINED_MAX_LOSS / 2
    with pytest.raises(AssertionError, match="contract's names"):
        checks.check_trained_gpt(memorised, chars.chars, 64)


def _gpt(chars, seed=0):
    torch.manual_seed(seed)
    return solutions.GPT(len(chars), d_model=32, num_heads=2, d_ff=64, num_layers=1, max_len=64)


def test_the_loss_is_the_contract_models_on_the_held_out_slice(data):
    """The loss reported is the reference GPT's, holding the handed-in weights, on the held-out slice (recomputed
    here from the reference); an untrained model is far above the bar."""
    chars, _, _ = data
    model = _gpt(chars).eval()
    text = heldout.heldout_text()
    assert text == split_text(load_shakespeare())[1][:checks.EVAL_CHARS]
    ids = torch.tensor(chars.encode(text))
    starts = torch.arange(0, len(ids) - 64, 64)
    windows = starts[:, None] + torch.arange(64)[None, :]
    with torch.no_grad():
        expected = float(torch.nn.functional.cross_entropy(model(ids[windows]).reshape(-1, len(chars)).double(),
                                                           ids[windows + 1].reshape(-1)))
    (remote,), _ = _remote.hand_in_locally((model,), {}, "loss_test")
    try:
        assert checks.trained_loss(remote, chars.chars, 64) == pytest.approx(expected, rel=1e-6)
    finally:
        probe.ProbeState.subjects.pop("loss_test", None)
    with pytest.raises(AssertionError, match="not predict the validation text well enough") as info:
        checks.check_trained_gpt(model, chars.chars, 64)
    assert f"{expected:.3f}" in str(info.value)


def test_the_jail_does_not_show_the_held_out_slice(data, tmp_path):
    text = load_shakespeare()
    masked = heldout.masked(text)
    slice_ = heldout.heldout_text()
    assert len(masked) == len(text) and set(masked) == set(text)
    assert split_text(masked)[0] == split_text(text)[0]                 # the training split is untouched
    assert slice_ not in masked and slice_[:200] not in masked
    source = tmp_path / "input.txt"
    source.write_text(text, encoding="utf-8")
    copy = jail.masked_text_file(str(source))
    assert Path(copy).read_text(encoding="utf-8") == masked
    argv = jail.bwrap_command("bwrap", kernel_cmd=["python"], ipc_dir=str(tmp_path), notebook_src=str(tmp_path),
                              disk_bytes=0, env={})
    data_dir = jail.view()[3]
    target = os.path.join(data_dir, "tinyshakespeare", "input.txt")
    bound = [argv[i + 1:i + 3] for i, a in enumerate(argv) if a == "--ro-bind"]
    over = bound.index([jail.masked_text_file(os.path.realpath(target)), target])
    assert bound.index([data_dir, data_dir]) < over       # bound over the data folder's file, after the folder


def test_a_jailed_kernel_reads_the_text_without_the_held_out_slice(tmp_path):
    """Through bwrap itself: coursekit's loader in the jail gets the masked text, of the full length."""
    text = load_shakespeare()
    start, end = heldout.heldout_span(len(text))
    code = ("from coursekit.shakespeare import load_shakespeare\n"
            "text = load_shakespeare()\n"
            f"print(len(text)); print(repr(text[{start}:{start} + 80]))")
    stdout = run_in_jail(code, tmp_path)
    length, shown = stdout.splitlines()
    assert int(length) == len(text)
    assert shown == repr(text[start - (end - start):start - (end - start) + 80]) != repr(text[start:start + 80])


@pytest.mark.slow
def test_a_gpt_trained_in_the_grading_budget_passes(data):
    chars, train_ids, val_ids = data
    budget = BUDGETS["grading"]
    torch.manual_seed(0)
    model = solutions.GPT(len(chars), **model_config(budget))
    train_language_model(model, train_ids, val_ids, budget, solutions.get_batch, solutions.train_step,
                         solutions.estimate_loss, solutions.lr_at, "cpu", generator=torch.Generator().manual_seed(0))
    checks.check_trained_gpt(model, chars.chars, budget.block_size)


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
