"""The stand-ins of notebooks 08 and 09 (autograder/checks/stand_ins.py) compute the contract's formulas.

Each is compared with an independent reference where PyTorch has one (`torch.nn.RMSNorm`,
`F.scaled_dot_product_attention(..., enable_gqa=True)`, `torch.multinomial` on the contract's distribution) and
with the course's reference solution (`solutions/`), on non-degenerate shapes. They are built from the text the
grader compiles and sends into a kernel (`source_for`, `compiled_for`), as a check would lend them, and stop working
once switched off; the kernel never holds that text.
"""
from __future__ import annotations

import types

import pytest
import torch
import torch.nn.functional as F

from autograder.checks import stand_ins
from solutions import gpt as reference_gpt
from solutions import modern as reference


def _lent(*names: str) -> types.ModuleType:
    module = types.ModuleType("course_stand_ins")
    exec(compile(stand_ins.source_for(names), "<course stand-ins>", "exec"), module.__dict__)  # noqa: S102
    return module


@pytest.fixture(autouse=True)
def _seeded():
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(21)
        yield


def test_sample_next_token_draws_as_the_contract_says():
    lent = _lent("sample_next_token")
    logits = torch.randn(5, 11) * 2
    logits[0, :3] = 4.0                                           # a tie at the top
    assert torch.equal(lent.sample_next_token(logits, 0.0), logits.argmax(dim=-1))
    for temperature, top_k, seed in ((1.0, None, 1), (0.7, 3, 2), (1.3, 11, 3), (0.9, 40, 4), (2.0, 1, 5)):
        scaled = logits / temperature
        if top_k is not None and top_k < 11:
            kth = scaled.sort(dim=-1, descending=True).values[:, top_k - 1:top_k]
            scaled = scaled.masked_fill(scaled < kth, float("-inf"))
        expected = torch.multinomial(scaled.softmax(-1), 1, generator=torch.Generator().manual_seed(seed))[:, 0]
        got = lent.sample_next_token(logits, temperature, top_k, torch.Generator().manual_seed(seed))
        assert torch.equal(got, expected)
        assert torch.equal(got, reference_gpt.sample_next_token(logits, temperature, top_k,
                                                                torch.Generator().manual_seed(seed)))


def test_rmsnorm_equals_torch_rmsnorm():
    lent = _lent("RMSNorm")
    for eps in (1e-6, 0.05):
        ours, theirs = lent.RMSNorm(24, eps=eps), torch.nn.RMSNorm(24, eps=eps)
        assert torch.equal(ours.weight, torch.ones(24))
        with torch.no_grad():
            ours.weight.uniform_(0.5, 1.5)
            theirs.weight.copy_(ours.weight)
        x = (torch.randn(2, 7, 24) + 0.7) * 1e-2                 # small: eps matters
        torch.testing.assert_close(ours(x), theirs(x), atol=1e-6, rtol=1e-5)


def test_rotary_tables_and_rotation_equal_the_reference_and_keep_relative_positions():
    lent = _lent("rotary_cos_sin", "apply_rotary")
    for max_len, d_head, base in ((13, 10, 10000.0), (9, 6, 500.0), (300, 8, 10000.0)):
        for ours, theirs in zip(lent.rotary_cos_sin(max_len, d_head, base),
                                reference.rotary_cos_sin(max_len, d_head, base)):
            assert ours.dtype == torch.float32 and ours.shape == (max_len, d_head // 2)
            torch.testing.assert_close(ours, theirs, atol=1e-6, rtol=0)
    with pytest.raises(ValueError):
        lent.rotary_cos_sin(8, 7)
    cos, sin = lent.rotary_cos_sin(12, 8)
    x = torch.randn(2, 3, 12, 8)
    torch.testing.assert_close(lent.apply_rotary(x, cos, sin), reference.apply_rotary(x, cos, sin))
    # the pair (x_2i, x_2i+1) as a complex number, turned by e^{i angle}: an independent statement of the rotation
    angle = torch.atan2(sin, cos)
    turned = torch.view_as_real(torch.view_as_complex(x.unflatten(-1, (-1, 2)).contiguous())
                                * torch.polar(torch.ones_like(angle), angle)).flatten(-2)
    torch.testing.assert_close(lent.apply_rotary(x, cos, sin), turned, atol=1e-5, rtol=1e-5)
    q, k = torch.randn(8), torch.randn(8)
    rq = lent.apply_rotary(q.expand(12, 8), cos, sin)
    rk = lent.apply_rotary(k.expand(12, 8), cos, sin)
    scores = rq @ rk.T                                            # (12, 12): depends on m - n only
    assert max(float(scores.diagonal(o).std()) for o in range(-10, 11)) < 1e-4


def test_swiglu_equals_the_reference():
    lent = _lent("SwiGLU")
    ours, theirs = lent.SwiGLU(24, 20), reference.SwiGLU(24, 20)
    assert set(ours.state_dict()) == set(theirs.state_dict())
    theirs.load_state_dict(ours.state_dict())
    x = torch.randn(2, 7, 24)
    torch.testing.assert_close(ours(x), theirs(x))
    torch.testing.assert_close(ours(x), ours.w_down(F.silu(ours.w_gate(x)) * ours.w_up(x)))


@pytest.mark.parametrize("heads, kv_heads", [(6, 3), (4, 2), (4, 1), (4, 4)])
def test_grouped_query_attention_equals_torch_sdpa_with_enable_gqa(heads, kv_heads):
    lent = _lent("GroupedQueryAttention")
    attn = lent.GroupedQueryAttention(24, heads, kv_heads, max_len=16, rope_base=1000.0).eval()
    assert set(attn.state_dict()) == {"w_q.weight", "w_k.weight", "w_v.weight", "w_o.weight"}
    B, T, d_head = 2, 7, 24 // heads
    x = torch.randn(B, T, 24)
    keep = torch.ones(B, T, dtype=torch.bool)
    keep[1, -2:] = False
    mask = keep[:, None, None, :] & torch.ones(T, T, dtype=torch.bool).tril()                # (B, 1, T, T)
    cos, sin = reference.rotary_cos_sin(16, d_head, 1000.0)
    q = reference.apply_rotary(attn.w_q(x).view(B, T, heads, d_head).transpose(1, 2), cos[:T], sin[:T])
    k = reference.apply_rotary(attn.w_k(x).view(B, T, kv_heads, d_head).transpose(1, 2), cos[:T], sin[:T])
    v = attn.w_v(x).view(B, T, kv_heads, d_head).transpose(1, 2)
    heads_out = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, enable_gqa=True)        # (B, H, T, d)
    expected = attn.w_o(heads_out.transpose(1, 2).reshape(B, T, 24))
    with torch.no_grad():
        torch.testing.assert_close(attn(x, mask), expected, atol=1e-5, rtol=1e-4)
        theirs = reference.GroupedQueryAttention(24, heads, kv_heads, max_len=16, rope_base=1000.0)
        theirs.load_state_dict(attn.state_dict())
        torch.testing.assert_close(attn(x, mask), theirs(x, mask), atol=1e-5, rtol=1e-4)
        torch.testing.assert_close(attn(x), theirs(x), atol=1e-5, rtol=1e-4)
    with pytest.raises(ValueError):
        attn(torch.randn(1, 17, 24))
    for args in ((25, 4, 1), (24, 4, 3), (20, 4, 2)):
        with pytest.raises(ValueError):
            lent.GroupedQueryAttention(*args)


@pytest.mark.parametrize("extra", [{}, {"rope_base": 500.0, "eps": 0.05}], ids=["defaults", "rope_base-eps"])
def test_llama_block_equals_the_reference(extra):
    lent = _lent("LlamaBlock")
    ours = lent.LlamaBlock(24, 4, 2, 20, max_len=16, **extra).eval()
    theirs = reference.LlamaBlock(24, 4, 2, 20, max_len=16, **extra).eval()
    assert set(ours.state_dict()) == set(theirs.state_dict())
    with torch.no_grad():
        for parameter in ours.parameters():
            parameter.normal_(0.0, 0.5)
    theirs.load_state_dict(ours.state_dict())
    x = torch.randn(2, 7, 24)
    mask = torch.ones(7, 7, dtype=torch.bool).tril()
    with torch.no_grad():
        torch.testing.assert_close(ours(x, mask), theirs(x, mask), atol=1e-5, rtol=1e-4)
        if extra:   # the arguments reach the attention and both norms: the defaults give another block
            default = reference.LlamaBlock(24, 4, 2, 20, max_len=16).eval()
            default.load_state_dict(ours.state_dict())
            assert not torch.allclose(ours(x, mask), default(x, mask), atol=1e-3)


def test_switched_off_stand_ins_stop_working():
    lent = _lent("LlamaBlock", "sample_next_token")
    block = lent.LlamaBlock(24, 4, 2, 20)
    lent.LENT = False
    with pytest.raises(RuntimeError, match="stand-in"):
        block(torch.randn(1, 3, 24))
    with pytest.raises(RuntimeError, match="stand-in"):
        lent.sample_next_token(torch.randn(2, 5))
    with pytest.raises(RuntimeError, match="stand-in"):
        lent.rotary_cos_sin(4, 8)


def test_lm_loss_is_the_mean_cross_entropy():
    lent = _lent("lm_loss")
    logits, targets = torch.randn(3, 7, 11) * 2, torch.randint(11, (3, 7))
    expected = F.cross_entropy(logits.reshape(-1, 11), targets.reshape(-1))
    torch.testing.assert_close(lent.lm_loss(logits, targets), expected)
    torch.testing.assert_close(lent.lm_loss(logits, targets), reference_gpt.lm_loss(logits, targets))


# The kernel side, as the probe receives a stand-in: a harvester's audit hook sees every text the kernel compiles,
# and `inspect.getsource` is what a student would try first. Neither may yield the stand-ins' source.
KERNEL = r"""
import base64, inspect, json, sys
from coursekit import probe
import torch
compiled = []
sys.addaudithook(lambda event, args: compiled.append(args[0] if isinstance(args[0], str) else repr(args[0]))
                 if event == "compile" and args else None)
reply = probe.run({"id": 1, "op": "define", "target": {}, "code": sys.argv[1]})
module = probe.ProbeState.defined[-1]
sources = []
for obj in (module.EncoderBlock, module.EncoderBlock.forward, module.PositionwiseFeedForward):
    try:
        sources.append(inspect.getsource(obj))
    except (OSError, TypeError):
        pass
out = module.EncoderBlock(8, 2, 16)(torch.randn(1, 3, 8))
print(json.dumps({"error": reply.get("error"), "compiled": compiled, "sources": sources, "shape": list(out.shape)}))
"""


def test_the_kernel_runs_the_stand_ins_without_ever_holding_their_source():
    import base64
    import json
    import subprocess
    import sys

    code = base64.b64encode(stand_ins.compiled_for(["EncoderBlock"])).decode()
    result = subprocess.run([sys.executable, "-c", KERNEL, code], capture_output=True, text=True, timeout=300)
    seen = json.loads(result.stdout.splitlines()[-1])
    assert seen["error"] is None and seen["shape"] == [1, 3, 8]                # defined, and it works
    lines = [line.strip() for line in stand_ins.source_for(["EncoderBlock"]).splitlines() if len(line.strip()) > 25]
    assert lines and seen["sources"] == []
    assert not [line for line in lines if any(line in text for text in seen["compiled"])]
