"""SmolLM2's tokenizer: byte-level BPE, as in notebook 08, with the merges the model was trained with.

    tokenizer = SmolTokenizer.from_metadata(read_checkpoint().metadata)
    ids = tokenizer.encode(chat_prompt("What is the capital of France?"))
    tokenizer.decode(ids)                       # the prompt again, special tokens included

How a text becomes ids:
1. Special tokens such as <|im_start|> are found in the text first and kept whole, one id each. They never go
   through BPE: the bytes of "<|im_start|>" would otherwise become several ordinary tokens.
2. The rest is cut into pieces by two patterns in turn (the `smollm` pre-split): every digit becomes a piece of its
   own, then GPT-2's pattern splits the remaining text into words with their leading space, numbers, runs of
   punctuation and runs of whitespace. No merge ever crosses the border of a piece.
3. Each piece is written as UTF-8 bytes, each byte a token of its own, and the merges are applied earliest first,
   as in 08. 08's loop goes through every merge in the order learned; with 48,900 merges it is quicker to look only
   at the pairs present: the neighbouring pair with the earliest merge is merged (every occurrence, left to right),
   until no neighbouring pair has a merge. Both give the same ids, since a merge can only create pairs that come
   later in the list.

In this vocabulary the 17 special tokens come first (ids 0-16), then the single bytes (ids 17-251, in the order of
the byte-to-unicode characters, not of the byte values), then one token per merge: merge k makes token 252 + k.
21 byte values have no token: six control characters (0x04, 0x06, 0x13, 0x14, 0x16, 0x1D), the bytes UTF-8 never
uses (0xC0, 0xC1, 0xF5-0xFF) and 0xF1, 0xF2, which begin characters of planes 4-11, where Unicode assigns none.
Like the `tokenizers` package, the tokenizer leaves such bytes out.

Tokens are stored as text with GPT-2's byte-to-unicode map: every byte is shown as a printable character, a space
as "Ġ" and a newline as "Ċ", so the merge "Ġ t" joins a space and a t.
"""
from __future__ import annotations

import functools

import regex

__all__ = ["DEFAULT_SYSTEM_PROMPT", "bytes_to_unicode", "pre_split", "merge_pair", "SmolTokenizer", "chat_prompt"]

# GGUF's token types (llama.cpp): 1 normal, 2 unknown, 3 control, 4 user-defined, 5 unused, 6 byte.
CONTROL, USER_DEFINED = 3, 4

_DIGIT_APART = regex.compile(r"(\p{N})")     # the group keeps each digit in split's result
_GPT2_PATTERN = regex.compile(r"""'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+""")


def bytes_to_unicode() -> dict[int, str]:
    """GPT-2's map from each of the 256 byte values to one printable character.

    The 188 bytes that print as themselves in Latin-1 ('!'..'~', '¡'..'¬', '®'..'ÿ') keep their character; the
    others (controls, space, ...) take the characters from U+0100 on, in byte order: 0 -> 'Ā', ..., 32 -> 'Ġ'.
    """
    printable = [*range(ord("!"), ord("~") + 1), *range(ord("¡"), ord("¬") + 1), *range(ord("®"), ord("ÿ") + 1)]
    mapping, shifted = {}, 0
    for byte in range(256):
        if byte in printable:
            mapping[byte] = chr(byte)
        else:
            mapping[byte] = chr(256 + shifted)
            shifted += 1
    return mapping


def pre_split(text: str) -> list[str]:
    """The `smollm` pre-split: every digit a piece of its own, then GPT-2's pattern on the text between them.

    >>> pre_split("I'm 25 today!!  ")
    ['I', "'m", ' ', '2', '5', ' today', '!!', '  ']
    """
    pieces = []
    for part in _DIGIT_APART.split(text):            # [text, digit, text, digit, ..., text]; a digit stays one piece
        pieces += _GPT2_PATTERN.findall(part)
    return pieces


def merge_pair(ids: list[int], pair: tuple[int, int], new_id: int) -> list[int]:
    """Replace every occurrence of `pair` in `ids`, left to right without overlap, by `new_id` (08's merge)."""
    out, i = [], 0
    while i < len(ids):
        if i + 1 < len(ids) and ids[i] == pair[0] and ids[i + 1] == pair[1]:
            out.append(new_id)
            i += 2
        else:
            out.append(ids[i])
            i += 1
    return out


class SmolTokenizer:
    """Byte-level BPE over a GGUF vocabulary: `tokens[i]` is the text of id i, `merges` the pairs "left right" by rank.

    token_types: GGUF's type of each token; control (3) and user-defined (4) tokens are matched whole in the text.
    """

    def __init__(self, tokens: list[str], merges: list[str], token_types: list[int],
                 eos_id: int | None = None, bos_id: int | None = None):
        if len(token_types) != len(tokens):
            raise ValueError(f"{len(tokens)} tokens but {len(token_types)} token types")
        self._tokens = list(tokens)
        self._ids = {token: i for i, token in enumerate(self._tokens)}
        self._eos_id, self._bos_id = eos_id, bos_id
        self._special = {token: i for i, (token, kind) in enumerate(zip(tokens, token_types))
                         if kind in (CONTROL, USER_DEFINED)}
        longest_first = sorted(self._special, key=len, reverse=True)      # "<ab>" before "<a", like tokenizers
        self._special_pattern = regex.compile("(" + "|".join(map(regex.escape, longest_first)) + ")") \
            if self._special else None
        byte_char = bytes_to_unicode()
        self._byte_of_char = {char: byte for byte, char in byte_char.items()}
        self._byte_ids = [self._ids.get(byte_char[byte]) for byte in range(256)]   # None: no token for that byte
        self._merges: list[tuple[int, int]] = []   # rank k -> (left id, right id)
        self._merged: list[int] = []               # rank k -> the id of the joined token
        for rank, merge in enumerate(merges):
            left, right = merge.split(" ")
            if left not in self._ids or right not in self._ids or left + right not in self._ids:
                raise ValueError(f"merge {rank} {merge!r}: a part or the joined token is not in the vocabulary")
            self._merges.append((self._ids[left], self._ids[right]))
            self._merged.append(self._ids[left + right])
        self._rank = {pair: rank for rank, pair in reversed(list(enumerate(self._merges)))}  # first rank wins
        self._bpe = functools.lru_cache(maxsize=1 << 16)(self._bpe_piece)   # pieces repeat: " the", " and", ...

    @classmethod
    def from_metadata(cls, metadata: dict[str, object]) -> SmolTokenizer:
        """The tokenizer a GGUF file describes (coursekit.gguf_checkpoint.read_checkpoint(...).metadata)."""
        model, pre = metadata.get("tokenizer.ggml.model"), metadata.get("tokenizer.ggml.pre")
        if model != "gpt2" or pre != "smollm":
            raise ValueError(f"expected GPT-2 style BPE with the `smollm` pre-split, the file says {model!r}/{pre!r}")
        return cls(metadata["tokenizer.ggml.tokens"], metadata["tokenizer.ggml.merges"],
                   metadata["tokenizer.ggml.token_type"], eos_id=metadata.get("tokenizer.ggml.eos_token_id"),
                   bos_id=metadata.get("tokenizer.ggml.bos_token_id"))

    @property
    def vocab_size(self) -> int:
        return len(self._tokens)

    @property
    def eos_id(self) -> int | None:
        """The token that ends a reply (<|im_end|> for SmolLM2-Instruct)."""
        return self._eos_id

    @property
    def bos_id(self) -> int | None:
        return self._bos_id

    @property
    def merges(self) -> list[tuple[int, int]]:
        """The merges as token id pairs in rank order, like 08's `merges` (in SmolLM2's file merge k makes 252 + k)."""
        return list(self._merges)

    def token_bytes(self, token_id: int) -> bytes:
        """The bytes token `token_id` stands for (a special token: its own text in UTF-8)."""
        if not 0 <= token_id < len(self._tokens):
            raise IndexError(f"token id {token_id} is outside the vocabulary (0 .. {len(self._tokens) - 1})")
        token = self._tokens[token_id]
        if token in self._special or any(char not in self._byte_of_char for char in token):
            return token.encode("utf-8")
        return bytes(self._byte_of_char[char] for char in token)

    def byte_ids(self, text: str) -> list[int]:
        """The UTF-8 bytes of `text` as single-byte token ids, where BPE starts (bytes without a token left out).

        08's loop over a piece: ids = byte_ids(piece); for k, pair in enumerate(merges): merge_pair(ids, pair, 252 + k)
        """
        return [self._byte_ids[byte] for byte in text.encode("utf-8") if self._byte_ids[byte] is not None]

    def _bpe_piece(self, piece: str) -> tuple[int, ...]:
        """One pre-split piece -> ids: its bytes, then the earliest-merged neighbouring pair until none is left."""
        ids = self.byte_ids(piece)
        while len(ids) >= 2:
            pair = min(zip(ids, ids[1:]), key=lambda p: self._rank.get(p, len(self._merges)))
            if pair not in self._rank:
                break                                  # no neighbouring pair was ever merged
            ids = merge_pair(ids, pair, self._merged[self._rank[pair]])
        return tuple(ids)

    def encode(self, text: str) -> list[int]:
        """Text -> token ids; special tokens written in the text become their own id. No BOS is added."""
        chunks = self._special_pattern.split(text) if self._special_pattern else [text]
        ids: list[int] = []
        for i, chunk in enumerate(chunks):             # [text, special, text, special, ..., text]
            if i % 2:
                ids.append(self._special[chunk])
            else:
                for piece in pre_split(chunk):
                    ids += self._bpe(piece)
        return ids

    def decode(self, ids) -> str:
        """Token ids (a list or a 1-d tensor) -> text; bytes that are not valid UTF-8 become U+FFFD."""
        return b"".join(self.token_bytes(int(i)) for i in ids).decode("utf-8", errors="replace")


# ---------------------------------------------------------------------------------------------- chat template

# SmolLM2-Instruct's template (metadata "tokenizer.chat_template") puts this system message first when a
# conversation does not start with one of its own.
DEFAULT_SYSTEM_PROMPT = "You are a helpful AI assistant named SmolLM, trained by Hugging Face"


def chat_prompt(user: str, system: str | None = None) -> str:
    """One user message in SmolLM2's chat format (ChatML), ending where the assistant's reply begins.

    >>> print(chat_prompt("Hi", system="Be brief."))
    <|im_start|>system
    Be brief.<|im_end|>
    <|im_start|>user
    Hi<|im_end|>
    <|im_start|>assistant
    <BLANKLINE>
    """
    system = DEFAULT_SYSTEM_PROMPT if system is None else system
    return (f"<|im_start|>system\n{system}<|im_end|>\n"
            f"<|im_start|>user\n{user}<|im_end|>\n"
            f"<|im_start|>assistant\n")
