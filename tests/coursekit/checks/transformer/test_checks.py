"""The public checks of notebook 06 pass correct answers (written two ways) and name the likely mistake otherwise."""
from __future__ import annotations

import pytest
import torch

from coursekit.checks import CheckFailed
from coursekit.mistakes import text_of
from coursekit.checks.transformer.checks import (check_decoder, check_decoder_block, check_greedy_decode,
                                          check_transformer)
from solutions import Decoder, DecoderBlock, Transformer, greedy_decode, make_causal_mask, make_padding_mask


class LoopDecoderBlock(DecoderBlock):
    """Correct, written as a loop over (norm, sublayer) pairs."""

    def forward(self, x, memory, tgt_mask=None, memory_mask=None):
        sublayers = [(self.norm1, lambda h: self.self_attn(h, h, h, tgt_mask)[0]),
                     (self.norm2, lambda h: self.cross_attn(h, memory, memory, memory_mask)[0]),
                     (self.norm3, self.ffn)]
        for norm, sublayer in sublayers:
            x = x + sublayer(norm(x)) if self.norm_first else norm(x + sublayer(x))
        return x


def greedy_decode_uncached(model, src_ids, max_len, bos_id=2, eos_id=3):
    return greedy_decode(model, src_ids, max_len, bos_id, eos_id, use_cache=False)


def greedy_decode_by_forward(model, src_ids, max_len, bos_id=2, eos_id=3):
    """Correct, written with model(src, ys) each step and a Python list of finished rows."""
    ys = torch.full((src_ids.size(0), 1), bos_id, dtype=torch.long)
    done = [False] * src_ids.size(0)
    for _ in range(max_len):
        token = model(src_ids, ys)[:, -1].argmax(-1)
        token = torch.tensor([model.pad_id if d else int(t) for d, t in zip(done, token)])
        done = [d or int(t) == eos_id for d, t in zip(done, token)]
        ys = torch.cat([ys, token[:, None]], 1)
        if all(done):
            break
    return ys[:, 1:]


def block_with(mistake):
    class Wrong(DecoderBlock):
        def forward(self, x, memory, tgt_mask=None, memory_mask=None):
            kv = x if mistake == "cross_from_x" else memory
            t_mask = None if mistake == "no_tgt_mask" else tgt_mask
            pre = (not self.norm_first) if mistake == "pre_post_swapped" else self.norm_first
            if pre:
                h = self.norm1(x)
                x = x + self.self_attn(h, h, h, t_mask)[0]
                h = self.norm2(x)
                kv = h if mistake == "cross_from_x" else memory
                x = x + self.cross_attn(h, kv, kv, None if kv is h else memory_mask)[0]
                return x + self.ffn(self.norm3(x))
            x = self.norm1(x + self.self_attn(x, x, x, t_mask)[0])
            kv = x if mistake == "cross_from_x" else memory
            x = self.norm2(x + self.cross_attn(x, kv, kv, None if kv is x else memory_mask)[0])
            return self.norm3(x + self.ffn(x))
    return Wrong


def decoder_without_scale():
    class Wrong(Decoder):
        def forward(self, tgt_ids, memory, tgt_mask=None, memory_mask=None):
            x = self.pos_encoding(self.embedding(tgt_ids))
            for layer in self.layers:
                x = layer(x, memory, tgt_mask, memory_mask)
            return self.norm(x)
    return Wrong


def transformer_with(mistake):
    class Wrong(Transformer):
        def decode(self, tgt_ids, memory, src_mask):
            T = tgt_ids.size(1)
            pad = make_padding_mask(tgt_ids, self.pad_id)
            tgt_mask = pad if mistake == "no_causal" else pad & make_causal_mask(T, tgt_ids.device)
            memory_mask = None if mistake == "no_memory_mask" else src_mask
            return self.generator(self.decoder(tgt_ids, memory, tgt_mask, memory_mask))
    return Wrong


def test_correct_answers_pass(capsys):
    for cls in (DecoderBlock, LoopDecoderBlock):
        check_decoder_block(cls)
    check_decoder(Decoder)
    check_transformer(Transformer)
    for fn in (greedy_decode_uncached, greedy_decode_by_forward):
        check_greedy_decode(fn)
    assert capsys.readouterr().out.count("passed") == 6


@pytest.mark.parametrize("mistake, words", [
    ("cross_from_x", text_of("decoder.cross_from_decoder")),
    ("no_tgt_mask", text_of("decoder.tgt_mask_ignored")),
    ("pre_post_swapped", text_of("encoder.norm_swapped")),
])
def test_decoder_block_mistakes(mistake, words):
    with pytest.raises(CheckFailed) as error:
        check_decoder_block(block_with(mistake))
    assert words in str(error.value)


def test_decoder_mistake():
    with pytest.raises(CheckFailed, match=r"not multiplied by sqrt\(d_model\)"):
        check_decoder(decoder_without_scale())


@pytest.mark.parametrize("mistake, words", [
    ("no_causal", text_of("transformer.no_causal_mask")),
    ("no_memory_mask", text_of("transformer.no_src_mask")),
])
def test_transformer_mistakes(mistake, words):
    with pytest.raises(CheckFailed) as error:
        check_transformer(transformer_with(mistake))
    assert words in str(error.value)


def test_transformer_encode_must_return_the_mask():
    class MemoryOnly(Transformer):
        def encode(self, src_ids):
            return super().encode(src_ids)[0]

    with pytest.raises(CheckFailed, match=r"pair \(memory, src_mask\)"):
        check_transformer(MemoryOnly)


def decode_with(mistake):
    def wrong(model, src_ids, max_len, bos_id=2, eos_id=3):
        memory, src_mask = model.encode(src_ids)
        ys = torch.full((src_ids.size(0), 1), bos_id, dtype=torch.long)
        finished = torch.zeros(src_ids.size(0), dtype=torch.bool)
        for _ in range(max_len):
            token = model.decode(ys, memory, src_mask)[:, -1].argmax(-1)
            if mistake != "no_pad_after_eos":
                token = token.masked_fill(finished, model.pad_id)
            ys = torch.cat([ys, token[:, None]], 1)
            finished |= token == eos_id
            if finished.all() and mistake != "never_stops":
                break
        return ys if mistake == "keeps_bos" else ys[:, 1:]
    return wrong


@pytest.mark.parametrize("mistake, words", [
    ("no_pad_after_eos", text_of("greedy.no_pad_after_eos")),
    ("never_stops", "stop as soon as every sequence"),
    ("keeps_bos", text_of("greedy.keeps_bos")),
])
def test_greedy_decode_mistakes(mistake, words):
    with pytest.raises(CheckFailed) as error:
        check_greedy_decode(decode_with(mistake))
    assert words in str(error.value)


def test_greedy_decode_must_feed_its_own_predictions():
    def always_bos(model, src_ids, max_len, bos_id=2, eos_id=3):
        memory, src_mask = model.encode(src_ids)
        ys = torch.full((src_ids.size(0), 1), bos_id, dtype=torch.long)
        out = []
        for _ in range(max_len):
            out.append(model.decode(ys, memory, src_mask)[:, -1].argmax(-1))
            ys = torch.cat([ys, torch.full_like(ys[:, :1], 9)], 1)
        return torch.stack(out, 1)

    with pytest.raises(CheckFailed, match="fed its own previous predictions"):
        check_greedy_decode(always_bos)


def test_greedy_decode_calling_a_part_directly():
    def by_parts(model, src_ids, max_len, bos_id=2, eos_id=3):
        model.encoder(src_ids)

    with pytest.raises(CheckFailed, match="called model.encoder"):
        check_greedy_decode(by_parts)


def test_transformer_with_causal_only_target_mask_passes(capsys):
    """With post-padding, a causal-only target mask gives the same logits at every real position: accepted."""
    class CausalOnly(Transformer):
        def decode(self, tgt_ids, memory, src_mask):
            tgt_mask = make_causal_mask(tgt_ids.size(1), tgt_ids.device)
            return self.generator(self.decoder(tgt_ids, memory, tgt_mask, src_mask))

    check_transformer(CausalOnly)
    assert "passed" in capsys.readouterr().out


@pytest.mark.parametrize("check, cls, criterion", [
    (check_decoder, Decoder, "Decoder.too_long"), (check_transformer, Transformer, "Transformer.too_long")])
def test_the_public_check_tries_the_too_long_edge_case(check, cls, criterion):
    """A correct answer that does not pass max_len on fails the public check, which names the stated edge case."""
    from coursekit.criteria import CRITERIA

    class IgnoresMaxLen(cls):
        def __init__(self, *args, max_len=512, **kwargs):
            super().__init__(*args, **kwargs)

    with pytest.raises(CheckFailed) as info:
        check(IgnoresMaxLen)
    assert "should raise ValueError" in str(info.value) and CRITERIA[criterion].text in str(info.value)


# --- arguments with teeth: the public checks try each one and say which it was -------------------------------------
class PostNormOnlyBlock(DecoderBlock):
    def __init__(self, d_model, num_heads, d_ff, dropout=0.0, norm_first=False):
        super().__init__(d_model, num_heads, d_ff, dropout)


class NoDropoutBlock(DecoderBlock):
    def __init__(self, d_model, num_heads, d_ff, dropout=0.0, norm_first=False):
        super().__init__(d_model, num_heads, d_ff, 0.0, norm_first)


class FixedDropoutBlock(DecoderBlock):
    def __init__(self, d_model, num_heads, d_ff, dropout=0.0, norm_first=False):
        super().__init__(d_model, num_heads, d_ff, 0.1, norm_first)


class PostNormOnlyDecoder(Decoder):
    def __init__(self, vocab_size, d_model, num_heads, d_ff, num_layers, max_len=512, dropout=0.0, norm_first=False):
        super().__init__(vocab_size, d_model, num_heads, d_ff, num_layers, max_len, dropout)


class NoDropoutDecoder(Decoder):
    def __init__(self, vocab_size, d_model, num_heads, d_ff, num_layers, max_len=512, dropout=0.0, norm_first=False):
        super().__init__(vocab_size, d_model, num_heads, d_ff, num_layers, max_len, 0.0, norm_first)


class PostNormOnlyTransformer(Transformer):
    def __init__(self, src_vocab_size, tgt_vocab_size, d_model=64, num_heads=4, d_ff=128, num_layers=2,
                 max_len=512, dropout=0.0, pad_id=0, norm_first=False):
        super().__init__(src_vocab_size, tgt_vocab_size, d_model, num_heads, d_ff, num_layers, max_len, dropout,
                         pad_id)


class NoDropoutTransformer(Transformer):
    def __init__(self, src_vocab_size, tgt_vocab_size, d_model=64, num_heads=4, d_ff=128, num_layers=2,
                 max_len=512, dropout=0.0, pad_id=0, norm_first=False):
        super().__init__(src_vocab_size, tgt_vocab_size, d_model, num_heads, d_ff, num_layers, max_len, 0.0,
                         pad_id, norm_first)


class PadZeroTransformer(Transformer):
    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.pad_id = 0


def greedy_default_bos(model, src_ids, max_len, bos_id=2, eos_id=3):
    return greedy_decode_uncached(model, src_ids, max_len, 2, eos_id)


def greedy_default_eos(model, src_ids, max_len, bos_id=2, eos_id=3):
    return greedy_decode_uncached(model, src_ids, max_len, bos_id, 3)


def _argument_text(criterion):
    from coursekit.criteria import CRITERIA

    return f"(an argument the exercise states: {CRITERIA[criterion].text})"


@pytest.mark.parametrize("check, answer, criterion, words", [
    (check_decoder_block, PostNormOnlyBlock, "DecoderBlock.norm_first", "norm_first=True"),
    (check_decoder_block, NoDropoutBlock, "DecoderBlock.dropout", "dropout dropped nothing"),
    (check_decoder_block, FixedDropoutBlock, "DecoderBlock.dropout", "nothing is dropped"),
    (check_decoder, PostNormOnlyDecoder, "Decoder.norm_first", "LayerNorm"),
    (check_decoder, NoDropoutDecoder, "Decoder.dropout", "dropout dropped nothing"),
    (check_transformer, PostNormOnlyTransformer, "Transformer.norm_first", "norm_first"),
    (check_transformer, NoDropoutTransformer, "Transformer.dropout", "dropout dropped nothing"),
    (check_transformer, PadZeroTransformer, "Transformer.pad_id", "pad_id=7"),
    (check_greedy_decode, greedy_default_bos, "greedy_decode.bos_id", "bos_id"),
    (check_greedy_decode, greedy_default_eos, "greedy_decode.eos_id", "eos_id=4"),
], ids=lambda v: v if isinstance(v, str) else getattr(v, "__name__", None))
def test_public_checks_name_the_argument(check, answer, criterion, words):
    with pytest.raises(CheckFailed) as info:
        check(answer)
    message = str(info.value)
    assert _argument_text(criterion) in message and words in message, message
