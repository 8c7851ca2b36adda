"""Hidden check of notebook 08's trained model: `check_trained_gpt(model, chars, block_size)`.

The trained weights come out of the kernel and are loaded into the contract's `GPT` here (`trained_weights.py`);
that model's next-character loss is computed here, on the first characters of the validation split (the
contract's `text[n:]`), a slice the jail does not show the kernel (`autograder/course/heldout.py`): the student's
code neither sees the text scored nor computes the predictions.
"""
from __future__ import annotations

import math

import torch
import torch.nn.functional as F

from autograder.checks.kit.toolkit import expected_got, fail, fetch, kind_of, start_check, type_name
from autograder.checks.kit.compare import is_integer
from autograder.checks.kit.remote import hidden_check
from autograder.checks.kit.trained_weights import count_layers, heads_of, load_into, size_of, trained_state
from autograder.course.heldout import HELDOUT_CHARS, heldout_text

# The notebook's grading-mode run of the reference (coursekit.lm_training.BUDGETS["grading"]: a GPT of width 64 and
# 2 layers, 600 AdamW steps at 3e-3, block 64, batch 12) reached the validation losses recorded in
# docs/benchmarks.md ("GPT language model") for seeds 0, 1, 2 on the CPU; the counted bigram reaches 2.49 nats per
# character. The bar sits between the two: above the worst grading seed with a margin, so an honest implementation
# (another order of operations, a GPU) passes, and clearly below the bigram, so a model that learned no more than
# character pairs (or nothing: ln 65 = 4.17) fails.
TRAINED_MAX_LOSS = 2.30
BIGRAM_LOSS = 2.49
EVAL_CHARS = HELDOUT_CHARS  # the first characters of the validation split (about 310 windows of 64)
WINDOWS_PER_CALL = 32
NOTEBOOK_HEADS = 4  # the notebook's GPT(..., num_heads=4, ...)


def validation_text() -> str:
    return heldout_text()


def contract_gpt(model, state: dict[str, torch.Tensor]):
    """The contract's GPT with the sizes of the student's weights, holding them."""
    import solutions

    label = "your trained model"
    vocab_size = size_of(state, "token_embedding.weight", 0, label)
    d_model = size_of(state, "token_embedding.weight", 1, label)
    heads = heads_of(model.attr("blocks", "0", "self_attn", "num_heads"), d_model, NOTEBOOK_HEADS)
    with torch.device("cpu"):
        reference = solutions.GPT(vocab_size, d_model=d_model, num_heads=heads,
                                  d_ff=size_of(state, "blocks.0.ffn.linear1.weight", 0, label),
                                  num_layers=count_layers(state, "blocks."),
                                  max_len=size_of(state, "position_embedding.embedding.weight", 0, label),
                                  dropout=0.0)
    return load_into(reference, state, label)


def trained_loss(model, chars: list[str], block_size: int) -> float:
    """Mean next-character loss of the contract's GPT holding the handed-in model's weights, on the first
    EVAL_CHARS characters of validation."""
    label = "evaluating your trained model on the validation text"
    device = start_check()
    text = validation_text()
    index = {ch: i for i, ch in enumerate(chars)}
    unknown = sorted({ch for ch in text if ch not in index})
    if unknown:
        fail("check_trained_gpt: the character list misses characters of the validation text.",
             details=[f"missing: {''.join(unknown)[:40]!r}"],
             hint="hand in the character list of the whole text (CharVocabulary(text).chars)")
    state = trained_state(model, "your trained model")
    reference = contract_gpt(model, state).to(device)
    if reference.lm_head.weight.shape[0] != len(chars):
        fail(f"{label}: the model's vocabulary does not match the character list.",
             details=expected_got(f"{len(chars)} rows in token_embedding.weight",
                                  str(reference.lm_head.weight.shape[0])))
    if block_size > reference.max_len:
        fail(f"{label}: the block size is longer than the model's positional table.",
             details=expected_got(f"block_size <= {reference.max_len}", str(block_size)))
    ids = torch.tensor([index[ch] for ch in text])
    starts = list(range(0, len(ids) - block_size, block_size))
    total, count = 0.0, 0
    with torch.no_grad():
        for i in range(0, len(starts), WINDOWS_PER_CALL):
            chunk = torch.tensor(starts[i:i + WINDOWS_PER_CALL])
            window = chunk[:, None] + torch.arange(block_size)[None, :]                # (b, T)
            logits = reference(ids[window].to(device)).double().cpu()                  # (b, T, V)
            if not bool(torch.isfinite(logits).all()):
                fail(f"{label}: the model returned NaN or inf logits.")
            total += float(F.cross_entropy(logits.reshape(-1, len(chars)), ids[window + 1].reshape(-1),
                                           reduction="sum"))
            count += window.numel()
    return total / count


@hidden_check
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
