"""The public check of 06's key/value cache (coursekit/checks/transformer/kv_cache.py)."""
from __future__ import annotations

import pytest

from coursekit.checks import CheckFailed
from solutions import Transformer, greedy_decode


def greedy_decode_uncached(model, src_ids, max_len, bos_id=2, eos_id=3):
    return greedy_decode(model, src_ids, max_len, bos_id, eos_id, use_cache=False)


def _argument_text(criterion):
    from coursekit.criteria import CRITERIA

    return f"(an argument the exercise states: {CRITERIA[criterion].text})"

# --- cached_greedy_decode ---------------------------------------------------------------------------------------

def _kv_variants():
    import sys
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "autograder" / "checks" / "transformer"))
    import test_kv_cache

    return test_kv_cache


def test_cached_greedy_decode_correct_answers_pass():
    from solutions import cached_greedy_decode
    from coursekit.checks.transformer.kv_cache import check_cached_greedy_decode

    kv = _kv_variants()
    for fn in (cached_greedy_decode, kv.student_cache):
        check_cached_greedy_decode(fn, Transformer, greedy_decode_uncached)
        check_cached_greedy_decode(fn, Transformer)


@pytest.mark.parametrize("variant, words", [
    ("uncached", "whole prefix"), ("memory", "projected again"), ("forged", "more than once")])
def test_cached_greedy_decode_recomputing_fails(variant, words):
    import functools

    from coursekit.checks.transformer.kv_cache import check_cached_greedy_decode

    kv = _kv_variants()
    fn = {"uncached": kv.uncached, "memory": functools.partial(kv.student_cache, cross_every_step=True),
          "forged": kv.forged_counts}[variant]
    with pytest.raises(CheckFailed, match=words):
        check_cached_greedy_decode(fn, Transformer, greedy_decode_uncached)


def test_cached_greedy_decode_wrong_tokens_named():
    from coursekit.checks.transformer.kv_cache import check_cached_greedy_decode

    kv = _kv_variants()

    def flipped(model, src_ids, max_len, bos_id=2, eos_id=3):
        return kv.student_cache(model, src_ids, max_len, bos_id, eos_id).flip(1)

    with pytest.raises(CheckFailed, match="your greedy_decode gave"):
        check_cached_greedy_decode(flipped, Transformer, greedy_decode_uncached)


@pytest.mark.parametrize("bos_or_eos", ["bos_id", "eos_id"])
def test_public_cached_check_tries_bos_and_eos(bos_or_eos):
    from solutions import cached_greedy_decode
    from coursekit.checks.transformer.kv_cache import check_cached_greedy_decode

    def ignores(model, src_ids, max_len, bos_id=2, eos_id=3):
        ids = {"bos_id": bos_id, "eos_id": eos_id, bos_or_eos: {"bos_id": 2, "eos_id": 3}[bos_or_eos]}
        return cached_greedy_decode(model, src_ids, max_len, **ids)

    with pytest.raises(CheckFailed) as info:
        check_cached_greedy_decode(ignores, Transformer, greedy_decode_uncached)
    message = str(info.value)
    assert _argument_text(f"cached_greedy_decode.{bos_or_eos}") in message, message
