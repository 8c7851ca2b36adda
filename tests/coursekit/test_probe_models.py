"""The public models the grader lends to a student's code (coursekit.probe.models)."""
from __future__ import annotations

import pytest
import torch

from coursekit.probe.models import BagOfEmbeddingsClassifier


# --- classifier probes
def ids_batch(seed=0, B=4, T=7, vocab=29):
    generator = torch.Generator().manual_seed(seed)
    ids = torch.randint(1, vocab, (B, T), generator=generator)
    ids[1, 4:] = 0  # padding
    return ids


def make(seed=0, **kwargs):
    torch.manual_seed(seed)
    return BagOfEmbeddingsClassifier(29, **kwargs)


def test_logits_shape_and_padding_is_ignored():
    model = make().eval()
    ids = ids_batch()
    logits = model(ids)
    assert logits.shape == (4, 5)
    longer = torch.cat([ids, torch.zeros(4, 3, dtype=torch.long)], dim=1)
    torch.testing.assert_close(model(longer), logits)
    assert make(num_classes=3, d_model=8).eval()(ids).shape == (4, 3)


def test_records_training_mode_and_grad_for_every_call():
    model = make()
    ids = ids_batch()
    model.train()
    model(ids)
    with torch.no_grad():
        model(ids)
    model.eval()
    model.forward(ids)  # calling forward directly is recorded too
    with torch.inference_mode():
        model(ids)
    assert model.calls == [(True, True), (True, False), (False, True), (False, False)]
    assert all(type(v) is bool for record in model.calls for v in record)


def test_training_mode_drops_features_deterministically():
    model = make()
    ids = ids_batch()
    model.train()
    first = model(ids)
    with torch.random.fork_rng():
        torch.manual_seed(123)  # the RNG does not matter: the dropped features are a function of the ids
        second = model(ids)
    torch.testing.assert_close(first, second)
    model.eval()
    assert not torch.allclose(model(ids), first)  # training mode changes the numbers
    assert not torch.allclose(make(dropout=0.0).train()(ids), first)


def test_drop_mask_keeps_about_one_minus_dropout():
    model = make(dropout=0.5)
    ids = torch.randint(1, 29, (200, 9), generator=torch.Generator().manual_seed(1))
    mask = model.drop_mask(ids, 16)
    assert set(mask.unique().tolist()) <= {0.0, 2.0}
    assert 0.35 < float((mask > 0).float().mean()) < 0.65
    assert not torch.equal(mask[0], mask[1]) or not torch.equal(mask[1], mask[2])  # differs between rows
    assert torch.equal(make(dropout=0.0).drop_mask(ids, 16), torch.ones(200, 16))


def test_same_weights_give_the_same_training_here_and_there():
    """The grader trains one copy, the student's code another: same weights, same batches -> same numbers."""
    state = make(seed=3).state_dict()
    copies = []
    for _ in range(2):
        model = BagOfEmbeddingsClassifier(29)
        model.load_state_dict(state)
        optimizer = torch.optim.SGD(model.parameters(), lr=0.2, momentum=0.9)
        model.train()
        for seed in range(3):
            loss = torch.nn.functional.cross_entropy(model(ids_batch(seed)), torch.tensor([0, 1, 2, 3]))
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
        copies.append(model.state_dict())
    for key in state:
        assert torch.equal(copies[0][key], copies[1][key])
        assert not torch.equal(copies[0][key], state[key]) or key == "embedding.weight"


def test_rejects_a_dropout_outside_0_1():
    with pytest.raises(ValueError):
        BagOfEmbeddingsClassifier(29, dropout=1.0)
