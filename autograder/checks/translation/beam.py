"""Hidden check of notebook 10's beam search: `check_beam_search`.

Everything is judged here, in the grader's process: against an exhaustive search over every output sequence of a
tiny model, the reference's `greedy_decode` (beam 1) and elsewhere the reference (`solutions.translation`). Beam
search is judged by the ranking score of the returned tokens, not by the tokens, since ties may fall either way.

The probes (models, sources, calls) are this submission's (`beam_probes.py`). The core leaves every optional
argument at its default (left out or passed); the calls with another value of an argument with teeth
(coursekit/criteria.py: bos_id, eos_id, length_penalty) run in its `argument` block, and no call tries two of them at
once, so an answer wrong in one argument only fails that criterion alone and keeps 1 - 0.25 / 3 of the points.
"""
from __future__ import annotations

import contextlib
import math

import torch
import torch.nn.functional as F

from autograder.checks.kit.compare import describe, is_integer
from autograder.checks.kit.criteria import argument
from autograder.checks.kit.inputs import reference
from autograder.checks.kit.remote import hidden_check
from autograder.checks.kit.tolerance import tolerance
from autograder.checks.kit.toolkit import call, expect_callable, expected_got, fail, lend_model, shape_of, start_check
from autograder.checks.translation import mistakes as M
from autograder.checks.translation.beam_probes import (
    PROBE_CLASS, TGT_VOCAB, WIDE_BEAM, BeamCase, BeamProbe, beam_probes, penalty, probe_config, structure_problem,
)
from autograder.checks.translation.common import known_mistakes

BEAM_SEED = 170


def _local_probe(state: dict, device):
    """A probe model with the weights `state`, on `device`, in eval mode: the grader's copy of a lent one."""
    from coursekit.probe.translation import BeamSearchProbe

    model = BeamSearchProbe(**probe_config())
    model.load_state_dict(state)
    return model.to(device).eval()


def exhaustive_best(model, src_ids, max_len: int, bos_id: int, eos_id: int, length_penalty: float) -> float:
    """The highest ranking score over EVERY finished sequence of at most `max_len` tokens (ending in eos_id, or
    max_len tokens long), enumerated step by step with the model in eval mode."""
    with torch.no_grad():
        memory, src_mask = model.encode(src_ids)                                   # (1, S, d), (1, 1, 1, S)
        prefixes = torch.full((1, 1), bos_id, device=src_ids.device)               # (n, t)
        scores = torch.zeros(1, dtype=torch.float64, device=src_ids.device)        # (n,)
        best = -math.inf
        for length in range(1, max_len + 1):
            n = prefixes.size(0)
            logits = model.decode(prefixes, memory.expand(n, -1, -1), src_mask.expand(n, -1, -1, -1))[:, -1]
            total = scores[:, None] + F.log_softmax(logits.double(), dim=-1)        # (n, V)
            ends = total if length == max_len else total[:, eos_id:eos_id + 1]     # the finished ones
            best = max(best, float(ends.max()) / penalty(length, length_penalty))
            if length < max_len:
                keep = torch.arange(total.size(1), device=src_ids.device) != eos_id
                tokens = torch.arange(total.size(1), device=src_ids.device)[keep]   # (V - 1,)
                prefixes = torch.cat([prefixes.repeat_interleave(len(tokens), 0),
                                      tokens.repeat(n)[:, None]], dim=1)            # (n * (V - 1), t + 1)
                scores = total[:, keep].reshape(-1)
    return best


def _as_tokens(got, tested) -> list[int]:
    """The returned tokens as a list of ints, or a clear failure."""
    if isinstance(got, torch.Tensor) and got.dim() == 1 and not got.is_floating_point():
        got = got.tolist()
    if not isinstance(got, (list, tuple)) or not all(is_integer(i) for i in got):
        fail("beam_search must return a list of int token ids.", tested=tested,
             details=[f"got a {type(got).__name__}"])
    return [int(i) for i in got]


class Beams:
    """The grader's side of the beam-search probes: the probes built locally, scoring and the known mistakes."""

    def __init__(self, seed: int, device):
        self.device = device
        self.probes, self.cases = beam_probes(seed)
        self.models = [_local_probe(p.state, device) for p in self.probes]
        self.tol = tolerance(device)

    def source(self, case: BeamCase) -> torch.Tensor:
        return self.probes[case.probe].sources[case.source].to(self.device)

    @staticmethod
    def length_penalty(case: BeamCase) -> float:
        return 0.6 if case.length_penalty is None else case.length_penalty

    def close(self, a: float, b: float) -> bool:
        return math.isclose(a, b, rel_tol=self.tol["rtol"], abs_tol=self.tol["atol"])

    def raw_score(self, case: BeamCase, tokens: list[int]) -> float:
        probe = self.probes[case.probe]
        return M.sequence_log_prob(self.models[case.probe], self.source(case), tokens, probe.bos_id)

    def rank(self, case: BeamCase, tokens: list[int]) -> float:
        return self.raw_score(case, tokens) / penalty(len(tokens), self.length_penalty(case))

    def expected(self, case: BeamCase) -> tuple[float, str]:
        """The ranking score to reach, and what it is."""
        probe, model = self.probes[case.probe], self.models[case.probe]
        if case.beam_size == WIDE_BEAM:
            best = exhaustive_best(model, self.source(case), case.max_len, probe.bos_id, probe.eos_id,
                                   self.length_penalty(case))
            return best, (f"the best ranking score over all sequences of at most {case.max_len} tokens (a beam of "
                          f"{WIDE_BEAM} drops none)")
        beam_search = reference("translation").beam_search
        tokens = beam_search(model, self.source(case), case.beam_size, case.max_len, probe.bos_id, probe.eos_id,
                             self.length_penalty(case))
        return self.rank(case, tokens), "the ranking score of the reference's translation"

    def greedy(self, case: BeamCase) -> list[int]:
        probe = self.probes[case.probe]
        greedy_decode = reference("transformer").greedy_decode
        return greedy_decode(self.models[case.probe], self.source(case), case.max_len, bos_id=probe.bos_id,
                             eos_id=probe.eos_id, use_cache=False)[0].tolist()

    def run(self, case: BeamCase, variant, switches) -> list[int]:
        """A known mistake's tokens (`variant` with `switches`, a row of the topic's table), the local model in the
        mode the student's was handed in."""
        probe, model = self.probes[case.probe], self.models[case.probe]
        model.train(case.training)
        try:
            return variant(model, self.source(case), case.beam_size, case.max_len, probe.bos_id, probe.eos_id,
                           self.length_penalty(case), **switches)
        finally:
            model.eval()

    def variant(self, case: BeamCase, **flags) -> list[int]:
        """mistakes.beam_search's tokens with `flags` switched on (`run`)."""
        return self.run(case, M.beam_search, flags)

    def same(self, case: BeamCase, got: list[int], other: list[int]) -> bool:
        """The same hypothesis, or one that no ranking can tell from it (same length and log-probability)."""
        if got == other:
            return True
        return (len(got) == len(other) and all(0 <= t < TGT_VOCAB for t in got)
                and self.close(self.raw_score(case, got), self.raw_score(case, other)))

    def diagnosis(self, results: list[tuple[BeamCase, list[int]]]) -> str | None:
        """The known mistake that reproduces the student's tokens on every call (each variant runs call by call, and
        stops at the first that differs)."""
        rows = known_mistakes("beam.", lambda variant, switches: (self.run(case, variant, switches)
                                                                  for case, _got in results))
        for mistake, produce in rows:
            try:
                if all(self.same(case, got, tokens) for (case, got), tokens in zip(results, produce())):
                    return mistake
            except Exception:  # noqa: BLE001 -- a variant that cannot run here does not match
                continue
        return None


def _beam_block(case: BeamCase, probe: BeamProbe):
    """The criterion block of one call: the argument with teeth it tries at another value, or the core."""
    if probe.bos_id != 2:
        return argument("beam_search.bos_id")
    if probe.eos_id != 3:
        return argument("beam_search.eos_id")
    if case.length_penalty not in (None, 0.6):
        return argument("beam_search.length_penalty")
    return contextlib.nullcontext()


def _beam_tested(case: BeamCase, probe: BeamProbe, kwargs: dict) -> str:
    shown = "".join(f", {k}={v}" for k, v in kwargs.items())
    return (f"beam_search(a small seq2seq model{' in training mode' if case.training else ''} with a target "
            f"vocabulary of {TGT_VOCAB}, src_ids {shape_of(probe.sources[case.source])}, "
            f"beam_size={case.beam_size}, max_len={case.max_len}{shown})")


@hidden_check
def check_beam_search(beam_search) -> None:
    """beam_search(model, src_ids (1, S), beam_size, max_len, bos_id=2, eos_id=3, length_penalty=0.6) -> list[int]."""
    device = start_check()
    expect_callable(beam_search, "beam_search")
    beams = Beams(BEAM_SEED, device)
    lent, runs = {}, []
    # every call first (one call alone may not tell two known mistakes apart), then the verdicts in order
    for case in beams.cases:
        probe = beams.probes[case.probe]
        if (case.probe, case.training) not in lent:
            lent[case.probe, case.training] = lend_model(
                beam_search.channel, PROBE_CLASS, probe_config(), probe.state, device, case.training,
                "a small seq2seq model lent to your beam_search")
        model = lent[case.probe, case.training]
        kwargs = {"bos_id": probe.bos_id, "eos_id": probe.eos_id} if case.explicit_ids else {}
        if case.length_penalty is not None:
            kwargs["length_penalty"] = case.length_penalty
        tested = _beam_tested(case, probe, kwargs)
        with _beam_block(case, probe):
            got = _as_tokens(call("beam_search", beam_search, model, beams.source(case).clone(), case.beam_size,
                                  case.max_len, tested=tested, **kwargs), tested)
            restored = describe(model, "the lent model").get("training") == case.training
            runs.append((case, tested, got, restored))
    results = [(case, got) for case, _tested, got, _restored in runs]

    def verdict(case, tested, got, restored):
        problem = structure_problem(got, case.max_len, beams.probes[case.probe].eos_id)
        if problem:
            fail(f"beam_search: {problem}.", tested=tested, mistake=beams.diagnosis(results),
                 hint="return the best-ranked finished hypothesis's tokens after <bos>, ending in <eos> when it "
                      "finished with one")
        if case.beam_size == 1:
            greedy = beams.greedy(case)
            if got != greedy:
                fail("beam_search with beam_size=1 does not return the tokens of greedy decoding.", tested=tested,
                     details=expected_got(f"{len(greedy)} tokens", f"{len(got)} tokens"),
                     mistake=beams.diagnosis(results),
                     hint="with one hypothesis, each step keeps the most likely next token")
        else:
            expected, what = beams.expected(case)
            score = beams.rank(case, got)
            if not beams.close(score, expected):
                fail("beam_search: the returned translation is not the best-ranked hypothesis of the search.",
                     tested=tested, details=[*expected_got(f"{what}: {expected:.5f}",
                                                           f"{score:.5f} ({len(got)} tokens)"),
                                             "ranking score: log-probability / ((5 + L) / 6) ** length_penalty"],
                     mistake=beams.diagnosis(results))
        if not restored:
            fail("beam_search does not restore the model's training mode.", tested=tested,
                 mistake="beam.mode_not_restored")

    for case, tested, got, restored in runs:
        with _beam_block(case, beams.probes[case.probe]):
            verdict(case, tested, got, restored)

