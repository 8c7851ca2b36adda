"""The public checks of notebook 11's LoRA part (LoRALinear, add_lora) pass the reference and answers written
differently, and name the likely mistake of each wrong answer (the hidden checks' student answers, reused); an answer
right but for one stated edge case or one argument is told which."""
from __future__ import annotations

import pytest
import torch

import variants as V
import variants_pretrained_lora as L
from coursekit.checks.pretrained import features
from coursekit.checks.pretrained import lora as checks
from part_suite import from_hidden_tests, public_suite

APIS = ("LoRALinear", "add_lora")

# the tests every part runs (tests/autograder/checks/part_suite.py), with this part's data
WRONG = L.of(APIS, L.WRONG) + [(api, answer, None) for api, answer, _words in L.of(APIS, L.UNNAMED)]
globals().update(public_suite(checks, APIS, correct=L.correct(APIS), wrong=WRONG,
                              edge_only=from_hidden_tests("pretrained", "lora", "EDGE_ONLY"), edge_says=("ValueError",),
                              argument_only=from_hidden_tests("pretrained", "lora", "ARGUMENT_ONLY")))


@pytest.mark.parametrize("answer, words", [(api_answer, words) for _, api_answer, words in L.UNNAMED],
                         ids=[words for _, _, words in L.UNNAMED])
def test_answers_without_a_catalogue_mistake_say_what_is_wrong(answer, words):
    V.fails_publicly(checks.check_lora_linear, answer, words)


def test_the_probe_model_has_modern_gpts_shape():
    model = features.probe_model(1, num_layers=3)
    attn = model.blocks[0].attn
    assert (attn.w_q.out_features, attn.w_k.out_features) == (16, 8) and attn.w_v.in_features == 16
    assert model.lm_head.weight is model.token_embedding.weight
    ids = torch.tensor([[1, 2, 3, 4]])
    with torch.no_grad():
        _, after = features.forward_states(model, ids)
        torch.testing.assert_close(model.lm_head(after), model(ids))
