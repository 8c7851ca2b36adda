"""Hidden check of notebook 10's trained model: `check_trained_translator(model, de_vocab=None, en_vocab=None)`.

The trained weights come out of the kernel and are loaded into the contract's `Transformer` here
(`trained_weights.py`, the same design as 07's and 08's checks); that model translates, here, with the reference's
greedy decoding, the held-out caption pairs of `test_2016_flickr` (`autograder/course/heldout_translation.py`), which
the jail does not show the kernel; the grader tokenises them and builds both vocabularies itself (the reference's
`build_vocab` on the training tokens, min_freq 2, as the contract says), and scores with the reference's
`corpus_bleu`. The student's code neither sees the sentences scored nor computes the translations. The
vocabularies, when handed in, are only compared with the grader's, to say why a model built on other ones fails.
"""
from __future__ import annotations

import functools

import torch

from autograder.checks.kit.remote import hidden_check
from autograder.checks.kit.toolkit import expected_got, fail, fetch, kind_of, start_check, type_name
from autograder.checks.kit.trained_weights import count_layers, heads_of, load_into, size_of, trained_state
from autograder.course.heldout_translation import HELDOUT_PAIRS, HELDOUT_SPLIT, heldout_pairs

# The notebook's grading-mode run of the reference (coursekit.translation_training.BUDGETS["grading"]: 06's
# Transformer with d_model 64, 4 heads, d_ff 256, 2 + 2 layers, dropout 0.1, 200 AdamW steps of about 1,500 tokens,
# noam_lr with 50 warm-up steps and factor 0.3, label smoothing 0.1), trained by that module's train_translator on
# the CPU (one thread, about 36 s of CPU), reached a greedy BLEU on the held-out pairs of 12.58, 10.16 and 12.09 for
# seeds 0, 1, 2 (2026-11-26; measured as the slow test of tests/autograder/checks/translation/test_trained.py does).
# A model that ignores its source and writes one common caption for every sentence ("a man in a blue shirt is
# standing on the street .") scores 3.52 on these pairs; the same model untrained (or trained with a loss that gives
# no gradient, which leaves it as it was) scores 0.00. The bar sits between: 6.0, about 60% of the worst seed and
# well above the constant caption.
TRAINED_MIN_BLEU = 6.0
UNTRAINED_BLEU = 0.0

MIN_FREQ = 2              # the contract's build_vocab(train tokens, min_freq=2), both languages
NOTEBOOK_HEADS = 4        # the notebook's Transformer(..., num_heads=4, ...)
MAX_DECODE_LEN = 60       # tokens a translation may have, its <eos> included (the notebook's max_decode_len)
BATCH_SIZE = 100
PAD_ID, UNK_ID, BOS_ID, EOS_ID = 0, 1, 2, 3


@functools.lru_cache(maxsize=1)
def grader_vocabularies() -> tuple[dict[str, int], dict[str, int]]:
    """(German, English) vocabularies as the contract builds them: the reference's build_vocab on the training
    tokens (coursekit.multi30k's tokenizer), min_freq 2. Built once per process; read, never changed."""
    import solutions
    from coursekit.multi30k import tokenized_multi30k

    german, english = tokenized_multi30k("train")
    return solutions.build_vocab(german, min_freq=MIN_FREQ), solutions.build_vocab(english, min_freq=MIN_FREQ)


def contract_transformer(model, state: dict[str, torch.Tensor]):
    """The contract's Transformer with the sizes of the student's weights, holding them."""
    import solutions

    label = "your trained model"
    d_model = size_of(state, "encoder.embedding.weight", 1, label)
    heads = heads_of(model.attr("encoder", "layers", "0", "self_attn", "num_heads"), d_model, NOTEBOOK_HEADS)
    with torch.device("cpu"):
        reference = solutions.Transformer(size_of(state, "encoder.embedding.weight", 0, label),
                                          size_of(state, "generator.weight", 0, label),
                                          d_model=d_model, num_heads=heads,
                                          d_ff=size_of(state, "encoder.layers.0.ffn.linear1.weight", 0, label),
                                          num_layers=count_layers(state, "encoder.layers."),
                                          max_len=size_of(state, "encoder.pos_encoding.pe", 0, label),
                                          dropout=0.0, pad_id=PAD_ID, norm_first="encoder.norm.weight" in state)
    return load_into(reference, state, label)


def _words(ids: list[int], itos: list[str]) -> list[str]:
    """Target ids -> tokens, up to the first <eos> (or padding)."""
    words = []
    for index in ids:
        if index in (EOS_ID, PAD_ID):
            break
        words.append(itos[index])
    return words


def translate(reference, sources: list[list[int]], itos: list[str], device) -> list[list[str]]:
    """Greedy translations (the reference's greedy_decode) of German id lists, as English token lists, in order."""
    import solutions
    from solutions import pad_batch

    table = reference.decoder.pos_encoding.pe.shape[0]
    order = sorted(range(len(sources)), key=lambda i: len(sources[i]))      # similar lengths batched together
    out: list[list[str]] = [[] for _ in sources]
    for start in range(0, len(order), BATCH_SIZE):
        rows = order[start:start + BATCH_SIZE]
        src = pad_batch([sources[i] or [UNK_ID] for i in rows], PAD_ID, max_len=table).to(device)   # (B, S)
        ys = solutions.greedy_decode(reference, src, min(MAX_DECODE_LEN, table), BOS_ID, EOS_ID)   # (B, L)
        for i, row in zip(rows, ys.cpu().tolist()):
            out[i] = _words(row, itos)
    return out


def trained_bleu(model, pairs: list[tuple[str, str]] | None = None) -> float:
    """Greedy BLEU of the contract's Transformer holding the handed-in model's weights on `pairs` (default: the
    held-out caption pairs), with the grader's vocabularies."""
    import solutions
    from coursekit.multi30k import tokenize_caption

    device = start_check()
    label = "your trained model"
    state = trained_state(model, label)
    reference = contract_transformer(model, state).to(device)
    de_vocab, en_vocab = grader_vocabularies()
    sizes = (reference.encoder.embedding.weight.shape[0], reference.generator.weight.shape[0])
    if sizes != (len(de_vocab), len(en_vocab)):
        fail(f"{label}'s vocabulary sizes are not those of the contract's vocabularies.",
             details=expected_got(f"{len(de_vocab)} German and {len(en_vocab)} English ids (build_vocab of the "
                                  f"training tokens, min_freq={MIN_FREQ})", f"{sizes[0]} and {sizes[1]}"),
             hint="build the model with Transformer(len(de_vocab), len(en_vocab), ...) on the notebook's "
                  "vocabularies.")
    itos = [""] * len(en_vocab)
    for token, index in en_vocab.items():
        itos[index] = token
    pairs = heldout_pairs() if pairs is None else pairs
    unk = de_vocab["<unk>"]
    sources = [[de_vocab.get(token, unk) for token in tokenize_caption(de)] for de, _ in pairs]
    references = [tokenize_caption(en) for _, en in pairs]
    with torch.no_grad():
        hypotheses = translate(reference, sources, itos, device)
    return float(solutions.corpus_bleu(hypotheses, references))


def _same_vocabulary(value, expected: dict[str, int], name: str) -> None:
    """A handed-in vocabulary (optional) must be the contract's: else the model's ids mean other words here."""
    value = fetch(value, f"the {name} vocabulary")
    if value is None:
        return
    if not isinstance(value, dict):
        fail(f"check_trained_translator needs the {name} vocabulary as a dict token -> id.",
             details=expected_got("a dict (build_vocab's result)", type_name(value)))
    if value != expected:
        differ = sorted(k for k in set(value) | set(expected) if value.get(k) != expected.get(k))
        fail(f"Your {name} vocabulary is not build_vocab(training tokens, min_freq={MIN_FREQ}) of the contract: "
             "the grader reads your model's ids with that vocabulary.",
             details=[f"{len(differ)} tokens differ, e.g. {', '.join(repr(k) for k in differ[:3])}",
                      *expected_got(f"{len(expected)} tokens", f"{len(value)} tokens")],
             hint="build both vocabularies with build_vocab on the training tokens and min_freq=2, as the notebook "
                  "does.")


@hidden_check
def check_trained_translator(model, de_vocab=None, en_vocab=None) -> None:
    """The notebook's trained translator must reach the BLEU bar on held-out captions (see the module docstring)."""
    start_check()
    info = kind_of(model, "model")
    if not info.get("module"):
        fail("check_trained_translator needs your trained model.",
             details=expected_got("an nn.Module (your Transformer)", str(info.get("type", "?"))))
    if de_vocab is not None or en_vocab is not None:
        expected_de, expected_en = grader_vocabularies()
        _same_vocabulary(de_vocab, expected_de, "German")
        _same_vocabulary(en_vocab, expected_en, "English")
    bleu = trained_bleu(model)
    if bleu < TRAINED_MIN_BLEU:
        fail(f"Your trained translator does not translate held-out captions well enough ({HELDOUT_PAIRS} pairs of "
             f"{HELDOUT_SPLIT} it never saw, greedy decoding).",
             details=expected_got(f"BLEU >= {TRAINED_MIN_BLEU:.1f} (an untrained model gets {UNTRAINED_BLEU:.0f})",
                                  f"{bleu:.2f}"),
             hint="run the training cells again after the checks of label_smoothed_cross_entropy and noam_lr "
                  "pass; keep the notebook's budget (steps, warm-up, model sizes).")
