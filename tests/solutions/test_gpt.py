"""Proofs for solutions/gpt.py (notebook 08): BPE against hand-worked examples and a lowest-rank encoder, the GPT
against nn.TransformerEncoderLayer(norm_first=True) under a causal mask, and the training and sampling helpers against
direct computations."""
from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F
from hypothesis import given, settings
from hypothesis import strategies as st

from solutions.gpt import (
    GPT, bpe_decode, bpe_encode, estimate_loss, generate, get_batch, lm_loss, lr_at, sample_next_token, train_bpe,
    train_step,
)
from solutions_compare import D_FF, D_MODEL, H, assert_matches, torch_encoder_layer_from

VOCAB, LAYERS, MAX_LEN = 23, 2, 16


# ------------------------------------------------------------------------------------------------------- BPE

def lowest_rank_encode(text: str, merges) -> list[int]:
    """An independent encoder: repeatedly merge the present pair with the lowest rank (GPT-2's loop)."""
    rank = {tuple(pair): k for k, pair in enumerate(merges)}
    ids = list(text.encode("utf-8"))
    while len(ids) >= 2:
        pairs = [(rank.get(pair, math.inf), i) for i, pair in enumerate(zip(ids, ids[1:]))]
        best, _ = min(pairs)
        if best == math.inf:
            break
        target, out, i = merges[best], [], 0
        while i < len(ids):
            if i + 1 < len(ids) and (ids[i], ids[i + 1]) == tuple(target):
                out.append(256 + best)
                i += 2
            else:
                out.append(ids[i])
                i += 1
        ids = out
    return ids


def test_train_bpe_on_a_worked_example():
    # "aaabdaaabac": aa (4) -> 256; then (256, a) and (a, b) tie at 2, (256, a) comes first -> 257; (257, b) -> 258;
    # then every pair occurs once: stop.
    a, b = ord("a"), ord("b")
    assert train_bpe("aaabdaaabac", 10) == [(a, a), (256, a), (257, b)]
    assert train_bpe("aaabdaaabac", 2) == [(a, a), (256, a)]


def test_train_bpe_breaks_ties_by_first_occurrence_not_by_value():
    assert train_bpe("abab cdcd", 1) == [(ord("a"), ord("b"))]
    assert train_bpe("cdcd abab", 1) == [(ord("c"), ord("d"))]      # a rule by id value would pick (a, b)


def test_train_bpe_counts_overlapping_pairs_and_merges_without_overlap():
    # overlapping counts: aa 2, bc 2 -> tie -> aa first; counting without overlap would give aa 1 and pick bc.
    assert train_bpe("aaa-bcbc", 1) == [(ord("a"), ord("a"))]
    # "aaaa": aa counted 3 times, merged left to right into [256, 256]; then (256, 256) occurs once: stop.
    assert train_bpe("aaaa", 5) == [(ord("a"), ord("a"))]
    assert bpe_encode("aaaaa", [(97, 97)]) == [256, 256, 97]


def test_train_bpe_stops_when_nothing_repeats():
    assert train_bpe("abcdef", 4) == []
    assert train_bpe("", 4) == [] and train_bpe("x", 3) == []
    assert train_bpe("abab", 0) == []


def test_merges_are_prefix_consistent():
    text = "the theme of the thesis: then there, the end " * 3
    merges = train_bpe(text, 12)
    for k in range(len(merges)):
        assert train_bpe(text, k) == merges[:k]


TEXTS = ["To be, or not to be: that is the question.", "naïve café — Æsop's “fables” 日本語 🤖\n", "",
         "\x00\uffff", "aaaaaaaaab"]


@pytest.mark.parametrize("text", TEXTS)
def test_encode_equals_the_lowest_rank_loop_and_round_trips(text):
    merges = train_bpe("To be, or not to be: that is the question. naïve café — Æsop 日本 " * 4, 40)
    assert bpe_encode(text, merges) == lowest_rank_encode(text, merges)
    assert bpe_decode(bpe_encode(text, merges), merges) == text
    assert bpe_encode(text, []) == list(text.encode("utf-8"))


@settings(max_examples=60, deadline=None)
@given(train=st.text(max_size=60), text=st.text(max_size=40), num_merges=st.integers(0, 30))
def test_round_trip_and_lowest_rank_on_any_text(train, text, num_merges):
    merges = train_bpe(train * 2, num_merges)
    assert len(merges) <= num_merges
    assert all(first < 256 + k and second < 256 + k for k, (first, second) in enumerate(merges))
    encoded = bpe_encode(text, merges)
    assert encoded == lowest_rank_encode(text, merges)
    assert bpe_decode(encoded, merges) == text


def test_decode_replaces_invalid_utf8():
    merges = [(0xC3, 0xA9)]                        # "é" as one token
    assert bpe_decode([256, 0xC3], merges) == "é\ufffd"
    assert bpe_decode(torch.tensor([104, 105]).tolist(), []) == "hi"


# ------------------------------------------------------------------------------------------------------- GPT

def make_gpt(device, seed=0, **kwargs):
    torch.manual_seed(seed)
    model = GPT(VOCAB, D_MODEL, H, D_FF, LAYERS, max_len=MAX_LEN, **kwargs).to(device).eval()
    with torch.no_grad():  # non-trivial norms, so a swapped or missing norm cannot hide
        for name, parameter in model.named_parameters():
            if "norm" in name:
                parameter.uniform_(0.5, 1.5) if name.endswith("weight") else parameter.uniform_(-0.5, 0.5)
    return model


def test_structure_tying_and_initialisation():
    torch.manual_seed(0)
    model = GPT(500, d_model=64, num_heads=4, d_ff=128, num_layers=3, max_len=300)
    assert model.max_len == 300 and len(model.blocks) == 3
    assert all(block.norm_first for block in model.blocks)
    assert model.lm_head.weight is model.token_embedding.weight and model.lm_head.bias is None
    n_tied = sum(p.numel() for p in model.parameters())
    n_untied = n_tied + 500 * 64
    assert sum(p.numel() for p in model.state_dict().values()) - 500 * 64 == n_tied - 0  # state_dict lists both names
    assert n_untied - n_tied == 500 * 64
    for table in (model.token_embedding.weight, model.position_embedding.embedding.weight):
        assert abs(table.std().item() - 64 ** -0.5) < 0.01, "both tables at the tokens' scale, d_model ** -0.5"


@pytest.mark.parametrize("length", [1, 5, MAX_LEN])
def test_gpt_equals_torch_layers_under_a_causal_mask(device, length):
    model = make_gpt(device)
    layers = [torch_encoder_layer_from(block, H, norm_first=True) for block in model.blocks]
    ids = torch.randint(0, VOCAB, (2, length), generator=torch.Generator().manual_seed(1)).to(device)
    blocked = torch.ones(length, length, dtype=torch.bool, device=device).triu(1)   # PyTorch: True = blocked
    with torch.no_grad():
        x = model.token_embedding.weight[ids] + model.position_embedding.embedding.weight[:length]
        for layer in layers:
            x = layer(x, src_mask=blocked)
        expected = F.layer_norm(x, (D_MODEL,), model.norm.weight, model.norm.bias) @ model.token_embedding.weight.T
        assert_matches(model(ids), expected, device, "GPT logits")


def test_changing_a_future_token_changes_no_earlier_logit(device):
    model = make_gpt(device)
    ids = torch.randint(0, VOCAB, (2, 9), generator=torch.Generator().manual_seed(2)).to(device)
    with torch.no_grad():
        before = model(ids)
        for t in range(ids.size(1)):
            changed = ids.clone()
            changed[:, t] = (changed[:, t] + 1) % VOCAB
            after = model(changed)
            assert torch.equal(after[:, :t], before[:, :t]) or torch.allclose(after[:, :t], before[:, :t],
                                                                              atol=1e-6)
            assert not torch.allclose(after[:, t:], before[:, t:]), "the changed token must matter from t on"


def test_gpt_refuses_too_long_inputs_and_dropout_is_off_in_eval():
    model = make_gpt("cpu", dropout=0.3)
    with pytest.raises(ValueError):
        model(torch.zeros(1, MAX_LEN + 1, dtype=torch.long))
    ids = torch.randint(0, VOCAB, (2, 6))
    with torch.no_grad():
        assert torch.equal(model(ids), model(ids))
        model.train()
        assert not torch.equal(model(ids), model(ids))


# ---------------------------------------------------------------------------------------------------- training

def test_get_batch_draws_with_one_randint_and_shifts_by_one():
    data = torch.arange(100, 150)
    x, y = get_batch(data, 8, 5, torch.Generator().manual_seed(3))
    starts = torch.randint(50 - 8, (5,), generator=torch.Generator().manual_seed(3))
    assert x.shape == y.shape == (5, 8) and x.dtype == torch.long
    assert x.tolist() == [list(range(100 + s, 108 + s)) for s in starts.tolist()]
    assert torch.equal(y, x + 1)
    torch.manual_seed(4)
    x1, _ = get_batch(data, 8, 5)
    torch.manual_seed(4)
    assert torch.equal(x1[:, 0] - 100, torch.randint(42, (5,))), "generator=None draws from the global generator"


def test_get_batch_reaches_the_last_token_and_no_further():
    data = torch.arange(10)
    seen = set()
    generator = torch.Generator().manual_seed(0)
    for _ in range(200):
        x, y = get_batch(data, 4, 8, generator)
        seen.update(y[:, -1].tolist())
    assert seen == {4, 5, 6, 7, 8, 9}


def test_lm_loss_is_the_mean_negative_log_likelihood():
    logits = torch.randn(3, 4, 7, generator=torch.Generator().manual_seed(5))
    targets = torch.randint(7, (3, 4), generator=torch.Generator().manual_seed(6))
    log_probs = logits.log_softmax(-1)
    expected = -sum(log_probs[b, t, targets[b, t]] for b in range(3) for t in range(4)) / 12
    assert torch.allclose(lm_loss(logits, targets), expected, atol=1e-6)
    assert lm_loss(logits, targets).dim() == 0


def test_estimate_loss_averages_every_non_overlapping_window():
    model = make_gpt("cpu", dropout=0.2).train()
    data = torch.randint(0, VOCAB, (53,), generator=torch.Generator().manual_seed(7))
    block = 8                                              # windows at 0, 8, ..., 40 (40 + 9 <= 53); 48 does not fit
    with torch.no_grad():
        model.eval()
        losses = [lm_loss(model(data[s:s + block][None]), data[s + 1:s + block + 1][None]).item()
                  for s in range(0, 41, block)]
        model.train()
    assert estimate_loss(model, data, block, "cpu") == pytest.approx(sum(losses) / len(losses), abs=1e-5)
    assert model.training, "training mode restored"
    model.eval()
    estimate_loss(model, data, block, "cpu")
    assert not model.training
    assert estimate_loss(model, data[:9], block, "cpu") == pytest.approx(losses[0], abs=1e-5)
    with pytest.raises(ValueError):
        estimate_loss(model, data[:8], block, "cpu")


def test_lr_at_warms_up_decays_and_holds():
    assert lr_at(0, 1e-3, 10, 100) == pytest.approx(1e-4)
    assert lr_at(9, 1e-3, 10, 100) == pytest.approx(1e-3)
    assert lr_at(10, 1e-3, 10, 100, 1e-4) == pytest.approx(1e-3)
    assert lr_at(55, 1e-3, 10, 100, 1e-4) == pytest.approx(5.5e-4)          # half way: the mean of max and min
    assert lr_at(100, 1e-3, 10, 100, 1e-4) == pytest.approx(1e-4)
    assert lr_at(5000, 1e-3, 10, 100, 1e-4) == pytest.approx(1e-4)
    assert lr_at(0, 1e-3, 0, 100) == pytest.approx(1e-3)
    assert lr_at(20, 1e-3, 20, 20, 1e-5) == pytest.approx(1e-5)
    for warmup, total in ((-1, 10), (11, 10)):
        with pytest.raises(ValueError):
            lr_at(0, 1e-3, warmup, total)


def _hand_step(params, forward, x, y, lr, grad_clip):
    """One SGD step written out: the gradients of the mean cross-entropy by torch.autograd.grad, scaled by
    min(1, grad_clip / (norm + 1e-6)) as clip_grad_norm_ documents, then w - lr * g. Returns (loss, new weights)."""
    logits = forward(params, x)
    loss = -logits.log_softmax(-1).gather(-1, y[..., None]).mean()
    grads = torch.autograd.grad(loss, params)
    norm = torch.sqrt(sum((g.double() ** 2).sum() for g in grads))
    scale = 1.0 if grad_clip is None else min(1.0, grad_clip / (float(norm) + 1e-6))
    return float(loss.detach()), [(w - lr * scale * g).detach() for w, g in zip(params, grads)]


@pytest.mark.parametrize("grad_clip", [0.05, 1.0, None, "default"])
def test_train_step_is_one_sgd_step_on_the_clipped_gradients(grad_clip):
    torch.manual_seed(5)
    model = GPT(VOCAB, D_MODEL, H, D_FF, LAYERS, max_len=MAX_LEN).eval()    # eval: dropout=0 anyway; mode kept
    names = [n for n, _ in model.named_parameters()]
    matrices = [p for p in model.parameters() if p.dim() >= 2]
    vectors = [p for p in model.parameters() if p.dim() < 2]
    optimizer = torch.optim.SGD([{"params": matrices}, {"params": vectors}], lr=0.9)
    x, y = torch.randint(VOCAB, (3, 9)), torch.randint(VOCAB, (3, 9))
    # stale gradients from an earlier step must not count
    lm_loss(model(torch.randint(VOCAB, (2, 5))), torch.randint(VOCAB, (2, 5))).backward()
    start = [p.detach().clone().requires_grad_() for p in model.parameters()]

    def forward(params, ids):
        return torch.func.functional_call(model, dict(zip(names, params)), (ids,))

    clip = 1.0 if grad_clip == "default" else grad_clip
    expected_loss, expected = _hand_step(start, forward, x, y, 0.3, clip)
    got = train_step(model, optimizer, x, y, 0.3, *(() if grad_clip == "default" else (grad_clip,)))
    assert isinstance(got, float) and got == pytest.approx(expected_loss, rel=1e-6)
    for name, p, w in zip(names, model.parameters(), expected):
        torch.testing.assert_close(p.detach(), w, atol=1e-6, rtol=1e-5, msg=name)
    assert [group["lr"] for group in optimizer.param_groups] == [0.3, 0.3]
    assert not model.training


# -------------------------------------------------------------------------------------------------- sampling

def test_temperature_zero_is_the_argmax_with_the_first_index_on_ties():
    logits = torch.tensor([[1.0, 3.0, 3.0, 0.0], [5.0, 5.0, 1.0, 1.0]])
    assert sample_next_token(logits, 0.0).tolist() == [1, 0]


def test_sampling_makes_exactly_one_multinomial_call():
    logits = torch.randn(4, 9, generator=torch.Generator().manual_seed(8))
    for temperature, top_k in ((1.0, 9), (0.7, 3), (1.5, 9), (2.0, 50)):
        scaled = logits / temperature
        if top_k < 9:   # the k-th largest by sorting, not by topk
            kth = scaled.sort(-1, descending=True).values[:, top_k - 1:top_k]
            scaled = torch.where(scaled >= kth, scaled, torch.tensor(float("-inf")))
        probs = torch.softmax(scaled, -1)
        expected = torch.multinomial(probs, 1, generator=torch.Generator().manual_seed(9)).squeeze(-1)
        got = sample_next_token(logits, temperature, None if top_k == 9 and temperature == 1.0 else top_k,
                                torch.Generator().manual_seed(9))
        assert torch.equal(got, expected), (temperature, top_k)


def test_top_k_keeps_ties_with_the_kth_largest():
    logits = torch.tensor([[4.0, 2.0, 2.0, 1.0, 0.0]])
    draws = sample_next_token(logits.expand(4000, 5), 1.0, 2, torch.Generator().manual_seed(10))
    assert set(draws.tolist()) == {0, 1, 2}, "top_k=2 keeps index 0 and both logits equal to the 2nd largest"


@pytest.mark.parametrize("temperature, top_k", [(1.0, None), (0.5, None), (2.0, 3)])
def test_sample_frequencies_follow_the_tempered_softmax(temperature, top_k):
    logits = torch.tensor([2.0, 1.0, 0.5, 0.0, -1.0])
    n = 20000
    draws = sample_next_token(logits.expand(n, 5), temperature, top_k, torch.Generator().manual_seed(11))
    probs = torch.softmax(logits / temperature, -1)
    if top_k is not None:
        probs[top_k:] = 0
        probs /= probs.sum()
    counts = torch.bincount(draws, minlength=5).double()
    expected = probs.double() * n
    kept = expected > 0
    assert (counts[~kept] == 0).all()
    chi2 = (((counts - expected)[kept] ** 2) / expected[kept]).sum().item()
    assert chi2 < 20.0, f"chi-square {chi2:.1f} with {int(kept.sum()) - 1} degrees of freedom"


# ------------------------------------------------------------------------------------------------ generation

def test_generate_greedy_equals_a_hand_loop_and_crops_the_context(device):
    model = make_gpt(device, dropout=0.1).train()
    prompt = torch.randint(0, VOCAB, (2, 5), generator=torch.Generator().manual_seed(12)).to(device)
    out = generate(model, prompt, MAX_LEN + 4, temperature=0.0)
    assert model.training and out.shape == (2, 5 + MAX_LEN + 4) and torch.equal(out[:, :5], prompt)
    model.eval()
    ids = prompt
    with torch.no_grad():
        for _ in range(MAX_LEN + 4):
            ids = torch.cat([ids, model(ids[:, -MAX_LEN:])[:, -1].argmax(-1, keepdim=True)], dim=1)
    assert torch.equal(out, ids)


def test_generate_draws_with_the_generator_step_by_step():
    model = make_gpt("cpu")
    prompt = torch.tensor([[1, 2, 3]])
    out = generate(model, prompt, 6, temperature=0.9, top_k=5, generator=torch.Generator().manual_seed(13))
    generator, ids = torch.Generator().manual_seed(13), prompt
    with torch.no_grad():
        for _ in range(6):
            ids = torch.cat([ids, sample_next_token(model(ids)[:, -1], 0.9, 5, generator)[:, None]], dim=1)
    assert torch.equal(out, ids)
    assert torch.equal(generate(model, prompt, 0), prompt)
