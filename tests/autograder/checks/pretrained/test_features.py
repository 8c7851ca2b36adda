"""Hidden check of notebook 11's features part (final_hidden): the reference and differently written answers pass;
each known mistake fails with its catalogue id named; an answer that returns the logits fails readably; the
known-mistake variants with their switches off are the reference; the model lent to the kernel computes what the
reference ModernGPT computes, and is switched off once the check is over."""
from __future__ import annotations

import types

import pytest
import torch

import solutions
import variants as V
import variants_pretrained_features as F
from autograder.checks.pretrained import features as checks
from autograder.checks.pretrained import mistakes_features as M
from autograder.checks.stand_ins import KERNEL_FILENAME
from part_suite import hidden_suite

APIS = ("final_hidden",)
MISTAKE_PREFIXES = ("final_hidden.",)  # its catalogue ids

# the tests every part runs (tests/autograder/checks/part_suite.py), with this part's data: final_hidden has no
# optional argument and states no edge case
globals().update(hidden_suite(checks, APIS, correct=F.correct(APIS), wrong=F.of(APIS, F.WRONG),
                              unnamed=F.of(APIS, F.UNNAMED), mistake_prefixes=MISTAKE_PREFIXES))


def test_returning_the_logits_names_the_shape_expected():
    message = V.fails_with(checks.check_final_hidden, F.make_final_hidden("returns_logits"), "wrong shape")
    assert "not the logits" in message, message


def test_the_variant_with_every_switch_off_is_the_reference():
    config = checks.features_config()
    model = checks.reference_model(3, config, embedding_scale=3.0, block_scale=2.0)
    ids = torch.randint(0, config["vocab_size"], (2, 9))
    with torch.no_grad():
        torch.testing.assert_close(M.hidden_states(model, ids), solutions.final_hidden(model, ids))
        for switches in ({"final_norm": False}, {"causal": False}):       # each mistake moves the states a lot
            assert (M.hidden_states(model, ids, **switches) - M.hidden_states(model, ids)).abs().max() > 0.1


def test_the_lent_model_computes_the_references_forward():
    module = types.ModuleType("lent")
    exec(compile(checks.kernel_source(), KERNEL_FILENAME, "exec"), module.__dict__)
    config = checks.features_config()
    ref = checks.reference_model(5, config, embedding_scale=3.0, block_scale=2.0)
    lent = module.ModernGPT(**config)
    lent.load_state_dict(checks.state_of(ref), strict=True)
    assert lent.lm_head.weight is lent.token_embedding.weight                       # tied, as 09's
    ids = torch.randint(0, config["vocab_size"], (3, config["max_len"]))
    with torch.no_grad():
        torch.testing.assert_close(lent.eval()(ids), ref(ids), atol=1e-5, rtol=1e-4)
    with pytest.raises(ValueError):
        lent(torch.zeros(1, config["max_len"] + 1, dtype=torch.long))
    assert module._output_requires_grad(solutions.final_hidden, lent.train(), ids) is True


def test_the_lent_model_stops_working_after_the_check():
    kept = {}

    def keeping(model, ids):                       # a final_hidden that keeps the model it was lent
        kept["model"] = model
        return solutions.final_hidden(model, ids)

    checks.check_final_hidden(keeping)
    with pytest.raises(RuntimeError, match="stand-in"):
        kept["model"](torch.zeros(1, 3, dtype=torch.long))


def test_the_draws_keep_what_the_check_needs():
    config = checks.features_config()
    assert config["rope_base"] != 10000.0 and config["eps"] != 1e-6
    assert config["num_heads"] // config["num_kv_heads"] >= 2 and (config["d_model"] // config["num_heads"]) % 2 == 0
    assert len({config["vocab_size"], config["d_model"], config["d_ff"], config["max_len"]}) == 4

