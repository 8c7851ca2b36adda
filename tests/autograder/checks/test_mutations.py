"""Mechanical mutants of the reference must fail their hidden checks (notebooks 01-06 and 08-11).

A check has teeth on an argument only if an answer that misuses that argument fails. Rather than writing such
answers by hand, this test makes them mechanically from the reference in `solutions/` for every API name of
notebooks 01-06 and requires each check to reject each of them:

    swap         two arguments exchanged (key <-> value, query <-> key, x <-> memory, tgt_mask <-> memory_mask,
                 two integer sizes of a constructor, bos_id <-> eos_id ...)
    replace      one argument replaced by another (value := key: the value input ignored ...)
    default      an optional argument dropped, i.e. the call made with its default (no mask, no pad_id, the
                 default bos_id/eos_id, norm_first=False, max_len=512 ...)
    ignore       a required argument ignored: passed as None (Transformer.decode without its src_mask)
    transpose    the last two dims of an output tensor transposed (the checks use shapes where this matters,
                 including square ones: causal masks, self-attention weights)
    swap_outputs the two returned values in swapped order
    reverse      a returned list (or 1-D array: 11's dequantised weights) in reverse order

Functions are wrapped; module classes are subclassed, with `__init__`, `forward` (and for the Transformer also
`encode` and `decode`, which the check calls directly) doing the mutation around the reference's own method. A
control test wraps every subject with the identity "mutation": it must still pass, so the mutants fail because of
what they change and not because of the wrapping.

Not mutated, on purpose (see `NOT_MUTATED`, which the completeness test reads):
- `greedy_decode(use_cache=...)`: a switch of the reference only (the student's signature has no such argument);
  both of its paths compute the same tokens.
- `make_causal_mask(device=...)` on a machine without CUDA: the check passes the grading device, which is then the
  CPU, i.e. where the mask is made anyway. With CUDA the mutant is generated (and must fail).
- Swaps of arguments of different kinds (a tensor with an int, ids with a float tensor) are not generated: they
  cannot even run. Same-kind pairs are swapped even where their shapes differ (key/value in
  scaled_dot_product_attention, d_k != d_v): those mutants fail by shape or by an error, as a student's would.
"""
from __future__ import annotations

import dataclasses
import inspect
import itertools

import numpy as np
import pytest
import torch

import solutions
import solutions.pretrained
from autograder.checks import (
    attention, embeddings, encoder, gpt, modern, multi_head, positional, pretrained, transformer, translation,
)

HAS_CUDA = torch.cuda.is_available()


@dataclasses.dataclass(frozen=True)
class Spec:
    """The mutations of one function or method: argument groups to swap / replace within, optional arguments to
    drop, outputs to transpose (None = the output itself, else an index into the returned tuple)."""

    swap: tuple = ()
    replace: tuple = ()
    defaults: tuple = ()
    ignore: tuple = ()
    transpose: tuple = ()
    swap_outputs: bool = False
    reverse: bool = False


@dataclasses.dataclass(frozen=True)
class Mutation:
    where: str        # "call" (a function) or the method of a module class ("__init__", "forward", ...)
    kind: str         # none (the control), swap, replace, default, ignore, transpose, swap_outputs, reverse
    names: tuple = ()

    @property
    def id(self) -> str:
        """e.g. forward-swap_key_value, forward-replace_value_by_key, forward-default_mask, call-transpose_output1"""
        names = [str(n) for n in self.names]
        if self.kind == "swap":
            what = "swap_" + "_".join(names)
        elif self.kind == "replace":
            what = f"replace_{names[0]}_by_{names[1]}"
        elif self.kind == "transpose":
            what = "transpose_output" + ("" if self.names == (None,) else names[0])
        else:
            what = "_".join([self.kind, *names])
        return f"{self.where}-{what}"


QKV = ("query", "key", "value")
STACK_SIZES = ("vocab_size", "d_model", "num_heads", "d_ff", "num_layers")
BLOCK_SIZES = ("d_model", "num_heads", "d_ff")

# API name -> (check, reference, {"call" or method: Spec})
SUBJECTS = {
    # 01 embeddings
    "build_vocab": (embeddings.check_build_vocab, solutions.build_vocab,
                    {"call": Spec(defaults=("min_freq", "specials"))}),
    "encode": (embeddings.check_encode, solutions.encode, {"call": Spec(reverse=True)}),
    "pad_batch": (embeddings.check_pad_batch, solutions.pad_batch,
                  {"call": Spec(swap=(("pad_id", "max_len"),), defaults=("pad_id", "max_len"), transpose=(None,))}),
    "TokenEmbedding": (embeddings.check_token_embedding, solutions.TokenEmbedding,
                       {"__init__": Spec(swap=(("vocab_size", "d_model", "padding_idx"),), defaults=("padding_idx",)),
                        "forward": Spec(transpose=(None,))}),
    "embedding_matrix_from_word2vec": (embeddings.check_embedding_matrix_from_word2vec,
                                       solutions.embedding_matrix_from_word2vec, {"call": Spec(transpose=(None,))}),
    "attention_over_words": (embeddings.check_attention_over_words, solutions.attention_over_words,
                             {"call": Spec(swap_outputs=True)}),
    # 02 positional
    "sinusoidal_positional_encoding": (positional.check_sinusoidal_positional_encoding,
                                       solutions.sinusoidal_positional_encoding,
                                       {"call": Spec(swap=(("max_len", "d_model"),), transpose=(None,))}),
    "PositionalEncoding": (positional.check_positional_encoding, solutions.PositionalEncoding,
                           {"__init__": Spec(swap=(("d_model", "max_len"),), defaults=("max_len", "dropout")),
                            "forward": Spec(transpose=(None,))}),
    "LearnedPositionalEmbedding": (positional.check_learned_positional_embedding,
                                   solutions.LearnedPositionalEmbedding,
                                   {"__init__": Spec(swap=(("max_len", "d_model"),)),
                                    "forward": Spec(transpose=(None,))}),
    # 03 attention
    "make_padding_mask": (attention.check_make_padding_mask, solutions.make_padding_mask,
                          {"call": Spec(defaults=("pad_id",), transpose=(None,))}),
    "make_causal_mask": (attention.check_make_causal_mask, solutions.make_causal_mask,
                         {"call": Spec(defaults=("device",) if HAS_CUDA else (), transpose=(None,))}),
    "scaled_dot_product_attention": (attention.check_scaled_dot_product_attention,
                                     solutions.scaled_dot_product_attention,
                                     {"call": Spec(swap=(QKV,), replace=(QKV,), defaults=("mask",), transpose=(0, 1),
                                                   swap_outputs=True)}),
    # 04 multi-head
    "split_heads": (multi_head.check_split_heads, solutions.split_heads, {"call": Spec(transpose=(None,))}),
    "merge_heads": (multi_head.check_merge_heads, solutions.merge_heads, {"call": Spec(transpose=(None,))}),
    "MultiHeadAttention": (multi_head.check_multi_head_attention, solutions.MultiHeadAttention,
                           {"__init__": Spec(swap=(("d_model", "num_heads"),), defaults=("bias", "dropout")),
                            "forward": Spec(swap=(QKV,), replace=(QKV,), defaults=("mask",), transpose=(0, 1),
                                            swap_outputs=True)}),
    # 05 encoder
    "PositionwiseFeedForward": (encoder.check_positionwise_feed_forward, solutions.PositionwiseFeedForward,
                                {"__init__": Spec(swap=(("d_model", "d_ff"),), defaults=("dropout",)),
                                 "forward": Spec(transpose=(None,))}),
    "EncoderBlock": (encoder.check_encoder_block, solutions.EncoderBlock,
                     {"__init__": Spec(swap=(BLOCK_SIZES,), defaults=("norm_first", "dropout")),
                      "forward": Spec(defaults=("mask",), transpose=(None,))}),
    "Encoder": (encoder.check_encoder, solutions.Encoder,
                {"__init__": Spec(swap=(STACK_SIZES,), defaults=("max_len", "norm_first", "dropout")),
                 "forward": Spec(defaults=("src_mask",), transpose=(None,))}),
    # 06 transformer
    "DecoderBlock": (transformer.check_decoder_block, solutions.DecoderBlock,
                     {"__init__": Spec(swap=(BLOCK_SIZES,), defaults=("norm_first", "dropout")),
                      "forward": Spec(swap=(("x", "memory"), ("tgt_mask", "memory_mask")), replace=(("x", "memory"),),
                                      defaults=("tgt_mask", "memory_mask"), transpose=(None,))}),
    "Decoder": (transformer.check_decoder, solutions.Decoder,
                {"__init__": Spec(swap=(STACK_SIZES,), defaults=("max_len", "norm_first", "dropout")),
                 "forward": Spec(swap=(("tgt_mask", "memory_mask"),), defaults=("tgt_mask", "memory_mask"),
                                 transpose=(None,))}),
    "Transformer": (transformer.check_transformer, solutions.Transformer,
                    {"__init__": Spec(swap=(("src_vocab_size", "tgt_vocab_size"),
                                            ("d_model", "num_heads", "d_ff", "num_layers")),
                                      defaults=("d_model", "num_heads", "d_ff", "num_layers", "max_len", "pad_id",
                                                "norm_first", "dropout")),
                     "forward": Spec(swap=(("src_ids", "tgt_ids"),), transpose=(None,)),
                     "encode": Spec(transpose=(0, 1), swap_outputs=True),
                     "decode": Spec(ignore=("src_mask",), transpose=(None,))}),
    "greedy_decode": (transformer.check_greedy_decode, solutions.greedy_decode,
                      {"call": Spec(swap=(("max_len", "bos_id", "eos_id"),), defaults=("bos_id", "eos_id"),
                                    transpose=(None,))}),
    # 08 gpt
    "train_bpe": (gpt.check_train_bpe, solutions.train_bpe, {"call": Spec(reverse=True)}),
    "bpe_encode": (gpt.check_bpe_encode, solutions.bpe_encode, {"call": Spec(reverse=True)}),
    "bpe_decode": (gpt.check_bpe_decode, solutions.bpe_decode, {"call": Spec(swap=(("ids", "merges"),))}),
    "GPT": (gpt.check_gpt, solutions.GPT,
            {"__init__": Spec(swap=(STACK_SIZES, ("num_layers", "max_len")),
                              defaults=("d_model", "num_heads", "d_ff", "num_layers", "max_len", "dropout")),
             "forward": Spec(transpose=(None,))}),
    "get_batch": (gpt.check_get_batch, solutions.get_batch,
                  {"call": Spec(swap=(("block_size", "batch_size"),), defaults=("generator",), transpose=(0, 1),
                                swap_outputs=True)}),
    "lm_loss": (gpt.check_lm_loss, solutions.lm_loss, {"call": Spec(swap=(("logits", "targets"),))}),
    "estimate_loss": (gpt.check_estimate_loss, solutions.estimate_loss,
                      {"call": Spec(ignore=("block_size", "device") if HAS_CUDA else ("block_size",))}),
    "lr_at": (gpt.check_lr_at, solutions.lr_at,
              {"call": Spec(swap=(("step", "warmup_steps", "max_steps"), ("max_lr", "min_lr")),
                            defaults=("min_lr",))}),
    "train_step": (gpt.check_train_step, solutions.train_step,
                   {"call": Spec(swap=(("x", "y"),), defaults=("grad_clip",), ignore=("grad_clip",))}),
    "sample_next_token": (gpt.check_sample_next_token, solutions.sample_next_token,
                          {"call": Spec(defaults=("temperature", "top_k", "generator"))}),
    "generate": (gpt.check_generate, solutions.generate,
                 {"call": Spec(swap=(("temperature", "top_k"),), defaults=("temperature", "top_k", "generator"),
                               transpose=(None,))}),
    # 09 the modern block
    "RMSNorm": (modern.check_rmsnorm, solutions.RMSNorm,
                {"__init__": Spec(defaults=("eps",)), "forward": Spec(transpose=(None,))}),
    "rotary_cos_sin": (modern.check_rotary_cos_sin, solutions.rotary_cos_sin,
                       {"call": Spec(swap=(("max_len", "d_head"),), defaults=("base",), transpose=(0, 1),
                                     swap_outputs=True)}),
    "apply_rotary": (modern.check_apply_rotary, solutions.apply_rotary,
                     {"call": Spec(swap=(("cos", "sin"),), replace=(("cos", "sin"),), transpose=(None,))}),
    "SwiGLU": (modern.check_swi_glu, solutions.SwiGLU,
               {"__init__": Spec(swap=(("d_model", "d_ff"),), defaults=("dropout",)),
                                 "forward": Spec(transpose=(None,))}),
    "GroupedQueryAttention": (modern.check_grouped_query_attention, solutions.GroupedQueryAttention,
                              {"__init__": Spec(swap=(("d_model", "num_heads", "num_kv_heads", "max_len"),),
                                                defaults=("max_len", "rope_base")),
                               "forward": Spec(defaults=("mask",), transpose=(None,))}),
    "LlamaBlock": (modern.check_llama_block, solutions.LlamaBlock,
                   {"__init__": Spec(swap=(("d_model", "num_heads", "num_kv_heads", "d_ff", "max_len"),
                                           ("rope_base", "eps")),
                                     defaults=("max_len", "rope_base", "eps")),
                    "forward": Spec(defaults=("mask",), transpose=(None,))}),
    "ModernGPT": (modern.check_modern_gpt, solutions.ModernGPT,
                  {"__init__": Spec(swap=(("d_model", "num_heads", "num_kv_heads", "d_ff", "num_layers", "max_len"),),
                                    defaults=("d_model", "num_heads", "num_kv_heads", "d_ff", "num_layers",
                                              "max_len", "rope_base", "eps")),
                   "forward": Spec(transpose=(None,))}),
    # 10 translate
    "label_smoothed_cross_entropy": (translation.check_label_smoothed_cross_entropy,
                                     solutions.label_smoothed_cross_entropy,
                                     {"call": Spec(swap=(("logits", "targets"), ("smoothing", "ignore_index")),
                                                   defaults=("smoothing", "ignore_index"))}),
    "noam_lr": (translation.check_noam_lr, solutions.noam_lr,
                {"call": Spec(swap=(("step", "d_model", "warmup_steps"),), defaults=("factor",))}),
    "beam_search": (translation.check_beam_search, solutions.beam_search,
                    {"call": Spec(swap=(("beam_size", "max_len"), ("bos_id", "eos_id")),
                                  defaults=("bos_id", "eos_id", "length_penalty"), reverse=True)}),
    "corpus_bleu": (translation.check_corpus_bleu, solutions.corpus_bleu,
                    {"call": Spec(swap=(("hypotheses", "references"),), defaults=("max_n",))}),
    # 11 pre-trained
    "dequantize_q4_1": (pretrained.check_dequantize_q4_1, solutions.pretrained.dequantize_q4_1,
                        {"call": Spec(reverse=True)}),
    "llama_state_dict": (pretrained.check_llama_state_dict, solutions.pretrained.llama_state_dict,
                         {"call": Spec(ignore=("num_layers",))}),
    "cached_forward": (pretrained.check_cached_forward, solutions.pretrained.cached_forward,
                       {"call": Spec(defaults=("cache",), transpose=(0,), swap_outputs=True)}),
    "cached_generate": (pretrained.check_cached_generate, solutions.pretrained.cached_generate,
                        {"call": Spec(swap=(("max_new_tokens", "eos_id"),), defaults=("eos_id",), reverse=True)}),
    "LoRALinear": (pretrained.check_lora_linear, solutions.pretrained.LoRALinear,
                   {"__init__": Spec(defaults=("rank", "alpha")), "forward": Spec(transpose=(None,))}),
    "add_lora": (pretrained.check_add_lora, solutions.pretrained.add_lora,
                 {"call": Spec(defaults=("rank", "alpha", "targets", "blocks"))}),
    "final_hidden": (pretrained.check_final_hidden, solutions.pretrained.final_hidden,
                     {"call": Spec(transpose=(None,))}),
}

# (API name, argument) -> why dropping that optional argument is not a mutant (see the module docstring)
NOT_MUTATED = {
    ("greedy_decode", "use_cache"): "a switch of the reference only, not part of the exercise's signature",
}
if not HAS_CUDA:
    NOT_MUTATED[("make_causal_mask", "device")] = "without CUDA the grading device is the CPU, the default"
    # estimate_loss(device=None): `.to(None)` leaves the windows where they are, the CPU, which is then the device



def mutations(spec: Spec, where: str) -> list[Mutation]:
    out = []
    for group in spec.swap:
        out += [Mutation(where, "swap", pair) for pair in itertools.combinations(group, 2)]
    for group in spec.replace:
        out += [Mutation(where, "replace", pair) for pair in itertools.permutations(group, 2)]
    out += [Mutation(where, "default", (name,)) for name in spec.defaults]
    out += [Mutation(where, "ignore", (name,)) for name in spec.ignore]
    out += [Mutation(where, "transpose", (index,)) for index in spec.transpose]
    if spec.swap_outputs:
        out.append(Mutation(where, "swap_outputs"))
    if spec.reverse:
        out.append(Mutation(where, "reverse"))
    return out


# ----------------------------------------------------------------------------------------------- the mutants
def _mutate_arguments(signature: inspect.Signature, mutation: Mutation, args, kwargs):
    if mutation.kind not in ("swap", "replace", "default", "ignore"):
        return args, kwargs
    bound = signature.bind(*args, **kwargs)
    bound.apply_defaults()
    arguments = bound.arguments
    if mutation.kind == "swap":
        a, b = mutation.names
        arguments[a], arguments[b] = arguments[b], arguments[a]
    elif mutation.kind == "replace":
        target, source = mutation.names
        arguments[target] = arguments[source]
    elif mutation.kind == "ignore":
        name, = mutation.names
        arguments[name] = None
    else:
        name, = mutation.names
        arguments[name] = signature.parameters[name].default
    return bound.args, bound.kwargs


class MutationError(Exception):
    """The mutation does not apply to what the reference returned (a mistake in SUBJECTS, not in the check)."""


def _transposed(x):
    if not isinstance(x, torch.Tensor) or x.dim() < 2:
        raise MutationError(f"cannot transpose a {type(x).__name__}")
    return x.transpose(-2, -1)


def _mutate_output(result, mutation: Mutation):
    if mutation.kind == "transpose":
        index, = mutation.names
        if index is None:
            return _transposed(result)
        items = list(result)
        items[index] = _transposed(items[index])
        return tuple(items)
    if mutation.kind == "swap_outputs":
        if not isinstance(result, tuple) or len(result) != 2:
            raise MutationError(f"cannot swap the outputs of a {type(result).__name__}")
        first, second = result
        return second, first
    if mutation.kind == "reverse":
        if isinstance(result, np.ndarray) and result.ndim == 1:   # 11's dequantised weights, in reverse order
            return np.ascontiguousarray(result[::-1])
        if not isinstance(result, list):
            raise MutationError(f"cannot reverse a {type(result).__name__}")
        return list(reversed(result))
    return result


def _wrap(function, mutation: Mutation):
    """`function` with `mutation` applied to its arguments (bound to its signature, defaults filled in) and result."""
    signature = inspect.signature(function)

    def mutant(*args, **kwargs):
        args, kwargs = _mutate_arguments(signature, mutation, args, kwargs)
        return _mutate_output(function(*args, **kwargs), mutation)

    mutant.__name__ = getattr(function, "__name__", "mutant")
    return mutant


def make_mutant(reference, mutations_by_where: list[Mutation]):
    """A function wrapping `reference`, or a subclass of the reference class whose methods are wrapped."""
    if not isinstance(reference, type):
        mutation, = mutations_by_where
        return _wrap(reference, mutation)
    methods = {m.where: _wrap(getattr(reference, m.where), m) for m in mutations_by_where}
    return type(reference.__name__, (reference,), methods)


def _cases():
    for api, (_check, _reference, specs) in SUBJECTS.items():
        for where, spec in specs.items():
            for mutation in mutations(spec, where):
                yield pytest.param(api, mutation, id=f"{api}-{mutation.id}")


# ------------------------------------------------------------------------------------------------------ tests
@pytest.mark.parametrize("api, mutation", list(_cases()))
def test_mutant_fails_its_check(api, mutation):
    check, reference, _specs = SUBJECTS[api]
    mutant = make_mutant(reference, [mutation])
    with pytest.raises(AssertionError) as failure:
        check(mutant)
    assert "MutationError" not in str(failure.value), f"the mutation itself is broken: {failure.value}"


@pytest.mark.parametrize("api", list(SUBJECTS))
def test_identity_wrapper_passes(api):
    """The wrapping alone (every mutated method wrapped, nothing changed) passes: mutants fail for what they do."""
    check, reference, specs = SUBJECTS[api]
    check(make_mutant(reference, [Mutation(where, "none") for where in specs]))


TOPICS = ("embeddings", "positional", "attention", "multi_head", "encoder", "transformer", "gpt", "modern",
          "translation", "pretrained")


def test_every_check_of_the_topic_modules_has_mutants():
    """Every check in the topic modules of notebooks 01-06 (other modules, e.g. 07's classifier, have their own)."""
    from autograder.checks import _TOPIC_OF

    # the exercises' checks of those topics' folders (06's cache and the trained models have their own tests)
    names = {name.removeprefix("check_") for name, module in _TOPIC_OF.items()
             if module.split(".")[0] in TOPICS and module.split(".")[1] not in ("kv_cache", "trained")}
    checks_of = {check.__name__.removeprefix("check_") for check, _reference, _specs in SUBJECTS.values()}
    assert checks_of == names
    for api, (_check, _reference, specs) in SUBJECTS.items():
        assert any(mutations(spec, where) for where, spec in specs.items()), f"{api} has no mutant"


@pytest.mark.parametrize("api", list(SUBJECTS))
def test_every_optional_argument_is_mutated_or_excluded_with_a_reason(api):
    _check, reference, specs = SUBJECTS[api]
    for where in specs if isinstance(reference, type) else ["call"]:
        function = getattr(reference, where) if isinstance(reference, type) else reference
        optional = [name for name, p in inspect.signature(function).parameters.items()
                    if p.default is not inspect.Parameter.empty]
        spec = specs.get(where, Spec())
        for name in optional:
            assert name in spec.defaults or (api, name) in NOT_MUTATED, \
                f"{api}.{where}: optional argument `{name}` is neither dropped by a mutant nor excluded with a reason"
