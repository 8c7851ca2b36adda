"""Notebook 10's training module: data, bucketed batches, the loop with passed-in loss and schedule, decoding helpers,
cross-attention maps. Tiny budgets on a few hundred Multi30k sentences: fast, but real data and the real model."""
from __future__ import annotations

import importlib.util
import json
import math
import sys
from collections import Counter
from dataclasses import replace

import pytest
import torch

from coursekit import translation_training as tt
from solutions.embeddings import build_vocab, encode
from solutions.transformer import Transformer, greedy_decode
from solutions.translation import beam_search, corpus_bleu, label_smoothed_cross_entropy, noam_lr

TINY = replace(tt.BUDGETS["grading"], name="tiny", steps=12, max_tokens=300, d_model=32, num_heads=2, d_ff=64,
               num_layers=1, warmup_steps=4, eval_every=5, val_bleu_sentences=8, max_decode_len=12)


@pytest.fixture(scope="module")
def full_data():
    return tt.prepare_translation_data(build_vocab, encode)


@pytest.fixture(scope="module")
def data(full_data):
    """The real vocabularies, 300 training pairs and 40 validation pairs."""
    pairs = {"train": full_data.pairs["train"][:300], "val": full_data.pairs["val"][:40],
             "test_2016_flickr": full_data.pairs["test_2016_flickr"][:20]}
    tokens = {split: (full_data.tokens[split][0][:len(p)], full_data.tokens[split][1][:len(p)])
              for split, p in pairs.items()}
    return tt.TranslationData(full_data.de_vocab, full_data.en_vocab, tokens, pairs)


def tiny_model(data, seed=0):
    torch.manual_seed(seed)
    return Transformer(len(data.de_vocab), len(data.en_vocab), **tt.model_config(TINY))


def test_vocabularies_and_ids_follow_the_contract(full_data):
    de_vocab, en_vocab = full_data.de_vocab, full_data.en_vocab
    # the contract: "about 7,900 German and 5,900 English types" at min_freq 2
    assert 7_700 < len(de_vocab) < 8_100 and 5_700 < len(en_vocab) < 6_100, (len(de_vocab), len(en_vocab))
    counts = Counter(token for sentence in full_data.tokens["train"][0] for token in sentence)
    assert all(counts[token] >= 2 for token in de_vocab if not token.startswith("<"))
    assert {split: len(p) for split, p in full_data.pairs.items()} == {"train": 29_000, "val": 1_014,
                                                                       "test_2016_flickr": 1_000}
    for (src, tgt), de, en in zip(full_data.pairs["val"][:50], *full_data.tokens["val"]):
        assert src == [de_vocab.get(w, 1) for w in de]                         # no <bos>/<eos> on the source
        assert tgt == [2] + [en_vocab.get(w, 1) for w in en] + [3]
    assert full_data.en_itos[en_vocab["dog"]] == "dog" and full_data.en_itos[:4] == ["<pad>", "<unk>", "<bos>",
                                                                                    "<eos>"]


def test_token_batches_respect_the_budget_pad_with_zero_and_bucket_by_length(data):
    pairs = data.pairs["train"]
    batches = tt.token_batches(pairs, 400, torch.Generator().manual_seed(0))
    seen = Counter()
    padding = cells = 0
    for src, tgt in batches:
        assert src.dtype == tgt.dtype == torch.long and src.size(0) == tgt.size(0)
        assert src.size(0) * max(src.size(1), tgt.size(1)) <= 400
        for s, t in zip(src.tolist(), tgt.tolist()):
            s_len, t_len = sum(x != 0 for x in s), sum(x != 0 for x in t)
            assert all(x == 0 for x in s[s_len:]) and all(x == 0 for x in t[t_len:])   # padding only at the end
            seen[(tuple(s[:s_len]), tuple(t[:t_len]))] += 1
        padding += int((tgt == 0).sum())
        cells += tgt.numel()
    assert seen == Counter((tuple(s), tuple(t)) for s, t in pairs)                 # every pair once
    # bucketed: far less padding than batches of the same sizes drawn at random
    rng = torch.Generator().manual_seed(1)
    order = torch.randperm(len(pairs), generator=rng).tolist()
    random_padding = random_cells = 0
    for src, tgt in batches:
        group, order = order[:src.size(0)], order[src.size(0):]
        longest = max(len(pairs[i][1]) for i in group)
        random_padding += sum(longest - len(pairs[i][1]) for i in group)
        random_cells += longest * len(group)
    assert padding / cells < 0.5 * random_padding / random_cells
    again = tt.token_batches(pairs, 400, torch.Generator().manual_seed(0))
    other = tt.token_batches(pairs, 400, torch.Generator().manual_seed(1))
    assert all(torch.equal(a[1], b[1]) for a, b in zip(batches, again))
    assert any(a[1].shape != b[1].shape or not torch.equal(a[1], b[1]) for a, b in zip(batches, other))


def test_the_loop_trains_with_the_passed_loss_and_schedule(data):
    loss_calls, lr_calls = [], []

    def loss_fn(logits, targets, smoothing, ignore_index):
        loss_calls.append((tuple(logits.shape), tuple(targets.shape), smoothing, ignore_index,
                           int((targets == 2).sum())))
        return label_smoothed_cross_entropy(logits, targets, smoothing, ignore_index)

    def lr_fn(step, d_model, warmup_steps, factor):
        lr_calls.append((step, d_model, warmup_steps, factor))
        return noam_lr(step, d_model, warmup_steps, factor)

    budget = replace(TINY, noam_factor=2.0)
    model = tiny_model(data)
    evals = []
    history = tt.train_translator(model, data, budget, loss_fn, lr_fn, "cpu", torch.Generator().manual_seed(0),
                                  decode_fn=greedy_decode, on_eval=lambda step, h: evals.append(step),
                                  bleu_fn=corpus_bleu)
    n = budget.steps
    assert [call[0] for call in lr_calls] == list(range(1, n + 1))
    assert {call[1:] for call in lr_calls} == {(budget.d_model, budget.warmup_steps, 2.0)}
    assert history["lr"] == [noam_lr(s, budget.d_model, budget.warmup_steps, 2.0) for s in range(1, n + 1)]
    assert len(loss_calls) == n
    for logits_shape, targets_shape, smoothing, ignore_index, bos_targets in loss_calls:
        assert logits_shape == (targets_shape[0], len(data.en_vocab)) and smoothing == budget.label_smoothing
        assert ignore_index == 0 and bos_targets == 0                     # targets are tgt[:, 1:]: never <bos>
    assert history["step"] == list(range(1, n + 1)) and len(history["train loss"]) == n
    assert history["val step"] == evals == [5, 10, 12]
    assert len(history["val loss"]) == len(history["val bleu"]) == 3
    assert all(0 <= b <= 100 for b in history["val bleu"]) and all(math.isfinite(x) for x in history["val loss"])
    assert history["seconds"] >= history["eval seconds"] > 0 and history["tokens"] > 0
    assert model.training


def test_the_loop_sets_the_learning_rate_every_step(data):
    model = tiny_model(data)
    before = [p.detach().clone() for p in model.parameters()]
    history = tt.train_translator(model, data, replace(TINY, steps=3), label_smoothed_cross_entropy,
                                  lambda *args: 0.0, "cpu", torch.Generator().manual_seed(0))
    assert all(torch.equal(a, b) for a, b in zip(before, model.parameters()))   # lr 0: nothing moves
    assert history["lr"] == [0.0] * 3 and history["val bleu"] == []           # no decode_fn: no BLEU
    tt.train_translator(model, data, replace(TINY, steps=3), label_smoothed_cross_entropy,
                        lambda *args: 1e-3, "cpu", torch.Generator().manual_seed(0))
    assert not all(torch.equal(a, b) for a, b in zip(before, model.parameters()))


def test_training_lowers_the_loss(data):
    model = tiny_model(data)
    history = tt.train_translator(model, data, replace(TINY, steps=30, eval_every=15, noam_factor=2.0),
                                  label_smoothed_cross_entropy, noam_lr, "cpu", torch.Generator().manual_seed(0))
    assert history["val loss"][-1] < history["val loss"][0] < math.log(len(data.en_vocab))
    assert sum(history["train loss"][-5:]) < sum(history["train loss"][:5])


def test_translate_corpus_stops_at_eos_and_calls_decoders_as_documented(data):
    model = tiny_model(data)
    itos = data.en_itos
    dog, runs = data.en_vocab["dog"], data.en_vocab["runs"]
    sources = [src for src, _ in data.pairs["val"][:5]]

    def batched(model_, src, max_len):                   # like greedy_decode: (B, S) -> (B, L), pad after <eos>
        assert src.shape[0] == len(sources) and max_len == 7
        return torch.tensor([[dog, runs, 3, 0, 0]] * src.size(0))

    def per_sentence(model_, src, beam_size, max_len, length_penalty):   # like beam_search: (1, S) -> list
        assert src.shape[0] == 1 and (beam_size, max_len, length_penalty) == (3, 7, 0.5)
        return [dog, 3, runs, runs]

    assert tt.translate_corpus(model, sources, batched, itos, max_len=7) == [["dog", "runs"]] * 5
    assert tt.translate_corpus(model, sources, per_sentence, itos, max_len=7, beam_size=3,
                               length_penalty=0.5) == [["dog"]] * 5
    # the real decoders: greedy and beam 1 agree (the contract), and no token after <eos> survives
    greedy = tt.translate_corpus(model, sources, greedy_decode, itos, max_len=10)
    beam1 = tt.translate_corpus(model, sources, beam_search, itos, max_len=10, beam_size=1)
    assert greedy == beam1 and all("<eos>" not in h and "<pad>" not in h for h in greedy)
    bleu = tt.bleu_of(model, data, "val", greedy_decode, corpus_bleu, n_sentences=5, max_len=10)
    assert bleu == corpus_bleu(greedy, data.references("val")[:5])
    assert tt.sacrebleu_bleu(data.references("val")[:5], data.references("val")[:5]) == pytest.approx(100.0)


def _provided_transformer(tmp_path):
    from autograder.course.provided import write_provided_module

    path = write_provided_module("10_translation", tmp_path)
    spec = importlib.util.spec_from_file_location("provided_10_for_test", path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    try:
        spec.loader.exec_module(module)
    finally:
        del sys.modules[spec.name]
    return module.Transformer


@pytest.mark.parametrize("which", ["solutions", "provided"])
def test_cross_attention_weights_per_head_rows_sum_to_one(data, tmp_path, which):
    cls = Transformer if which == "solutions" else _provided_transformer(tmp_path)
    torch.manual_seed(0)
    model = cls(len(data.de_vocab), len(data.en_vocab), d_model=32, num_heads=4, d_ff=64, num_layers=2, dropout=0.3)
    src, tgt = data.pairs["val"][0]
    weights = tt.cross_attention_weights(model, src, tgt[:-1])
    assert weights.shape == (4, len(tgt) - 1, len(src))
    assert torch.allclose(weights.sum(-1), torch.ones(4, len(tgt) - 1), atol=1e-5)
    assert model.training                                                  # mode restored
    again = tt.cross_attention_weights(model, torch.tensor([src]), torch.tensor(tgt[:-1]))
    assert torch.equal(weights, again)                                     # eval mode: no dropout
    first = tt.cross_attention_weights(model, src, tgt[:-1], layer=0)
    assert first.shape == weights.shape and not torch.allclose(first, weights)
    assert not model.decoder.layers[-1].cross_attn._forward_hooks        # the hook is gone


def test_budgets():
    assert tt.budget_for("cpu") is tt.BUDGETS["student"] and tt.budget_for("cuda") is tt.BUDGETS["gpu"]
    assert tt.budget_for("cuda", grading=True) is tt.BUDGETS["grading"]
    for budget in tt.BUDGETS.values():
        assert budget.label_smoothing == 0.1 and budget.betas == (0.9, 0.98) and budget.eps == 1e-9
        assert budget.beam_size == 4 and budget.length_penalty == 0.6 and budget.clip_norm == 1.0
        Transformer(10, 10, **tt.model_config(budget))                         # 06's keyword arguments


def test_the_recorded_runs_are_found_through_course_data_dir(tmp_path, monkeypatch):
    (tmp_path / "translation_runs.json").write_text(json.dumps({"meta": {}, "runs": [{"seed": 7}]}))
    monkeypatch.setenv("COURSE_DATA_DIR", str(tmp_path))
    assert tt.translation_runs_path() == tmp_path / "translation_runs.json"
    assert tt.load_translation_runs()["runs"] == [{"seed": 7}]
