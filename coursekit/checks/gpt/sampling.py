"""Public self-checks of notebook 08's sampling: `sample_next_token`, checked by how often each token is drawn and by
the draws of a seeded generator, and `generate`, greedy and sampled, on a tiny causal model (`common.py`)."""
from __future__ import annotations

import torch

from coursekit.checks.gpt.common import CountingModel
from coursekit.checks.toolkit import expect_shape, expect_type, fail, mistake_hint, passed, run, uses_parts
from coursekit.criteria import argument, edge_case
from coursekit.tolerance import SAMPLING_FREQUENCY_SLACK


def check_sample_next_token(sample_next_token) -> None:
    logits = torch.tensor([[1.0, 3.0, 3.0, 0.0], [0.5, 0.2, 2.0, 2.0]])
    _frequencies(sample_next_token, 1.0, None)  # the defaults: plain draws from torch's global generator
    with argument("sample_next_token.temperature"):
        got = run("sample_next_token", sample_next_token, logits, 0.0)
        if not isinstance(got, torch.Tensor) or got.tolist() != [1, 2]:
            fail(f"temperature 0 should give the argmax of each row, [1, 2] (first index on ties), got {got}.")
        _frequencies(sample_next_token, 0.5, None)
    with argument("sample_next_token.top_k"):
        _frequencies(sample_next_token, 1.0, 2)
    probs = logits.softmax(-1)
    with argument("sample_next_token.generator"):
        draws = run("sample_next_token", sample_next_token, logits, 1.0, None, torch.Generator().manual_seed(6))
        if not torch.equal(draws, torch.multinomial(probs, 1, generator=torch.Generator().manual_seed(6)).squeeze(-1)):
            again = run("sample_next_token", sample_next_token, logits, 1.0, None, torch.Generator().manual_seed(6))
            fail("with a generator the draws should be torch.multinomial(probs, 1, generator=generator).squeeze(-1).",
                 mistake_hint("sample.generator_ignored")
                 if not torch.equal(again, draws) else "pass the generator on to torch.multinomial.")
    # top_k at or above the vocabulary size keeps every token (torch.topk would raise for k > V)
    with edge_case("sample_next_token.top_k_past_vocabulary"):
        for top_k in (4, 9):
            draws = run("sample_next_token", sample_next_token, logits, 1.0, top_k,
                        torch.Generator().manual_seed(7))
            expected = torch.multinomial(probs, 1, generator=torch.Generator().manual_seed(7)).squeeze(-1)
            if not isinstance(draws, torch.Tensor) or not torch.equal(draws, expected):
                fail(f"with top_k={top_k} on {logits.size(-1)} tokens every token must stay possible (top_k >= V "
                     f"keeps all): the draws should equal those without top_k.", "apply top-k only when top_k < V.")
    passed("sample_next_token", "(argmax at temperature 0, frequencies with temperature and top-k, top_k >= V)")


def _frequencies(sample_next_token, temperature, top_k) -> None:
    """4000 draws from the same row (torch's global generator, seeded here) against the right distribution."""
    row = torch.tensor([2.0, 1.0, 1.0, 0.0, -1.0])                                # a tie at the 2nd/3rd largest
    n = 4000
    torch.manual_seed(5)
    draws = run("sample_next_token", sample_next_token, row.expand(n, 5).clone(), temperature, top_k)
    expect_shape(draws, (n,), "sample_next_token's result", "one token id per row: (B,)")
    counts = torch.bincount(draws.long(), minlength=5).double()
    scaled = row / temperature
    if top_k is not None:
        scaled = scaled.masked_fill(scaled < scaled.sort(descending=True).values[top_k - 1], float("-inf"))
    probs = scaled.softmax(-1).double()
    blocked = probs == 0
    frequencies = counts / n
    if bool((counts[blocked] > 0).any()) or (frequencies - probs).abs().max() > SAMPLING_FREQUENCY_SLACK or \
            bool(((counts == 0) & ~blocked).any()):
        hint = None
        if top_k is not None and int((counts > 0).sum()) == top_k:
            hint = mistake_hint("sample.top_k_drops_ties")
        elif top_k is not None and int((counts > 0).sum()) == top_k - 1:
            hint = mistake_hint("sample.top_k_minus_one")
        elif (frequencies - row.softmax(-1).double()).abs().max() < SAMPLING_FREQUENCY_SLACK:
            hint = mistake_hint("sample.temperature_after_softmax")
        elif (frequencies - (row * temperature).softmax(-1).double()).abs().max() < SAMPLING_FREQUENCY_SLACK:
            hint = mistake_hint("sample.temperature_multiplied")
        fail(f"with temperature={temperature}, top_k={top_k} the tokens were drawn with frequencies "
             f"{[round(f, 3) for f in frequencies.tolist()]}, expected about "
             f"{[round(p, 3) for p in probs.tolist()]}.", hint)


@uses_parts("generate")
def check_generate(generate) -> None:
    model = CountingModel().train()
    prompt = torch.tensor([[1, 2], [3, 4]])
    out = run("generate", generate, model, prompt, 10, 0.0)
    expect_type(out, torch.Tensor, "generate's output")
    expect_shape(out, (2, 12), "generate's output (the prompt followed by 10 new tokens)")
    if not torch.equal(out[:, :2], prompt):
        fail("generate's output should start with the prompt.")
    if not model.training:
        fail("generate left the model in eval mode.", mistake_hint("generate.mode_not_restored"))
    if any(training for training, _ in model.calls):
        fail("the model was called in training mode.", mistake_hint("generate.train_mode"))
    model.eval()
    ids = prompt
    with torch.no_grad():
        for _ in range(10):
            ids = torch.cat([ids, model(ids[:, -model.max_len:])[:, -1].argmax(-1, keepdim=True)], dim=1)
    if not torch.equal(out, ids):
        wrong = prompt
        with torch.no_grad():
            for _ in range(10):
                wrong = torch.cat([wrong, model(wrong[:, -model.max_len:])[:, 0].argmax(-1, keepdim=True)], dim=1)
        first = prompt
        with torch.no_grad():
            for _ in range(10):
                first = torch.cat([first, model(first[:, :model.max_len])[:, -1].argmax(-1, keepdim=True)], dim=1)
        fail(f"generate(model, prompt, 10, temperature=0) should give {ids.tolist()}, got {out.tolist()}.",
             mistake_hint("generate.first_position") if torch.equal(out, wrong) else
             mistake_hint("generate.keeps_first_tokens") if torch.equal(out, first) else
             "feed ids[:, -model.max_len:] each step and append the argmax of the last position.")
    # every argument goes on to sample_next_token: the draws of a seeded generator, as written out here
    with argument("generate.generator"):
        _sampled_like_here(generate, model, prompt, (), 11)
    with argument("generate.temperature"):
        _sampled_like_here(generate, model, prompt, (0.5,), 12)
    with argument("generate.top_k"):
        _sampled_like_here(generate, model, prompt, (1.0, 2), 13)
    passed("generate", "(greedy, longer than max_len, training mode restored, temperature, top_k, generator)")


def _sampled_like_here(generate, model, prompt, args, seed) -> None:
    """generate with a seeded generator draws what the loop written out here draws with your own sample_next_token
    (the one your generate calls; the contract's draw where it cannot be found): each argument must go on to it."""
    out = run("generate", generate, model, prompt, 6, *args, generator=torch.Generator().manual_seed(seed))
    sampler = getattr(generate, "__globals__", {}).get("sample_next_token")
    try:
        expected = _sampled(model, prompt, 6, *args, seed=seed, sampler=sampler if callable(sampler) else None)
    except Exception:  # noqa: BLE001 -- your sample_next_token fails here: its own check says so
        expected = _sampled(model, prompt, 6, *args, seed=seed)
    if not isinstance(out, torch.Tensor) or not torch.equal(out, expected):
        shown = "".join(f", {a}" for a in args)
        fail(f"generate(model, prompt, 6{shown}, generator=torch.Generator().manual_seed({seed})) should "
             f"give {expected.tolist()}, got {out.tolist() if isinstance(out, torch.Tensor) else out}.",
             "pass temperature, top_k and the generator on to sample_next_token at every step.")


def _sampled(model, prompt, steps, temperature=1.0, top_k=None, seed=0, sampler=None):
    """generate written out here: softmax(logits / temperature) after top-k, one torch.multinomial per step (or
    `sampler(logits, temperature, top_k, generator)` when given)."""
    generator = torch.Generator().manual_seed(seed)
    ids = prompt
    model.eval()
    with torch.no_grad():
        for _ in range(steps):
            if sampler is not None:
                drawn = sampler(model(ids[:, -model.max_len:])[:, -1], temperature, top_k, generator)
                ids = torch.cat([ids, drawn.reshape(-1, 1).to(ids.dtype)], dim=1)
                continue
            logits = model(ids[:, -model.max_len:])[:, -1] / temperature
            if top_k is not None and top_k < logits.size(-1):
                kth = logits.sort(-1, descending=True).values[:, top_k - 1:top_k]
                logits = logits.masked_fill(logits < kth, float("-inf"))
            ids = torch.cat([ids, torch.multinomial(logits.softmax(-1), 1, generator=generator)], dim=1)
    return ids
