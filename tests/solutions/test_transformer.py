"""Proofs for solutions/transformer.py (notebook 06): DecoderBlock, Decoder, Transformer, greedy_decode and
cached_greedy_decode."""
from __future__ import annotations

import math

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

import solutions.transformer as transformer_module
from solutions.attention import make_causal_mask, make_padding_mask
from solutions.positional import sinusoidal_positional_encoding
from solutions.transformer import Decoder, DecoderBlock, Transformer, greedy_decode
from solutions_compare import (
    B, D_FF, D_MODEL, H, T, T_K, assert_matches, assert_matches_where, random_ids, torch_decoder_layer_from,
    torch_encoder_layer_from,
)

SRC_VOCAB, TGT_VOCAB, NUM_LAYERS, MAX_LEN = 19, 23, 2, 32
PAD, BOS, EOS = 0, 2, 3
NORMS = pytest.mark.parametrize("norm_first", [False, True], ids=["post-norm", "pre-norm"])


def ids_with_padding(length, vocab, seed, pad_from):
    ids = random_ids(B, length, vocab, torch.Generator().manual_seed(seed))
    ids[1, pad_from:] = PAD
    return ids


def src_ids(seed=0):
    return ids_with_padding(T_K, SRC_VOCAB, seed, pad_from=4)   # (B, T_K): row 1 has 4 tokens + 3 padding


def tgt_ids(seed=1):
    ids = ids_with_padding(T, TGT_VOCAB, seed, pad_from=3)      # (B, T): row 1 has 3 tokens + 2 padding
    ids[:, 0] = BOS
    return ids


def with_random_norms(module):
    with torch.no_grad():
        for sub in module.modules():
            if isinstance(sub, torch.nn.LayerNorm):
                sub.weight.uniform_(0.5, 1.5)
                sub.bias.uniform_(-0.5, 0.5)
    return module


def make_model(device, norm_first, seed=0):
    torch.manual_seed(seed)
    model = Transformer(SRC_VOCAB, TGT_VOCAB, d_model=D_MODEL, num_heads=H, d_ff=D_FF, num_layers=NUM_LAYERS,
                        max_len=MAX_LEN, dropout=0.0, pad_id=PAD, norm_first=norm_first)
    return with_random_norms(model).to(device).eval()


def embed(stack, ids, device):
    pe = sinusoidal_positional_encoding(MAX_LEN, D_MODEL).to(device)
    return stack.embedding.weight[ids] * math.sqrt(D_MODEL) + pe[: ids.size(1)]


def final_norm(stack, x, norm_first):
    if not norm_first:
        return x
    return torch.nn.functional.layer_norm(x, (D_MODEL,), stack.norm.weight, stack.norm.bias)


# --- DecoderBlock / Decoder -------------------------------------------------------------------------------------

@NORMS
def test_block_matches_torch_layer(device, norm_first):
    torch.manual_seed(0)
    block = with_random_norms(DecoderBlock(D_MODEL, H, D_FF, norm_first=norm_first)).to(device).eval()
    theirs = torch_decoder_layer_from(block, H, norm_first)
    x = torch.randn(B, T, D_MODEL, device=device)
    memory = torch.randn(B, T_K, D_MODEL, device=device)
    src, tgt = src_ids().to(device), tgt_ids().to(device)
    tgt_keep = make_padding_mask(tgt) & make_causal_mask(T, device)
    ours = block(x, memory, tgt_keep, make_padding_mask(src))
    ref = theirs(x, memory, tgt_mask=~make_causal_mask(T, device), tgt_key_padding_mask=tgt == PAD,
                 memory_key_padding_mask=src == PAD)
    assert ours.shape == (B, T, D_MODEL)
    assert_matches_where(ours, ref, tgt != PAD, device, "decoder block")


@NORMS
def test_teeth_block_with_swapped_norm_placement_is_rejected(device, norm_first):
    torch.manual_seed(0)
    block = with_random_norms(DecoderBlock(D_MODEL, H, D_FF, norm_first=norm_first)).to(device).eval()
    theirs = torch_decoder_layer_from(block, H, not norm_first)
    x, memory = torch.randn(B, T, D_MODEL, device=device), torch.randn(B, T_K, D_MODEL, device=device)
    with pytest.raises(AssertionError):
        assert_matches(block(x, memory), theirs(x, memory), device)


@NORMS
def test_decoder_equals_hand_composition(device, norm_first):
    torch.manual_seed(0)
    decoder = with_random_norms(Decoder(TGT_VOCAB, D_MODEL, H, D_FF, NUM_LAYERS, MAX_LEN, norm_first=norm_first))
    decoder = decoder.to(device).eval()
    src, tgt = src_ids().to(device), tgt_ids().to(device)
    memory = torch.randn(B, T_K, D_MODEL, device=device)
    x = embed(decoder, tgt, device)
    for block in decoder.layers:
        x = torch_decoder_layer_from(block, H, norm_first)(
            x, memory, tgt_mask=~make_causal_mask(T, device), tgt_key_padding_mask=tgt == PAD,
            memory_key_padding_mask=src == PAD)
    x = final_norm(decoder, x, norm_first)
    out = decoder(tgt, memory, make_padding_mask(tgt) & make_causal_mask(T, device), make_padding_mask(src))
    assert_matches_where(out, x, tgt != PAD, device, "decoder stack")


# --- Transformer ------------------------------------------------------------------------------------------------

def test_transformer_submodules_and_shapes(device):
    model = make_model(device, norm_first=False)
    assert isinstance(model.generator, torch.nn.Linear) and model.generator.out_features == TGT_VOCAB
    src, tgt = src_ids().to(device), tgt_ids().to(device)
    memory, src_mask = model.encode(src)
    assert memory.shape == (B, T_K, D_MODEL) and src_mask.shape == (B, 1, 1, T_K)
    assert torch.equal(src_mask[:, 0, 0], src != PAD)
    logits = model(src, tgt)
    assert logits.shape == (B, T, TGT_VOCAB)
    assert_matches(logits, model.decode(tgt, memory, src_mask), device)


@NORMS
def test_transformer_equals_hand_composition(device, norm_first):
    model = make_model(device, norm_first)
    src, tgt = src_ids().to(device), tgt_ids().to(device)
    memory = embed(model.encoder, src, device)
    for block in model.encoder.layers:
        memory = torch_encoder_layer_from(block, H, norm_first)(memory, src_key_padding_mask=src == PAD)
    memory = final_norm(model.encoder, memory, norm_first)
    x = embed(model.decoder, tgt, device)
    for block in model.decoder.layers:
        x = torch_decoder_layer_from(block, H, norm_first)(
            x, memory, tgt_mask=~make_causal_mask(T, device), tgt_key_padding_mask=tgt == PAD,
            memory_key_padding_mask=src == PAD)
    expected = model.generator(final_norm(model.decoder, x, norm_first))
    assert_matches_where(model(src, tgt), expected, tgt != PAD, device, "transformer logits")


@settings(max_examples=25, deadline=None)
@given(cut=st.integers(1, T - 1), seed=st.integers(0, 1000), norm_first=st.booleans())
def test_outputs_do_not_depend_on_later_tokens(cut, seed, norm_first):
    """Causality: changing the target tokens after position `cut - 1` leaves logits at positions < cut unchanged."""
    model = make_model("cpu", norm_first)
    src = src_ids()
    tgt = random_ids(B, T, TGT_VOCAB, torch.Generator().manual_seed(seed))
    changed = tgt.clone()
    changed[:, cut:] = random_ids(B, T - cut, TGT_VOCAB, torch.Generator().manual_seed(seed + 1))
    assert_matches(model(src, changed)[:, :cut], model(src, tgt)[:, :cut], "cpu")


# --- greedy_decode: behaviour with a scripted model -------------------------------------------------------------

class ScriptedTransformer(Transformer):
    """A Transformer whose decode() makes token `script[b][t]` the argmax at step t, and records its inputs."""

    def __init__(self, script):
        super().__init__(SRC_VOCAB, TGT_VOCAB, d_model=D_MODEL, num_heads=H, d_ff=D_FF, num_layers=1, pad_id=PAD)
        self.script = torch.tensor(script)
        self.seen = []

    def decode(self, tgt_ids, memory, src_mask):
        self.seen.append(tgt_ids.clone())
        step = tgt_ids.size(1) - 1
        logits = torch.zeros(tgt_ids.size(0), tgt_ids.size(1), TGT_VOCAB)
        logits[torch.arange(tgt_ids.size(0)), -1, self.script[:, step]] = 1.0
        return logits


def test_greedy_stops_when_all_finished_and_pads_after_eos():
    model = ScriptedTransformer([[5, 6, EOS, 7, 7], [5, EOS, 9, 9, 9]])
    out = greedy_decode(model, src_ids(), max_len=5, bos_id=BOS, eos_id=EOS, use_cache=False)
    assert out.dtype == torch.long
    assert out.tolist() == [[5, 6, EOS], [5, EOS, PAD]]
    assert all(torch.all(seen[:, 0] == BOS) for seen in model.seen)     # <bos> is fed first
    assert model.seen[-1].tolist() == [[BOS, 5, 6], [BOS, 5, EOS]]      # generated tokens are fed back


def test_greedy_respects_max_len():
    model = ScriptedTransformer([[5, 6, 7, 8, EOS], [5, EOS, 9, 9, 9]])
    out = greedy_decode(model, src_ids(), max_len=3, use_cache=False)
    assert out.tolist() == [[5, 6, 7], [5, EOS, PAD]]
    assert greedy_decode(model, src_ids(), max_len=0, use_cache=False).shape == (B, 0)


def test_greedy_uses_the_model_pad_id():
    model = ScriptedTransformer([[EOS, 4, 4], [4, 4, EOS]])
    model.pad_id = 1
    out = greedy_decode(model, src_ids(), max_len=3, use_cache=False)
    assert out.tolist() == [[EOS, 1, 1], [4, 4, EOS]]


def test_greedy_bad_arguments_raise_clearly():
    model = make_model("cpu", norm_first=False)
    with pytest.raises(ValueError, match="pad_id"):
        greedy_decode(model, src_ids(), max_len=4, bos_id=PAD)
    with pytest.raises(ValueError, match="positional"):
        greedy_decode(model, src_ids(), max_len=MAX_LEN + 1)
    with pytest.raises(ValueError, match="max_len"):
        greedy_decode(model, src_ids(), max_len=-1)


# --- greedy_decode: cached == uncached on random models ----------------------------------------------------------

def decode_both(model, src, max_len):
    cached = greedy_decode(model, src, max_len, BOS, EOS, use_cache=True)
    uncached = greedy_decode(model, src, max_len, BOS, EOS, use_cache=False)
    return cached, uncached


@NORMS
@pytest.mark.parametrize("seed", [0, 1, 2, 3])
@pytest.mark.parametrize("favour,boost", [(None, 0.0), (EOS, 0.5), (PAD, 2.0)], ids=["plain", "eos-likely", "pad-likely"])
def test_cached_equals_uncached(device, norm_first, seed, favour, boost):
    model = make_model(device, norm_first, seed)
    if favour is not None:  # make eos (or a pad token mid-sequence) likely, so those paths are exercised
        with torch.no_grad():
            model.generator.bias[favour] += boost
    cached, uncached = decode_both(model, src_ids(seed).to(device), max_len=12)
    assert torch.equal(cached, uncached), (cached, uncached)
    for row in cached.tolist():                       # nothing but padding after the first eos
        if EOS in row:
            assert all(token == PAD for token in row[row.index(EOS) + 1:])


def test_real_model_finishing_rows_at_different_steps(device):
    """One row emits eos while the other continues: the finished row is padded, both paths agree, decoding stops."""
    model = make_model(device, norm_first=True, seed=3)
    with torch.no_grad():
        model.generator.bias[EOS] += 0.5   # chosen for the N(0, d_model^-1/2) embedding: rows end at steps 2 and 11
    cached, uncached = decode_both(model, src_ids(3).to(device), max_len=12)
    assert torch.equal(cached, uncached)
    rows = cached.tolist()
    assert cached.size(1) < 12 and all(EOS in row for row in rows)           # stopped once every row finished
    assert any(row.index(EOS) < len(row) - 1 for row in rows)                 # one row finished earlier ...
    for row in rows:
        assert all(token == PAD for token in row[row.index(EOS) + 1:])        # ... and was padded after eos


def test_greedy_restores_training_mode_and_uses_model_device(device):
    model = make_model(device, norm_first=True).train()
    out = greedy_decode(model, src_ids(), max_len=4)   # src on CPU, model maybe elsewhere
    assert model.training and out.device.type == device.type


def test_teeth_cache_that_forgets_the_past_is_caught(monkeypatch):
    """A cache that keeps only the newest key/value must make decoding differ from the uncached path."""
    step = transformer_module._decoder_block_step

    def forgetful_step(block, x_new, cache, key_keep, memory_mask, norm_first):
        cache["k"], cache["v"] = cache["k"][:, :, :0], cache["v"][:, :, :0]
        return step(block, x_new, cache, key_keep[..., -1:], memory_mask, norm_first)

    monkeypatch.setattr(transformer_module, "_decoder_block_step", forgetful_step)
    differs = (not torch.equal(*decode_both(make_model("cpu", nf, seed), src_ids(seed), 12))
               for nf in (False, True) for seed in range(3))
    assert any(differs)  # stops at the first model where the broken cache changes the tokens


# --- cached_greedy_decode: the API name of 06's cache exercise ------------------------------------------------------

@NORMS
@pytest.mark.parametrize("seed", [0, 1])
def test_cached_greedy_decode_equals_greedy_decode(device, norm_first, seed):
    from solutions.transformer import cached_greedy_decode

    model = make_model(device, norm_first, seed)
    with torch.no_grad():
        model.generator.bias[EOS] += 1.0
    src = src_ids(seed).to(device)
    assert torch.equal(cached_greedy_decode(model, src, 12, BOS, EOS),
                       greedy_decode(model, src, 12, BOS, EOS, use_cache=False))


def test_cached_greedy_decode_projects_each_position_once():
    """One call on the memory per cross-attention projection; one new position per step for self-attention."""
    from coursekit.probe.hooks import ProjectionRecorder
    from solutions.transformer import cached_greedy_decode

    model = make_model("cpu", False, 0)
    recorder = ProjectionRecorder(model, scale=0.0)          # offsets off: only the counts
    out = cached_greedy_decode(model, src_ids(), 6, BOS, EOS)
    for name, calls in recorder.counts().items():
        if ".cross_attn." in name:
            assert calls == [src_ids().size(1)], (name, calls)
        else:
            assert calls == [1] * out.size(1), (name, calls)


def test_cached_greedy_decode_needs_a_transformer():
    from solutions.transformer import cached_greedy_decode

    with pytest.raises(TypeError, match="Transformer"):
        cached_greedy_decode(torch.nn.Linear(2, 2), src_ids(), 4)
