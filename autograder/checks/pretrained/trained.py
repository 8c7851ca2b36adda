"""Hidden check of notebook 11's graded result: `check_review_probe(head)`, the trained review probe.

The notebook fits a linear probe (`coursekit.review_probe.fit_probe`) on the last-real-token `final_hidden` features
of synthetic Yelp training reviews, computed with the student's own code (their `dequantize_q4_1` and
`llama_state_dict` load SmolLM2-135M, their `final_hidden` gives the features), and its grade cell hands in the
exported head: `hand_in("review_probe", head.to_dict())` (plain lists: mean (576), std (576), weight (5 rows of
576), bias (5); 4,037 numbers). Only those numbers come out of the kernel; nothing of the student's code runs here.

The head is read as untrusted data first (`ProbeHead.from_dict` with d = 576 and C = 5: the right keys, shapes,
finite float32 numbers, std > 0, a bounded size), before any model is loaded. Then it is scored outside the kernel
on the grader's own copy of the base model (the real GGUF file read by `coursekit.gguf_checkpoint` and decoded and
mapped by the reference `solutions.pretrained`; loaded once per grading process), on reviews the grader generates
for this submission with coursekit's synthetic generator (`draws.seed_for`: the same reviews when the same notebook
is regraded, other reviews for another submission; a fresh random seed when no salt is set), none of them a review
of the shipped train or test split, which the kernel can read. The reviews are tokenised with coursekit's SmolLM2
tokenizer and turned into features with the reference `final_hidden` through `coursekit.review_probe.
last_token_features` (the notebook's defaults), so neither the reviews, nor their labels, nor the features, nor the
predictions pass through the student's code.

All or nothing, like 07's, 08's and 10's trained checks: the criteria framework gives partial credit for stated
edge cases and arguments of an exercise, which a trained result does not have. The cascade (a head fit on the
features of a broken decoder, mapping or `final_hidden` scores near chance on the reference's features) is
intended (coursekit.api.INTENDED_CASCADES["review_probe"]).
"""
from __future__ import annotations

import functools
import secrets

import numpy as np
import torch

from autograder.checks.kit.draws import current_salt, seed_for
from autograder.checks.kit.remote import ProbeBroken, RemoteObject, StudentError, hidden_check
from autograder.checks.kit.toolkit import call, expected_got, fail, fetch, kind_of, start_check, type_name

# Calibration (2026-11-28, this machine's CPU, one torch thread; the reference pipeline as the notebook runs it at
# its grading budget): features of coursekit.review_probe.last_token_features (batch 16, max_tokens 128) with
# solutions.pretrained on the real SmolLM2-135M-Instruct Q4_1 file; a head fit_probe(features, labels) (default
# L2 prior) on balanced_subset(train labels, 200, seed) of data/yelp_synthetic/train.csv; scored on four draws of
# 250 reviews generated as this check generates them (generator seeds 101, 202, 303, 404, shipped splits excluded):
#   reference heads, training seeds 0-4:  0.404 0.404 0.468 0.436 | 0.424 0.420 0.392 0.340 |
#       0.376 0.420 0.380 0.380 | 0.468 0.384 0.424 0.412 | 0.452 0.420 0.436 0.396
#       (over the 1,000 reviews: 0.428, 0.394, 0.389, 0.422, 0.426; course-api-11.md: 0.438 on the test split)
#   the same heads fit on shuffled labels: 0.148-0.268 (over the 1,000: 0.176-0.243);
#   an all-zero head, any constant head: 0.200; random heads: 0.188-0.208;
#   heads fit on features of broken student code (training seed 0), same four draws: Q4_1 nibbles interleaved
#       0.208 0.192 0.200 0.200, final_hidden without the final norm 0.200 (every draw), attn_norm and ffn_norm
#       swapped 0.224 0.240 0.292 0.244, final_hidden without the causal mask 0.328 0.280 0.308 0.340 (its features
#       still carry the review: that mistake is left to final_hidden's own check), the weights computed in float16
#       (a harmless slip) 0.404 0.404 0.464 0.436 (as the reference).
# The bar sits 0.04 below the worst reference draw and 0.09 below the worst reference seed's mean; 300 reviews
# give a standard error of about 0.028 at accuracy 0.4, so an honest run (another order of operations, a GPU)
# passes, while a head that learned nothing from the reviews (about 0.20) does not.
TRAINED_MIN_ACCURACY = 0.30
MAJORITY_ACCURACY = 0.20

D_MODEL = 576         # SmolLM2-135M's llama.embedding_length: the features' size
NUM_CLASSES = 5       # ratings 1-5 as labels 0-4
HELDOUT_REVIEWS = 300  # their features: 47-83 ms of CPU each, 14-25 s in all (+3-6 s to load the model once)
HELDOUT_SEED = 1111    # stands for this submission's seed of the generated reviews (`draws.seed_for`)
MAX_TOKENS = 128       # last_token_features' default, the notebook's: each review cut to its first 128 tokens
LABEL = "your review probe"
_HINT_READ = ("run the notebook's probe cells again as they are: the grade cell hands in head.to_dict() of the "
              "head fit_probe returns on your features (576 numbers per review) and the 5 ratings")


# ------------------------------------------------------------------------------------------------ the head
def _plain(value, where: str):
    """A tensor or array in the payload -> a (nested) list, bounded: the export is plain lists, but a dict of the
    head's tensors holds the same numbers. Anything else is left to from_dict, which names what it got."""
    if isinstance(value, (torch.Tensor, np.ndarray)):
        from coursekit.review_probe import MAX_PROBE_NUMBERS

        size = value.numel() if isinstance(value, torch.Tensor) else value.size
        if size > MAX_PROBE_NUMBERS:
            fail(f"{LABEL} is too large to be evaluated.",
                 details=expected_got(f"at most {MAX_PROBE_NUMBERS:,} numbers in all", f"{size:,} in {where}"),
                 hint=_HINT_READ)
        if isinstance(value, torch.Tensor) and not value.is_complex() and value.dtype != torch.bool:
            return value.detach().cpu().tolist()
        if isinstance(value, np.ndarray) and value.dtype.kind in "fiu":
            return value.tolist()
    return value


def read_head(head):
    """The handed-in head as a `coursekit.review_probe.ProbeHead` of SmolLM2's size, or a readable failure; needs
    no model. `head` is to_dict()'s dict (or the ProbeHead itself, whose to_dict() runs in the kernel)."""
    from coursekit.review_probe import ProbeHead

    kind_of(head, "head")                            # handed in at all?
    payload = fetch(head, LABEL)
    if isinstance(payload, RemoteObject):            # not data: a ProbeHead (or anything else) left in the kernel
        described = type_name(payload)
        try:
            exported = bool(payload.describe(callables=["to_dict"]).get("callables", {}).get("to_dict"))
        except (StudentError, ProbeBroken):
            exported = False
        if not exported:
            fail(f"{LABEL} is not the exported head.",
                 details=expected_got("a dict with mean, std, weight and bias (head.to_dict())", described),
                 hint=_HINT_READ)
        payload = call(f"{described}.to_dict()", payload.attr("to_dict"))
    if isinstance(payload, dict):
        payload = {key: _plain(value, str(key)) for key, value in payload.items()}
    try:
        return ProbeHead.from_dict(payload, d_model=D_MODEL, num_classes=NUM_CLASSES)
    except ValueError as error:
        fail(f"{LABEL} could not be read as a linear head on SmolLM2's features.",
             details=[" ".join(str(error).split())[:300],
                      *expected_got(f"mean, std ({D_MODEL}), weight ({NUM_CLASSES} x {D_MODEL}), bias "
                                    f"({NUM_CLASSES}): finite numbers, std > 0", type_name(payload))],
             hint=_HINT_READ)


# ------------------------------------------------------------------------------------------------ the grader's side
@functools.lru_cache(maxsize=1)
def grader_model(device: str = "cpu"):
    """(model, tokenizer): the reference ModernGPT holding SmolLM2-135M-Instruct, decoded by the reference's
    dequantize_q4_1 and mapped by its llama_state_dict, in eval mode on `device`; coursekit's tokenizer of the same
    file. Loaded once per grading process (about 3 s of CPU, ~0.55 GB held); read, never changed."""
    from coursekit.gguf_checkpoint import load_tensors, model_config, read_checkpoint
    from coursekit.smollm_tokenizer import SmolTokenizer
    from solutions.modern import ModernGPT
    from solutions.pretrained import dequantize_q4_1, llama_state_dict

    checkpoint = read_checkpoint()
    config = model_config(checkpoint.metadata, max_len=MAX_TOKENS)
    with torch.device("cpu"):
        model = ModernGPT(**config)
    model.load_state_dict(llama_state_dict(load_tensors(checkpoint, dequantize_q4_1), config["num_layers"]),
                          strict=True)
    for parameter in model.parameters():
        parameter.requires_grad_(False)
    return model.to(device).eval(), SmolTokenizer.from_metadata(checkpoint.metadata)


@functools.lru_cache(maxsize=1)
def _shipped_texts() -> frozenset[str]:
    """Every review of the shipped splits (train and test), which the kernel can read."""
    from coursekit.review_probe import load_synthetic_yelp

    return frozenset(load_synthetic_yelp("train")[0]) | frozenset(load_synthetic_yelp("test")[0])


def heldout_reviews(seed: int, count: int = HELDOUT_REVIEWS) -> tuple[list[str], list[int]]:
    """`count` new synthetic reviews (texts, labels 0..4, as balanced as count allows), none of them a review of
    the shipped splits: the generator and label noise of the course's data (coursekit/data/synth.py), a seed of the
    grader's choosing."""
    from coursekit.data.synth import generate_reviews

    reviews = generate_reviews(count, seed=seed, exclude=set(_shipped_texts()))
    return [review.text for review in reviews], [review.label - 1 for review in reviews]


def reference_features(texts: list[str], device=None) -> torch.Tensor:
    """(N, 576) float32 on the CPU: the reference final_hidden of the grader's model at each review's last real
    token (the notebook's last_token_features with its defaults)."""
    from coursekit.review_probe import last_token_features
    from solutions.pretrained import final_hidden

    device = start_check() if device is None else device
    model, tokenizer = grader_model(str(device))
    return last_token_features(model, tokenizer.encode, texts, final_hidden, max_tokens=MAX_TOKENS)


def probe_accuracy(head, seed: int | None = None, count: int = HELDOUT_REVIEWS) -> float:
    """Accuracy of a ProbeHead on `count` reviews generated with `seed` (this submission's when None), with the
    reference's features of the grader's model."""
    from coursekit.review_probe import accuracy

    if seed is None:  # this submission's reviews (the same on a regrade); with no salt, new ones on every run
        seed = seed_for(HELDOUT_SEED) if current_salt() else secrets.randbits(62)
    texts, labels = heldout_reviews(seed, count)
    with torch.no_grad():
        predictions = head.predict(reference_features(texts))
    return accuracy(predictions, labels)


@hidden_check
def check_review_probe(head) -> None:
    """The notebook's review probe must beat the bar on new synthetic reviews (see the module docstring)."""
    start_check()
    probe_head = read_head(head)                       # every structural failure before the model is loaded
    score = probe_accuracy(probe_head)
    if score < TRAINED_MIN_ACCURACY:
        fail("Your review probe is not accurate enough on new synthetic reviews it has never seen.",
             tested=f"{HELDOUT_REVIEWS} reviews generated for this submission, the grader's SmolLM2 features at "
                    "each review's last token",
             details=expected_got(f"accuracy >= {TRAINED_MIN_ACCURACY:.2f} (always one rating gives "
                                  f"{MAJORITY_ACCURACY:.2f})", f"{score:.3f}"),
             hint="the probe learns from the features your dequantize_q4_1, llama_state_dict and final_hidden "
                  "compute: make their checks pass, then run the probe cells again with the notebook's settings "
                  "(200 labels, fit_probe's defaults).")
