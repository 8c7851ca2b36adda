"""Hidden check of notebook 11's features part: `final_hidden(model, ids)`, and the small ModernGPT that notebook 11's
checks lend to the student's functions (`kernel_models`; the LoRA part's add_lora check uses it too).

The model. The student's functions run in the jailed kernel, so the model they are given is built there: the grader
sends the course's stand-ins of 09's model (`autograder/checks/stand_ins.py`: RMSNorm, GroupedQueryAttention, SwiGLU,
LlamaBlock, ModernGPT) and a gradient probe, compiled (`stand_ins.compiled_for`: the kernel runs them but never
holds their source), as one module (`remote.define`), builds a ModernGPT of this submission's sizes from it and loads
the grader's weights. These are 09's exercises, which notebook 11 hands every student in its provided module anyway;
the module is switched off when the check is over (`unlend`). The grader's own copy of the model is the reference's
`solutions.modern.ModernGPT` with the same weights: the expected values come from the reference
(`solutions.pretrained`), the known mistakes from `mistakes_features.py`.

final_hidden is judged on a ModernGPT drawn for this submission: 2 or 3 blocks of 4 query heads over 2 key/value
heads, a rotary base and an RMSNorm eps far from their defaults, the embedding and the blocks' matrices scaled up so
that the final norm changes the hidden states a lot; ids of B >= 2 different rows, T >= 5. It checks, in order: the
shape (B, T, d_model) (the hidden states, not the logits); that position t does not depend on the tokens after it
(the hidden states of a prefix of the ids are those of the whole ids at the prefix's positions); the values against
the reference (diagnosed with the model without its final norm, or without the causal mask); that
model.lm_head(final_hidden(model, ids)) is model(ids); and that the model's mode and gradients are the caller's
(called in training mode with gradients on, the result carries gradients and the model stays in training mode;
called in eval mode it stays in eval mode).
"""
from __future__ import annotations

import contextlib

import torch
from torch import nn

from autograder.checks.kit.compare import (
    as_tensor, describe, expect_tensor, from_table, max_difference, values_close,
)
from autograder.checks.kit.draws import pick
from autograder.checks.kit.inputs import reference
from autograder.checks.kit.remote import ProbeBroken, StudentError, define, hidden_check, unlend
from autograder.checks.kit.toolkit import (
    call, expect_callable, fail, grader_step, randint, seeded, shape_of, start_check,
)
from autograder.checks.pretrained import mistakes_features as M
from autograder.checks.stand_ins import compiled_for, source_for
from coursekit.tolerance import ROTARY_LOOSER

FEATURES_SEED = 190


KERNEL_NAMES = ["ModernGPT", "_output_requires_grad"]   # the stand-ins of 09's model and the gradient probe


def kernel_source() -> str:
    """The module sent to the kernel (its text; the kernel receives it compiled)."""
    return source_for(KERNEL_NAMES)


class KernelModels:
    """The module `kernel_source()` defined in the student's kernel: ModernGPTs holding the grader's weights, and
    the gradient probe."""

    def __init__(self, channel, module):
        self.channel, self.module = channel, module

    def modern_gpt(self, config: dict, state: dict, device, training: bool = False):
        """A ModernGPT(**config) in the kernel with the weights `state`, on `device`, in training mode or not."""
        def make():
            model = self.module.attr("ModernGPT")(**config)
            missing, unexpected = model.load_state(state)
            if missing or unexpected:
                raise ProbeBroken(f"the lent model did not take the grader's weights ({missing + unexpected})")
            model.attr("to")(device)
            model.attr("train")(training)
            return model

        return grader_step("a small ModernGPT lent to your function", make)

    def output_requires_grad(self, label: str, function, *args, tested: str) -> bool:
        return call(label, self.module.attr("_output_requires_grad"), function, *args, tested=tested)


@contextlib.contextmanager
def kernel_models(channel):
    """`KernelModels` for one check; everything it sent is switched off when the check is over."""
    module = grader_step("building a small ModernGPT in your notebook", lambda: define(channel, compiled_for(KERNEL_NAMES)))
    try:
        yield KernelModels(channel, module)
    finally:
        with contextlib.suppress(StudentError, ProbeBroken):
            unlend(channel)


def reference_model(seed: int, config: dict, embedding_scale: float = 1.0, block_scale: float = 1.0):
    """The reference ModernGPT(**config) under this submission's seed: RMSNorm weights N(1, 0.3) (so that every norm
    matters), the embedding and the blocks' matrices multiplied by the scales; in eval mode."""
    solution = reference("modern")
    with seeded(seed), torch.no_grad():
        model = solution.ModernGPT(**config)
        for name, parameter in model.named_parameters():
            if parameter.dim() == 1:
                nn.init.normal_(parameter, 1.0, 0.3)
            elif name == "token_embedding.weight":
                parameter.mul_(embedding_scale)
            elif name.startswith("blocks."):
                parameter.mul_(block_scale)
    return model.eval()


def state_of(model: nn.Module) -> dict:
    """The weights to load into the kernel's copy (the tied embedding under both of its names)."""
    return {name: value.detach().cpu().clone() for name, value in model.state_dict().items()}


def shown_config(config: dict) -> str:
    """`ModernGPT(19, d_model=24, ..., rope_base=500, eps=0.05)` for messages."""
    extra = ", ".join(f"{k}={v:g}" if isinstance(v, float) else f"{k}={v}"
                      for k, v in config.items() if k != "vocab_size")
    return f"ModernGPT({config['vocab_size']}, {extra})"


# ================================================================================================== final_hidden
def features_config() -> dict:
    """This submission's model: every size different from the others and from the defaults, 4 query heads over 2
    key/value heads (d_head even), a rotary base and an eps far from their defaults."""
    return {"vocab_size": pick("final_hidden.vocab", [19, 23, 29, 17]),
            "d_model": pick("final_hidden.d_model", [24, 48, 40]),
            "num_heads": 4, "num_kv_heads": 2,
            "d_ff": pick("final_hidden.d_ff", [36, 20, 44, 52]),
            "num_layers": pick("final_hidden.num_layers", [2, 3]),
            "max_len": pick("final_hidden.max_len", [16, 14, 18]),
            "rope_base": pick("final_hidden.rope_base", [500.0, 2000.0, 100000.0, 200.0]),
            "eps": pick("final_hidden.eps", [0.05, 0.02, 0.1, 0.03])}


def _hidden(final_hidden, model, ids, tested: str):
    got = call("final_hidden", final_hidden, model, ids.clone(), _no_grad=True, tested=tested)
    return as_tensor(got, "final_hidden's result", tested)


def _expect_causal(final_hidden, model, ids, got, t: int, device) -> None:
    """The hidden states of the prefix ids[:, :t] are those of the whole ids at its positions: position t does not
    depend on the tokens after it."""
    tested = f"final_hidden(the same model, ids[:, :{t}]) against final_hidden(model, ids)[:, :{t}]"
    prefix = _hidden(final_hidden, model, ids[:, :t].contiguous(), tested)
    if tuple(prefix.shape) != (got.size(0), t, got.size(2)):
        fail("final_hidden's result on a prefix of the ids has the wrong shape.", tested=tested,
             details=[f"expected shape {(got.size(0), t, got.size(2))}, got {tuple(prefix.shape)}"])
    if not values_close(prefix, got[:, :t].to(prefix.device), device, looser=ROTARY_LOOSER):
        fail("final_hidden's hidden states at the first positions change when the tokens after them are left out.",
             tested=tested, details=[f"largest difference {max_difference(prefix, got[:, :t]):.3g}"],
             mistake="final_hidden.no_causal_mask")


def _training(model, label: str) -> bool:
    return bool(describe(model, label).get("training"))


@hidden_check
def check_final_hidden(final_hidden) -> None:
    """final_hidden(model, ids (B, T)) -> (B, T, d_model): the token embedding, every block with the causal mask,
    then model.norm; gradients and the model's mode are the caller's."""
    device = start_check()
    expect_callable(final_hidden, "final_hidden")
    solution = reference("pretrained")
    config = features_config()
    ref = reference_model(FEATURES_SEED, config, embedding_scale=pick("final_hidden.embedding_scale", [3.0, 2.5, 4.0]),
                          block_scale=pick("final_hidden.block_scale", [2.0, 1.5, 2.5])).to(device)
    B_ = pick("final_hidden.batch", [2, 3])
    T_ = pick("final_hidden.length", [9, 7, 8, 10])
    t = pick("final_hidden.prefix", [4, 3, 5])                      # 3 <= t < T: a prefix with positions after it
    ids = randint(0, config["vocab_size"], (B_, T_), seed=FEATURES_SEED + 1, device=device)
    shown = shown_config(config)
    with kernel_models(final_hidden.channel) as kernel:
        model = kernel.modern_gpt(config, state_of(ref), device)
        tested = f"final_hidden(a small {shown} in eval mode, ids {shape_of(ids)})"
        got = _hidden(final_hidden, model, ids, tested)
        with torch.no_grad():
            expected = solution.final_hidden(ref, ids)                                    # (B, T, d_model)
            logits = ref(ids)                                                             # (B, T, V)
        shape_hint = "(B, T, d_model): the hidden states after model.norm, before lm_head (not the logits)"
        if tuple(got.shape) != tuple(expected.shape) or not bool(torch.isfinite(got).all()):
            expect_tensor(got, expected, "final_hidden's result", device, tested=tested, shape_hint=shape_hint)
        _expect_causal(final_hidden, model, ids, got, t, device)
        expect_tensor(got, expected, "final_hidden's result", device, tested=tested, looser=ROTARY_LOOSER,
                      shape_hint=shape_hint, mistakes=lambda: from_table(
                          M.TABLE, lambda variant, switches: variant(ref, ids, **switches)))
        with torch.no_grad():
            head = ref.lm_head(got.to(device))
        expect_tensor(head, logits, "model.lm_head(final_hidden(model, ids))", device, tested=tested,
                      looser=ROTARY_LOOSER, note="lm_head applied to final_hidden's result must give model(ids)")
        if _training(model, "the lent model"):
            fail("final_hidden switched the model to training mode.", tested=tested, mistake="final_hidden.sets_mode")
        # the model's mode and gradients are the caller's: in training mode with gradients on
        call("model.train()", model.attr("train"))
        tested = f"final_hidden(a small {shown} in training mode, ids {shape_of(ids)}) with gradients on"
        keeps = kernel.output_requires_grad("final_hidden", final_hidden, model, ids.clone(), tested=tested)
        if keeps is not True:
            fail("final_hidden's result carries no gradients, although the model's parameters require them.",
                 tested=tested, mistake="final_hidden.no_grad")
        if not _training(model, "the lent model"):
            fail("final_hidden switched the model to eval mode.", tested=tested, mistake="final_hidden.sets_mode")
