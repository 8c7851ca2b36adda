"""The catalogue of an exercise's criteria beyond its main behaviour: stated edge cases and arguments with teeth.

- A **stated edge case** (kind "edge") is what an exercise asks for at the rim of its inputs: an error to raise, an
  empty text, a top-k past the vocabulary. Its id reads `<api name>.<case>`.
- An **argument with teeth** (kind "argument") is an optional argument whose non-default values the checks try and
  whose effect they can see: `sample_next_token`'s `temperature`, `beam_search`'s `length_penalty`. Its id reads
  `<api name>.<argument>`. Every optional argument of the course API is either one of them or listed in
  `NOT_CRITERIA` with the reason it is none (a size that the core's shapes already judge, an argument whose wrong
  use the core catches, one no check can see); tests/course/test_criteria.py derives the list from `coursekit.api`.

Both check layers try each criterion: the public self-check (`coursekit.checks.<topic>`, inside
`edge_case("<id>")`, `argument("<id>")` or with `criterion="<id>"`) and the hidden check of the grader
(`autograder.checks`, the same), where failing one costs only its share of the exercise's points
(autograder/checks/kit/criteria.py) instead of all of them. Each is stated in its exercise's statement: `stated` is a
phrase of the notebook's text (tests/course/test_criteria.py compares the three lists: hidden checks, public checks,
notebooks).
"""
from __future__ import annotations

import contextlib
from dataclasses import dataclass


@dataclass(frozen=True)
class Criterion:
    id: str      # e.g. "GroupedQueryAttention.too_long"
    api: str     # the course API name whose exercise states it
    text: str    # the edge case, as the feedback lists it
    stated: str  # a phrase of the notebook's statement of the exercise that asks for it
    kind: str = "edge"  # "edge": a stated edge case; "argument": an argument with teeth


_CATALOGUE = [
    # 02 positional encoding
    ("sinusoidal_positional_encoding.odd_d_model", "sinusoidal_positional_encoding",
     "an odd d_model raises ValueError", "Raise `ValueError` for an odd `d_model`"),
    ("PositionalEncoding.too_long", "PositionalEncoding",
     "a sequence longer than max_len raises ValueError", "longer than `max_len` has no encoding: raise `ValueError`"),
    # 04 multi-head attention
    ("MultiHeadAttention.indivisible", "MultiHeadAttention",
     "d_model not divisible by num_heads raises ValueError", "is not divisible by `num_heads`"),
    # 05 and 06: max_len reaches the positional encoding
    ("Encoder.too_long", "Encoder",
     "a sequence longer than max_len raises ValueError (max_len reaches the positional encoding)",
     "longer than `max_len` raises `ValueError`"),
    ("Decoder.too_long", "Decoder",
     "a sequence longer than max_len raises ValueError (max_len reaches the positional encoding)",
     "longer than `max_len` raises `ValueError`"),
    ("Transformer.too_long", "Transformer",
     "a sequence longer than max_len raises ValueError (max_len reaches the positional encodings)",
     "longer than `max_len` raises `ValueError`"),
    # 08 GPT
    ("train_bpe.empty_text", "train_bpe", "an empty text gives no merges", "empty text"),
    ("GPT.too_long", "GPT", "T > max_len raises ValueError", "raise `ValueError` if `T > max_len`"),
    ("estimate_loss.too_short", "estimate_loss", "data too short for one window raises ValueError",
     "raise `ValueError` when no"),
    ("lr_at.bad_warmup", "lr_at", "warmup_steps outside [0, max_steps] raises ValueError", "raise `ValueError` unless"),
    ("sample_next_token.top_k_past_vocabulary", "sample_next_token",
     "a top_k equal to or larger than the vocabulary keeps every token", "equal to or larger than"),
    # 09 the modern block
    ("rotary_cos_sin.odd_d_head", "rotary_cos_sin", "an odd d_head raises ValueError",
     "an odd `d_head` raises `ValueError`"),
    ("GroupedQueryAttention.bad_sizes", "GroupedQueryAttention",
     "sizes that do not split into heads and groups raise ValueError",
     "`num_heads % num_kv_heads` or an odd `d_head` makes the sizes"),
    ("GroupedQueryAttention.too_long", "GroupedQueryAttention", "T > max_len raises ValueError", "T > max_len"),
    ("LlamaBlock.too_long", "LlamaBlock", "T > max_len raises ValueError (max_len reaches the attention)",
     "more than `max_len` positions raises `ValueError`"),
    ("ModernGPT.too_long", "ModernGPT", "T > max_len raises ValueError", "`T > max_len` raises `ValueError`"),
    # 10 translation
    ("label_smoothed_cross_entropy.bad_smoothing", "label_smoothed_cross_entropy",
     "a smoothing outside [0, 1) raises ValueError", "A `smoothing` outside `[0, 1)` raises"),
    ("noam_lr.bad_warmup", "noam_lr", "warmup_steps below 1 raises ValueError",
     "A `warmup_steps` below 1 raises `ValueError`"),
    ("corpus_bleu.length_mismatch", "corpus_bleu", "lists of different lengths raise ValueError",
     "Lists of different lengths raise"),
    # 11 pre-trained
    ("dequantize_q4_1.bad_input", "dequantize_q4_1",
     "raw of another dtype than uint8 or another shape than (n_blocks, 20) raises ValueError",
     "dtype or shape raises `ValueError`"),
    ("llama_state_dict.missing", "llama_state_dict", "a tensor the model needs and tensors lacks raises KeyError "
     "naming it", "lacks raises `KeyError` naming it"),
    ("llama_state_dict.unknown", "llama_state_dict", "a tensor that maps to nothing (an unknown name, a block index "
     ">= num_layers) raises ValueError naming it", "`ValueError` naming it"),
    ("cached_forward.too_long", "cached_forward", "T_past + T > model.max_len raises ValueError",
     "`T_past + T > model.max_len` raises `ValueError`"),
    ("LoRALinear.bad_rank", "LoRALinear", "rank < 1 raises ValueError", "a `rank` below 1 raises `ValueError`"),
    ("add_lora.unknown_target", "add_lora", "a target outside w_q, w_k, w_v, w_o raises ValueError",
     "An unknown target or a block index"),
    ("add_lora.bad_block", "add_lora", "a block index the model does not have raises ValueError",
     "outside the model raises `ValueError`"),
]

# The arguments with teeth: (id "<api>.<argument>", api, what the feedback lists, a phrase of the statement).
_ARGUMENTS = [
    # 01 tokens and embeddings
    ("build_vocab.min_freq", "build_vocab", "tokens seen fewer than min_freq times are left out",
     "Tokens seen fewer than `min_freq` times are left out"),
    ("build_vocab.specials", "build_vocab", "specials gives the special tokens, ids 0, 1, ... in its order",
     "The `specials` argument lists the special tokens"),
    ("pad_batch.pad_id", "pad_batch", "pad_id fills the padding", "by appending `pad_id` to the short ones"),
    ("pad_batch.max_len", "pad_batch",
     "max_len gives every row exactly max_len entries (longer sequences cut at the end)",
     "unless `max_len` is given: then every row has"),
    ("TokenEmbedding.padding_idx", "TokenEmbedding", "row padding_idx of the weight starts as zeros",
     "if `padding_idx` is given, that row starts as zeros"),
    # 02 positional encoding
    ("PositionalEncoding.dropout", "PositionalEncoding",
     "dropout applies to x + pe[:T] in training mode, not in eval mode", "returns `dropout(x + pe[:T])`"),
    # 03 attention
    ("make_padding_mask.pad_id", "make_padding_mask", "pad_id is the padding id (False in the mask)",
     "A position is padding where its id equals `pad_id`"),
    ("scaled_dot_product_attention.mask", "scaled_dot_product_attention",
     "the mask blocks the keys where it is False (weight 0) before the softmax",
     "if a mask is given, replace the scores where the mask is `False`"),
    # 04 multi-head attention
    ("MultiHeadAttention.bias", "MultiHeadAttention", "bias=False gives w_q, w_k, w_v and w_o no bias",
     "four `nn.Linear(d_model, d_model, bias=bias)`"),
    ("MultiHeadAttention.dropout", "MultiHeadAttention",
     "dropout acts on the attention weights in training mode, not in eval mode (the weights returned are those "
     "before dropout)", "applies dropout to the weights, multiplies by `v`"),
    # 05 encoder
    ("PositionwiseFeedForward.dropout", "PositionwiseFeedForward",
     "dropout (on the hidden layer) acts in training mode, not in eval mode",
     "computes `linear2(dropout(relu(linear1(x))))`"),
    ("EncoderBlock.dropout", "EncoderBlock",
     "dropout reaches self_attn and ffn and acts in training mode, not in eval mode",
     "pass `dropout` on to `self_attn` and `ffn`"),
    ("EncoderBlock.norm_first", "EncoderBlock", "norm_first=True makes the block pre-norm: x + sublayer(norm(x))",
     "(`norm_first=True`, GPT-2 and most later models)"),
    ("Encoder.dropout", "Encoder",
     "dropout reaches the positional encoding and every block: it acts in training mode, not in eval mode",
     "Every block gets the encoder's `dropout`"),
    ("Encoder.norm_first", "Encoder", "norm_first=True makes every block pre-norm and adds the final LayerNorm",
     "for a pre-norm stack (`norm_first=True`)"),
    # 06 decoder and transformer
    ("DecoderBlock.norm_first", "DecoderBlock",
     "norm_first=True arranges each sublayer pre-norm: x + drop(sublayer(norm(x)))", "pre-norm (`norm_first=True`)"),
    ("DecoderBlock.dropout", "DecoderBlock",
     "dropout is the rate of the block's dropouts: it acts in training mode (dropout=0.0 drops nothing)",
     "`dropout` is the rate of every `drop` in the table"),
    ("Decoder.norm_first", "Decoder",
     "norm_first reaches every DecoderBlock (pre-norm) and makes the final norm a LayerNorm",
     "`nn.LayerNorm(d_model)` when `norm_first`"),
    ("Decoder.dropout", "Decoder",
     "dropout reaches the positional encoding and the blocks: it acts in training mode (dropout=0.0 drops nothing)",
     "`dropout` goes on to the positional encoding and to every block"),
    ("Transformer.dropout", "Transformer",
     "dropout reaches the encoder and the decoder: it acts in training mode (dropout=0.0 drops nothing)",
     "`dropout` and `norm_first` go on to both the encoder and the decoder"),
    ("Transformer.pad_id", "Transformer",
     "pad_id is the padding id of both masks (source padding, target padding and causal)",
     "It builds its masks itself from `pad_id`"),
    ("Transformer.norm_first", "Transformer",
     "norm_first reaches the encoder and the decoder (pre-norm stacks)",
     "`dropout` and `norm_first` go on to both the encoder and the decoder"),
    ("greedy_decode.bos_id", "greedy_decode", "bos_id is the decoder's first input",
     "`bos_id` is the id of `<bos>`, the decoder's first input"),
    ("greedy_decode.eos_id", "greedy_decode",
     "eos_id ends a sequence: it is kept, then model.pad_id follows, and decoding stops when all have ended",
     "a sequence that has produced `eos_id` is finished"),
    ("cached_greedy_decode.bos_id", "cached_greedy_decode",
     "bos_id is the decoder's first input, as in greedy_decode",
     "`bos_id` and `eos_id` mean what they mean in `greedy_decode`"),
    ("cached_greedy_decode.eos_id", "cached_greedy_decode",
     "eos_id ends a sequence, as in greedy_decode (padding after it, stopping when all have ended)",
     "`bos_id` and `eos_id` mean what they mean in `greedy_decode`"),
    # 07 classifier
    ("TransformerClassifier.pad_id", "TransformerClassifier",
     "pad_id is the padding id: its positions are masked in the encoder and left out of the mean",
     "from `ids` and `self.pad_id`"),
    ("TransformerClassifier.dropout", "TransformerClassifier",
     "dropout reaches the encoder: it acts in training mode (dropout=0.0 drops nothing)",
     "encoder, where it acts in training mode only"),
    # 08 GPT
    ("GPT.dropout", "GPT",
     "dropout reaches the model: dropout=0.5 changes the logits in training mode, not in eval mode",
     "`drop = nn.Dropout(dropout)`"),
    ("get_batch.generator", "get_batch",
     "the starts are drawn from the generator given (the same seed, the same windows)",
     "(batch_size,), generator=generator)"),
    ("lr_at.min_lr", "lr_at", "min_lr is the floor the cosine decays to and stays at after max_steps",
     "`min_lr` from `max_steps` on"),
    ("train_step.grad_clip", "train_step", "grad_clip is the gradient norm clipped to (None: no clipping)",
     "when `grad_clip` is not `None`, the gradients are clipped"),
    ("sample_next_token.temperature", "sample_next_token",
     "temperature divides the logits before the softmax (temperature 0: the argmax)",
     "divide the **logits** by the temperature before the softmax"),
    ("sample_next_token.top_k", "sample_next_token", "top_k keeps the logits at or above the k-th largest (ties kept)",
     "set every logit strictly below the $k$-th largest of its row to $-\\infty$"),
    ("sample_next_token.generator", "sample_next_token",
     "the draw is one torch.multinomial call with the generator given (a seeded generator repeats it)",
     "draw with exactly one call `torch.multinomial(probs, 1, generator=generator)`"),
    ("generate.temperature", "generate", "temperature goes on to sample_next_token at every step",
     "The `temperature`, `top_k` and `generator` you are given go on to"),
    ("generate.top_k", "generate", "top_k goes on to sample_next_token at every step",
     "The `temperature`, `top_k` and `generator` you are given go on to"),
    ("generate.generator", "generate",
     "the generator goes on to sample_next_token (a seeded generator repeats the text)",
     "The `temperature`, `top_k` and `generator` you are given go on to"),
    # 09 the modern block
    ("RMSNorm.eps", "RMSNorm", "eps is the epsilon added under the root",
     "argument `eps` is the $\\varepsilon$ under the root"),
    ("rotary_cos_sin.base", "rotary_cos_sin", "base replaces 10000 as the base of the angles",
     "The argument `base` replaces the 10000 of the angles"),
    ("GroupedQueryAttention.rope_base", "GroupedQueryAttention",
     "rope_base is the base of the rotary angles of queries and keys", "its rotary tables use `rope_base` as the base"),
    ("LlamaBlock.rope_base", "LlamaBlock", "rope_base goes on to the attention as its rotary base",
     "`rope_base` goes on to the attention as its rotary"),
    ("LlamaBlock.eps", "LlamaBlock", "eps is the epsilon of norm1 and norm2",
     "`eps` is the epsilon of both `norm1` and `norm2`"),
    ("ModernGPT.rope_base", "ModernGPT", "rope_base goes on to every block (the rotary base of each attention)",
     "`rope_base` and `eps` go on to every block"),
    ("ModernGPT.eps", "ModernGPT", "eps goes on to every block (norm1 and norm2) and to the final norm",
     "`eps` is also the epsilon of the final `norm`"),
    # 10 translation
    ("label_smoothed_cross_entropy.smoothing", "label_smoothed_cross_entropy",
     "smoothing is the share of the target's mass spread over all V classes (0: plain cross-entropy)",
     "$\\varepsilon$ = `smoothing`"),
    ("label_smoothed_cross_entropy.ignore_index", "label_smoothed_cross_entropy",
     "the positions whose target is ignore_index are left out (class 0 is then an ordinary target)",
     "over the positions whose target is not `ignore_index`"),
    ("noam_lr.factor", "noam_lr", "factor multiplies the whole schedule",
     "The argument `factor` multiplies the whole schedule"),
    ("beam_search.bos_id", "beam_search", "every hypothesis starts with bos_id (left out of the result)",
     "Every hypothesis starts with `bos_id`"),
    ("beam_search.eos_id", "beam_search", "eos_id is the token that finishes a hypothesis",
     "and `eos_id` is the token that"),
    ("beam_search.length_penalty", "beam_search",
     "finished hypotheses rank by score / ((5 + L) / 6) ** length_penalty (0: the raw score)",
     "with $\\alpha$ = `length_penalty`"),
    ("corpus_bleu.max_n", "corpus_bleu", "max_n is the largest n-gram length N of the geometric mean",
     "with $N$ = `max_n`"),
    # 11 pre-trained
    ("cached_generate.eos_id", "cached_generate",
     "generation stops after eos_id, which is returned as the last new token (None: only max_new_tokens stops it)",
     "Stop after `eos_id` (which is included in the result)"),
    ("LoRALinear.rank", "LoRALinear", "rank is the inner size of lora_A (rank, in) and lora_B (out, rank)",
     "`lora_A` of shape `(rank, in_features)`"),
    ("LoRALinear.alpha", "LoRALinear", "the update is scaled by alpha / rank", "`scaling = alpha / rank`"),
    ("add_lora.rank", "add_lora", "rank goes on to every LoRALinear it adds (and to the count it returns)",
     "by `LoRALinear(that linear, rank, alpha)`"),
    ("add_lora.alpha", "add_lora", "alpha goes on to every LoRALinear it adds (their scaling alpha / rank)",
     "by `LoRALinear(that linear, rank, alpha)`"),
    ("add_lora.targets", "add_lora", "targets names the attention linears that get adapters (among w_q, w_k, w_v, "
     "w_o)", "each linear named in `targets`"),
    ("add_lora.blocks", "add_lora", "blocks lists the blocks whose attention gets adapters (None: every block)",
     "whose index is in `blocks` (every block when `blocks` is `None`)"),
]

_SIZE = "a size: the core's shapes and parameter counts already judge it"
_MAX_LEN = "its teeth are the stated edge case {api}.too_long (a longer sequence raises ValueError)"

# Optional arguments of the course API that are no criterion of their own, each with the reason
# (tests/course/test_criteria.py: every optional argument is an argument with teeth or listed here).
NOT_CRITERIA: dict[str, str] = {
    **{f"{api}.{size}": _SIZE for api, sizes in [
        ("Transformer", ("d_model", "num_heads", "d_ff", "num_layers")),
        ("TransformerClassifier", ("num_classes", "d_model", "num_heads", "d_ff", "num_layers")),
        ("GPT", ("d_model", "num_heads", "d_ff", "num_layers")),
        ("ModernGPT", ("d_model", "num_heads", "num_kv_heads", "d_ff", "num_layers"))] for size in sizes},
    **{f"{api}.max_len": _MAX_LEN.format(api=api) for api in (
        "PositionalEncoding", "Encoder", "Decoder", "Transformer", "GPT", "GroupedQueryAttention", "LlamaBlock",
        "ModernGPT")},
    "TransformerClassifier.max_len": "a size: it reaches the encoder's positional table (a buffer of max_len rows), "
                                     "whose shape the core compares with the contract's",
    "cached_forward.cache": "the core: every check runs a second call with the cache the first one returned",
    "make_causal_mask.device": "where the mask is made: on the CPU every answer gets it right, and a check on a GPU "
                               "tries it inside the core (the mask must live with the scores it masks)",
}

CRITERIA: dict[str, Criterion] = {}
for _kind, _entries in (("edge", _CATALOGUE), ("argument", _ARGUMENTS)):
    for _id, _api, _text, _stated in _entries:
        if _id in CRITERIA:
            raise ValueError(f"criterion {_id!r} is listed twice")
        CRITERIA[_id] = Criterion(_id, _api, _text, _stated, _kind)


def lookup(criterion: str, kind: str | None = None) -> Criterion:
    """The catalogue's entry of `criterion` (KeyError if it is not there, or is not of `kind`)."""
    entry = CRITERIA.get(criterion)
    if entry is None or (kind is not None and entry.kind != kind):
        what = {"edge": "edge case", "argument": "argument with teeth"}.get(kind or "", "criterion")
        raise KeyError(f"{what} {criterion!r} is not in the catalogue coursekit/criteria.py")
    return entry


@contextlib.contextmanager
def _tried(criterion: str, kind: str):
    entry = lookup(criterion, kind)
    try:
        yield
    except AssertionError as failure:
        what = "an edge case the exercise states" if kind == "edge" else "an argument the exercise states"
        failure.args = (f"{failure.args[0] if failure.args else ''}\n({what}: {entry.text})",)
        raise


def edge_case(criterion: str):
    """A public self-check's edge case: a failure inside says which stated edge case it was."""
    return _tried(criterion, "edge")


def argument(criterion: str):
    """A public self-check's try of an argument with teeth: a failure inside says which argument it was."""
    return _tried(criterion, "argument")
