"""The inputs of the key/value-cache check (`kv_cache.check_cached_greedy_decode`): this submission's cases, for
each a reference Transformer (its weights found by a deterministic search) and sources, and the grader's own
decodes of them: plain greedy decoding, and under the StatefulProjection offsets (`coursekit.probe.hooks`) a
decoder that projects each position once, one that recomputes the prefix and one that projects the memory at every
step."""
from __future__ import annotations

import copy

import torch

from autograder.checks.kit.draws import current_salt, pick
from autograder.checks.kit.inputs import padded_ids, reference, reference_module
from coursekit.probe.hooks import ProjectionRecorder

B, D_MODEL, H, D_FF, NUM_LAYERS = 3, 12, 3, 20, 2
SRC_VOCAB, TGT_VOCAB, TABLE_LEN = 19, 13, 32
SCALE = 1.0                      # size of the StatefulProjection offsets (keys/values are of order 1)


def _other_ids() -> tuple[int, int, int]:
    """This submission's (pad_id, bos_id, eos_id) off the defaults (0, 2, 3): all distinct, off 2 and 3."""
    return pick("kv_cache.ids", [(5, 4, 6), (1, 4, 7), (7, 5, 1), (4, 6, 5), (6, 1, 4)])


def cases() -> tuple:
    """This submission's core cases, (norm_first, pad_id, bos_id, eos_id, max_len, want), all with the default
    bos_id=2 and eos_id=3 (`draws.pick`; with no salt: (False, 0, 2, 3, 8, mixed), (True, 0, 2, 3, 12,
    all_early), (False, 5, 2, 3, 9, mixed)). The model's weights of each case come from a deterministic search over
    this submission's seeds (`find_case`)."""
    pad_id = _other_ids()[0]
    return ((False, 0, 2, 3, pick("kv_cache.max_len_mixed", [8, 7, 9, 10]), "mixed"),
            (True, 0, 2, 3, pick("kv_cache.max_len_early", [12, 10, 11]), "all_early"),
            (False, pad_id, 2, 3, pick("kv_cache.max_len_ids", [9, 8, 10]), "mixed"))


def argument_cases() -> tuple:
    """(criterion, bos_id, eos_id) of the arguments with teeth, each tried with its own other id (the other one at
    its default) on the model and sources of the last core case (another pad_id). With no salt:
    ("cached_greedy_decode.bos_id", 4, 3), ("cached_greedy_decode.eos_id", 2, 6)."""
    _, bos_id, eos_id = _other_ids()
    return (("cached_greedy_decode.bos_id", bos_id, 3), ("cached_greedy_decode.eos_id", 2, eos_id))


def source_length() -> int:
    """This submission's source length S (7 with no salt)."""
    return pick("kv_cache.S", [7, 6, 8, 9])


# The first (model seed, eos bias) tried for each case of `cases()`: the ones the search found with no salt (so the
# fixed inputs need no search); every other candidate comes after them, all in a fixed order. A case qualifies
# (`qualifies`) when decoding stops as `want` says ("mixed": some sequences end, at different steps, and some never
# do; "all_early": all end, at different steps, before max_len), the tokens are varied (at least 4 distinct ids)
# and the three StatefulProjection outcomes differ from each other (so each way of not caching is named); the last
# case's model, which the arguments bos_id and eos_id are tried on, also decodes otherwise with each other id
# (`ids_change_tokens`).
FIRST_TRIED = ((13, 1.0), (11, 1.0), (8, -1.0))
SEARCHED = tuple((seed, bias) for seed in range(100) for bias in (1.0, 0.0, 2.0, 3.0, -1.0, 0.5, 1.5, 2.5))

def transformer_kwargs(norm_first: bool, pad_id: int) -> dict:
    return dict(d_model=D_MODEL, num_heads=H, d_ff=D_FF, num_layers=NUM_LAYERS, max_len=TABLE_LEN, dropout=0.0,
                pad_id=pad_id, norm_first=norm_first)


# ------------------------------------------------------------------------------------- the grader's own decodes
def _wrapped(model, mode: str = "count"):
    clone = copy.deepcopy(model)
    ProjectionRecorder(clone, scale=SCALE, mode=mode)
    return clone


@torch.no_grad()
def _cross_projected_every_step(model, src_ids, max_len, bos_id, eos_id):
    """The cached loop, except that each step projects the memory's cross-attention keys/values again."""
    solution = reference("transformer")
    memory, src_mask = model.encode(src_ids)
    ys = torch.full((src_ids.size(0), 1), bos_id, dtype=torch.long, device=src_ids.device)
    finished = torch.zeros(src_ids.size(0), dtype=torch.bool, device=src_ids.device)
    caches = solution.start_cache(model, memory)
    norm_first = not isinstance(model.decoder.norm, torch.nn.Identity)
    for step in range(max_len):
        if step:
            for block, cache in zip(model.decoder.layers, caches):
                cache["mem_k"] = solution.project_heads(block.cross_attn.w_k, memory, H)
                cache["mem_v"] = solution.project_heads(block.cross_attn.w_v, memory, H)
        logits = solution.next_logits_cached(model, ys, caches, src_mask, norm_first)
        token = logits.argmax(-1).masked_fill(finished, model.pad_id)
        ys = torch.cat([ys, token[:, None]], dim=1)
        finished |= token == eos_id
        if finished.all():
            break
    return ys[:, 1:]


def _outcomes(ref, src_ids, max_len, bos_id, eos_id, plain=None) -> dict[str, torch.Tensor]:
    """Tokens of plain greedy decoding (`plain` when already known), and under the StatefulProjection offsets:
    projecting each position once, recomputing the prefix every step, projecting the memory every step."""
    solution = reference("transformer")
    decode = solution.greedy_decode
    if plain is None:
        plain = decode(ref, src_ids, max_len, bos_id=bos_id, eos_id=eos_id, use_cache=False)
    return {"plain": plain,
            "once": solution.cached_greedy_decode(_wrapped(ref), src_ids, max_len, bos_id=bos_id, eos_id=eos_id),
            "prefix": decode(_wrapped(ref), src_ids, max_len, bos_id=bos_id, eos_id=eos_id, use_cache=False),
            "memory": _cross_projected_every_step(_wrapped(ref), src_ids, max_len, bos_id, eos_id)}


def _model(device, norm_first, pad_id, bos_id, eos_id, seed, bias, built=None):
    """A case's reference Transformer (this submission's weights for `seed`, the eos logit raised by `bias`);
    `built`: (seed, model, its generator bias as initialised) of the previous call, reused for the same seed."""
    if built is not None and built[0] == seed:
        ref, initial = built[1], built[2]
    else:
        ref = reference_module(reference("transformer").Transformer, 200 + seed, SRC_VOCAB, TGT_VOCAB,
                               **transformer_kwargs(norm_first, pad_id)).to(device).eval()
        initial = ref.generator.bias.detach().clone()
    with torch.no_grad():
        ref.generator.bias.copy_(initial)
        ref.generator.bias[[pad_id, bos_id]] = -30.0
        ref.generator.bias[eos_id] += bias
    return ref, (seed, ref, initial)


def _sources(device, pad_id):
    S = source_length()
    return padded_ids([S, 4, S - 1], S, vocab=SRC_VOCAB, pad_id=pad_id, seed=91, device=device)


def candidate(device, norm_first, pad_id, bos_id, eos_id, max_len, seed, bias):
    """A case's reference Transformer, sources and decoding outcomes for one (seed, bias)."""
    ref, src_ids = _model(device, norm_first, pad_id, bos_id, eos_id, seed, bias)[0], _sources(device, pad_id)
    return ref, src_ids, _outcomes(ref, src_ids, max_len, bos_id, eos_id)


_FOUND: dict = {}   # (salt, device, case) -> the (seed, bias) that qualified: one search per submission and case


def find_case(device, norm_first, pad_id, bos_id, eos_id, max_len, want):
    """The case's reference Transformer, sources and outcomes: the first candidate (seed, bias) that `qualifies`
    (bounded, the plain decoding tried first since it is the cheap part; if none qualifies, the last candidate: the
    comparison stays valid, it only exercises less, and the tests assert that the search succeeds)."""
    case = (norm_first, pad_id, bos_id, eos_id, max_len, want)
    key = (current_salt(), str(device), case)
    index = next((i for i, c in enumerate(cases()) if c == case), 0)
    candidates = [_FOUND[key]] if key in _FOUND else [FIRST_TRIED[index], *SEARCHED]
    decode = reference("transformer").greedy_decode
    src_ids = _sources(device, pad_id)
    built = None
    tries_ids = case == cases()[-1]   # the argument cases (bos_id, eos_id) use this model too
    for seed, bias in candidates:
        ref, built = _model(device, norm_first, pad_id, bos_id, eos_id, seed, bias, built)
        plain = decode(ref, src_ids, max_len, bos_id=bos_id, eos_id=eos_id, use_cache=False)
        if not _decodes_as_wanted(plain, eos_id, max_len, want):
            continue
        if tries_ids and not ids_change_tokens(ref, src_ids, max_len, plain):
            continue
        outcomes = _outcomes(ref, src_ids, max_len, bos_id, eos_id, plain)
        if qualifies(outcomes, eos_id, max_len, want):
            break
    else:
        outcomes = _outcomes(ref, src_ids, max_len, bos_id, eos_id, plain)
    if len(_FOUND) > 64:
        _FOUND.clear()
    _FOUND[key] = (seed, bias)
    return ref, src_ids, outcomes


def ids_change_tokens(ref, src_ids, max_len, plain) -> bool:
    """Each argument case's other id (`argument_cases`) changes the tokens of greedy decoding with the default ids
    (`plain`), so that a cache that ignores bos_id or eos_id is seen."""
    decode = reference("transformer").greedy_decode
    return all(not torch.equal(decode(ref, src_ids, max_len, bos_id=bos, eos_id=eos, use_cache=False), plain)
               for _, bos, eos in argument_cases())


def _decodes_as_wanted(plain, eos_id, max_len, want) -> bool:
    """Decoding stops as `want` says, with varied tokens (at least 4 distinct ids)."""
    is_eos = plain == eos_id
    has_eos, first = is_eos.any(dim=1), is_eos.float().argmax(dim=1)
    stops = (want == "mixed" and bool(has_eos.any()) and not bool(has_eos.all()) and int(first.max()) > 0) \
        or (want == "all_early" and bool(has_eos.all()) and plain.size(1) < max_len
            and int(first.min()) != int(first.max()))
    return stops and len(set(plain.flatten().tolist())) >= 4


def qualifies(outcomes, eos_id, max_len, want) -> bool:
    """Decoding stops as `want` says, and projecting twice (prefix or memory) changes the tokens, each in its own
    way (so that the diagnosis can tell them apart)."""
    return _decodes_as_wanted(outcomes["plain"], eos_id, max_len, want) \
        and not torch.equal(outcomes["once"], outcomes["prefix"]) \
        and not torch.equal(outcomes["once"], outcomes["memory"]) \
        and not torch.equal(outcomes["prefix"], outcomes["memory"])
