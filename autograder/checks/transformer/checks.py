"""Hidden checks of notebook 06 (decoder block, decoder, the full Transformer, greedy decoding)."""
from __future__ import annotations

from autograder.checks.kit.parts import given_working_parts
from autograder.checks.kit.remote import new, probed

import torch

from autograder.checks.transformer import mistakes as M
from autograder.checks.kit.criteria import argument
from autograder.checks.kit.toolkit import call, construct, expect_callable, fail, randn, shape_of, start_check
from autograder.checks.kit.compare import (
    as_tensor, describe, diagnose, expect_dropout_acts, expect_shape, expect_tensor, prepare,
)
from types import SimpleNamespace

from autograder.checks.encoder.checks import block_mistakes, stack_mistakes
from autograder.checks.kit.inputs import padded_ids, reference_module, short_length
from autograder.checks.kit.compare import expect_max_len
from autograder.checks.kit.draws import generator, pick
from coursekit.probe.decoding import DecodingProbe

B = 2
DECODER_RESIDUALS = ("attn_residual", "cross_residual", "ffn_residual")


def sizes() -> SimpleNamespace:
    """This submission's sizes (`probe_inputs.pick`; with no salt: T=5, S=7, H=3, d_head=4, d_model=12, d_ff=20,
    vocabularies 19 (source) and 13 (target), 2 layers, 4 in the Transformer, max_len=32).

    The space keeps what the cases need: T (target) != S (source), an even d_model, H >= 2, the constructor's sizes
    distinct from each other and from the Transformer's defaults (d_model=64, num_heads=4, d_ff=128, num_layers=2,
    max_len=512), so that an argument that is ignored or swapped shows."""
    heads = pick("transformer.num_heads", [3, 2, 5])
    d_head = pick("transformer.d_head", [4, 6, 8])
    d_model = heads * d_head
    T = pick("transformer.T", [5, 4, 6, 7])
    return SimpleNamespace(
        B=B, T=T, S=pick("transformer.S", [n for n in (7, 5, 6, 8) if n != T]), H=heads, d_head=d_head,
        d_model=d_model, d_ff=pick("transformer.d_ff", [f for f in (20, 16, 28, 36) if f != d_model]),
        src_vocab=pick("transformer.src_vocab", [19, 17, 23]), tgt_vocab=pick("transformer.tgt_vocab", [13, 11, 15]),
        num_layers=pick("transformer.num_layers", [n for n in (2, 3) if n != heads]),
        transformer_layers=pick("transformer.transformer_layers", [n for n in (4, 3, 5) if n != heads]),
        max_len=pick("transformer.max_len", [32, 20, 24, 40]))


def _reference():
    import solutions.transformer as reference

    return reference


def _masks(z, device):
    from solutions.attention import make_causal_mask, make_padding_mask

    T, S = z.T, z.S
    tgt_ids = padded_ids([T, short_length("transformer.tgt_short", 3, T)], T, vocab=z.tgt_vocab, seed=80,
                         device=device)
    src_ids = padded_ids([short_length("transformer.src_short", 4, S), S], S, vocab=z.src_vocab, seed=81,
                         device=device)
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
            ("causal tgt_mask", make_causal_mask(tgt_mask.size(-1), device=device), None),
            ("causal+padding tgt_mask and padding memory_mask", tgt_mask, memory_mask)]


def _non_defaults(dropout: float = 0.0, norm_first: bool = False, pad_id: int = 0) -> dict:
    """The optional arguments that differ from their defaults: the core passes none of them (every optional
    argument at its default), each argument's block passes its own."""
    given = {"dropout": dropout, "norm_first": norm_first, "pad_id": pad_id}
    return {k: v for k, v in given.items() if v != {"dropout": 0.0, "norm_first": False, "pad_id": 0}[k]}


def expect_dropout(build, ref, name: str, forward, expected: torch.Tensor, device, tested: str, where=None,
                   hint: str = "pass dropout on to the sublayers (and the positional encoding) instead of a fixed "
                               "value") -> None:
    """dropout with teeth, seen from outside: `build(p)` (the student's module with dropout=p, the reference's
    weights copied) in training mode gives `expected` (the reference's eval-mode output) for p=0.0 (nothing is
    dropped) and something else for p=0.5 (something is), and `expected` again in eval mode (dropout switched off):
    the toolkit's `expect_dropout_acts`, training mode first. `forward(module, tested)` runs it."""
    for p in (0.0, 0.5):
        module = build(p)
        label = f"{name}(..., dropout={p})"
        prepare(module, ref, device, label)
        expect_dropout_acts(module, label, lambda shown, _seed, module=module: forward(module, shown), expected,
                            device, tested=f"{tested}, dropout={p}", hint=hint, p=p, eval_first=False, seed=None,
                            where=where)


@probed
def check_decoder_block(DecoderBlock) -> None:
    """DecoderBlock(d_model, num_heads, d_ff, dropout=0.0, norm_first=False).

    forward(x, memory, tgt_mask=None, memory_mask=None) -> (B, T, d_model). The core is the post-norm block
    (every optional argument at its default); norm_first=True and dropout are each tried in their own block.
    """
    device = start_check()
    reference = _reference()
    z = sizes()
    tgt_ids, src_ids, tgt_mask, memory_mask = _masks(z, device)
    keep = tgt_ids != 0
    x = randn(z.B, z.T, z.d_model, seed=82, device=device)
    memory = randn(z.B, z.S, z.d_model, seed=83, device=device)

    def build(norm_first=False, dropout=0.0):
        extra = _non_defaults(dropout=dropout, norm_first=norm_first)
        return construct(DecoderBlock, "DecoderBlock", z.d_model, z.H, z.d_ff, **extra)

    def forward(module, tested, tm=None, mm=None):
        return call("DecoderBlock.forward", module, x.clone(), memory.clone(), tm, mm, tested=tested)

    def try_block(norm_first):
        name = f"DecoderBlock({z.d_model}, {z.H}, {z.d_ff}" + (", norm_first=True)" if norm_first else ")")
        module = build(norm_first)
        ref = reference_module(reference.DecoderBlock, 8, z.d_model, z.H, z.d_ff, dropout=0.0,
                               norm_first=norm_first)
        prepare(module, ref, device, "DecoderBlock")
        for what, tm, mm in _mask_cases(tgt_mask, memory_mask, device):
            tested = f"{name} on x {shape_of(x)}, memory {shape_of(memory)}, {what}"
            with torch.no_grad():
                expected = ref(x, memory, tm, mm)
            got = forward(module, tested, tm, mm)
            expect_tensor(got, expected, "DecoderBlock output", device, tested=tested,
                          where=keep if mm is not None else None,
                          mistakes=_decoder_mistakes(
                              lambda tm=tm, mm=mm, **f: M.decoder_block(ref, x, memory, tm, mm, **f),
                              norm_first, tm is not None, mm is not None))
        return ref

    ref = try_block(False)                           # the core: the post-norm block
    with argument("DecoderBlock.norm_first"):
        try_block(True)
    with argument("DecoderBlock.dropout"):
        causal = _mask_cases(tgt_mask, memory_mask, device)[1][1]
        with torch.no_grad():
            expected = ref(x, memory, causal, None)
        expect_dropout(lambda p: build(dropout=p), ref, "DecoderBlock", lambda m, t: forward(m, t, causal),
                       expected, device, f"DecoderBlock({z.d_model}, {z.H}, {z.d_ff}) on x {shape_of(x)}, memory "
                       f"{shape_of(memory)}, causal tgt_mask",
                       hint="pass dropout on to the attention modules and the feed-forward (and drop each "
                            "sublayer's output) instead of a fixed value")


@probed
@given_working_parts("decoder")
def check_decoder(Decoder) -> None:
    """Decoder(vocab_size, d_model, num_heads, d_ff, num_layers, max_len=512, dropout=0.0, norm_first=False).

    The core is the post-norm stack (every optional argument but max_len at its default); norm_first=True and
    dropout are each tried in their own block."""
    device = start_check()
    reference = _reference()
    z = sizes()
    TGT_VOCAB, MAX_LEN = z.tgt_vocab, z.max_len
    tgt_ids, src_ids, tgt_mask, memory_mask = _masks(z, device)
    keep = tgt_ids != 0
    memory = randn(z.B, z.S, z.d_model, seed=84, device=device)

    def build(norm_first=False, dropout=0.0):
        extra = _non_defaults(dropout=dropout, norm_first=norm_first)
        return construct(Decoder, "Decoder", TGT_VOCAB, z.d_model, z.H, z.d_ff, z.num_layers, max_len=MAX_LEN,
                         **extra)

    def forward(module, tested, tm=None, mm=None):
        return call("Decoder.forward", module, tgt_ids.clone(), memory.clone(), tm, mm, tested=tested)

    def try_decoder(norm_first):
        name = f"Decoder({TGT_VOCAB}, {z.d_model}, {z.H}, {z.d_ff}, {z.num_layers}, max_len={MAX_LEN}" \
               + (", norm_first=True)" if norm_first else ")")
        module = build(norm_first)
        ref = reference_module(reference.Decoder, 9, TGT_VOCAB, z.d_model, z.H, z.d_ff, z.num_layers,
                               max_len=MAX_LEN, dropout=0.0, norm_first=norm_first)
        prepare(module, ref, device, "Decoder")
        for what, tm, mm in _mask_cases(tgt_mask, memory_mask, device):
            tested = f"{name} on tgt_ids {shape_of(tgt_ids)}, memory {shape_of(memory)}, {what}"
            with torch.no_grad():
                expected = ref(tgt_ids, memory, tm, mm)
            got = forward(module, tested, tm, mm)
            expect_tensor(got, expected, "Decoder output", device, tested=tested,
                          where=keep if mm is not None else None,
                          mistakes=_decoder_mistakes(
                              lambda tm=tm, mm=mm, **f: M.decoder(ref, tgt_ids, memory, tm, mm, **f),
                              norm_first, tm is not None, mm is not None, stack=True))
        return module, ref, name

    module, ref, name = try_decoder(False)           # the core: the post-norm stack
    with argument("Decoder.norm_first"):
        try_decoder(True)
    with argument("Decoder.dropout"):
        causal = _mask_cases(tgt_mask, memory_mask, device)[1][1]
        with torch.no_grad():
            expected = ref(tgt_ids, memory, causal, None)
        expect_dropout(lambda p: build(dropout=p), ref, "Decoder", lambda m, t: forward(m, t, causal), expected,
                       device, f"{name} on tgt_ids {shape_of(tgt_ids)}, memory {shape_of(memory)}, causal tgt_mask",
                       hint="pass dropout on to the positional encoding and to every DecoderBlock instead of a "
                            "fixed value")
    expect_max_len(module, name, MAX_LEN,
                   lambda length: (padded_ids([length, 3], length, vocab=TGT_VOCAB, seed=88, device=device), memory),
                   criterion="Decoder.too_long")


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


def _build_transformer(Transformer, z, device, norm_first, pad_id, seed, dropout=0.0):
    """The student's Transformer (only the optional arguments off their defaults passed) and the reference's (eval
    mode, dropout 0), the reference's weights copied into the student's."""
    reference = _reference()
    kwargs = dict(d_model=z.d_model, num_heads=z.H, d_ff=z.d_ff, num_layers=z.transformer_layers,
                  max_len=z.max_len)
    module = construct(Transformer, "Transformer", z.src_vocab, z.tgt_vocab, **kwargs,
                       **_non_defaults(dropout=dropout, norm_first=norm_first, pad_id=pad_id))
    ref = reference_module(reference.Transformer, seed, z.src_vocab, z.tgt_vocab, **kwargs, dropout=0.0,
                           pad_id=pad_id, norm_first=norm_first)
    prepare(module, ref, device, "Transformer")
    return module, ref


def _transformer_ids(z, pad_id, device):
    src_short, tgt_short = short_length("transformer.src_short", 4, z.S), short_length("transformer.tgt_short", 3, z.T)
    src_ids = padded_ids([src_short, z.S], z.S, vocab=z.src_vocab, pad_id=pad_id, seed=85, device=device)
    tgt_ids = padded_ids([z.T, tgt_short], z.T, vocab=z.tgt_vocab, pad_id=pad_id, seed=86, device=device)
    return src_short, src_ids, tgt_ids


def _try_transformer(Transformer, z, device, norm_first: bool, pad_id: int):
    """forward, encode and decode of Transformer(..., norm_first, pad_id) against the reference, on padded ids."""
    module, ref = _build_transformer(Transformer, z, device, norm_first, pad_id, seed=10)
    src_short, src_ids, tgt_ids = _transformer_ids(z, pad_id, device)
    keep_src, keep_tgt = src_ids != pad_id, tgt_ids != pad_id
    name = f"Transformer({z.src_vocab}, {z.tgt_vocab}, d_model={z.d_model}, num_heads={z.H}" \
           + (f", pad_id={pad_id}" if pad_id else "") + (", norm_first=True" if norm_first else "") + ")"
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
    return module, ref, name, src_short, src_ids, tgt_ids


@probed
@given_working_parts("transformer")
def check_transformer(Transformer) -> None:
    """Transformer(src_vocab_size, tgt_vocab_size, ...): encoder, decoder, generator; encode/decode/forward.

    The core is the post-norm Transformer with pad_id 0 and no dropout (the defaults); norm_first=True, another
    pad_id and dropout are each tried in their own block."""
    device = start_check()
    z = sizes()
    other_pad = pick("transformer.pad_id", [5, 1, 4, 7, 9])          # not the default 0, in both vocabularies
    module, ref, name, src_short, src_ids, tgt_ids = _try_transformer(Transformer, z, device, False, 0)  # the core
    with argument("Transformer.norm_first"):
        _try_transformer(Transformer, z, device, True, 0)
    with argument("Transformer.pad_id"):
        _try_transformer(Transformer, z, device, False, other_pad)
    with argument("Transformer.dropout"):
        keep_tgt = tgt_ids != 0
        with torch.no_grad():
            expected = ref(src_ids, tgt_ids)
        expect_dropout(
            lambda p: construct(Transformer, "Transformer", z.src_vocab, z.tgt_vocab, d_model=z.d_model,
                                num_heads=z.H, d_ff=z.d_ff, num_layers=z.transformer_layers, max_len=z.max_len,
                                dropout=p), ref,
            "Transformer", lambda m, t: call("Transformer.forward", m, src_ids.clone(), tgt_ids.clone(), tested=t,
                                             _no_grad=True),
            expected, device, f"{name}, src_ids {shape_of(src_ids)}, tgt_ids {shape_of(tgt_ids)} (both padded)",
            where=keep_tgt, hint="pass dropout on to Encoder(...) and Decoder(...) instead of a fixed value")
    expect_max_len(module, name, z.max_len, lambda length: (
        padded_ids([length, src_short], length, vocab=z.src_vocab, seed=89, device=device), tgt_ids),
        criterion="Transformer.too_long")


# -------------------------------------------------------------------------------------------------- greedy decode
def greedy_cases() -> tuple:
    """(criterion, pad_id, bos_id, eos_id, max_len, want) of this submission's greedy-decoding cases. The core
    (criterion None) uses the default bos_id=2 and eos_id=3, with model.pad_id 0 twice, then another pad id; each
    argument with teeth is then tried with its own other id (the other one at its default). The other ids are all
    distinct, off the defaults 2 and 3, below both vocabularies, and below every max_len so that swapping max_len
    with an id shows. With no salt: (None, 0, 2, 3, 8, mixed), (None, 0, 2, 3, 12, all_early),
    (None, 5, 2, 3, 9, mixed), ("greedy_decode.bos_id", 5, 4, 3, 9, mixed), ("greedy_decode.eos_id", 5, 2, 6, 9,
    mixed)."""
    pad_id, bos_id, eos_id = pick("transformer.greedy_ids", [(5, 4, 6), (1, 4, 7), (7, 5, 1), (4, 6, 5), (6, 1, 4)])
    max_len = pick("transformer.greedy_max_len_ids", [9, 8, 10, 11])
    return ((None, 0, 2, 3, pick("transformer.greedy_max_len_mixed", [8, 7, 9, 10]), "mixed"),
            (None, 0, 2, 3, pick("transformer.greedy_max_len_early", [12, 10, 11, 13]), "all_early"),
            (None, pad_id, 2, 3, max_len, "mixed"),
            ("greedy_decode.bos_id", pad_id, bos_id, 3, max_len, "mixed"),
            ("greedy_decode.eos_id", pad_id, 2, eos_id, max_len, "mixed"))


def decodes_as_wanted(out: torch.Tensor, eos_id: int, max_len: int, want: str) -> bool:
    """want="mixed": some sequences produce eos_id (not at the first step; one of them before the last column, so
    padding follows it) and some never do. want="all_early": every sequence produces eos_id, at different steps,
    before max_len."""
    is_eos = out == eos_id
    has_eos, first = is_eos.any(dim=1), is_eos.float().argmax(dim=1)
    if want == "mixed":
        return bool(has_eos.any()) and not bool(has_eos.all()) and int(first.max()) > 0 \
            and bool((has_eos & (first < out.size(1) - 1)).any())
    return bool(has_eos.all()) and out.size(1) < max_len and int(first.min()) != int(first.max())


def _decoding_model(device, pad_id: int, bos_id: int, eos_id: int, max_len: int, want: str):
    """A random `DecodingProbe` (this submission's weights) and sources whose greedy decoding exercises stopping
    and padding as `want` says (`decodes_as_wanted`) and, with ids other than the defaults, whose decoding with the
    default ids differs (so that an id ignored shows). Found by a deterministic search over this submission's
    seeds and eos biases (pad and bos are made unlikely as outputs); if none qualifies, the last candidate is used:
    the comparison with the reference stays valid, it only exercises less (the tests assert the search succeeds)."""
    reference = _reference()
    z = sizes()
    S = z.S
    src_ids = padded_ids([S, short_length("transformer.greedy_short", 4, S), S - 1], S, vocab=z.src_vocab,
                         pad_id=pad_id, seed=87, device=device)
    for seed in range(40):
        for bias in (0.0, 1.0, 2.0, 3.0):
            draw = generator(100 + seed)
            model = DecodingProbe(z.src_vocab, z.tgt_vocab, d_model=z.d_model, max_len=z.max_len, pad_id=pad_id)
            with torch.no_grad():
                for parameter in model.parameters():
                    parameter.copy_(torch.randn(parameter.shape, generator=draw) * 1.5)
                model.generator.bias[[pad_id, bos_id]] = -30.0
                model.generator.bias[eos_id] += bias
            model.to(device).eval()
            out = reference.greedy_decode(model, src_ids, max_len, bos_id=bos_id, eos_id=eos_id, use_cache=False)
            if decodes_as_wanted(out, eos_id, max_len, want) and \
                    ((bos_id, eos_id) == (2, 3) or not torch.equal(out, reference.greedy_decode(
                        model, src_ids, max_len, use_cache=False))):   # the defaults would decode otherwise
                return model, src_ids
    return model, src_ids


def _in_kernel(greedy_decode, model: DecodingProbe, device):
    """The same DecodingProbe, built in the student's kernel with the grader's weights."""
    theirs = new(greedy_decode.channel, "coursekit.probe.decoding.DecodingProbe",
                 model.src_embedding.num_embeddings, model.tgt_embedding.num_embeddings,
                 d_model=model.mix.out_features, max_len=model.max_len, pad_id=model.pad_id)
    theirs.load_state(model.state_dict())
    theirs.attr("to")(device)
    theirs.attr("eval")()
    return theirs


@probed
def check_greedy_decode(greedy_decode) -> None:
    """greedy_decode(model, src_ids, max_len, bos_id=2, eos_id=3) -> LongTensor (B, <= max_len). The core calls it
    with the default ids; bos_id and eos_id are each tried with another id in their own block."""
    device = start_check()
    expect_callable(greedy_decode, "greedy_decode")
    for criterion, *case in greedy_cases():
        if criterion is None:
            _try_greedy(greedy_decode, device, *case)
        elif criterion == "greedy_decode.bos_id":
            with argument("greedy_decode.bos_id"):
                _try_greedy(greedy_decode, device, *case)
        else:
            with argument("greedy_decode.eos_id"):
                _try_greedy(greedy_decode, device, *case)


def _try_greedy(greedy_decode, device, pad_id: int, bos_id: int, eos_id: int, max_len: int, want: str) -> None:
    """One case: the student's greedy_decode on the grader's DecodingProbe, against the reference's tokens (only the
    ids off their defaults passed)."""
    reference = _reference()
    model, src_ids = _decoding_model(device, pad_id, bos_id, eos_id, max_len, want)
    kwargs = {**({"bos_id": bos_id} if bos_id != 2 else {}), **({"eos_id": eos_id} if eos_id != 3 else {})}
    tested = f"a seq2seq model with pad_id={pad_id}, src_ids {shape_of(src_ids)}, max_len={max_len}" \
             + "".join(f", {k}={v}" for k, v in kwargs.items())
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

    if kwargs and not torch.equal(got.cpu(), expected.cpu()):   # an argument tried: is it ignored?
        default = reference.greedy_decode(model, src_ids, max_len, use_cache=False)
        if tuple(got.shape) == tuple(default.shape) and torch.equal(got.cpu(), default.cpu()):
            shown = " and ".join(f"{k}={v}" for k, v in kwargs.items())
            fail(f"greedy_decode ignores {shown}: its tokens are those of the default ids (bos_id=2, eos_id=3).",
                 tested=tested, hint="use the arguments bos_id and eos_id, not the ids 2 and 3")
    if tuple(got.shape) != tuple(expected.shape):
        mistake = diagnose(got.to(device), mistakes, device, exact=True)
        fail("greedy_decode's result has the wrong shape.", tested=tested, mistake=mistake,
             details=[f"expected shape {tuple(expected.shape)} = (B, generated length), got {tuple(got.shape)}"])
    expect_tensor(got, expected, "greedy_decode's result", device, tested=tested, exact=True, mistakes=mistakes)
