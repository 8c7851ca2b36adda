"""Hidden checks of notebook 06 (decoder block, decoder, the full Transformer, greedy decoding)."""
from __future__ import annotations

from autograder.checks.parts import given_working_parts
from autograder.checks.remote import new, probed

import torch

from autograder.checks import known_mistakes as M
from autograder.checks.toolkit import (
    as_tensor, call, construct, describe, diagnose, expect_callable, expect_shape, expect_tensor, fail, prepare,
    randn, shape_of, start_check,
)
from autograder.checks.attention import padded_ids
from autograder.checks.encoder import block_mistakes, expect_max_len, reference_module, stack_mistakes
from coursekit.probe.decoding import DecodingProbe

B, T, S, H, D_HEAD, D_FF = 2, 5, 7, 3, 4, 20   # T (target) != S (source)
D_MODEL = H * D_HEAD
SRC_VOCAB, TGT_VOCAB, NUM_LAYERS, MAX_LEN = 19, 13, 2, 32
TRANSFORMER_LAYERS = 4                          # neither Transformer's default num_layers (2) nor H: it must matter
DECODER_RESIDUALS = ("attn_residual", "cross_residual", "ffn_residual")


def _reference():
    import solutions.transformer as reference

    return reference


def _masks(device):
    from solutions.attention import make_causal_mask, make_padding_mask

    tgt_ids = padded_ids([T, 3], T, vocab=TGT_VOCAB, seed=80, device=device)
    src_ids = padded_ids([4, S], S, vocab=SRC_VOCAB, seed=81, device=device)
    tgt_mask = make_padding_mask(tgt_ids) & make_causal_mask(T, device=device)             # (B, 1, T, T)
    memory_mask = make_padding_mask(src_ids)                                               # (B, 1, 1, S)
    return tgt_ids, src_ids, tgt_mask, memory_mask


def _decoder_mistakes(call_variant, norm_first, has_tgt_mask, has_memory_mask, stack=False):
    """Block (or stack) mistakes plus the decoder's own: cross-attention source, masks swapped or ignored."""
    maker = stack_mistakes if stack else block_mistakes
    base = maker(call_variant, norm_first, has_tgt_mask or has_memory_mask, DECODER_RESIDUALS)

    def variants():
        out = [("decoder.cross_from_decoder", lambda: call_variant(cross_from_decoder=True))]
        if has_tgt_mask:
            out.append(("decoder.tgt_mask_ignored", lambda: call_variant(ignore_tgt_mask=True)))
        if has_tgt_mask and has_memory_mask:
            out.append(("decoder.masks_swapped", lambda: call_variant(swap_masks=True)))
        return out + base()

    return variants


def _mask_cases(tgt_mask, memory_mask, device):
    from solutions.attention import make_causal_mask

    return [("no masks", None, None),
            ("causal tgt_mask", make_causal_mask(T, device=device), None),
            ("causal+padding tgt_mask and padding memory_mask", tgt_mask, memory_mask)]


@probed
def check_decoder_block(DecoderBlock) -> None:
    """DecoderBlock(d_model, num_heads, d_ff, dropout=0.0, norm_first=False).

    forward(x, memory, tgt_mask=None, memory_mask=None) -> (B, T, d_model).
    """
    device = start_check()
    reference = _reference()
    tgt_ids, src_ids, tgt_mask, memory_mask = _masks(device)
    keep = tgt_ids != 0
    x = randn(B, T, D_MODEL, seed=82, device=device)
    memory = randn(B, S, D_MODEL, seed=83, device=device)
    for norm_first in (False, True):
        name = f"DecoderBlock({D_MODEL}, {H}, {D_FF}, norm_first={norm_first})"
        module = construct(DecoderBlock, "DecoderBlock", D_MODEL, H, D_FF, dropout=0.0, norm_first=norm_first)
        ref = reference_module(reference.DecoderBlock, 8, D_MODEL, H, D_FF, dropout=0.0, norm_first=norm_first)
        prepare(module, ref, device, "DecoderBlock")
        for what, tm, mm in _mask_cases(tgt_mask, memory_mask, device):
            tested = f"{name} on x {shape_of(x)}, memory {shape_of(memory)}, {what}"
            with torch.no_grad():
                expected = ref(x, memory, tm, mm)
                got = call("DecoderBlock.forward", module, x.clone(), memory.clone(), tm, mm, tested=tested)
            expect_tensor(got, expected, "DecoderBlock output", device, tested=tested,
                          where=keep if mm is not None else None,
                          mistakes=_decoder_mistakes(
                              lambda tm=tm, mm=mm, **f: M.decoder_block(ref, x, memory, tm, mm, **f),
                              norm_first, tm is not None, mm is not None))


@probed
@given_working_parts("decoder")
def check_decoder(Decoder) -> None:
    """Decoder(vocab_size, d_model, num_heads, d_ff, num_layers, max_len=512, dropout=0.0, norm_first=False)."""
    device = start_check()
    reference = _reference()
    tgt_ids, src_ids, tgt_mask, memory_mask = _masks(device)
    keep = tgt_ids != 0
    memory = randn(B, S, D_MODEL, seed=84, device=device)
    for norm_first in (False, True):
        name = f"Decoder({TGT_VOCAB}, {D_MODEL}, {H}, {D_FF}, {NUM_LAYERS}, max_len={MAX_LEN}, norm_first={norm_first})"
        module = construct(Decoder, "Decoder", TGT_VOCAB, D_MODEL, H, D_FF, NUM_LAYERS, max_len=MAX_LEN, dropout=0.0,
                           norm_first=norm_first)
        ref = reference_module(reference.Decoder, 9, TGT_VOCAB, D_MODEL, H, D_FF, NUM_LAYERS, max_len=MAX_LEN,
                               dropout=0.0, norm_first=norm_first)
        prepare(module, ref, device, "Decoder")
        for what, tm, mm in _mask_cases(tgt_mask, memory_mask, device):
            tested = f"{name} on tgt_ids {shape_of(tgt_ids)}, memory {shape_of(memory)}, {what}"
            with torch.no_grad():
                expected = ref(tgt_ids, memory, tm, mm)
                got = call("Decoder.forward", module, tgt_ids.clone(), memory.clone(), tm, mm, tested=tested)
            expect_tensor(got, expected, "Decoder output", device, tested=tested,
                          where=keep if mm is not None else None,
                          mistakes=_decoder_mistakes(
                              lambda tm=tm, mm=mm, **f: M.decoder(ref, tgt_ids, memory, tm, mm, **f),
                              norm_first, tm is not None, mm is not None, stack=True))
    expect_max_len(module, name, MAX_LEN,
                   lambda length: (padded_ids([length, 3], length, vocab=TGT_VOCAB, seed=88, device=device), memory))


def _transformer_mistakes(ref, src_ids, tgt_ids, norm_first):
    def run(**flags):
        return M.transformer(ref, src_ids, tgt_ids, **flags)

    def variants():
        out = [("transformer.no_causal_mask", lambda: run(causal=False)),
               ("transformer.no_src_mask", lambda: run(src_mask=False)),
               ("transformer.pad_id_hardcoded", lambda: run(pad_id=0)),
               ("attention.mask_inverted", lambda: run(invert_src_mask=True)),
               ("attention.mask_inverted", lambda: run(attn_flags={"invert_mask": True}))]
        out += _decoder_mistakes(run, norm_first, True, True, stack=True)()
        return out

    return variants


def _build_transformer(Transformer, device, norm_first, pad_id, seed):
    reference = _reference()
    kwargs = dict(d_model=D_MODEL, num_heads=H, d_ff=D_FF, num_layers=TRANSFORMER_LAYERS, max_len=MAX_LEN,
                  dropout=0.0, pad_id=pad_id, norm_first=norm_first)
    module = construct(Transformer, "Transformer", SRC_VOCAB, TGT_VOCAB, **kwargs)
    ref = reference_module(reference.Transformer, seed, SRC_VOCAB, TGT_VOCAB, **kwargs)
    prepare(module, ref, device, "Transformer")
    return module, ref


@probed
@given_working_parts("transformer")
def check_transformer(Transformer) -> None:
    """Transformer(src_vocab_size, tgt_vocab_size, ...): encoder, decoder, generator; encode/decode/forward."""
    device = start_check()
    for norm_first, pad_id in ((False, 0), (True, 0), (False, 5)):
        module, ref = _build_transformer(Transformer, device, norm_first, pad_id, seed=10)
        src_ids = padded_ids([4, S], S, vocab=SRC_VOCAB, pad_id=pad_id, seed=85, device=device)
        tgt_ids = padded_ids([T, 3], T, vocab=TGT_VOCAB, pad_id=pad_id, seed=86, device=device)
        keep_src, keep_tgt = src_ids != pad_id, tgt_ids != pad_id
        name = f"Transformer({SRC_VOCAB}, {TGT_VOCAB}, d_model={D_MODEL}, num_heads={H}, pad_id={pad_id}, " \
               f"norm_first={norm_first})"
        tested = f"{name}, src_ids {shape_of(src_ids)}, tgt_ids {shape_of(tgt_ids)} (both padded)"
        with torch.no_grad():
            expected = ref(src_ids, tgt_ids)
            got = call("Transformer.forward", module, src_ids.clone(), tgt_ids.clone(), tested=tested)
        expect_tensor(got, expected, "Transformer logits", device, tested=tested, where=keep_tgt,
                      mistakes=_transformer_mistakes(ref, src_ids, tgt_ids, norm_first),
                      shape_hint="logits are (B, T_tgt, tgt_vocab_size)")
        # encode / decode separately
        methods = describe(module, "Transformer", callables=["encode", "decode"]).get("callables", {})
        for method in ("encode", "decode"):
            if not methods.get(method):
                fail(f"Transformer needs a method `{method}` as given in the exercise.")
        with torch.no_grad():
            memory, src_mask = ref.encode(src_ids)
            got = call("Transformer.encode", module.attr("encode"), src_ids.clone(), tested=tested)
        if not isinstance(got, tuple) or len(got) != 2:
            fail("Transformer.encode must return a tuple (memory, src_mask).", tested=tested)
        expect_tensor(got[0], memory, "the memory returned by encode", device, tested=tested,
                      where=keep_src,
                      mistakes=lambda: [("transformer.no_src_mask", lambda: M.encoder(ref.encoder, src_ids))])
        got_mask = as_tensor(got[1], "the src_mask returned by encode", tested)
        try:
            got_mask = torch.broadcast_to(got_mask.to(device).bool(), src_mask.shape)
        except RuntimeError:
            expect_shape(got_mask, src_mask.shape, "the src_mask returned by encode", tested)
        expect_tensor(got_mask, src_mask, "the src_mask returned by encode", device, tested=tested, exact=True,
                      mistakes=lambda: [("attention.mask_inverted", lambda: ~src_mask),
                                        ("transformer.pad_id_hardcoded", lambda: (src_ids != 0)[:, None, None, :])])
        with torch.no_grad():
            expected = ref.decode(tgt_ids, memory, src_mask)
            got = call("Transformer.decode", module.attr("decode"), tgt_ids.clone(), memory.clone(), src_mask.clone(),
                       tested=tested)
        expect_tensor(got, expected, "the logits returned by decode", device, tested=tested, where=keep_tgt,
                      mistakes=_transformer_mistakes(ref, src_ids, tgt_ids, norm_first))
    expect_max_len(module, name, MAX_LEN, lambda length: (
        padded_ids([length, 4], length, vocab=SRC_VOCAB, pad_id=pad_id, seed=89, device=device), tgt_ids))


# -------------------------------------------------------------------------------------------------- greedy decode
def _decoding_model(device, pad_id: int, bos_id: int, eos_id: int, max_len: int, want: str):
    """A random `DecodingProbe` and sources whose greedy decoding exercises stopping and padding.

    want="mixed": some sequences produce eos_id (not at the first step) and some never do, so the output has
    max_len columns with padding after each eos_id. want="all_early": every sequence produces eos_id, at different
    steps, before max_len, so decoding must stop early. Found by a deterministic search over seeds and eos biases
    (pad and bos are made unlikely as outputs); if none qualifies, the last candidate is used: the comparison with
    the reference stays valid, it only exercises less.
    """
    reference = _reference()
    src_ids = padded_ids([S, 4, 6], S, vocab=SRC_VOCAB, pad_id=pad_id, seed=87, device=device)
    for seed in range(40):
        for bias in (0.0, 1.0, 2.0, 3.0):
            generator = torch.Generator().manual_seed(100 + seed)
            model = DecodingProbe(SRC_VOCAB, TGT_VOCAB, d_model=D_MODEL, max_len=MAX_LEN, pad_id=pad_id)
            with torch.no_grad():
                for parameter in model.parameters():
                    parameter.copy_(torch.randn(parameter.shape, generator=generator) * 1.5)
                model.generator.bias[[pad_id, bos_id]] = -30.0
                model.generator.bias[eos_id] += bias
            model.to(device).eval()
            out = reference.greedy_decode(model, src_ids, max_len, bos_id=bos_id, eos_id=eos_id, use_cache=False)
            is_eos = out == eos_id
            has_eos, first = is_eos.any(dim=1), is_eos.float().argmax(dim=1)
            if want == "mixed" and bool(has_eos.any()) and not bool(has_eos.all()) and int(first.max()) > 0:
                return model, src_ids
            if want == "all_early" and bool(has_eos.all()) and out.size(1) < max_len and \
                    int(first.min()) != int(first.max()):
                return model, src_ids
    return model, src_ids


def _in_kernel(greedy_decode, model: DecodingProbe, device):
    """The same DecodingProbe, built in the student's kernel with the grader's weights."""
    theirs = new(greedy_decode.channel, "coursekit.probe.decoding.DecodingProbe", SRC_VOCAB, TGT_VOCAB,
                 d_model=D_MODEL, max_len=MAX_LEN, pad_id=model.pad_id)
    theirs.load_state(model.state_dict())
    theirs.attr("to")(device)
    theirs.attr("eval")()
    return theirs


@probed
def check_greedy_decode(greedy_decode) -> None:
    """greedy_decode(model, src_ids, max_len, bos_id=2, eos_id=3) -> LongTensor (B, <= max_len)."""
    device = start_check()
    expect_callable(greedy_decode, "greedy_decode")
    reference = _reference()
    for pad_id, bos_id, eos_id, max_len, want in ((0, 2, 3, 8, "mixed"), (0, 2, 3, 12, "all_early"),
                                                  (5, 4, 6, 9, "mixed")):
        model, src_ids = _decoding_model(device, pad_id, bos_id, eos_id, max_len, want)
        kwargs = {} if (bos_id, eos_id) == (2, 3) else {"bos_id": bos_id, "eos_id": eos_id}
        tested = f"a seq2seq model with pad_id={pad_id}, src_ids {shape_of(src_ids)}, max_len={max_len}" \
                 + (f", bos_id={bos_id}, eos_id={eos_id}" if kwargs else "")
        expected = reference.greedy_decode(model, src_ids, max_len, bos_id=bos_id, eos_id=eos_id, use_cache=False)
        theirs = _in_kernel(greedy_decode, model, device)
        got = call("greedy_decode", greedy_decode, theirs, src_ids.clone(), max_len, tested=tested, **kwargs)
        got = as_tensor(got, "greedy_decode's result", tested)
        if got.dtype != torch.long:
            fail(f"greedy_decode must return int64 (torch.long) token ids, got {got.dtype}.", tested=tested)

        def mistakes():
            def run(**flags):
                return M.greedy(model, src_ids, max_len, bos_id, eos_id, **flags)

            return [("greedy.keeps_bos", lambda: run(keep_bos=True)),
                    ("greedy.no_early_stop", lambda: run(early_stop=False)),
                    ("greedy.stops_at_first_eos", lambda: run(stop_any=True)),
                    ("greedy.no_pad_after_eos", lambda: run(pad_after_eos=False)),
                    ("greedy.drops_eos", lambda: run(keep_eos=False))]

        if tuple(got.shape) != tuple(expected.shape):
            mistake = diagnose(got.to(device), mistakes, device, exact=True)
            fail("greedy_decode's result has the wrong shape.", tested=tested, mistake=mistake,
                 details=[f"expected shape {tuple(expected.shape)} = (B, generated length), got {tuple(got.shape)}"])
        expect_tensor(got, expected, "greedy_decode's result", device, tested=tested, exact=True, mistakes=mistakes)
