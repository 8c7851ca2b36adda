"""The public checks of notebook 11's key/value cache (coursekit/checks/pretrained/cache.py) pass the reference and
answers written differently, and name the likely mistake of the hidden checks' wrong answers; their float64 loops
are the reference's computation; the recorder counts what it should."""
from __future__ import annotations

import types
from functools import partial

import numpy as np
import pytest
import torch

import coursekit.checks.pretrained as public_package
import solutions
import variants as V
import variants_pretrained_cache as K
from coursekit.checks.pretrained import cache as C
from part_suite import public_suite

# uses_parts finds each part's check in the topic's package: until its __init__ exports them (the integrator's)
for _name in ("check_cached_forward", "check_cached_generate"):
    if not hasattr(public_package, _name):
        setattr(public_package, _name, getattr(C, _name))

APIS = ("cached_forward", "cached_generate")
# the checks with the class given (part_suite's own answers are defined where no ModernGPT is)
checks = types.SimpleNamespace(
    __name__=C.__name__, check_cached_forward=partial(C.check_cached_forward, ModernGPT=solutions.ModernGPT),
    check_cached_generate=partial(C.check_cached_generate, ModernGPT=solutions.ModernGPT))

CORRECT = {"cached_forward": [solutions.cached_forward, K.cached_forward_sdpa, K.cached_forward_loop],
           "cached_generate": [solutions.cached_generate, K.cached_generate_student]}
WRONG = [  # (api name, answer, the catalogue id its HINT names, or None)
    ("cached_forward", K.forward_with("no_offset"), "kv.no_rotary_offset"),
    ("cached_forward", K.forward_with("rotate_all"), "kv.rotated_twice"),
    ("cached_forward", K.forward_with("unrotated_cache"), "kv.keys_stored_unrotated"),
    ("cached_forward", K.forward_with("query_heads"), "kv.query_heads_cached"),
    ("cached_forward", K.forward_with("no_causal"), "kv.no_causal_mask"),
    ("cached_forward", K.forward_with("new_only"), "kv.cache_not_extended"),
    ("cached_forward", K.forward_with("returns_old"), "kv.cache_not_extended"),
    ("cached_forward", K.forward_with("eval_inside"), "kv.sets_mode"),
    ("cached_forward", torch.no_grad()(solutions.cached_forward), None),          # the caller's gradients cut off
    ("cached_generate", K.generate_with("refeed_last"), "kv_generate.prompt_token_by_token"),
    ("cached_generate", K.generate_with("token_by_token"), "kv_generate.prompt_token_by_token"),
    ("cached_generate", K.generate_with("eos_excluded"), "kv_generate.eos_not_included"),
    ("cached_generate", K.generate_with("returns_prompt"), "kv_generate.returns_prompt"),
    ("cached_generate", K.generate_with("no_cache_model"), "kv_generate.no_cache"),
    ("cached_generate", K.generate_with("no_cache_forward"), "kv_generate.no_cache"),
    ("cached_generate", K.generate_with("mode_not_restored"), "kv_generate.mode_not_restored"),
    ("cached_generate", K.generate_with("no_eval"), "kv_generate.train_mode_or_grad"),
    ("cached_generate", K.generate_with("with_grad"), "kv_generate.train_mode_or_grad"),
]
EDGE_ONLY = [("cached_forward", K.forward_with("no_length_check"), "cached_forward.too_long"),
             ("cached_forward", K.forward_with("off_by_one"), "cached_forward.too_long")]
ARGUMENT_ONLY = [("cached_generate", K.generate_with("ignores_eos"), "cached_generate.eos_id")]

globals().update(public_suite(checks, APIS, correct=CORRECT, wrong=WRONG, edge_only=EDGE_ONLY,
                              argument_only=ARGUMENT_ONLY))


@pytest.fixture(autouse=True)
def _single_thread():
    """Tiny models: intra-op threads only wait for each other (as in tests/autograder/checks/conftest.py)."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


def test_the_class_is_found_where_the_function_is_defined(capsys):
    """The notebook's self-check cells pass the function alone."""
    C.check_cached_forward(solutions.cached_forward)
    C.check_cached_generate(K.cached_generate_student)
    assert capsys.readouterr().out.count("all public checks passed") == 2
    namespace = {}
    exec("def cached_forward(model, ids, cache=None):\n    return None\n", namespace)   # noqa: S102
    V.fails_publicly(C.check_cached_forward, namespace["cached_forward"], "no ModernGPT class is defined")


def test_a_generator_built_on_a_failing_cached_forward_is_told_to_fix_that_first():
    student = types.FunctionType(K.cached_generate_student.__code__,
                                 {**vars(K), "cached_forward": K.forward_with("no_offset")},
                                 argdefs=K.cached_generate_student.__defaults__)
    V.fails_publicly(C.check_cached_generate, student,
                     "your cached_generate uses your cached_forward, which fails its own check: fix that first")


def test_the_loops_compute_the_references_calls():
    model, p = C._small_model(solutions.ModernGPT, C._SIZE, seed=3)
    ids = torch.tensor(C._IDS)
    cache = None
    for (logits, loops_cache), (a, b) in zip(C._numpy_calls(p, C._SIZE, ids, [0, 2, 3, 7]), [(0, 2), (2, 3), (3, 7)]):
        with torch.no_grad():
            expected, cache = solutions.cached_forward(model, ids[:, a:b], cache)
        np.testing.assert_allclose(logits, expected.double().numpy(), atol=1e-5, rtol=1e-5)
        for mine, theirs in zip(loops_cache, cache):
            np.testing.assert_allclose(mine[0], theirs[0].double().numpy(), atol=1e-5, rtol=1e-5)
            np.testing.assert_allclose(mine[1], theirs[1].double().numpy(), atol=1e-5, rtol=1e-5)


def test_the_generation_example_has_no_near_tie_and_an_eos_mid_way():
    model, p = C._small_model(solutions.ModernGPT, C._GENERATE_SIZE, C._GENERATE["seed"], C._GENERATE["std"])
    prompt, steps, eos = C._GENERATE["prompt"], C._GENERATE["steps"], C._GENERATE["eos"]
    ids, tokens = list(prompt), []
    for _ in range(steps):
        logits = np.sort(C._numpy_call(p, C._GENERATE_SIZE, [ids])[0][0, -1])
        assert logits[-1] - logits[-2] > 0.1
        tokens.append(int(np.argmax(C._numpy_call(p, C._GENERATE_SIZE, [ids])[0][0, -1])))
        ids.append(tokens[-1])
    assert tokens == solutions.cached_generate(model, prompt, steps) == C._numpy_greedy(p, C._GENERATE_SIZE, prompt,
                                                                                         steps)
    assert 2 <= tokens.index(eos) <= steps - 3 and len(set(tokens)) >= 5
    assert C._numpy_greedy(p, C._GENERATE_SIZE, prompt + prompt[-1:], steps) != tokens


@pytest.mark.parametrize("counts, seen", [
    ({"k": [5, 1, 1, 1]}, None), ({"k": [5, 1, 1, 1, 1]}, None),
    ({"k": [5, 6, 7, 8]}, "kv_generate.no_cache"),
    ({"k": [1, 1, 1, 1, 1, 1, 1, 1]}, "kv_generate.prompt_token_by_token"),
    ({"k": [4, 1, 1, 1, 1]}, "kv_generate.prompt_token_by_token"), ({"k": []}, "never ran"), ({"k": [5, 1]}, "ran 2")])
def test_the_counts_say_what_is_wrong(counts, seen):
    problem = C.count_problem(counts, 5, 4)
    assert problem is None if seen is None else seen in (problem[0] or problem[1])
