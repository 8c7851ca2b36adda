"""Hidden checks of notebook 06 (decoder block, decoder, the full Transformer, greedy decoding)."""
from __future__ import annotations

from types import SimpleNamespace

import torch

from autograder.checks.kit.compare import (
    as_tensor, describe, diagnose, expect_dropout_acts, expect_max_len, expect_shape, expect_tensor, from_table,
    prepare,
)
from autograder.checks.kit.criteria import argument
from autograder.checks.kit.draws import pick
from autograder.checks.kit.inputs import padded_ids, reference, reference_module, short_length
from autograder.checks.kit.parts import given_working_parts
from autograder.checks.kit.remote import hidden_check
from autograder.checks.kit.toolkit import call, construct, expect_callable, fail, randn, shape_of, start_check
from autograder.checks.transformer import mistakes as M
from autograder.checks.transformer.decoding import decoding_model, greedy_cases, in_kernel

B = 2


def sizes() -> SimpleNamespace:
    """This submission's sizes (`draws.pick`; with no salt: T=5, S=7, H=3, d_head=4, d_model=12, d_ff=20,
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


def decoder_mistakes(run, has_tgt_mask: bool, has_memory_mask: bool, stack: bool = False):
    """The known mistakes of a DecoderBlock (or, `stack`, a Decoder): `run(variant, switches)` runs one row of
    `M.TABLE` on the check's inputs."""
    return lambda: from_table(M.TABLE, run, M.decoder_ids(has_tgt_mask, has_memory_mask, stack))


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


@hidden_check
def check_decoder_block(DecoderBlock) -> None:
    """DecoderBlock(d_model, num_heads, d_ff, dropout=0.0, norm_first=False).

    forward(x, memory, tgt_mask=None, memory_mask=None) -> (B, T, d_model). The core is the post-norm block
    (every optional argument at its default); norm_first=True and dropout are each tried in their own block.
    """
    device = start_check()
    solution = reference("transformer")
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
        ref = reference_module(solution.DecoderBlock, 8, z.d_model, z.H, z.d_ff, dropout=0.0,
                               norm_first=norm_first)
        prepare(module, ref, device, "DecoderBlock")
        for what, tm, mm in _mask_cases(tgt_mask, memory_mask, device):
            tested = f"{name} on x {shape_of(x)}, memory {shape_of(memory)}, {what}"
            with torch.no_grad():
                expected = ref(x, memory, tm, mm)
            got = forward(module, tested, tm, mm)
            expect_tensor(got, expected, "DecoderBlock output", device, tested=tested,
                          where=keep if mm is not None else None,
                          mistakes=decoder_mistakes(
                              lambda variant, switches, tm=tm, mm=mm: variant(ref, x, memory, tm, mm, **switches),
                              tm is not None, mm is not None))
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


@hidden_check
@given_working_parts("decoder")
def check_decoder(Decoder) -> None:
    """Decoder(vocab_size, d_model, num_heads, d_ff, num_layers, max_len=512, dropout=0.0, norm_first=False).

    The core is the post-norm stack (every optional argument but max_len at its default); norm_first=True and
    dropout are each tried in their own block."""
    device = start_check()
    solution = reference("transformer")
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
        ref = reference_module(solution.Decoder, 9, TGT_VOCAB, z.d_model, z.H, z.d_ff, z.num_layers,
                               max_len=MAX_LEN, dropout=0.0, norm_first=norm_first)
        prepare(module, ref, device, "Decoder")
        for what, tm, mm in _mask_cases(tgt_mask, memory_mask, device):
            tested = f"{name} on tgt_ids {shape_of(tgt_ids)}, memory {shape_of(memory)}, {what}"
            with torch.no_grad():
                expected = ref(tgt_ids, memory, tm, mm)
            got = forward(module, tested, tm, mm)
            expect_tensor(got, expected, "Decoder output", device, tested=tested,
                          where=keep if mm is not None else None,
                          mistakes=decoder_mistakes(
                              lambda _variant, switches, tm=tm, mm=mm: M.decoder(ref, tgt_ids, memory, tm, mm,
                                                                                 **switches),
                              tm is not None, mm is not None, stack=True))
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


def transformer_mistakes(ref, src_ids, tgt_ids, part: str = "logits", ids=None):
    """The known mistakes of a Transformer (the reference `ref`) on src_ids and tgt_ids: its own masks
    (`M.TRANSFORMER_TABLE`), then, for the logits, the attention's inversion of every mask and its decoder's
    mistakes (`M.TABLE`, run through the whole model). `part`: "logits", or encode's "memory" or "src_mask" (only
    the rows `ids` of the Transformer's own)."""
    def run(_variant, switches):
        return M.transformer(ref, src_ids, tgt_ids, part=part, **switches)

    def variants():
        own = list(from_table(M.TRANSFORMER_TABLE, run, ids).items())
        if part != "logits":
            return own
        decoder_ids = ["attention.mask_inverted", *M.decoder_ids(True, True, stack=True)]
        return own + list(from_table(M.TABLE, run, decoder_ids).items())

    return variants


def _build_transformer(Transformer, z, device, norm_first, pad_id, seed, dropout=0.0):
    """The student's Transformer (only the optional arguments off their defaults passed) and the reference's (eval
    mode, dropout 0), the reference's weights copied into the student's."""
    solution = reference("transformer")
    kwargs = dict(d_model=z.d_model, num_heads=z.H, d_ff=z.d_ff, num_layers=z.transformer_layers,
                  max_len=z.max_len)
    module = construct(Transformer, "Transformer", z.src_vocab, z.tgt_vocab, **kwargs,
                       **_non_defaults(dropout=dropout, norm_first=norm_first, pad_id=pad_id))
    ref = reference_module(solution.Transformer, seed, z.src_vocab, z.tgt_vocab, **kwargs, dropout=0.0,
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
                  mistakes=transformer_mistakes(ref, src_ids, tgt_ids),
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
                  mistakes=transformer_mistakes(ref, src_ids, tgt_ids, "memory", ["transformer.no_src_mask"]))
    got_mask = as_tensor(got[1], "the src_mask returned by encode", tested)
    try:
        got_mask = torch.broadcast_to(got_mask.to(device).bool(), src_mask.shape)
    except RuntimeError:
        expect_shape(got_mask, src_mask.shape, "the src_mask returned by encode", tested)
    expect_tensor(got_mask, src_mask, "the src_mask returned by encode", device, tested=tested, exact=True,
                  mistakes=transformer_mistakes(ref, src_ids, tgt_ids, "src_mask",
                                                ["attention.mask_inverted", "transformer.pad_id_hardcoded"]))
    with torch.no_grad():
        expected = ref.decode(tgt_ids, memory, src_mask)
        got = call("Transformer.decode", module.attr("decode"), tgt_ids.clone(), memory.clone(), src_mask.clone(),
                   tested=tested)
    expect_tensor(got, expected, "the logits returned by decode", device, tested=tested, where=keep_tgt,
                  mistakes=transformer_mistakes(ref, src_ids, tgt_ids))
    return module, ref, name, src_short, src_ids, tgt_ids


@hidden_check
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
@hidden_check
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
    solution = reference("transformer")
    model, src_ids = decoding_model(device, sizes(), pad_id, bos_id, eos_id, max_len, want)
    kwargs = {**({"bos_id": bos_id} if bos_id != 2 else {}), **({"eos_id": eos_id} if eos_id != 3 else {})}
    tested = f"a seq2seq model with pad_id={pad_id}, src_ids {shape_of(src_ids)}, max_len={max_len}" \
             + "".join(f", {k}={v}" for k, v in kwargs.items())
    expected = solution.greedy_decode(model, src_ids, max_len, bos_id=bos_id, eos_id=eos_id, use_cache=False)
    theirs = in_kernel(greedy_decode, model, device)
    got = call("greedy_decode", greedy_decode, theirs, src_ids.clone(), max_len, tested=tested, **kwargs)
    got = as_tensor(got, "greedy_decode's result", tested)
    if got.dtype != torch.long:
        fail(f"greedy_decode must return int64 (torch.long) token ids, got {got.dtype}.", tested=tested)

    def mistakes():
        return from_table(M.TABLE, lambda variant, switches: variant(model, src_ids, max_len, bos_id, eos_id,
                                                                     **switches), M.GREEDY_IDS)

    if kwargs and not torch.equal(got.cpu(), expected.cpu()):   # an argument tried: is it ignored?
        default = solution.greedy_decode(model, src_ids, max_len, use_cache=False)
        if tuple(got.shape) == tuple(default.shape) and torch.equal(got.cpu(), default.cpu()):
            shown = " and ".join(f"{k}={v}" for k, v in kwargs.items())
            fail(f"greedy_decode ignores {shown}: its tokens are those of the default ids (bos_id=2, eos_id=3).",
                 tested=tested, hint="use the arguments bos_id and eos_id, not the ids 2 and 3")
    if tuple(got.shape) != tuple(expected.shape):
        mistake = diagnose(got.to(device), mistakes, device, exact=True)
        fail("greedy_decode's result has the wrong shape.", tested=tested, mistake=mistake,
             details=[f"expected shape {tuple(expected.shape)} = (B, generated length), got {tuple(got.shape)}"])
    expect_tensor(got, expected, "greedy_decode's result", device, tested=tested, exact=True, mistakes=mistakes)
