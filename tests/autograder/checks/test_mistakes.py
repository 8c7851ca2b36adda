"""Every known-mistake variant with its switches at their defaults reproduces the reference exactly, so a match
with a switch on points at that one mistake."""
from __future__ import annotations

import importlib
from types import SimpleNamespace

import pytest
import torch

import solutions
from coursekit.api import TOPICS

# every topic's variants under one name (each topic folder's mistakes.py)
M = SimpleNamespace(**{name: value for topic in TOPICS
                       for name, value in vars(importlib.import_module(f"autograder.checks.{topic}.mistakes")).items()
                       if not name.startswith("_")})
from autograder.checks.kit.inputs import padded_ids


def close(a, b):
    torch.testing.assert_close(a, b, atol=1e-5, rtol=1e-4)


def test_data_prep_defaults_match_reference():
    texts = [["b", "a", "c", "a"], ["c", "d", "<unk>", "b"], ["e"]]
    for kwargs in ({}, {"min_freq": 2}, {"specials": ("<pad>", "<unk>")}):
        assert M.build_vocab(texts, **kwargs) == solutions.build_vocab(texts, **kwargs)
    vocab = solutions.build_vocab(texts)
    assert M.encode(["a", "zz"], vocab) == solutions.encode(["a", "zz"], vocab)
    seqs = [[5, 6, 7], [8], [9, 10, 11, 12]]
    for kwargs in ({}, {"pad_id": 4}, {"max_len": 2}, {"max_len": 6}):
        assert torch.equal(M.pad_batch(seqs, **kwargs), solutions.pad_batch(seqs, **kwargs))
    embedding, ids = solutions.TokenEmbedding(11, 6, padding_idx=0), torch.tensor([[3, 0, 7], [1, 10, 9]])
    assert torch.equal(M.lookup(embedding.weight, ids), embedding(ids))


def test_positional_defaults_match_reference():
    for max_len, d_model in ((12, 8), (9, 6)):
        close(M.sinusoidal(max_len, d_model), solutions.sinusoidal_positional_encoding(max_len, d_model))
    x = torch.randn(3, 5, 8)
    close(M.add_positions(x, M.sinusoidal(12, 8)), solutions.PositionalEncoding(8, 12)(x))


def test_attention_defaults_match_reference():
    torch.manual_seed(0)
    q, k, v = torch.randn(2, 3, 5, 4), torch.randn(2, 3, 7, 4), torch.randn(2, 3, 7, 6)
    mask = solutions.make_padding_mask(padded_ids([7, 3], 7))
    for m in (None, mask):
        for got, want in zip(M.sdpa(q, k, v, m), solutions.scaled_dot_product_attention(q, k, v, m)):
            close(got, want)
    for size in (1, 5):
        assert torch.equal(M.causal_mask(size), solutions.make_causal_mask(size))
    x = torch.randn(2, 5, 12)
    assert torch.equal(M.split(x, 3), solutions.split_heads(x, 3))
    assert torch.equal(M.merge(M.split(x, 3)), x)
    attn = solutions.MultiHeadAttention(12, 3).eval()
    memory = torch.randn(2, 7, 12)
    for got, want in zip(M.mha(attn, x, memory, memory, mask), attn(x, memory, memory, mask)):
        close(got, want)


def test_stack_defaults_match_reference():
    torch.manual_seed(1)
    ids = padded_ids([6, 4], 6, vocab=17)
    mask = solutions.make_padding_mask(ids)
    x = torch.randn(2, 6, 12)
    for norm_first in (False, True):
        block = solutions.EncoderBlock(12, 3, 20, norm_first=norm_first).eval()
        close(M.encoder_block(block, x, mask), block(x, mask))
        encoder = solutions.Encoder(17, 12, 3, 20, 2, max_len=16, norm_first=norm_first).eval()
        close(M.encoder(encoder, ids, mask), encoder(ids, mask))
        memory = torch.randn(2, 7, 12)
        tgt_mask = mask & solutions.make_causal_mask(6)
        dec_block = solutions.DecoderBlock(12, 3, 20, norm_first=norm_first).eval()
        close(M.decoder_block(dec_block, x, memory, tgt_mask, None), dec_block(x, memory, tgt_mask, None))
        decoder = solutions.Decoder(17, 12, 3, 20, 2, max_len=16, norm_first=norm_first).eval()
        close(M.decoder(decoder, ids, memory, tgt_mask), decoder(ids, memory, tgt_mask))
        model = solutions.Transformer(19, 17, 12, 3, 20, 2, max_len=16, pad_id=0, norm_first=norm_first).eval()
        src = padded_ids([7, 4], 7, vocab=19)
        close(M.transformer(model, src, ids), model(src, ids))
        assert torch.equal(M.greedy(model, src, 6), solutions.greedy_decode(model, src, 6))


def test_train_step_defaults_match_reference():
    from coursekit.probe.models import LanguageModelProbe

    def run(step):
        torch.manual_seed(3)
        model = LanguageModelProbe(11, d_model=6, max_len=8, dropout=0.5).train()
        matrices = [p for p in model.parameters() if p.dim() >= 2]
        vectors = [p for p in model.parameters() if p.dim() < 2]
        optimizer = torch.optim.SGD([{"params": matrices}, {"params": vectors}], lr=0.9, momentum=0.5)
        generator = torch.Generator().manual_seed(4)
        losses = []
        for lr, clip in ((0.3, 0.2), (0.1, None), (0.2, 5.0)):
            x, y = torch.randint(11, (2, 8), generator=generator), torch.randint(11, (2, 8), generator=generator)
            losses.append(step(model, optimizer, x, y, lr, clip))
        return losses, model.state_dict()

    expected_losses, expected_state = run(solutions.train_step)
    losses, state = run(M.train_step_variant)
    assert losses == expected_losses
    for key, value in expected_state.items():
        assert torch.equal(state[key], value), key


def test_translation_defaults_match_reference():
    from autograder.checks.translation.beam import BEAM_SEED, Beams
    from autograder.checks.translation.bleu import bleu_probes
    from autograder.checks.translation.loss import noam_probes, smoothing_probes

    for logits, targets, kwargs in smoothing_probes(3, "cpu"):
        expected = solutions.label_smoothed_cross_entropy(logits, targets, **kwargs)
        close(M.smoothed_ce(logits, targets, **kwargs), expected)
    for step, d_model, warmup, factor in noam_probes(3):
        factor = 1.0 if factor is None else factor
        assert M.noam(step, d_model, warmup, factor) == pytest.approx(solutions.noam_lr(step, d_model, warmup, factor),
                                                                       rel=1e-12)
    beams = Beams(BEAM_SEED, "cpu")
    for case in beams.cases:
        probe, model = beams.probes[case.probe], beams.models[case.probe]
        args = (model, beams.source(case), case.beam_size, case.max_len, probe.bos_id, probe.eos_id,
                beams.length_penalty(case))
        assert M.beam_search(*args) == solutions.beam_search(*args)
    for hypotheses, references, max_n in bleu_probes(3):
        n = max_n or 4
        assert M.bleu(hypotheses, references, n) == pytest.approx(solutions.corpus_bleu(hypotheses, references, n),
                                                                  rel=1e-12, abs=1e-12)
