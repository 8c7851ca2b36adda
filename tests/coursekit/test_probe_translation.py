"""The public helpers the grader builds in a student's kernel for notebook 10 (coursekit.probe.translation)."""
from __future__ import annotations

import pytest
import torch

from coursekit.probe.translation import BeamSearchProbe, loss_and_gradient


def make(seed=0, **kwargs):
    torch.manual_seed(seed)
    return BeamSearchProbe(11, 7, d_model=8, max_len=16, **kwargs)


def inputs(seed=0, k=3, T=6):
    generator = torch.Generator().manual_seed(seed)
    return torch.randint(1, 11, (1, 5), generator=generator), torch.randint(1, 7, (k, T), generator=generator)


def test_decoding_is_causal_and_each_row_on_its_own():
    """Position t's logits depend on the target tokens up to t only, and not on the other rows of the batch, in
    eval and in training mode (the dropout mask is a function of the prefix too)."""
    src, ys = inputs()
    for training in (False, True):
        model = make().train(training)
        memory, src_mask = model.encode(src)
        full = model.decode(ys, memory.expand(len(ys), -1, -1), src_mask.expand(len(ys), -1, -1, -1))
        for t in range(1, ys.size(1) + 1):
            for row in range(len(ys)):
                alone = model.decode(ys[row:row + 1, :t], memory, src_mask)[0, -1]
                torch.testing.assert_close(alone, full[row, t - 1])


def test_training_mode_drops_logits_the_same_way_every_time():
    src, ys = inputs(1)
    model = make()
    eval_logits = model.eval()(src.expand(len(ys), -1), ys)
    first, second = model.train()(src.expand(len(ys), -1), ys), model(src.expand(len(ys), -1), ys)
    torch.testing.assert_close(first, second)
    assert not torch.allclose(first, eval_logits)
    dropped = first == 0
    assert 0.3 < dropped.float().mean() < 0.7
    torch.testing.assert_close(first[~dropped], 2 * eval_logits[~dropped])
    torch.testing.assert_close(make(dropout=0.0).train()(src.expand(len(ys), -1), ys), eval_logits)


def test_padding_is_ignored_and_bad_arguments_are_refused():
    src, ys = inputs(2, k=1)
    model = make().eval()
    memory, src_mask = model.encode(torch.cat([src, torch.zeros(1, 3, dtype=torch.long)], dim=1))
    torch.testing.assert_close(model.decode(ys, memory, src_mask), model(src, ys))
    with pytest.raises(ValueError):
        model(src, torch.ones(1, 17, dtype=torch.long))
    with pytest.raises(ValueError):
        make(dropout=1.0)


def test_the_loss_gradient_helper_backpropagates_like_training():
    logits, targets = torch.randn(4, 5), torch.tensor([1, 2, 0, 3])
    value, grad = loss_and_gradient(torch.nn.functional.cross_entropy, logits, targets, label_smoothing=0.2)
    leaf = logits.clone().requires_grad_(True)
    torch.nn.functional.cross_entropy(leaf, targets, label_smoothing=0.2).backward()
    torch.testing.assert_close(grad, leaf.grad)
    torch.testing.assert_close(value, torch.nn.functional.cross_entropy(logits, targets, label_smoothing=0.2))
    assert not logits.requires_grad
    assert loss_and_gradient(lambda x, t: x.sum().detach(), logits, targets)[1] is None
    assert loss_and_gradient(lambda x, t: 1.0, logits, targets) == (1.0, None)
