"""The probes of notebook 10's hidden beam-search check (`beam.py`): three small seq2seq models (their weights), the
source sentences each translates, and the calls made with them, this submission's (autograder/checks/kit/draws.py).

The scalar arguments (beam sizes, max_len, length penalties, bos / eos ids) are drawn with `pick` from the spaces
documented at each draw, whose first option is the value used with no salt; the models and sources come from
`generator`. Some sources are found by a deterministic search over drawn ones, so that each mistake the check must
catch in the core shows on every submission's inputs (`SEARCHED_MISTAKES`, `beam_probes`).
"""
from __future__ import annotations

import functools
import math
from typing import NamedTuple

import torch

from autograder.checks.kit.draws import current_salt, generator, pick
from autograder.checks.kit.inputs import reference
from autograder.checks.translation import mistakes as M
from coursekit.tolerance import RANKING_APART

PROBE_CLASS = "coursekit.probe.translation.BeamSearchProbe"
SRC_VOCAB, TGT_VOCAB, D_MODEL, PROBE_MAX_LEN = 11, 7, 8, 16
EXHAUSTIVE_LEN = 4                       # every sequence of at most 4 tokens: 7 ** 4 = 2401 at the last step
WIDE_BEAM = TGT_VOCAB ** EXHAUSTIVE_LEN  # a beam that never drops a hypothesis within EXHAUSTIVE_LEN steps


def probe_config() -> dict:
    return {"src_vocab_size": SRC_VOCAB, "tgt_vocab_size": TGT_VOCAB, "d_model": D_MODEL,
            "max_len": PROBE_MAX_LEN, "pad_id": 0, "dropout": 0.5}


class BeamProbe(NamedTuple):
    state: dict            # the probe's weights
    bos_id: int
    eos_id: int
    sources: list          # one (1, S) LongTensor per sentence


class BeamCase(NamedTuple):
    probe: int             # index into the probes
    source: int            # index into that probe's sources
    beam_size: int
    max_len: int
    length_penalty: float | None   # None: left out of the call (0.6)
    explicit_ids: bool     # bos_id and eos_id passed (else left out: 2 and 3)
    training: bool         # the model handed in in training mode (dropout on)


class BeamSettings(NamedTuple):
    """The scalar arguments of the beam-search calls, this submission's (`beam_settings`)."""
    small: int                  # the narrow beam (greedy is beam 1, the exhaustive one WIDE_BEAM)
    large: int                  # the wider beam
    middle: int                 # the second probe's third beam
    max_len: int                # the first probe's calls (its exhaustive ones: EXHAUSTIVE_LEN)
    max_lens: tuple[int, int]   # the second probe's calls
    length_penalty: float       # the penalty passed besides 0 and the default 0.6 (left out or passed)
    ids: tuple[int, int]        # the second probe's bos_id and the third's eos_id (the first probe's: 2 / 3)


def beam_settings() -> BeamSettings:
    """Beam sizes from 2 to 6 (two distinct ones per probe, besides greedy and the exhaustive beam), max_len 5 to
    10 (within the probe's 16 positions), a length penalty other than 0 and 0.6 between 0.8 and 1.5, and ids other
    than <pad> 0 and the defaults 2 / 3: a bos_id for the second probe, an eos_id for the third."""
    small, large = pick("translation.beam.sizes", [(2, 5), (2, 4), (3, 5), (2, 6), (3, 6), (3, 4), (4, 6)])
    return BeamSettings(small, large, pick("translation.beam.middle", (3, 2, 4)),
                        pick("translation.beam.max_len", (8, 7, 9, 10)),
                        pick("translation.beam.max_lens", [(6, 7), (5, 7), (6, 8), (7, 6), (7, 9), (8, 6)]),
                        pick("translation.beam.length_penalty", (1.0, 0.8, 0.9, 1.2, 1.5)),
                        pick("translation.beam.ids", [(4, 5), (5, 4), (6, 1), (1, 4), (5, 6), (6, 4), (4, 1)]))


SOURCE_POOL = 24         # sources drawn for each probe model (the first two are the plain ones)
SOURCE_SEARCH = 24       # at most this many more drawn for one model while a search below finds none
MODEL_DRAWS = 24         # at most this many models drawn per probe, one after the other, until the searches succeed


def _sources(generator: torch.Generator):
    """Source sentences (1, S), S from 2 to 7, drawn one after the other from `generator`, without end."""
    j = 0
    while True:
        yield torch.randint(1, SRC_VOCAB, (1, 2 + j % 6), generator=generator)
        j += 1


def _probe_model(draws: torch.Generator, bos_id: int, eos_id: int):
    """A BeamSearchProbe with weights drawn from `draws` (in eval mode): <pad> and <bos> never likely outputs,
    <eos> likelier the longer the hypothesis."""
    from coursekit.probe.translation import BeamSearchProbe

    model = BeamSearchProbe(**probe_config())
    with torch.no_grad():
        for parameter in model.parameters():
            parameter.copy_(torch.randn(parameter.shape, generator=draws) * 0.8)
        model.generator.bias[[0, bos_id]] = -30.0
        model.position_bias[:, eos_id] = -3.0 + 0.7 * torch.arange(PROBE_MAX_LEN)
    return model.eval()


# What the first probe's searched sources must show, each on a source of its own: (the mistake, named by its row of
# mistakes.TABLE, the mistakes whose translation must differ from it in the same call). Ranking by the raw score
# (beam.no_length_penalty), told apart from counting <bos> in L: that mistake also favours short translations, where
# it shows at all, so the diagnosis (which tries ranking by the raw score first) needs a call where the two differ;
# counting <bos> in L (beam.length_counts_bos); searching on past the contract's stopping rule
# (beam.searches_past_stop: the check compares with the contract's search, not with the best it can find); the
# length penalty applied while walking down the candidates (beam.penalty_on_unfinished). All are searched at the
# default penalty 0.6: they are mistakes of the core, which must fail it on every submission's inputs (not only the
# calls with another length_penalty, where they would keep the partial credit of that argument).
SEARCHED_MISTAKES = (("beam.no_length_penalty", ("beam.length_counts_bos",)), ("beam.length_counts_bos", ()),
                     ("beam.searches_past_stop", ()), ("beam.penalty_on_unfinished", ()))
# Other forms of the core's mistakes (mistake id, switches: one of mistakes.FORMS[id]), searched for only when none
# of the sources chosen before shows them (the same way, told from nothing), so that they add a source only to the
# submissions whose other sources miss them: a beam that keeps its finished hypotheses (beam.searches_past_stop)
# differs from the contract's search on only some sources.
SEARCHED_UNLESS_SHOWN = (("beam.searches_past_stop", {"penalty_in_beam": "mixed"}),)


def _apart(a: float, b: float) -> bool:
    """Two ranking scores that the check tells apart (`RANKING_APART`)."""
    return not math.isclose(a, b, rel_tol=RANKING_APART["rtol"], abs_tol=RANKING_APART["atol"])


class _SourceSearch:
    """The sources drawn for the first probe's model (`pool`, drawn on as far as needed) and what the searched
    mistakes do on them: `shows(index, name, others)` says whether one call of the core (a beam of settings.small or
    .large, the default length penalty 0.6) on pool[index] gives a translation of the mistake `name` that ranks
    apart from the reference's (the check compares ranking scores, so it then fails) and that differs from the
    translations of the mistakes `others` (so the diagnosis names it)."""

    def __init__(self, model, draws, bos_id: int, eos_id: int, settings: BeamSettings):
        self.model, self.bos_id, self.eos_id, self.settings = model, bos_id, eos_id, settings
        self.drawn = _sources(draws)
        self.pool = [next(self.drawn) for _ in range(SOURCE_POOL)]
        self.memo = {}   # (source index, beam, lp, searched mistake or None) -> (tokens, raw log-probability)

    def source(self, index: int) -> torch.Tensor:
        while index >= len(self.pool):
            self.pool.append(next(self.drawn))
        return self.pool[index]

    def translation(self, index, beam, lp, name=None, switches=None) -> tuple[list[int], float]:
        """The reference's translation of pool[index] (name None), or that of the mistake `name`: its row of
        mistakes.TABLE, or that row's variant with `switches` (another form)."""
        key = (index, beam, lp, name, None if switches is None else tuple(sorted(switches.items())))
        if key not in self.memo:
            src = self.source(index)
            args = (self.model, src, beam, self.settings.max_len, self.bos_id, self.eos_id, lp)
            if name is None:
                tokens = reference("translation").beam_search(*args)
            else:
                variant, row = M.TABLE[name]
                tokens = variant(*args, **(row if switches is None else switches))
            self.memo[key] = tokens, M.sequence_log_prob(self.model, src, tokens, self.bos_id)
        return self.memo[key]

    def shows(self, index, name, others=(), switches=None) -> bool:
        def apart(a, b, lp) -> bool:
            return _apart(a[1] / penalty(len(a[0]), lp), b[1] / penalty(len(b[0]), lp))

        for lp in (0.6,):   # the core's penalty: these mistakes are wrong at the default, not only with another
            for beam in (self.settings.small, self.settings.large):
                got = self.translation(index, beam, lp, name, switches)
                if apart(got, self.translation(index, beam, lp), lp) and all(
                        len(got[0]) != len(other[0]) or apart(got, other, 0.0)
                        for other in (self.translation(index, beam, lp, o) for o in others)):
                    return True
        return False


def _searched_sources(model, draws, bos_id: int, eos_id: int, settings: BeamSettings) -> list | None:
    """Two plain sources, then for each of SEARCHED_MISTAKES the first source drawn that shows it
    (`_SourceSearch.shows`), then for each of SEARCHED_UNLESS_SHOWN that none of these shows, the first drawn that
    does. None when SOURCE_POOL - 2 + SOURCE_SEARCH sources show one of them nowhere."""
    search = _SourceSearch(model, draws, bos_id, eos_id, settings)
    chosen = [0, 1]
    drawn = range(2, SOURCE_POOL + SOURCE_SEARCH)
    for name, others in SEARCHED_MISTAKES:
        index = next((i for i in drawn if search.shows(i, name, others)), None)
        if index is None:
            return None
        chosen.append(index)
    for name, switches in SEARCHED_UNLESS_SHOWN:
        if not any(search.shows(i, name, switches=switches) for i in chosen):
            index = next((i for i in drawn if search.shows(i, name, switches=switches)), None)
            if index is None:
                return None
            chosen.append(index)
    return [search.source(index) for index in chosen]


def _id_sources(model, draws, bos_id: int, eos_id: int, settings: BeamSettings) -> list | None:
    """The second and third probes' sources: two plain ones, then the first source drawn on which a search that
    ignores the probe's other id (starting with <bos> 2, or finishing at <eos> 3) fails the check in one of the
    probe's calls with max_len settings.max_lens[0] (a beam of settings.small or .middle, the default penalty 0.6):
    its translation is not finished by the probe's eos_id, or ranks apart from the reference's. None when
    SOURCE_POOL - 2 + SOURCE_SEARCH sources have no such call (the model never lets the id matter)."""
    solution = reference("translation")
    wrong_bos, wrong_eos = (2, eos_id) if bos_id != 2 else (bos_id, 3)
    max_len = settings.max_lens[0]
    drawn = _sources(draws)
    sources = [next(drawn) for _ in range(2)]

    def rank(src, tokens) -> float:
        return M.sequence_log_prob(model, src, tokens, bos_id) / penalty(len(tokens), 0.6)

    def shows(src) -> bool:
        for beam in (settings.small, settings.middle):
            right = solution.beam_search(model, src, beam, max_len, bos_id, eos_id, 0.6)
            wrong = solution.beam_search(model, src, beam, max_len, wrong_bos, wrong_eos, 0.6)
            if structure_problem(wrong, max_len, eos_id) or _apart(rank(src, wrong), rank(src, right)):
                return True
        return False

    for _index in range(SOURCE_POOL - 2 + SOURCE_SEARCH):
        src = next(drawn)
        if shows(src):
            return sources + [src]
    return None


def beam_probes(seed: int) -> tuple[list[BeamProbe], list[BeamCase]]:
    """Three random probes (bos 2 / eos 3; another bos_id with eos 3; bos 2 with another eos_id; see
    `_probe_model`), source sentences for each, and the calls (`beam_settings`): greedy (beam 1), two wider beams
    with length penalties 0, 0.6 and another, and a beam wide enough to be an exhaustive search, some on a model
    handed in in training mode. Each call tries one argument with teeth at most (beam.py's `_beam_block`): the
    first probe's calls with a length penalty other than 0.6 try length_penalty, the second's bos_id, the third's
    eos_id; the rest is the core.

    Besides two plain sources, the first probe gets sources found by a deterministic search over sources drawn
    from the seed (`_searched_sources`): one where the length penalty changes the best translation (so that ranking
    by the raw score, `beam.no_length_penalty`, shows), one where counting <bos> in L does
    (`beam.length_counts_bos`), one where searching on after beam_size finished hypotheses does, one where dividing
    the stored scores while walking does (`beam.penalty_on_unfinished`), and, when none of these shows it, one where
    keeping the finished hypotheses in the beam does (a form of `beam.searches_past_stop`), each at the default
    penalty 0.6 (they are core mistakes); the second and third probes get one source where ignoring their
    other id shows (`_id_sources`). When a model shows one of them on none of its sources, the next model drawn is
    tried (at most MODEL_DRAWS), so that each shows on every submission's inputs."""
    return _beam_probes(seed, current_salt())


@functools.lru_cache(maxsize=4)
def _beam_probes(seed: int, salt: int) -> tuple[list[BeamProbe], list[BeamCase]]:
    """beam_probes for this salt (the search costs up to seconds: done once per submission and process; the
    tensors handed out are never changed in place by the checks, which move or clone them)."""
    settings = beam_settings()
    probes = []
    # the defaults 2 / 3 (the core and the length penalty), another bos_id, another eos_id (one argument each)
    for k, (bos_id, eos_id) in enumerate(((2, 3), (settings.ids[0], 3), (2, settings.ids[1]))):
        draws = generator(seed + k)
        for _attempt in range(MODEL_DRAWS):
            model = _probe_model(draws, bos_id, eos_id)
            search = _searched_sources if k == 0 else _id_sources
            sources = search(model, draws, bos_id, eos_id, settings)
            if sources is not None:
                break
        else:
            raise RuntimeError(f"beam_probes: no probe model of {MODEL_DRAWS} shows every searched mistake "
                               f"(probe {k})")
        state = {key: value.detach().clone() for key, value in model.state_dict().items()}
        probes.append(BeamProbe(state, bos_id, eos_id, sources))
    small, large, middle, max_len, (first, second) = settings[:5]
    cases = []
    for source in range(len(probes[0].sources)):
        cases.append(BeamCase(0, source, 1, max_len, None, False, False))
        cases += [BeamCase(0, source, beam, max_len, lp, False, False)
                  for beam in (small, large) for lp in (0.0, None, settings.length_penalty)]
        cases += [BeamCase(0, source, WIDE_BEAM, EXHAUSTIVE_LEN, lp, False, False)
                  for lp in (0.0, 0.6, settings.length_penalty)]
    for k in (1, 2):   # the ids passed (one of them its default), the length penalty at its default 0.6
        for source in range(len(probes[k].sources)):
            cases += [BeamCase(k, source, 1, first, 0.6, True, False),
                      BeamCase(k, source, small, first, None, True, False),
                      BeamCase(k, source, large, second, 0.6, True, False),
                      BeamCase(k, source, middle, first, None, True, False)]
    for source in range(2):
        cases += [BeamCase(0, source, beam, max_len, 0.6, False, True) for beam in (1, small)]
    return probes, cases


def penalty(length: int, length_penalty: float) -> float:
    """The length penalty ((5 + L) / 6) ** length_penalty that divides a finished hypothesis's log-probability."""
    return ((5 + length) / 6) ** length_penalty


def structure_problem(tokens: list[int], max_len: int, eos_id: int) -> str | None:
    """What makes `tokens` no finished hypothesis of the search (None: nothing)."""
    if any(not 0 <= t < TGT_VOCAB for t in tokens):
        return "the returned tokens are not ids of the target vocabulary"
    if len(tokens) > max_len:
        return f"{len(tokens)} tokens returned, more than max_len={max_len}"
    if eos_id in tokens[:-1]:
        return "a token follows <eos>"
    if not tokens or (tokens[-1] != eos_id and len(tokens) < max_len):
        return "the hypothesis neither ends in <eos> nor has max_len tokens: it is not finished"
    return None

