"""Public self-checks for notebook 06 (decoder block, decoder, Transformer, greedy decoding).

As in the encoder checks, the block and the stacks are checked for their wiring: the expected output is composed
from your module's own submodules. The Transformer is also checked for the two promises its masks make (no peeking
at later target tokens; source padding changes nothing), and greedy_decode runs against a tiny scripted model whose
answers are known in advance (`scripted.py`; the key/value cache's check: kv_cache.py). Shapes: B batch, S source
length, T target length, V vocabulary size.
"""
from __future__ import annotations

import torch
from torch import nn

from coursekit.checks.toolkit import (expect_close, expect_shape, expect_stack_submodules, expect_too_long,
                                     expect_type, fail, first_matching_hint, mistake_hint, norm_swapped_hint,
                                     padding_mask, passed, randomize, require_submodule, run, stack_variants,
                                     uses_parts)
from coursekit.checks.transformer.scripted import ScriptedModel
from coursekit.criteria import argument
from coursekit.tolerance import CPU_FLOAT32

_D_MODEL, _H, _D_FF = 6, 3, 10


def causal_mask(size: int) -> torch.Tensor:
    """(size, size), True on and below the diagonal: position i may look at positions 0..i."""
    return torch.ones(size, size, dtype=torch.bool).tril()


def _same(a, b) -> bool:
    return isinstance(a, torch.Tensor) and a.shape == b.shape and torch.allclose(a, b, **CPU_FLOAT32)


def _dropout_tries(build, forward, expected: torch.Tensor, name: str, hint: str) -> None:
    """dropout acts in training mode: `build(p)` (your module with dropout=p, given the weights of the module that
    gave `expected` in eval mode) in training mode gives `expected` with dropout=0.0 (nothing is dropped), other
    values with dropout=0.5 (something is), and `expected` again in eval mode."""
    for p in (0.0, 0.5):
        module = build(p)
        module.train()
        with torch.no_grad():
            trained = run(f"{name}(..., dropout={p}).forward", forward, module)
        if p == 0.0 and not _same(trained, expected):
            fail(f"{name}(..., dropout=0.0) in training mode gives other values than in eval mode: with "
                 "dropout=0.0 nothing is dropped.", hint)
        if p > 0.0:
            if _same(trained, expected):
                fail(f"{name}(..., dropout={p}) in training mode gives the values of eval mode: dropout dropped "
                     "nothing.", hint)
            module.eval()
            with torch.no_grad():
                evaluated = run(f"{name}(..., dropout={p}).forward", forward, module)
            if not _same(evaluated, expected):
                fail(f"{name}(..., dropout={p}) in eval mode gives other values than with dropout=0.0: dropout "
                     "must do nothing in eval mode.", "use nn.Dropout, or F.dropout(..., training=self.training).")


def _with_weights(cls, name: str, weights: nn.Module, *args, **kwargs) -> nn.Module:
    """Your `cls(*args, **kwargs)` given the weights (and buffers) of `weights`."""
    module = run(name, cls, *args, **kwargs)
    run(f"{name}.load_state_dict", module.load_state_dict, weights.state_dict())
    return module


# ------------------------------------------------------------------------------------------------ decoder block

def _decoder_block_variants(block: nn.Module, x, memory, tgt_mask, memory_mask, norm_first: bool) -> dict:
    """The right output and (wrong output, hint) pairs, composed from the block's own submodules."""
    def self_attn(h, m=tgt_mask):
        return block.self_attn(h, h, h, m)[0]

    def cross_attn(h, m=memory_mask):
        return block.cross_attn(h, memory, memory, m)[0]

    ffn, n1, n2, n3 = block.ffn, block.norm1, block.norm2, block.norm3

    def post(x, sa=self_attn, ca=cross_attn, res=True):
        x = n1((x if res else 0) + sa(x))
        x = n2((x if res else 0) + ca(x))
        return n3((x if res else 0) + ffn(x))

    def pre(x, sa=self_attn, ca=cross_attn, res=True):
        x = (x if res else 0) + sa(n1(x))
        x = (x if res else 0) + ca(n2(x))
        return (x if res else 0) + ffn(n3(x))

    right, other = (pre, post) if norm_first else (post, pre)
    from_x = mistake_hint("decoder.cross_from_decoder")
    return right(x), [
        (other(x), norm_swapped_hint(norm_first)),
        (right(x, ca=lambda h: block.cross_attn(h, h, h, None)[0]), from_x),
        (right(x, ca=lambda h: block.cross_attn(h, h, h, tgt_mask)[0]), from_x),
        (right(x, sa=lambda h: self_attn(h, None)), mistake_hint("decoder.tgt_mask_ignored")),
        (right(x, ca=lambda h: cross_attn(h, None)), mistake_hint("transformer.no_src_mask")),
        (right(x, res=False), "the residual connections are missing: add each sublayer's input back."),
    ]


def check_decoder_block(DecoderBlock) -> None:
    generator = torch.Generator().manual_seed(70)
    B, T, S = 2, 4, 5
    x = torch.randn(B, T, _D_MODEL, generator=generator)                              # (2, 4, 6) target side
    memory = torch.randn(B, S, _D_MODEL, generator=generator)                         # (2, 5, 6) encoder output
    tgt_mask = causal_mask(T)                                                         # (4, 4)
    memory_mask = padding_mask(torch.tensor([[4, 5, 6, 7, 8], [4, 5, 6, 0, 0]]))      # (2, 1, 1, 5)
    def try_block(norm_first):
        name = f"DecoderBlock({_D_MODEL}, {_H}, {_D_FF}" + (", norm_first=True)" if norm_first else ")")
        block = run("DecoderBlock", DecoderBlock, _D_MODEL, _H, _D_FF, **({"norm_first": True} if norm_first else {}))
        expect_type(block, nn.Module, name, "subclass nn.Module.")
        for sub in ("self_attn", "cross_attn", "ffn"):
            require_submodule(block, "DecoderBlock", sub)
        for sub in ("norm1", "norm2", "norm3"):
            require_submodule(block, "DecoderBlock", sub, nn.LayerNorm, f"self.{sub} = nn.LayerNorm(d_model)")
        block.eval()
        randomize(block, seed=8)
        with torch.no_grad():
            out = run(f"{name}.forward", block, x, memory, tgt_mask, memory_mask)
            expect_type(out, torch.Tensor, f"the output of {name}",
                        "return only x; the attention modules return (output, weights), keep [0].")
            expect_shape(out, (B, T, _D_MODEL), f"the output of {name}",
                         "the output has the target's length T (queries come from x), not the source's.")
            right, wrong_answers = _decoder_block_variants(block, x, memory, tgt_mask, memory_mask, norm_first)
        hint = first_matching_hint(out, wrong_answers)
        expect_close(out, right, f"the output of {name} (causal target mask, source padding mask)", hint)
        return block, out

    block, out = try_block(False)                            # post-norm: every optional argument at its default
    with argument("DecoderBlock.norm_first"):
        try_block(True)
    with argument("DecoderBlock.dropout"):
        _dropout_tries(lambda p: _with_weights(DecoderBlock, "DecoderBlock", block, _D_MODEL, _H, _D_FF, dropout=p),
                       lambda b: b(x, memory, tgt_mask, memory_mask), out, "DecoderBlock",
                       "pass dropout on to the attention modules and the feed-forward, and drop each sublayer's "
                       "output (nn.Dropout(dropout)).")
    passed("DecoderBlock", "(post-norm and pre-norm, dropout)")


# ------------------------------------------------------------------------------------------------------ decoder

@uses_parts("Decoder")
def check_decoder(Decoder) -> None:
    vocab_size, num_layers = 13, 2
    generator = torch.Generator().manual_seed(80)
    tgt_ids = torch.tensor([[2, 9, 5, 12], [2, 8, 4, 0]])                             # (B=2, T=4), 0 = <pad>
    memory = torch.randn(2, 5, _D_MODEL, generator=generator)                         # (B, S=5, d_model)
    tgt_mask = padding_mask(tgt_ids) & causal_mask(4)                                 # (2, 1, 4, 4)
    memory_mask = padding_mask(torch.tensor([[4, 5, 6, 7, 8], [4, 5, 6, 0, 0]]))      # (2, 1, 1, 5)
    def try_decoder(norm_first):
        name = "Decoder(norm_first=True)" if norm_first else "Decoder()"
        decoder = run("Decoder", Decoder, vocab_size, _D_MODEL, _H, _D_FF, num_layers, max_len=16,
                      **({"norm_first": True} if norm_first else {}))
        expect_type(decoder, nn.Module, name, "subclass nn.Module.")
        expect_stack_submodules(decoder, "Decoder", num_layers, "DecoderBlock", norm_first)
        decoder.eval()
        randomize(decoder, seed=9)
        with torch.no_grad():
            out = run(f"{name}.forward", decoder, tgt_ids, memory, tgt_mask, memory_mask)
            expect_type(out, torch.Tensor, f"the output of {name}")
            expect_shape(out, (2, 4, _D_MODEL), f"the output of {name}")

            def run_layers(x, use_masks):
                for layer in decoder.layers:
                    x = layer(x, memory, *((tgt_mask, memory_mask) if use_masks else (None, None)))
                return x

            variants = stack_variants(decoder, tgt_ids, run_layers, _D_MODEL)
        right = variants.pop("right")
        hint = first_matching_hint(out, [(wrong, hint.replace("the mask is", "the masks are"))
                                         for hint, wrong in variants.items()])
        expect_close(out, right, f"the output of {name}", hint)
        return decoder, out

    decoder, out = try_decoder(False)                        # post-norm: every optional argument at its default
    with argument("Decoder.norm_first"):
        try_decoder(True)
    with argument("Decoder.dropout"):
        _dropout_tries(lambda p: _with_weights(Decoder, "Decoder", decoder, vocab_size, _D_MODEL, _H, _D_FF,
                                               num_layers, max_len=16, dropout=p),
                       lambda d: d(tgt_ids, memory, tgt_mask, memory_mask), out, "Decoder",
                       "pass dropout on to the positional encoding and to every DecoderBlock.")
    expect_too_long(decoder, "Decoder(max_len=16)", 16,
                    lambda T: (torch.randint(1, vocab_size, (2, T), generator=torch.Generator().manual_seed(T)),
                               memory), criterion="Decoder.too_long")
    passed("Decoder", "(post-norm and pre-norm stacks, dropout)")


# -------------------------------------------------------------------------------------------------- Transformer

@uses_parts("Transformer")
def check_transformer(Transformer) -> None:
    src_vocab, tgt_vocab = 9, 11
    sizes = dict(d_model=_D_MODEL, num_heads=_H, d_ff=_D_FF, num_layers=2, max_len=16)
    model = run("Transformer", Transformer, src_vocab, tgt_vocab, **sizes)
    expect_type(model, nn.Module, "Transformer(...)", "subclass nn.Module.")
    for sub in ("encoder", "decoder"):
        require_submodule(model, "Transformer", sub)
    generator_layer = require_submodule(model, "Transformer", "generator", nn.Linear,
                                        "self.generator = nn.Linear(d_model, tgt_vocab_size)")
    if (generator_layer.in_features, generator_layer.out_features) != (_D_MODEL, tgt_vocab):
        fail(f"`generator` should map d_model={_D_MODEL} -> tgt_vocab_size={tgt_vocab} features, got "
             f"{generator_layer.in_features} -> {generator_layer.out_features}.")
    model.eval()
    randomize(model, seed=10)
    src = torch.tensor([[4, 5, 6, 7, 8], [5, 6, 7, 0, 0]])                            # (B=2, S=5), 0 = <pad>
    tgt = torch.tensor([[2, 9, 5, 10], [2, 4, 0, 0]])                                 # (B=2, T=4)
    with torch.no_grad():
        _expect_encode(model, src)
        logits = run("Transformer.forward", model, src, tgt)
        expect_type(logits, torch.Tensor, "the logits of Transformer(src_ids, tgt_ids)")
        expect_shape(logits, (2, 4, tgt_vocab), "the logits of Transformer(src_ids, tgt_ids)",
                     "one row of tgt_vocab_size scores per target position: apply self.generator at the end.")
        _expect_masks_used(model, src, tgt, logits)
        _expect_no_peeking(model, src, tgt, logits)
    expect_too_long(model, "Transformer(max_len=16)", 16,
                    lambda S: (torch.randint(4, src_vocab, (2, S), generator=torch.Generator().manual_seed(S)), tgt),
                    criterion="Transformer.too_long",
                    hint="pass max_len on to the Encoder and the Decoder (their positional encodings raise it).")
    with argument("Transformer.norm_first"):
        pre = run("Transformer", Transformer, src_vocab, tgt_vocab, **sizes, norm_first=True)
        for part in ("encoder", "decoder"):
            require_submodule(require_submodule(pre, "Transformer", part), f"Transformer(..., norm_first=True).{part}",
                              "norm", nn.LayerNorm, f"pass norm_first on to the {part.capitalize()}: a pre-norm "
                                                    "stack ends with nn.LayerNorm(d_model).")
    with argument("Transformer.pad_id"):
        _try_pad_id(_with_weights(Transformer, "Transformer", model, src_vocab, tgt_vocab, **sizes, pad_id=7).eval())
    with argument("Transformer.dropout"):
        _dropout_tries(lambda p: _with_weights(Transformer, "Transformer", model, src_vocab, tgt_vocab, **sizes,
                                               dropout=p),
                       lambda m: m(src, tgt), logits, "Transformer",
                       "pass dropout on to Encoder(...) and Decoder(...).")
    passed("Transformer")


def _expect_encode(model: nn.Module, src) -> None:
    """encode(src_ids) returns (memory, src_mask), the mask True at real tokens."""
    encoded = run("Transformer.encode", model.encode, src)
    if not (isinstance(encoded, tuple) and len(encoded) == 2):
        fail("Transformer.encode(src_ids) should return a pair (memory, src_mask).")
    memory, src_mask = encoded
    expect_shape(memory, (2, 5, _D_MODEL), "the memory returned by encode")
    expect_shape(src_mask, (2, 1, 1, 5), "the src_mask returned by encode", "build it with make_padding_mask.")
    if not torch.equal(src_mask.bool(), padding_mask(src)):
        fail("the src_mask from encode should be True at real tokens and False at padding (pad_id).",
             "True means 'may attend' in this course.")


def _expect_masks_used(model: nn.Module, src, tgt, logits) -> None:
    """The logits at the real target positions are those of the decoder given padding & causal target masks and
    the source mask, composed from the model's own parts; a mask left out is named."""
    memory = model.encoder(src, padding_mask(src))
    full_tgt_mask = padding_mask(tgt) & causal_mask(4)                                # (2, 1, 4, 4)

    def logits_with(tgt_mask, memory=memory, memory_mask=padding_mask(src)):
        return model.generator(model.decoder(tgt, memory, tgt_mask, memory_mask))

    real = tgt != 0                                                                   # compare real targets only
    hint = first_matching_hint(logits[real], [
        (logits_with(padding_mask(tgt))[real], mistake_hint("transformer.no_causal_mask")),
        (logits_with(None)[real], mistake_hint("transformer.no_causal_mask")),
        (logits_with(full_tgt_mask, memory_mask=None)[real], mistake_hint("transformer.no_src_mask")),
        (logits_with(full_tgt_mask, memory=model.encoder(src, None))[real], mistake_hint("transformer.no_src_mask")),
    ])
    expect_close(logits[real], logits_with(full_tgt_mask)[real],
                 "the logits of Transformer(src_ids, tgt_ids) at the real (non-padding) target positions", hint)


def _expect_no_peeking(model: nn.Module, src, tgt, logits) -> None:
    """The masks' two promises: later target tokens do not change earlier logits, source padding changes nothing."""
    changed = tgt.clone()
    changed[:, 2:] = 7                                                                # only the future changes
    earlier = run("Transformer.forward", model, src, changed)[:, :2]
    if not torch.allclose(earlier, logits[:, :2], **CPU_FLOAT32):
        fail("changing target tokens at positions 2.. changed the logits at positions 0..1: the decoder "
             "looks ahead.", mistake_hint("transformer.no_causal_mask"))
    padded_src = torch.cat([src, torch.zeros(2, 3, dtype=torch.long)], dim=1)         # 3 more <pad> at the end
    if not torch.allclose(run("Transformer.forward", model, padded_src, tgt), logits, **CPU_FLOAT32):
        fail("adding more padding to the source changed the logits: padding is being attended to.",
             mistake_hint("transformer.no_src_mask"))


def _try_pad_id(model7: nn.Module) -> None:
    """Transformer(..., pad_id=7) (in eval mode): both masks use pad_id, where 0 is an ordinary token."""
    src7 = torch.tensor([[4, 5, 0, 7, 7], [5, 6, 7, 7, 7]])                            # pad_id = 7; 0 is a real token
    tgt7 = torch.tensor([[2, 9, 0, 10], [2, 4, 7, 7]])
    with torch.no_grad():
        encoded = run("Transformer(..., pad_id=7).encode", model7.encode, src7)
        if not (isinstance(encoded, tuple) and len(encoded) == 2 and isinstance(encoded[1], torch.Tensor)
                and encoded[1].shape == (2, 1, 1, 5) and torch.equal(encoded[1].bool(), padding_mask(src7, 7))):
            fail("Transformer(..., pad_id=7).encode: the src_mask should be False exactly where src_ids == 7.",
                 mistake_hint("transformer.pad_id_hardcoded"))
        logits7 = run("Transformer(..., pad_id=7).forward", model7, src7, tgt7)
        expect_type(logits7, torch.Tensor, "the logits of Transformer(..., pad_id=7)")
        longer = torch.cat([src7, torch.full((2, 3), 7)], dim=1)                     # 3 more <pad> = 7
        again = run("Transformer(..., pad_id=7).forward", model7, longer, tgt7)
        real = tgt7 != 7
        if not _same(again[real] if isinstance(again, torch.Tensor) else again, logits7[real]):
            fail("Transformer(..., pad_id=7): adding more padding (7) to the source changed the logits.",
                 mistake_hint("transformer.pad_id_hardcoded"))


# ------------------------------------------------------------------------------------------------ greedy decode

def _decode_case(greedy_decode, scripts, max_len, expected, what, **ids) -> None:
    """greedy_decode on a ScriptedModel; `ids`: bos_id and/or eos_id when not their defaults (2 and 3)."""
    model = ScriptedModel(scripts, bos_id=ids.get("bos_id", 2)).eval()
    src = torch.tensor([[4, 5, 6]] * len(scripts))
    out = run("greedy_decode", greedy_decode, model, src, max_len, **ids)
    if model.problems:
        fail(model.problems[0])
    expect_type(out, torch.Tensor, "greedy_decode(...)")
    expected = torch.tensor(expected)
    if (tuple(out.shape) == (expected.size(0), expected.size(1) + 1) and bool((out[:, 0] == model.bos_id).all())
            and torch.equal(out[:, 1:].cpu(), expected)):
        fail(f"greedy_decode {what}: expected {expected.tolist()}, got {out.cpu().tolist()}.",
             mistake_hint("greedy.keeps_bos"))
    expect_shape(out, tuple(expected.shape), f"greedy_decode(..., max_len={max_len}) {what}",
                 "return the generated tokens only (drop the leading bos_id); stop as soon as every sequence has "
                 "produced eos_id, and never generate more than max_len tokens.")
    if out.dtype != torch.long:
        fail(f"greedy_decode should return token ids as int64 (torch.long), got {out.dtype}.")
    if not torch.equal(out.cpu(), expected):
        hint = None
        if out.size(1) == expected.size(1) and torch.equal(out[:, :-1].cpu(), expected[:, 1:]):
            hint = "the output starts one token late: the first generated token is the argmax after <bos>."
        elif (expected == 0).any() and not torch.equal(out.cpu()[expected == 0], expected[expected == 0]):
            hint = mistake_hint("greedy.no_pad_after_eos")
        fail(f"greedy_decode {what}: expected {expected.tolist()}, got {out.cpu().tolist()}.",
             hint or "at each step take the argmax of the logits at the LAST position and append it.")


def check_greedy_decode(greedy_decode) -> None:
    eos = 3
    # Row 0 ends after 2 tokens, row 1 after 4: the second run stops there, padding row 0 after its <eos>.
    _decode_case(greedy_decode, [[7, eos], [8, 9, 10, eos]], 6, [[7, eos, 0, 0], [8, 9, 10, eos]],
                 "with two sequences that end at different steps")
    _decode_case(greedy_decode, [[7, 8, 9, 10, 11, 7, eos]], 4, [[7, 8, 9, 10]],
                 "when max_len is reached before eos_id")
    with argument("greedy_decode.eos_id"):
        _decode_case(greedy_decode, [[7, 4, 9, 3, 8], [6, 5, 4, 9, 9]], 5, [[7, 4, 0], [6, 5, 4]], "with eos_id=4",
                     eos_id=4)
    with argument("greedy_decode.bos_id"):
        _decode_case(greedy_decode, [[7, eos], [8, 9, 10, eos]], 6, [[7, eos, 0, 0], [8, 9, 10, eos]],
                     "with bos_id=1", bos_id=1)
    passed("greedy_decode")
