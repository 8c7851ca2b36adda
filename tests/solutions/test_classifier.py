"""Proofs for solutions/classifier.py (notebook 07)."""
from __future__ import annotations

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from solutions.classifier import TransformerClassifier, evaluate, masked_mean_pool, train_one_epoch
from solutions_compare import B, D_FF, D_MODEL, H, T, assert_matches, random_ids

VOCAB, CLASSES = 29, 5


def make_classifier(device, seed=0, dropout=0.0):
    torch.manual_seed(seed)
    return TransformerClassifier(VOCAB, CLASSES, d_model=D_MODEL, num_heads=H, d_ff=D_FF, num_layers=2,
                                 max_len=32, dropout=dropout).to(device)


def padded_reviews(seed=0, batch=B):
    ids = random_ids(batch, T, VOCAB, torch.Generator().manual_seed(seed))
    ids[1, 2:] = 0
    return ids


def plain_mean(x, mask):
    """Broken copy: averages over padding too."""
    return x.mean(dim=1)


@settings(max_examples=25, deadline=None)
@given(lengths=st.lists(st.integers(1, T), min_size=1, max_size=4), seed=st.integers(0, 1000))
def test_masked_mean_pool_ignores_padding(lengths, seed):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(len(lengths), T, D_MODEL, generator=g)
    mask = torch.arange(T)[None, :] < torch.tensor(lengths)[:, None]      # (B, T)
    pooled = masked_mean_pool(x, mask)
    expected = torch.stack([x[b, :n].mean(dim=0) for b, n in enumerate(lengths)])
    assert_matches(pooled, expected, "cpu")
    noisy = x.masked_fill(~mask[..., None], 1e3)                          # garbage at padded positions
    assert_matches(masked_mean_pool(noisy, mask), pooled, "cpu")


def test_teeth_plain_mean_is_rejected():
    x = torch.randn(B, T, D_MODEL)
    mask = torch.ones(B, T, dtype=torch.bool)
    mask[1, 2:] = False
    with pytest.raises(AssertionError):
        assert_matches(plain_mean(x, mask), masked_mean_pool(x, mask), "cpu")


def test_masked_mean_pool_shape_mismatch_raises():
    with pytest.raises(ValueError, match="mask"):
        masked_mean_pool(torch.zeros(2, 5, 3), torch.ones(2, 4, dtype=torch.bool))


def test_classifier_shape_and_submodules(device):
    model = make_classifier(device).eval()
    assert isinstance(model.classifier, torch.nn.Linear) and model.classifier.out_features == CLASSES
    assert model.encoder.embedding.weight.shape == (VOCAB, D_MODEL)
    logits = model(padded_reviews().to(device))
    assert logits.shape == (B, CLASSES) and torch.isfinite(logits).all()


def test_classifier_logits_do_not_change_with_extra_padding(device):
    model = make_classifier(device).eval()
    ids = padded_reviews().to(device)
    longer = torch.cat([ids, torch.zeros(B, 4, dtype=torch.long, device=device)], dim=1)
    assert_matches(model(longer), model(ids), device, "classifier logits")


def test_train_one_epoch_reduces_loss_on_a_fixed_batch(device):
    model = make_classifier(device)
    ids, labels = padded_reviews(batch=8), torch.arange(8) % CLASSES
    loader = [(ids, labels)] * 4                                           # CPU batches: moved by the function
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-2)
    first = train_one_epoch(model, loader, optimizer, device)
    for _ in range(3):
        last = train_one_epoch(model, loader, optimizer, device)
    assert model.training
    assert last < first


def test_train_one_epoch_returns_mean_of_batch_losses(device):
    model = make_classifier(device)
    loader = [(padded_reviews(s, batch=4), torch.tensor([0, 1, 2, 3])) for s in range(3)]
    optimizer = torch.optim.SGD(model.parameters(), lr=0.0)                # lr 0: the losses stay put
    with torch.no_grad():
        model.train()
        expected = sum(torch.nn.functional.cross_entropy(model(i.to(device)), y.to(device)).item()
                       for i, y in loader) / 3
    assert train_one_epoch(model, loader, optimizer, device) == pytest.approx(expected, rel=1e-5)


def test_evaluate_equals_direct_accuracy(device):
    model = make_classifier(device).train()
    batches = [(padded_reviews(s, batch=3 + s), torch.randint(0, CLASSES, (3 + s,),
                                                              generator=torch.Generator().manual_seed(s)))
               for s in range(3)]
    accuracy = evaluate(model, batches, device)
    assert not model.training
    with torch.no_grad():
        correct = sum((model(i.to(device)).argmax(-1).cpu() == y).sum().item() for i, y in batches)
    assert accuracy == correct / sum(len(y) for _, y in batches)
