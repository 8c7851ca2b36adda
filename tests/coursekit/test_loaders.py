"""coursekit.loaders: padding collate and the length-bucketed DataLoader."""
import random

import pytest
import torch

from coursekit.loaders import make_loader, pad_collate, padding_fraction


def _dataset(n=2000, seed=0):
    rng = random.Random(seed)
    ids = [[rng.randint(1, 500) for _ in range(rng.randint(1, 120))] for _ in range(n)]
    return ids, list(range(n))  # label = example index, so every example can be traced


def test_pad_collate_post_pads():
    ids, labels = pad_collate([([5, 6, 7], 1), ([8], 4)])
    assert ids.dtype == torch.long and labels.dtype == torch.long
    assert ids.tolist() == [[5, 6, 7], [8, 0, 0]]
    assert labels.tolist() == [1, 4]


def test_pad_collate_pad_id_max_len_and_tensors():
    ids, _ = pad_collate([(torch.tensor([1, 2, 3, 4]), 0), ([9], 2)], pad_id=7, max_len=2)
    assert ids.tolist() == [[1, 2], [9, 7]]
    ids, _ = pad_collate([([], 0)])
    assert ids.shape == (1, 1) and ids.tolist() == [[0]]
    with pytest.raises(ValueError):
        pad_collate([])


def test_every_example_once_per_epoch_with_shapes():
    ids, labels = _dataset(1003)
    loader = make_loader(ids, labels, batch_size=32)
    assert len(loader) == 32
    for _ in range(2):
        seen = []
        for batch_ids, batch_labels in loader:
            assert batch_ids.dim() == 2 and batch_ids.shape[0] == batch_labels.shape[0] <= 32
            for row, index in zip(batch_ids, batch_labels.tolist()):
                length = len(ids[index])
                assert row[:length].tolist() == ids[index] and not row[length:].any()
            seen.extend(batch_labels.tolist())
        assert sorted(seen) == list(range(1003))


def _order(loader):
    return [batch_labels.tolist() for _, batch_labels in loader]


def test_deterministic_by_seed_and_new_order_each_epoch():
    ids, labels = _dataset(600)
    first = make_loader(ids, labels, batch_size=16, seed=3)
    second = make_loader(ids, labels, batch_size=16, seed=3)
    epoch0 = _order(first)
    assert epoch0 == _order(second)
    assert _order(first) != epoch0  # epoch 1 differs from epoch 0
    assert _order(make_loader(ids, labels, batch_size=16, seed=4)) != epoch0


def test_bucketing_cuts_padding():
    ids, labels = _dataset(3000)
    bucketed = padding_fraction(make_loader(ids, labels, batch_size=32, bucket=True))
    plain = padding_fraction(make_loader(ids, labels, batch_size=32, bucket=False))
    assert plain > 0.3
    assert bucketed < plain / 4


def test_no_shuffle_no_bucket_keeps_order_and_max_len():
    ids, labels = _dataset(50)
    loader = make_loader(ids, labels, batch_size=8, shuffle=False, bucket=False, max_len=10)
    assert [i for batch in _order(loader) for i in batch] == list(range(50))
    assert all(batch_ids.shape[1] <= 10 for batch_ids, _ in loader)


@pytest.mark.parametrize("kwargs", [dict(batch_size=0), dict(batch_size=2.5), dict(batch_size=4, max_len=0)])
def test_rejects_bad_arguments(kwargs):
    with pytest.raises(ValueError):
        make_loader([[1, 2]], [0], **kwargs)


def test_rejects_mismatched_lengths_and_empty_data():
    with pytest.raises(ValueError, match="differ"):
        make_loader([[1], [2]], [0], batch_size=2)
    with pytest.raises(ValueError):
        make_loader([], [], batch_size=2)
