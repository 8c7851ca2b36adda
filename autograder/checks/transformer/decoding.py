"""The inputs of the greedy-decoding check (`checks.check_greedy_decode`): this submission's cases, and for each a
`DecodingProbe` (the public stand-in for a trained seq2seq model) with sources whose decoding exercises what the
case asks, found by a deterministic search; `in_kernel` builds the same probe in the student's kernel."""
from __future__ import annotations

import torch

from autograder.checks.kit.draws import generator, pick
from autograder.checks.kit.inputs import padded_ids, reference, short_length
from autograder.checks.kit.remote import new
from coursekit.probe.decoding import DecodingProbe


def greedy_cases() -> tuple:
    """(criterion, pad_id, bos_id, eos_id, max_len, want) of this submission's greedy-decoding cases. The core
    (criterion None) uses the default bos_id=2 and eos_id=3, with model.pad_id 0 twice, then another pad id; each
    argument with teeth is then tried with its own other id (the other one at its default). The other ids are all
    distinct, off the defaults 2 and 3, below both vocabularies, and below every max_len so that swapping max_len
    with an id shows. With no salt: (None, 0, 2, 3, 8, mixed), (None, 0, 2, 3, 12, all_early),
    (None, 5, 2, 3, 9, mixed), ("greedy_decode.bos_id", 5, 4, 3, 9, mixed), ("greedy_decode.eos_id", 5, 2, 6, 9,
    mixed)."""
    pad_id, bos_id, eos_id = pick("transformer.greedy_ids", [(5, 4, 6), (1, 4, 7), (7, 5, 1), (4, 6, 5), (6, 1, 4)])
    max_len = pick("transformer.greedy_max_len_ids", [9, 8, 10, 11])
    return ((None, 0, 2, 3, pick("transformer.greedy_max_len_mixed", [8, 7, 9, 10]), "mixed"),
            (None, 0, 2, 3, pick("transformer.greedy_max_len_early", [12, 10, 11, 13]), "all_early"),
            (None, pad_id, 2, 3, max_len, "mixed"),
            ("greedy_decode.bos_id", pad_id, bos_id, 3, max_len, "mixed"),
            ("greedy_decode.eos_id", pad_id, 2, eos_id, max_len, "mixed"))


def decodes_as_wanted(out: torch.Tensor, eos_id: int, max_len: int, want: str) -> bool:
    """want="mixed": some sequences produce eos_id (not at the first step; one of them before the last column, so
    padding follows it) and some never do. want="all_early": every sequence produces eos_id, at different steps,
    before max_len."""
    is_eos = out == eos_id
    has_eos, first = is_eos.any(dim=1), is_eos.float().argmax(dim=1)
    if want == "mixed":
        return bool(has_eos.any()) and not bool(has_eos.all()) and int(first.max()) > 0 \
            and bool((has_eos & (first < out.size(1) - 1)).any())
    return bool(has_eos.all()) and out.size(1) < max_len and int(first.min()) != int(first.max())


def decoding_model(device, z, pad_id: int, bos_id: int, eos_id: int, max_len: int, want: str):
    """A random `DecodingProbe` (this submission's weights; `z`: the sizes of the checks of 06, `checks.sizes()`)
    and sources whose greedy decoding exercises stopping and padding as `want` says (`decodes_as_wanted`) and, with
    ids other than the defaults, whose decoding with the default ids differs (so that an id ignored shows). Found
    by a deterministic search over this submission's seeds and eos biases (pad and bos are made unlikely as
    outputs); if none qualifies, the last candidate is used: the comparison with the reference stays valid, it only
    exercises less (the tests assert the search succeeds)."""
    solution = reference("transformer")
    S = z.S
    src_ids = padded_ids([S, short_length("transformer.greedy_short", 4, S), S - 1], S, vocab=z.src_vocab,
                         pad_id=pad_id, seed=87, device=device)
    for seed in range(40):
        for bias in (0.0, 1.0, 2.0, 3.0):
            draw = generator(100 + seed)
            model = DecodingProbe(z.src_vocab, z.tgt_vocab, d_model=z.d_model, max_len=z.max_len, pad_id=pad_id)
            with torch.no_grad():
                for parameter in model.parameters():
                    parameter.copy_(torch.randn(parameter.shape, generator=draw) * 1.5)
                model.generator.bias[[pad_id, bos_id]] = -30.0
                model.generator.bias[eos_id] += bias
            model.to(device).eval()
            out = solution.greedy_decode(model, src_ids, max_len, bos_id=bos_id, eos_id=eos_id, use_cache=False)
            if decodes_as_wanted(out, eos_id, max_len, want) and \
                    ((bos_id, eos_id) == (2, 3) or not torch.equal(out, solution.greedy_decode(
                        model, src_ids, max_len, use_cache=False))):   # the defaults would decode otherwise
                return model, src_ids
    return model, src_ids


def in_kernel(greedy_decode, model: DecodingProbe, device):
    """The same DecodingProbe, built in the student's kernel with the grader's weights."""
    theirs = new(greedy_decode.channel, "coursekit.probe.decoding.DecodingProbe",
                 model.src_embedding.num_embeddings, model.tgt_embedding.num_embeddings,
                 d_model=model.mix.out_features, max_len=model.max_len, pad_id=model.pad_id)
    theirs.load_state(model.state_dict())
    theirs.attr("to")(device)
    theirs.attr("eval")()
    return theirs
