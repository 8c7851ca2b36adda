"""Hidden check of notebook 08's trained model: `check_trained_gpt(model, chars, block_size)`.

The validation split of tinyshakespeare (the contract's `text[n:]`) is encoded here with the student's character
list, cut into non-overlapping windows of `block_size` tokens, and only the input ids go to the kernel; the logits
come back and the next-token loss is computed here, so the targets never enter the kernel.
"""
from __future__ import annotations

import math

import torch
import torch.nn.functional as F

from autograder.checks.toolkit import (
    call, describe, expected_got, fail, fetch, is_integer, kind_of, start_check, type_name,
)
from autograder.checks.remote import ProbeBroken, StudentError, probed

# The notebook's grading-mode run of the reference (coursekit.lm_training.BUDGETS["grading"]: a GPT of width 64 and
# 2 layers, 600 AdamW steps at 3e-3, block 64, batch 12) reached the validation losses recorded in
# docs/benchmarks.md ("GPT language model") for seeds 0, 1, 2 on the CPU; the counted bigram reaches 2.49 nats per
# character. The bar sits between the two: above the worst grading seed with a margin, so an honest implementation
# (another order of operations, a GPU) passes, and clearly below the bigram, so a model that learned no more than
# character pairs (or nothing: ln 65 = 4.17) fails.
TRAINED_MAX_LOSS = 2.30
BIGRAM_LOSS = 2.49
EVAL_CHARS = 20_000          # the first characters of the validation split (about 310 windows of 64)
WINDOWS_PER_CALL = 32


def validation_text() -> str:
    from coursekit.shakespeare import load_shakespeare, split_text

    return split_text(load_shakespeare())[1][:EVAL_CHARS]


def trained_loss(model, chars: list[str], block_size: int) -> float:
    """Mean next-character loss of the handed-in `model` on the first EVAL_CHARS characters of validation."""
    label = "evaluating your trained model on the validation text"
    device = start_check()
    text = validation_text()
    index = {ch: i for i, ch in enumerate(chars)}
    unknown = sorted({ch for ch in text if ch not in index})
    if unknown:
        fail("check_trained_gpt: the character list misses characters of the validation text.",
             details=[f"missing: {''.join(unknown)[:40]!r}"],
             hint="hand in the character list of the whole text (CharVocabulary(text).chars)")
    ids = torch.tensor([index[ch] for ch in text])
    starts = list(range(0, len(ids) - block_size, block_size))
    was_training = bool(describe(model, "your trained model").get("training"))
    call(label, model.attr("to"), device)
    call(label, model.attr("eval"))
    total, count = 0.0, 0
    try:
        for i in range(0, len(starts), WINDOWS_PER_CALL):
            chunk = torch.tensor(starts[i:i + WINDOWS_PER_CALL])
            window = chunk[:, None] + torch.arange(block_size)[None, :]                # (b, T)
            logits = call(label, model, ids[window].to(device), _no_grad=True)          # (b, T, V)
            if not isinstance(logits, torch.Tensor) or logits.dim() != 3 or \
                    tuple(logits.shape[:2]) != tuple(window.shape) or logits.shape[2] != len(chars):
                fail(f"{label}: the model must return logits of shape (B, T, vocab_size).",
                     details=expected_got(f"a tensor of shape ({len(window)}, {block_size}, {len(chars)})",
                                          str(tuple(logits.shape)) if isinstance(logits, torch.Tensor)
                                          else type_name(logits)))
            logits = logits.detach().double().cpu()
            if not bool(torch.isfinite(logits).all()):
                fail(f"{label}: the model returned NaN or inf logits.")
            total += float(F.cross_entropy(logits.reshape(-1, len(chars)), ids[window + 1].reshape(-1),
                                           reduction="sum"))
            count += window.numel()
    finally:
        try:
            model.attr("train")(was_training)
        except (StudentError, ProbeBroken):
            pass
    return total / count


@probed
def check_trained_gpt(model, chars, block_size) -> None:
    """The notebook's trained character GPT must clearly beat the bigram baseline on the validation text."""
    start_check()
    info = kind_of(model, "model")
    if not info.get("module"):
        fail("check_trained_gpt needs your trained model.",
             details=expected_got("an nn.Module (your GPT)", str(info.get("type", "?"))))
    chars = fetch(chars, "the character list")
    if isinstance(chars, str):
        chars = list(chars)
    if not isinstance(chars, (list, tuple)) or not chars or not all(isinstance(c, str) and len(c) == 1
                                                                    for c in chars) \
            or len(set(chars)) != len(chars):
        fail("check_trained_gpt needs the characters of the vocabulary in id order.",
             details=expected_got("a list of distinct single characters (CharVocabulary(text).chars)",
                                  type_name(chars)))
    block_size = fetch(block_size, "block_size")
    max_len = fetch(model.attr("max_len"), "the model's max_len")
    if not is_integer(block_size) or block_size < 1 or (is_integer(max_len) and block_size > max_len):
        fail("check_trained_gpt needs the block size the model was trained with (at most its max_len).",
             details=expected_got("an int between 1 and model.max_len", repr(block_size)[:40]))
    loss = trained_loss(model, list(chars), int(block_size))
    if loss > TRAINED_MAX_LOSS:
        fail("Your trained GPT does not predict the validation text well enough.",
             details=expected_got(f"a loss <= {TRAINED_MAX_LOSS:.2f} nats per character (the bigram baseline "
                                  f"reaches {BIGRAM_LOSS:.2f}, guessing uniformly {math.log(len(chars)):.2f})",
                                  f"{loss:.3f}"),
             hint="run the training cells again after the checks of the exercises above pass; keep the "
                  "notebook's budget (steps, learning rate, block size).")
