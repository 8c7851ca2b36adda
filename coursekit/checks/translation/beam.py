"""Public self-check for notebook 10's beam search.

Beam search runs on `TableTranslator`, a tiny model whose next-token probabilities are written out in a table, so
that greedy and beam disagree and the length penalty decides.
"""
from __future__ import annotations

import math

import torch
from torch import nn

from coursekit.checks.toolkit import expect_type, fail, mistake_hint, passed, run
from coursekit.criteria import argument

PAD, BOS, EOS = 0, 2, 3
A, B, C = 4, 5, 6  # three word tokens; 0 <pad>, 1 <unk>, 2 <bos>, 3 <eos> as everywhere in the course


class TableTranslator(nn.Module):
    """A tiny "translator" whose next-token probabilities are written out by hand.

    It has the decoding interface of the course's `Transformer` (`pad_id`, `encode`, `decode`), but ignores the
    source: `table` maps the target prefix (the tokens after <bos>, as a tuple) to {token: probability}; a prefix not
    in the table gives `default`. Tokens not named get probability `rest`. In training mode a dropout on the logits
    makes decoding random. It records every decode call (training mode, gradients enabled) and counts encodes.
    """

    def __init__(self, table: dict, default: dict, vocab_size: int = 7, rest: float = 1e-6, pad_id: int = PAD):
        super().__init__()
        self.pad_id = pad_id
        self.table, self.default, self.vocab_size, self.rest = table, default, vocab_size, rest
        self.scale = nn.Parameter(torch.ones(()))                              # gives the device, like any model
        self.drop = nn.Dropout(0.5)
        self.calls: list[tuple[bool, bool]] = []
        self.encodes = 0
        self.bos = BOS   # a hypothesis that starts with another token gets `default` at every position

    def next_logits(self, prefix: tuple) -> torch.Tensor:
        """(V,) log-probabilities after <bos> + prefix (unnormalised by at most `rest` * V)."""
        probs = torch.full((self.vocab_size,), self.rest, dtype=torch.float64)
        for token, p in self.table.get(tuple(prefix), self.default).items():
            probs[token] = p
        return probs.log()

    def encode(self, src_ids: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """(B, S) -> memory (B, S, 1) of zeros, src_mask (B, 1, 1, S)."""
        self.encodes += 1
        return (torch.zeros(*src_ids.shape, 1, device=src_ids.device),
                (src_ids != self.pad_id)[:, None, None, :])

    def decode(self, tgt_ids: torch.Tensor, memory: torch.Tensor, src_mask: torch.Tensor) -> torch.Tensor:
        """(B, T) target ids starting with <bos> -> logits (B, T, V); position t depends on tokens 1..t."""
        self.calls.append((self.training, torch.is_grad_enabled()))
        rows = [[self.next_logits(tuple(ids[1:t + 1]) if ids[0] == self.bos else ("not <bos>",))
                 for t in range(len(ids))] for ids in tgt_ids.tolist()]
        logits = torch.stack([torch.stack(row) for row in rows]).float().to(tgt_ids.device)
        return self.drop(logits * self.scale)

    def forward(self, src_ids: torch.Tensor, tgt_ids: torch.Tensor) -> torch.Tensor:
        memory, src_mask = self.encode(src_ids)
        return self.decode(tgt_ids, memory, src_mask)


def greedy_vs_beam_translator(eos: int = EOS) -> TableTranslator:
    """Greedy takes A (0.5) and then <eos> (0.4): [A, <eos>] has probability 0.20. A beam of 2 also keeps B
    (0.4), whose <eos> has probability 0.95: [B, <eos>] has 0.38 and wins (both have L = 2, so the penalty does not
    matter)."""
    return TableTranslator({(): {A: 0.5, B: 0.4, C: 0.1},
                            (A,): {eos: 0.4, A: 0.35, B: 0.25},
                            (B,): {eos: 0.95, C: 0.05}},
                           default={C: 0.9, A: 0.1})


def length_penalty_translator() -> TableTranslator:
    """Two finished translations compete: the short [<eos>] (L = 1, log-probability log 0.4 = -0.916) and the long
    [A, A, A, <eos>] (L = 4, 0.55 * 0.9 * 0.9 * p = exp(-1.34), -1.34). Ranked by score / ((5 + L) / 6) ** alpha:
    alpha 0 and 0.6 pick the short one (-0.916 > -1.34 / 1.275 = -1.051), alpha 1 and 2 the long one
    (-1.34 / 1.5 = -0.893, -1.34 / 2.25 = -0.596). Counting <bos> in L (divisors 7/6 and 10/6) flips alpha 1 back
    to the short one (-0.785 > -0.804), not alpha 2. With a beam of 2 the runner-up (B..., then A C...) never
    finishes, so the search stops once the long one has finished (step 4)."""
    p = math.exp(-1.34) / (0.55 * 0.9 * 0.9)
    return TableTranslator({(): {A: 0.55, EOS: 0.4, B: 0.05},
                            (A,): {A: 0.9, C: 0.1},
                            (A, A): {A: 0.9, B: 0.1},
                            (A, A, A): {EOS: p, C: 1 - p}},
                           default={C: 1.0})


_SRC = torch.tensor([[7, 8, 9]])                                               # (1, S=3): the source is ignored


def _greedy(model: TableTranslator, max_len: int) -> list[int]:
    tokens: list[int] = []
    while len(tokens) < max_len and (not tokens or tokens[-1] != EOS):
        tokens.append(int(model.next_logits(tuple(tokens)).argmax()))
    return tokens


def _decoded(fn, model, beam_size, max_len, length_penalty=0.6, bos_id=BOS, eos_id=EOS):
    got = run("beam_search", fn, model, _SRC, beam_size, max_len, bos_id, eos_id, length_penalty)
    ids = "" if (bos_id, eos_id) == (BOS, EOS) else f", bos_id={bos_id}, eos_id={eos_id}"
    call = (f"beam_search(model, src, beam_size={beam_size}, max_len={max_len}{ids}, "
            f"length_penalty={length_penalty})")
    if isinstance(got, torch.Tensor):
        fail(f"{call} should return a list of ints, got a tensor.", "return tokens.tolist() (or a list built "
                                                                      "from them).")
    if model.encodes != 1:
        fail(f"{call} encoded the source {model.encodes} times: encode it once, before the loop.",
             "memory, src_mask = model.encode(src_ids); then call model.decode(...) each step.")
    if any(training for training, _ in model.calls):
        fail(f"{call} called the model in training mode.", mistake_hint("beam.dropout_on"))
    if any(grad for _, grad in model.calls):
        fail(f"{call} called the model with gradients enabled.", "decode under `with torch.no_grad():`.")
    expect_type(got, list, call)
    if not all(isinstance(t, int) for t in got):
        fail(f"{call} should return a list of Python ints, got {got}.", "convert with int(...) or .tolist().")
    if got[:1] == [bos_id]:
        fail(f"{call} returned {got}, which starts with <bos> ({bos_id}).",
             mistake_hint("beam.returns_bos"))
    if eos_id in got[:-1]:
        fail(f"{call} returned {got}: tokens after <eos> ({eos_id}).",
             mistake_hint("beam.continues_after_eos"))
    if len(got) > max_len:
        fail(f"{call} returned {len(got)} tokens: at most max_len={max_len} steps.")
    return got


def check_beam_search(beam_search) -> None:
    fn = beam_search
    # beam_size = 1 is greedy decoding
    for make in (greedy_vs_beam_translator, length_penalty_translator):
        model = make().eval()
        expected = _greedy(model, 6)
        got = _decoded(fn, model, 1, 6)
        if got != expected:
            fail(f"with beam_size=1 beam_search should give greedy decoding's tokens {expected}, got {got}.",
                 "a beam of one keeps the single best extension each step; an <eos> extension above it finishes.")
    # a beam of 2 finds a more probable translation than greedy, and restores the training mode
    model = greedy_vs_beam_translator().train()
    got = _decoded(fn, model, 2, 6)
    if not model.training:
        fail("beam_search left the model in eval mode.",
             mistake_hint("beam.mode_not_restored"))
    if got != [B, EOS]:
        hint = None
        if got == [A, EOS]:
            hint = "greedy's answer: keep the beam_size best extensions each step (B has probability 0.4)."
        fail(f"beam_search(beam_size=2) on a model where [B, <eos>] has probability 0.38 and greedy's [A, <eos>] "
             f"0.20 should give {[B, EOS]}, got {got}.", hint)
    # the length penalty ranks the finished hypotheses (the default 0.6 first, then the others)
    short, long = [EOS], [A, A, A, EOS]
    expected = {0.0: short, 0.6: short, 1.0: long, 2.0: long}
    results = {0.6: _decoded(fn, length_penalty_translator().eval(), 2, 8, 0.6)}
    _penalty_verdict(fn, results, {0.6: short})
    with argument("beam_search.length_penalty"):
        results.update({alpha: _decoded(fn, length_penalty_translator().eval(), 2, 8, alpha)
                        for alpha in (0.0, 1.0, 2.0)})
        _penalty_verdict(fn, dict(sorted(results.items())), expected)
    # max_len: after max_len steps the beam is finished as it is
    got = _decoded(fn, length_penalty_translator().eval(), 2, 2, 0.6)
    if got != [A, A]:
        fail(f"with max_len=2 the beam holds [A, A] (log-prob -0.70) and [A, C] and [<eos>] has finished; ranked with "
             f"the penalty [A, A] wins: expected {[A, A]}, got {got}.",
             "after max_len steps, every hypothesis still in the beam is finished as it is.")
    got = _decoded(fn, length_penalty_translator().eval(), 2, 0, 0.6)
    if got != []:
        fail(f"with max_len=0 nothing is generated: expected [], got {got}.",
             "with no step the only hypothesis is [<bos>]: return the tokens after it, [].")
    # other ids: hypotheses start with bos_id (the model answers nonsense after another first token), and eos_id
    # finishes them
    with argument("beam_search.bos_id"):
        model = greedy_vs_beam_translator().eval()
        model.bos = 1
        got = _decoded(fn, model, 2, 6, bos_id=1)
        if got != [B, EOS]:
            fail(f"beam_search(..., bos_id=1) on a model whose hypotheses start with 1 should give {[B, EOS]}, got "
                 f"{got}.", "start every hypothesis with bos_id (not a fixed 2).")
    with argument("beam_search.eos_id"):
        got = _decoded(fn, greedy_vs_beam_translator(eos=1).eval(), 2, 6, eos_id=1)
        if got != [B, 1]:
            fail(f"beam_search(..., eos_id=1) on a model whose end token is 1 should give {[B, 1]}, got {got}.",
                 "a hypothesis is finished when it ends in eos_id (not a fixed 3).")
    passed("beam_search", "(greedy at beam_size=1, a better translation than greedy, the length penalty, "
                          "max_len, other bos_id and eos_id, eval mode restored)")


def _penalty_verdict(fn, results: dict, expected: dict) -> None:
    short, long = [EOS], [A, A, A, EOS]
    if results != expected:
        hint = None
        if all(got == short for got in results.values()):
            # a search that stops once [<eos>] finished (step 1) returns it at max_len=2 too, where ranking the
            # finished hypotheses by the raw score returns [A, A] (log-prob -0.70 against -0.916)
            if _decoded(fn, length_penalty_translator().eval(), 2, 2, 0.6) == short:
                hint = mistake_hint("beam.stops_at_first_finished")
            else:
                hint = mistake_hint("beam.no_length_penalty")
        elif results == {0.0: short, 0.6: short, 1.0: short, 2.0: long}:
            hint = mistake_hint("beam.length_counts_bos")
        elif len(results.get(2.0, ())) == 8 and results[2.0][-1] != EOS:
            # at alpha 2 the live [A, A, A, C, C, ...] outranks both finished ones: a search that goes on past the
            # step where two had finished (or a beam that keeps them, ranked with the live ones) ends with it
            hint = mistake_hint("beam.searches_past_stop")
        fail(f"with A = {A} and <eos> = {EOS}: [<eos>] (L=1, log-prob -0.916) and [A, A, A, <eos>] (L=4, log-prob "
             f"-1.34) are finished; ranked by score / ((5 + L) / 6) ** alpha, alpha 0 and 0.6 pick {short}, 1 and 2 "
             f"pick {long}; got {results}.", hint)

