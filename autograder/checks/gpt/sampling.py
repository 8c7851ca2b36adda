"""Hidden checks of notebook 08's sampling: `sample_next_token` and `generate`.

Where randomness is involved the contract fixes the draws (one `torch.multinomial` call in `sample_next_token`), so
with a generator the draws must be exactly the reference's; before that, frequencies over many draws are tested
against the right distribution, so a failure says whether the distribution or only the way of drawing is wrong.
The model the student's `generate` runs on is a public probe (`coursekit.probe.models`) built in the kernel with the
grader's weights (`common.py`).
"""
from __future__ import annotations

import math

import torch

from autograder.checks.gpt import mistakes as M
from autograder.checks.gpt.common import (
    PROBE_LM_CONFIG, local_generator, local_lm, probe_state, remote_generator, remote_lm, training_flag,
)
from autograder.checks.kit.compare import as_tensor, expect_shape, expect_tensor, from_table
from autograder.checks.kit.criteria import argument, edge_case
from autograder.checks.kit.draws import pick, rng
from autograder.checks.kit.inputs import reference
from autograder.checks.kit.parts import given_working_parts
from autograder.checks.kit.remote import hidden_check
from autograder.checks.kit.toolkit import call, fail, randint, randn, seeded, shape_of, start_check
from coursekit.tolerance import SAME_DISTRIBUTION, SAMPLING_CHI2_LIMIT as CHI2_LIMIT


# --------------------------------------------------------------------------------------------- sample_next_token
# Draws for the frequency test; a chi-square above CHI2_LIMIT (coursekit/tolerance.py) or any draw of a blocked token
# fails.
DRAWS = 6000
STAT_LOGITS = torch.tensor([2.0, 1.0, 1.0, 0.3, -0.5, -1.0])      # a tie at the 2nd/3rd largest


def chi_square(counts: torch.Tensor, probs: torch.Tensor) -> float:
    counts, expected = counts.double(), probs.double() * counts.sum()
    if bool(((expected == 0) & (counts > 0)).any()):
        return math.inf
    kept = expected > 0
    return float((((counts - expected) ** 2)[kept] / expected[kept]).sum())


ARGMAX_LOGITS = [[1.0, 3.0, 3.0, 0.0], [5.0, 5.0, 1.0, 1.0], [0.0, -1.0, 2.0, 2.0]]    # ties at the largest
# the known mistakes whose distribution the draws may fit, in the order tried (the rows of M.TABLE on M.tempered)
SAMPLE_MISTAKES = M.ids_of(M.tempered)
SEPARATION = 200.0   # the chi-square's non-centrality between two distributions a frequency test must tell apart


def _argmax_logits() -> torch.Tensor:
    """Rows of small integers whose largest value occurs twice (the first index wins): today's, or drawn."""
    draw = rng("gpt.sample.argmax")
    options = [ARGMAX_LOGITS]
    for _ in range(12):
        width, rows = draw.randint(4, 7), []
        for r in range(draw.randint(3, 5)):
            row = [float(draw.randint(-3, 5)) for _ in range(width)]
            first, second = sorted(draw.sample(range(1 if r == 0 else 0, width), 2))  # not all argmaxes at 0
            row[first] = row[second] = max(row) + float(draw.randint(0, 2))
            rows.append(row)
        options.append(rows)
    return torch.tensor(pick("gpt.sample.argmax_rows", options))


def _stat_logits() -> torch.Tensor:
    """STAT_LOGITS with its entries in this submission's order (the tie at the 2nd/3rd largest stays)."""
    draw = rng("gpt.sample.stat_order")
    orders = [list(range(STAT_LOGITS.numel()))] + [draw.sample(range(STAT_LOGITS.numel()), STAT_LOGITS.numel())
                                                   for _ in range(24)]
    return STAT_LOGITS[pick("gpt.sample.stat_order", orders)]


def _non_centrality(a: torch.Tensor, b: torch.Tensor) -> float:
    """DRAWS * sum (a - b)^2 / b: how far counts drawn from `a` land from `b` in chi-square (inf: a draws what b
    blocks)."""
    a, b = a.double(), b.double()
    if bool(((b == 0) & (a > 0)).any()):
        return math.inf
    kept = b > 0
    return float(DRAWS * (((a - b) ** 2)[kept] / b[kept]).sum())


def _distinguishable(logits: torch.Tensor, temperature: float, top_k) -> bool:
    """Every two different distributions among the right one and the known mistakes' are far apart: each mistake
    fails the frequency test and is not taken for another."""
    dists = [M.tempered(logits, temperature, top_k)] + [produce() for produce in _mistaken(
        logits, temperature, top_k).values()]
    for i, a in enumerate(dists):
        for b in dists[i + 1:]:
            if torch.allclose(a, b, **SAME_DISTRIBUTION):
                continue
            if min(_non_centrality(a, b), _non_centrality(b, a)) < SEPARATION:
                return False
    return True


def _frequency_plan(logits: torch.Tensor) -> list[tuple[float, int | None]]:
    """(temperature, top_k) of the frequency tests: plain; a temperature; top_k 2 cutting the tie; top_k 3 or 4.
    Drawn among values whose distributions stay distinguishable (else today's)."""
    spaces = [("gpt.sample.plain", [(1.0, None)]),
              ("gpt.sample.temperature", [(0.5, None), (0.4, None), (0.6, None), (2.0, None), (2.5, None)]),
              ("gpt.sample.tie_cut", [(2.0, 2), (1.5, 2), (0.7, 2), (2.5, 2), (1.0, 2)]),
              ("gpt.sample.top_k", [(1.0, 3), (0.8, 3), (1.2, 4), (0.6, 4), (1.0, 4)])]
    plan = []
    for label, options in spaces:
        chosen = pick(label, options)
        plan.append(chosen if _distinguishable(logits, *chosen) else options[0])
    return plan


@hidden_check
def check_sample_next_token(sample_next_token) -> None:
    """sample_next_token(logits (B, V), temperature=1.0, top_k=None, generator=None) -> (B,) token ids."""
    start_check()
    solution = reference("gpt")
    channel = sample_next_token.channel
    stat = _stat_logits()
    plain, tempered, tie_cut, top_k_plan = _frequency_plan(stat)
    # the core: frequencies over many plain draws (temperature 1.0, no top_k) from the global generator
    _frequencies(sample_next_token, stat, *plain)
    passed = set()  # the arguments whose own tries passed (a try of several arguments counts only on top of them)
    with argument("sample_next_token.temperature"):
        # temperature 0: the argmax, first index on ties
        logits = _argmax_logits()
        tested = f"sample_next_token(logits {shape_of(logits)}, temperature=0)"
        got = call("sample_next_token", sample_next_token, logits.clone(), 0.0, tested=tested)
        expect_tensor(got, logits.argmax(-1), "the tokens at temperature 0", "cpu", tested=tested, exact=True,
                      note="temperature 0 means the argmax of each row (torch.argmax keeps the first index on ties)")
        _frequencies(sample_next_token, stat, *tempered)
        passed.add("temperature")
    with argument("sample_next_token.top_k"):  # at the plan's temperatures on top of a passing temperature, else 1
        for temperature, top_k in (tie_cut, top_k_plan):
            _frequencies(sample_next_token, stat, temperature if "temperature" in passed else 1.0, top_k)
        passed.add("top_k")
    # with a generator, the draws are exactly torch.multinomial(probs, 1, generator=generator)
    rows, vocab = pick("gpt.sample.rows", [5, 4, 6, 7]), pick("gpt.sample.vocab", [9, 8, 10, 11, 12])
    logits = randn(rows, vocab, seed=121, device="cpu") * 2
    note = ("with a generator the draw is fixed: one call torch.multinomial(probs, 1, generator=generator)"
            ".squeeze(-1) for the whole batch, after temperature and top-k")

    def drawn_like_reference(temperature, top_k, seed):
        tested = f"sample_next_token(logits {shape_of(logits)}, {temperature}, top_k={top_k}, generator)"
        generator = remote_generator(channel, seed)
        got = call("sample_next_token", sample_next_token, logits.clone(), temperature, top_k, generator,
                   tested=tested)
        expected = solution.sample_next_token(logits, temperature, top_k, local_generator(seed))
        if _generator_ignored(got, expected, lambda: call("sample_next_token", sample_next_token, logits.clone(),
                                                             temperature, top_k, remote_generator(channel, seed),
                                                             tested=tested, _seed=128)):
            fail("sample_next_token: the same seeded generator gives other tokens at every call.", tested=tested,
                 mistake="sample.generator_ignored")
        expect_tensor(got, expected, "the drawn tokens", "cpu", tested=tested, exact=True, note=note)

    with argument("sample_next_token.generator"):
        drawn_like_reference(1.0, None, 122)
        if {"temperature", "top_k"} <= passed:  # the one draw comes after temperature and top-k
            drawn_like_reference(pick("gpt.sample.gen_temperature", [0.7, 0.6, 0.9, 1.4]),
                                 pick("gpt.sample.gen_top_k", [3, 2, 4, 5]), 123)
            drawn_like_reference(pick("gpt.sample.gen_temperature_b", [1.1, 0.8, 1.3, 0.5]), vocab - 1, 126)
        passed.add("generator")
    # the stated edge case: a top_k equal to or larger than the vocabulary keeps every token (exact draws where the
    # arguments passed on their own, else frequencies at temperature 1, which need neither the generator nor it)
    past = pick("gpt.sample.edge_past", [11, 1, 5, 30])
    with edge_case("sample_next_token.top_k_past_vocabulary"):
        if {"temperature", "top_k", "generator"} <= passed:
            drawn_like_reference(pick("gpt.sample.edge_temperature", [1.3, 1.1, 0.8, 1.6]), vocab, 124)
            drawn_like_reference(pick("gpt.sample.edge_temperature_b", [0.9, 1.2, 0.7]), vocab + past, 125)
        else:
            _frequencies(sample_next_token, stat, 1.0, stat.numel())
            _frequencies(sample_next_token, stat, 1.0, stat.numel() + past)


def _frequencies(sample_next_token, stat: torch.Tensor, temperature: float, top_k) -> None:
    """DRAWS draws from the same logits `stat` (the global generator, seeded by the grader) are drawn from the right
    distribution (a chi-square test); a failure names the known mistake whose distribution they fit."""
    batch = stat.expand(DRAWS, -1).clone()
    tested = (f"sample_next_token(the same logits in {DRAWS} rows, temperature={temperature}, top_k={top_k})"
              " (how often each token is drawn)")
    got = call("sample_next_token", sample_next_token, batch, temperature, top_k, tested=tested, _seed=120)
    got = as_tensor(got, "sample_next_token's result", tested)
    expect_shape(got, (DRAWS,), "sample_next_token's result", tested, hint="one token id per row: (B,)")
    if got.is_floating_point() or int(got.min()) < 0 or int(got.max()) >= stat.numel():
        fail("sample_next_token must return token ids (int64) between 0 and V - 1.", tested=tested)
    counts = torch.bincount(got.long().cpu(), minlength=stat.numel())
    right = chi_square(counts, M.tempered(stat, temperature, top_k))
    if right > CHI2_LIMIT:
        mistake = None
        support = M.tempered(stat, temperature, top_k) > 0
        if top_k is not None and int(support.sum()) > top_k and int((counts > 0).sum()) == top_k \
                and not bool((counts[~support] > 0).any()):
            mistake = "sample.top_k_drops_ties"       # exactly k kept: some logit equal to the k-th was dropped
        for mistake_id, produce in _mistaken(stat, temperature, top_k).items():
            if mistake is None and chi_square(counts, produce()) <= CHI2_LIMIT:
                mistake = mistake_id
                break
        fail("sample_next_token: the tokens are not drawn from the right distribution.", tested=tested,
             details=[f"drawn counts {counts.tolist()}, expected about "
                      f"{[round(p * DRAWS) for p in M.tempered(stat, temperature, top_k).tolist()]}"],
             mistake=mistake)


def _generator_ignored(got, expected, again) -> bool:
    """The draw differs from the reference's, and a second call with a generator seeded the same way (and torch's
    global generator seeded otherwise) draws other tokens still: the answer draws from something else."""
    if not isinstance(got, torch.Tensor) or got.shape != expected.shape or torch.equal(got.cpu(), expected):
        return False
    second = again()
    return isinstance(second, torch.Tensor) and second.shape == got.shape and not torch.equal(second, got)


def _mistaken(logits: torch.Tensor, temperature: float, top_k) -> dict:
    """{id: thunk}: the distribution each known mistake of SAMPLE_MISTAKES draws from (`M.tempered`)."""
    return from_table(M.TABLE, lambda variant, switches: variant(logits, temperature, top_k, **switches),
                      SAMPLE_MISTAKES)


# ------------------------------------------------------------------------------------------------------ generate


DRAW_SEED, LONG_DRAW_SEED = 138, 139  # torch's global generator, seeded the same in the kernel and here
LONG_PROMPT_MISTAKES = ("generate.keeps_first_tokens",)  # what a prompt longer than max_len reveals


def _sampled(draw_seed: int, produce):
    """What `produce()` generates with the defaults (temperature 1, no top-k, no generator): torch's global
    generator seeded as the kernel's is for the student's call."""
    with seeded(draw_seed):
        return produce()


def _revealing_prompt(local, shape, seed: int, steps: int, ids, draw_seed: int, tries: int = 5):
    """A prompt (seed, else seed + 1000, + 2000, ...) on which each known mistake's output with the defaults (`ids`:
    rows of M.TABLE, drawn from the generator seeded with `draw_seed`) differs from the right one (None if none of
    `tries` does)."""
    found = None
    for k in range(tries):
        prompt = randint(0, PROBE_LM_CONFIG["vocab_size"], shape, seed=seed + 1000 * k, device="cpu")
        right = _sampled(draw_seed, lambda: reference("gpt").generate(local, prompt, steps))
        if all(not torch.equal(produce(), right) for produce in _generated(local, prompt, steps, draw_seed,
                                                                           ids).values()):
            found = prompt
            break
    local.eval()
    return found


def _generated(local, ids, new_tokens: int, draw_seed: int, mistake_ids) -> dict:
    """{id: thunk}: what each known mistake `mistake_ids` generates from `ids` with the defaults, drawn as the
    student's call draws (torch's global generator seeded with `draw_seed`)."""
    return from_table(M.TABLE, lambda variant, switches: _sampled(draw_seed, lambda: variant(
        local, ids, new_tokens, sample=True, **switches)), mistake_ids)


def generate_setup(shape, steps: int, long_shape, more: int):
    """The lent model's weights (seed 130, else 1130, 2130, ...: some weights settle on one token whatever the
    context, then a wrong crop cannot show) and the two prompts, each revealing its known mistakes."""
    fallback = None
    for k in range(12):
        state = probe_state(130 + 1000 * k)
        local = local_lm(state, "cpu", False)
        prompt = _revealing_prompt(local, shape, 131, steps, M.ids_of(M.generate_variant), DRAW_SEED)
        long_prompt = _revealing_prompt(local, long_shape, 137, more, LONG_PROMPT_MISTAKES, LONG_DRAW_SEED)
        if prompt is not None and long_prompt is not None:
            return state, local, prompt, long_prompt
        if fallback is None:
            fallback = (state, local, randint(0, PROBE_LM_CONFIG["vocab_size"], shape, seed=131, device="cpu"),
                        randint(0, PROBE_LM_CONFIG["vocab_size"], long_shape, seed=137, device="cpu"))
    return fallback


@hidden_check
@given_working_parts("generate")
def check_generate(generate) -> None:
    """generate(model, ids, max_new_tokens, temperature=1.0, top_k=None, generator=None) -> prompt + new tokens."""
    start_check()
    solution = reference("gpt")
    channel = generate.channel
    max_len = PROBE_LM_CONFIG["max_len"]
    steps, more = pick("gpt.generate.steps", [20, 18, 22, 25]), pick("gpt.generate.long_steps", [6, 5, 7])
    state, local, prompt, long_prompt = generate_setup(
        (pick("gpt.generate.b", [2, 3, 4]), pick("gpt.generate.t", [3, 2, 4, 5])), steps,
        (2, max_len + pick("gpt.generate.long", [8, 4, 11, 6])), more)
    # the core: the defaults (temperature 1, no top-k, no generator: torch's global generator, seeded for the call
    # as it is here), past max_len (the context must be cropped), starting in training mode
    model = remote_lm(channel, state, "cpu", True)
    tested = f"generate(a small model with max_len={max_len}, ids {shape_of(prompt)}, {steps}) (torch seeded)"
    got = call("generate", generate, model, prompt.clone(), steps, tested=tested, _seed=DRAW_SEED)
    expected = _sampled(DRAW_SEED, lambda: solution.generate(local, prompt, steps))
    expect_tensor(got, expected, "generate's output", "cpu", tested=tested, exact=True, mistakes=lambda: _generated(
        local, prompt, steps, DRAW_SEED, M.ids_of(M.generate_variant)),
        note="each step feeds ids[:, -model.max_len:], takes the LAST position's logits and draws one token with "
             "sample_next_token(logits, temperature, top_k, generator)")
    local.eval()
    if training_flag(model, "the lent model") is not True:
        fail("generate does not restore the model's training mode.", tested=tested,
             mistake="generate.mode_not_restored")
    # a prompt longer than max_len: the context is its LAST max_len tokens from the first step on
    tested = f"generate(a small model with max_len={max_len}, ids {shape_of(long_prompt)}, {more}) (torch seeded)"
    got = call("generate", generate, remote_lm(channel, state, "cpu", False), long_prompt.clone(), more,
               tested=tested, _seed=LONG_DRAW_SEED)
    expect_tensor(got, _sampled(LONG_DRAW_SEED, lambda: solution.generate(local, long_prompt, more)),
                  "generate's output", "cpu", tested=tested, exact=True, mistakes=lambda: _generated(
                      local, long_prompt, more, LONG_DRAW_SEED, LONG_PROMPT_MISTAKES),
                  note="each step feeds ids[:, -model.max_len:], the last max_len tokens")
    local.eval()
    model = remote_lm(channel, state, "cpu", False)
    _judge_generate_arguments(generate, model, local, prompt, steps)
    got = call("generate", generate, model, prompt.clone(), 0, tested="generate(..., max_new_tokens=0)")
    expect_tensor(got, prompt, "generate's output with max_new_tokens=0", "cpu", exact=True,
                  tested="generate(..., max_new_tokens=0)")


def _judge_generate_arguments(generate, model, local, prompt: torch.Tensor, steps: int) -> None:
    """Every argument reaches sample_next_token: each argument's own tries, then a try of several arguments at once,
    run only on top of their own tries' passing (one mistake crosses one criterion). `model` is the lent model in
    eval mode, `local` its copy here."""
    solution = reference("gpt")
    channel = generate.channel

    def sampled(args, seed, **kwargs):
        shown = ", ".join([*(str(a) for a in args), *(f"{k}={v}" for k, v in kwargs.items())])
        tested = f"generate(a small model, ids {shape_of(prompt)}, {shown}, generator=...)"
        got = call("generate", generate, model, prompt.clone(), *args, **kwargs,
                   generator=remote_generator(channel, seed), tested=tested)
        expected = solution.generate(local, prompt, *args, **kwargs, generator=local_generator(seed))
        expect_tensor(got, expected, "generate's output", "cpu", tested=tested, exact=True,
                      note="pass temperature, top_k and the generator on to sample_next_token")

    passed = set()
    with argument("generate.generator"):  # the defaults otherwise
        sampled((pick("gpt.generate.n_b", [5, 4, 7]),), 133)
        passed.add("generator")
    with argument("generate.top_k"):  # top_k=1 keeps the largest logit only: the same tokens whatever the draw
        sampled((pick("gpt.generate.n_c", [4, 3, 6]),), 134, top_k=1)
        passed.add("top_k")
    with argument("generate.temperature"):  # temperature 0 decodes greedily: the same tokens whatever the draw
        tested = f"generate(a small model, ids {shape_of(prompt)}, {steps}, temperature=0)"
        got = call("generate", generate, model, prompt.clone(), steps, 0.0, tested=tested)
        expect_tensor(got, solution.generate(local, prompt, steps, 0.0), "generate's output", "cpu", tested=tested,
                      exact=True, note="temperature 0 goes on to sample_next_token, which then takes the argmax")
        local.eval()
    if "generator" in passed:  # another temperature, drawn with the generator (without it: not judged here)
        with argument("generate.temperature"):
            sampled((pick("gpt.generate.n_d", [7, 6, 9]), pick("gpt.generate.temp_d", [1.7, 1.5, 2.0, 0.6])), 135)
            passed.add("temperature")
    if {"generator", "top_k", "temperature"} <= passed:
        with argument("generate.top_k"):  # temperature and top_k together
            sampled((pick("gpt.generate.n_a", [6, 5, 8]), pick("gpt.generate.temp_a", [0.8, 0.7, 1.2]),
                     pick("gpt.generate.k_a", [4, 3, 5, 6])), 132)
