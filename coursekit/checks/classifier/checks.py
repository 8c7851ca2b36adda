"""Public self-checks of notebook 07 (the Yelp review classifier): masked_mean_pool and TransformerClassifier.

Small fixed examples whose answers are worked out here by simple means (hand-made numbers), plus shape checks and a
HINT for each likely mistake. train_one_epoch and evaluate: `training.py`.
"""
from __future__ import annotations

import numpy as np
import torch
import torch.nn as nn

from coursekit.checks.toolkit import (
    expect_shape, expect_type, fail, first_matching_hint, mistake_hint, passed, run,
)
from coursekit.checks.toolkit import uses_parts
from coursekit.criteria import argument
from coursekit.tolerance import CPU_FLOAT32, PADDING_APPENDED

__all__ = ["check_masked_mean_pool", "check_transformer_classifier"]


# ---------------------------------------------------------------------------------------------------- pooling
def check_masked_mean_pool(masked_mean_pool) -> None:
    # two reviews of 3 and 1 real tokens, padded to T = 4, with d = 2 features
    x = torch.tensor([[[1.0, 2.0], [3.0, 4.0], [5.0, 9.0], [100.0, 100.0]],
                      [[2.0, -2.0], [7.0, 7.0], [7.0, 7.0], [7.0, 7.0]]])  # (B=2, T=4, d=2)
    mask = torch.tensor([[True, True, True, False], [True, False, False, False]])  # (B, T)
    x_before = x.clone()
    out = run("masked_mean_pool", masked_mean_pool, x, mask)
    expect_type(out, torch.Tensor, "masked_mean_pool(x, mask)")
    expect_shape(out, (2, 2), "masked_mean_pool(x (2, 4, 2), mask (2, 4))",
                 "average over the time axis (dim=1), keeping the batch and feature axes.")
    if not torch.equal(x, x_before):
        fail("masked_mean_pool changed x in place.", mistake_hint("pool.in_place"))
    expected = np.array([[3.0, 5.0], [2.0, -2.0]])  # (1+3+5)/3, (2+4+9)/3 ; the single real token
    if not np.allclose(out.detach().cpu().double().numpy(), expected, **CPU_FLOAT32):
        hint = first_matching_hint(out, [
            (x.mean(dim=1), mistake_hint("pool.includes_padding")),
            ([[2.25, 3.75], [0.5, -0.5]], mistake_hint("pool.divides_by_T")),
            ([[9.0, 15.0], [2.0, -2.0]], mistake_hint("pool.no_division")),
            ([[100.0, 100.0], [7.0, 7.0]], mistake_hint("pool.mask_inverted")),
        ])
        fail(f"masked_mean_pool gives {out.detach().cpu().numpy().round(4).tolist()}, expected "
             f"{expected.tolist()} (mean over the real positions only).", hint)
    passed("masked_mean_pool")


# ---------------------------------------------------------------------------------------------------- model
def _padding_invariance(model, ids: torch.Tensor, pad_id: int, name: str) -> torch.Tensor:
    longer = torch.cat([ids, torch.full((ids.shape[0], 3), pad_id)], dim=1)  # 3 more padding columns
    with torch.no_grad():
        logits = run(name, model, ids)
        logits_longer = run(name, model, longer)
    expect_type(logits, torch.Tensor, f"{name}(ids)")
    if logits.shape != logits_longer.shape or not torch.allclose(logits, logits_longer, **PADDING_APPENDED):
        fail(f"{name}: the logits change when more padding ({pad_id}) is appended to the same reviews.",
             mistake_hint("classifier.padding_not_excluded"))
    return logits


@uses_parts("TransformerClassifier")
def check_transformer_classifier(TransformerClassifier) -> None:
    if not (isinstance(TransformerClassifier, type) and issubclass(TransformerClassifier, nn.Module)):
        fail("TransformerClassifier should be a class that derives from nn.Module.")
    torch.manual_seed(0)
    config = dict(vocab_size=20, num_classes=5, d_model=8, num_heads=2, d_ff=16, num_layers=1, max_len=16)
    model = run("TransformerClassifier", TransformerClassifier, **config)
    for name in ("encoder", "classifier"):
        if not isinstance(getattr(model, name, None), nn.Module):
            fail(f"TransformerClassifier has no submodule `self.{name}`.",
                 "create `self.encoder = Encoder(...)` and `self.classifier = nn.Linear(d_model, num_classes)` in "
                 "__init__ (the names matter: grading copies weights by name).")
    if not isinstance(model.classifier, nn.Linear) or (model.classifier.in_features,
                                                       model.classifier.out_features) != (8, 5):
        fail(f"self.classifier should be nn.Linear(d_model=8, num_classes=5), got {model.classifier}.")
    model.eval()
    ids = torch.tensor([[5, 3, 9, 2, 7, 4], [6, 1, 8, 0, 0, 0], [11, 12, 0, 0, 0, 0]])  # (B=3, T=6), pad 0
    logits = _padding_invariance(model, ids, 0, "TransformerClassifier.forward")
    expect_shape(logits, (3, 5), "model(ids (3, 6))", "return one row of num_classes logits per review.")
    if not torch.isfinite(logits).all():
        fail("the logits contain NaN or inf.", "check the pooling: divide by the count of real tokens.")
    rows = logits.detach().double()
    if (rows >= 0).all() and torch.allclose(rows.sum(-1), torch.ones(3, dtype=rows.dtype), **CPU_FLOAT32):
        fail("forward returns probabilities.", mistake_hint("classifier.returns_probabilities"))
    if (rows <= 0).all() and torch.allclose(rows.exp().sum(-1), torch.ones(3, dtype=rows.dtype), **CPU_FLOAT32):
        fail("forward returns log-probabilities.", mistake_hint("classifier.returns_log_probabilities"))
    if torch.allclose(rows[0], rows[1], **CPU_FLOAT32):
        fail("two different reviews get identical logits.", "the logits must depend on the tokens of each review.")

    with argument("TransformerClassifier.pad_id"):
        torch.manual_seed(0)
        model7 = run("TransformerClassifier", TransformerClassifier, **config, pad_id=7).eval()
        ids7 = torch.tensor([[5, 3, 9, 0, 4], [6, 1, 7, 7, 7]])  # pad_id = 7 here; 0 is a real token
        _padding_invariance(model7, ids7, 7, "TransformerClassifier(..., pad_id=7).forward")

    with argument("TransformerClassifier.dropout"):  # the same weights in training mode
        for p in (0.0, 0.5):
            torch.manual_seed(0)
            dropped = run("TransformerClassifier", TransformerClassifier, **config, dropout=p)
            run("load_state_dict", dropped.load_state_dict, model.state_dict())
            dropped.train()
            with torch.no_grad():
                trained = run(f"TransformerClassifier(..., dropout={p}).forward", dropped, ids)
            same = isinstance(trained, torch.Tensor) and trained.shape == logits.shape and \
                torch.allclose(trained, logits, **CPU_FLOAT32)
            if p == 0.0 and not same:
                fail("TransformerClassifier(..., dropout=0.0) in training mode gives other logits than in eval mode.",
                     "with dropout=0.0 nothing is dropped: pass dropout on to Encoder(..., dropout).")
            if p > 0.0 and same:
                fail("TransformerClassifier(..., dropout=0.5) in training mode gives the logits of eval mode.",
                     "dropout acts in training mode: pass dropout on to Encoder(..., dropout).")
    passed("TransformerClassifier")
