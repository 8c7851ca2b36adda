"""Proofs for solutions/translation.py (notebook 10): the loss against F.cross_entropy(label_smoothing=), the
schedule against the paper's formula and its shape, beam search against an exhaustive search and against
greedy_decode, corpus BLEU against sacrebleu on generated corpora."""
from __future__ import annotations

import itertools
import math

import pytest
import sacrebleu
import torch
import torch.nn.functional as F
from hypothesis import given, settings
from hypothesis import strategies as st
from sacrebleu.metrics import BLEU

from coursekit.checks.translation.beam import TableTranslator
from coursekit.probe.decoding import DecodingProbe
from solutions.transformer import Transformer, greedy_decode
from solutions.translation import beam_search, corpus_bleu, label_smoothed_cross_entropy, noam_lr

PAD, BOS, EOS = 0, 2, 3


# ------------------------------------------------------------------------------------------------- the loss

@settings(max_examples=60, deadline=None)
@given(n=st.integers(1, 12), v=st.integers(2, 9), smoothing=st.floats(0.0, 0.99), seed=st.integers(0, 10 ** 6),
       ignore=st.integers(-100, 8), padded=st.floats(0.0, 0.8))
def test_loss_equals_torch_label_smoothing(n, v, smoothing, seed, ignore, padded):
    generator = torch.Generator().manual_seed(seed)
    logits = torch.randn(n, v, generator=generator, dtype=torch.float64) * 3
    targets = torch.randint(v, (n,), generator=generator)
    targets[torch.rand(n, generator=generator) < padded] = ignore               # padding, ignore_index maybe != 0
    if bool((targets == ignore).all()):
        targets[0] = (ignore + 1) % v if 0 <= ignore < v else 0                  # at least one position kept
    ours = label_smoothed_cross_entropy(logits, targets, smoothing, ignore)
    theirs = F.cross_entropy(logits, targets, ignore_index=ignore, label_smoothing=smoothing)
    assert ours.dim() == 0
    assert torch.allclose(ours, theirs, rtol=1e-10, atol=1e-12)


def test_loss_gradient_equals_torch_and_skips_padding(device):
    generator = torch.Generator().manual_seed(3)
    logits = torch.randn(7, 11, generator=generator).to(device)
    targets = torch.tensor([4, 0, 0, 10, 2, 0, 7], device=device)
    ours_in, theirs_in = logits.clone().requires_grad_(), logits.clone().requires_grad_()
    label_smoothed_cross_entropy(ours_in, targets, 0.1, 0).backward()
    F.cross_entropy(theirs_in, targets, ignore_index=0, label_smoothing=0.1).backward()
    assert torch.allclose(ours_in.grad, theirs_in.grad, atol=1e-6)
    assert ours_in.grad[targets == 0].abs().max() == 0


def test_loss_spreads_the_mass_over_all_classes_and_means_over_kept_positions():
    # a confident correct prediction: the smoothed loss is (1 - s) * nll + s * mean_v(-log p_v), written out
    logits = torch.tensor([[4.0, 0.0, 0.0, 0.0], [0.0, 0.0, 0.0, 0.0], [1.0, 2.0, 3.0, 4.0]])
    targets = torch.tensor([0, 2, 3])
    log_p = logits.log_softmax(-1)
    rows = [(0.8 * -log_p[i, t] + 0.2 * -log_p[i].sum() / 4) for i, t in enumerate(targets.tolist())]
    assert torch.isclose(label_smoothed_cross_entropy(logits, targets, 0.2, ignore_index=-1), sum(rows) / 3)
    # padded position 1 (target 2 = ignore_index) is left out of both the sum and the count
    assert torch.isclose(label_smoothed_cross_entropy(logits, targets, 0.2, ignore_index=2), (rows[0] + rows[2]) / 2)
    # a uniform prediction costs log V whatever the smoothing
    assert torch.isclose(label_smoothed_cross_entropy(logits[1:2], targets[1:2], 0.7), torch.tensor(math.log(4)))


def test_smoothing_zero_is_plain_cross_entropy_and_out_of_range_raises():
    generator = torch.Generator().manual_seed(4)
    logits, targets = torch.randn(5, 6, generator=generator), torch.tensor([1, 2, 0, 5, 3])
    assert torch.allclose(label_smoothed_cross_entropy(logits, targets, 0.0), F.cross_entropy(logits, targets,
                                                                                               ignore_index=0))
    for smoothing in (-1e-9, -0.5, 1.0, 1.2):
        with pytest.raises(ValueError):
            label_smoothed_cross_entropy(logits, targets, smoothing)


# --------------------------------------------------------------------------------------------- the schedule

def paper_rate(step_num, d_model, warmup_steps):
    """Vaswani et al. (2017), eq. (3): lrate = d_model^-0.5 * min(step_num^-0.5, step_num * warmup_steps^-1.5)."""
    return d_model ** -0.5 * min(step_num ** -0.5, step_num * warmup_steps ** -1.5)


@pytest.mark.parametrize("d_model, warmup", [(512, 4000), (256, 400), (64, 1), (32, 7)])
def test_noam_equals_the_paper_and_has_its_shape(d_model, warmup):
    steps = range(1, 6 * warmup + 50)
    rates = [noam_lr(step, d_model, warmup) for step in steps]
    for step, rate in zip(steps, rates):
        assert math.isclose(rate, paper_rate(step, d_model, warmup), rel_tol=1e-12)
        assert math.isclose(noam_lr(step, d_model, warmup, factor=2.5), 2.5 * rate, rel_tol=1e-12)
    assert max(steps, key=lambda s: rates[s - 1]) == warmup                         # the peak at warmup_steps
    assert math.isclose(rates[warmup - 1], (d_model * warmup) ** -0.5, rel_tol=1e-12)
    for s in range(1, warmup + 1):                                                   # a linear rise
        assert math.isclose(rates[s - 1], s * rates[0], rel_tol=1e-9)
    for s in (warmup, warmup + 3, 2 * warmup):                                       # then 1 / sqrt(step)
        assert math.isclose(noam_lr(4 * s, d_model, warmup), rates[s - 1] / 2, rel_tol=1e-12)
    assert isinstance(rates[0], float)


def test_noam_step_zero_counts_as_one_and_warmup_below_one_raises():
    assert noam_lr(0, 512, 4000) == noam_lr(1, 512, 4000) > 0
    for warmup in (0, -1):
        with pytest.raises(ValueError):
            noam_lr(10, 512, warmup)


# ------------------------------------------------------------------------------------------------ beam search

@torch.no_grad()
def sequence_scores(model, src, sequences) -> list[float]:
    """Sum of log_softmax(next-token logits) over each sequence's tokens after <bos>, in float64; sequences of one
    length are scored in one batch (the decoder is causal: position t sees tokens up to t)."""
    memory, src_mask = model.encode(src)                                            # (1, S, d), (1, 1, 1, S)
    scores = {}
    for length in {len(seq) for seq in sequences}:
        group = [seq for seq in sequences if len(seq) == length]
        tokens = torch.tensor(group)                                                # (n, L)
        ys = torch.cat([torch.full((len(group), 1), BOS), tokens[:, :-1]], dim=1)   # (n, L): <bos> + all but last
        log_p = model.decode(ys, memory.expand(len(group), -1, -1),
                             src_mask.expand(len(group), -1, -1, -1)).double().log_softmax(-1)  # (n, L, V)
        for seq, row in zip(group, log_p.gather(-1, tokens[..., None]).squeeze(-1).sum(-1).tolist()):
            scores[tuple(seq)] = row
    return [scores[tuple(seq)] for seq in sequences]


def rank(score, length, alpha):
    return score / ((5 + length) / 6) ** alpha


def all_translations(vocab, max_len) -> list[list[int]]:
    """Every finished sequence: up to max_len tokens ending in <eos>, and the sequences of max_len tokens without
    <eos> (what is left in the beam at max_len)."""
    words = [v for v in range(vocab) if v != EOS]
    finished = [list(prefix) + [EOS] for length in range(max_len) for prefix in itertools.product(words, repeat=length)]
    return finished + [list(seq) for seq in itertools.product(words, repeat=max_len)]


def exhaustive_best(model, src, vocab, max_len, alphas) -> dict[float, float]:
    """The best ranking score among all translations, for each length penalty in `alphas`."""
    candidates = all_translations(vocab, max_len)
    scores = sequence_scores(model, src, candidates)
    return {alpha: max(rank(score, len(c), alpha) for c, score in zip(candidates, scores)) for alpha in alphas}


def probe_model(seed, vocab=5):
    torch.manual_seed(seed)
    return DecodingProbe(6, vocab, d_model=8, max_len=8).eval()


def course_model(seed, vocab=6, dropout=0.0, eos_bias=-1.5):
    """A tiny course Transformer whose random weights would emit <eos> at once: <pad> and <bos> are made impossible
    and <eos> less likely, so decoding runs for several tokens."""
    torch.manual_seed(seed)
    model = Transformer(7, vocab, d_model=16, num_heads=2, d_ff=32, num_layers=2, max_len=32, dropout=dropout)
    with torch.no_grad():
        model.generator.bias[PAD] = model.generator.bias[BOS] = -30.0
        model.generator.bias[EOS] += eos_bias
    return model.eval()


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_a_large_beam_finds_the_exhaustive_best(seed):
    alphas = (0.0, 0.6, 1.0)
    for model, vocab, max_len in ((probe_model(seed), 5, 4), (course_model(seed, eos_bias=0.0), 6, 3)):
        src = torch.tensor([[1 + seed, 4, 5, 0]])
        best = exhaustive_best(model, src, vocab, max_len, alphas)
        for alpha in alphas:
            beam = beam_search(model, src, vocab ** max_len, max_len, length_penalty=alpha)
            got = rank(sequence_scores(model, src, [beam])[0], len(beam), alpha)
            assert math.isclose(got, best[alpha], rel_tol=1e-5, abs_tol=1e-6)


@pytest.mark.parametrize("seed", range(4))
def test_beam_one_is_greedy_decode_on_the_course_transformer(seed, device):
    model = course_model(seed, vocab=9).to(device)
    lengths = []
    for src in ([[1, 4, 5, 6, 0]], [[6, 5]], [[2, 2, 3, 1]]):
        src = torch.tensor(src, device=device)
        greedy = greedy_decode(model, src, 12)[0].tolist()
        greedy = greedy[:greedy.index(EOS) + 1] if EOS in greedy else greedy       # without the padding after it
        assert beam_search(model, src, 1, 12) == greedy
        lengths.append(len(greedy))
    assert max(lengths) >= 3, f"a degenerate model: greedy lengths {lengths}"


def test_the_output_never_continues_after_eos_nor_starts_with_bos():
    for seed in range(5):
        model = course_model(seed, vocab=8, eos_bias=0.5)
        for beam_size in (2, 5):
            out = beam_search(model, torch.tensor([[1, 5, 6]]), beam_size, 10)
            assert EOS not in out[:-1] and BOS not in out                             # <bos> is impossible here
            assert len(out) <= 10


def length_model():
    """The short [<eos>] (0.4) against the long [4, 4, 4, <eos>] (0.55 * 0.9 * 0.9 * 0.6 = 0.267); the runner-up
    branch never finishes."""
    return TableTranslator({(): {4: 0.55, EOS: 0.4, 5: 0.05}, (4,): {4: 0.9, 6: 0.1}, (4, 4): {4: 0.9, 5: 0.1},
                            (4, 4, 4): {EOS: 0.6, 6: 0.4}}, default={6: 1.0}).eval()


def test_the_length_penalty_changes_the_chosen_length():
    src = torch.tensor([[1, 2]])
    chosen = {alpha: beam_search(length_model(), src, 2, 8, length_penalty=alpha) for alpha in (0.0, 1.0)}
    assert chosen == {0.0: [EOS], 1.0: [4, 4, 4, EOS]}
    # and each is the exhaustive best, under its own ranking, among the translations of at most 4 tokens
    best = exhaustive_best(length_model(), src, 7, 4, chosen)
    for alpha, tokens in chosen.items():
        score = sequence_scores(length_model(), src, [tokens])[0]
        assert math.isclose(rank(score, len(tokens), alpha), best[alpha], rel_tol=1e-6)


def test_training_mode_is_restored_and_dropout_is_off(device):
    model = course_model(3, vocab=9, dropout=0.5).to(device)
    src = torch.tensor([[1, 4, 5, 6]], device=device)
    expected = beam_search(model, src, 3, 10)
    model.train()
    assert [beam_search(model, src, 3, 10) for _ in range(3)] == [expected] * 3
    assert model.training
    assert all(module.training for module in model.modules())
    model.eval()
    beam_search(model, src, 3, 10)
    assert not model.training


def test_the_source_is_encoded_once_and_max_len_bounds_the_steps():
    model = length_model()
    calls = []
    encode = model.encode
    model.encode = lambda src: calls.append(src) or encode(src)
    assert beam_search(model, torch.tensor([[1, 2]]), 2, 0) == []
    assert beam_search(model, torch.tensor([[1, 2]]), 2, 2, length_penalty=0.6) == [4, 4]   # unfinished, as is
    assert beam_search(model, torch.tensor([[1, 2]]), 2, 1, length_penalty=0.0) == [4]        # -0.60 > log 0.4
    assert len(calls) == 3


# ------------------------------------------------------------------------------------------------------ BLEU

def sacre(hypotheses, references, max_n=4) -> float:
    return BLEU(max_ngram_order=max_n, tokenize="none", smooth_method="none", force=True).corpus_score(
        [" ".join(h) for h in hypotheses], [[" ".join(r) for r in references]]).score


WORDS = st.sampled_from(["a", "the", "dog", "runs", "on", "grass", "."])
SENTENCE = st.lists(WORDS, max_size=9)


@settings(max_examples=150, deadline=None)
@given(pairs=st.lists(st.tuples(SENTENCE, SENTENCE), min_size=1, max_size=6), max_n=st.integers(1, 4))
def test_bleu_equals_sacrebleu_on_generated_corpora(pairs, max_n):
    hypotheses, references = [h for h, _ in pairs], [r for _, r in pairs]
    ours = corpus_bleu(hypotheses, references, max_n)
    assert 0.0 <= ours <= 100.0
    assert math.isclose(ours, sacre(hypotheses, references, max_n), rel_tol=1e-9, abs_tol=1e-9)


@pytest.mark.parametrize("seed", range(20))
def test_bleu_equals_sacrebleu_on_noisy_copies(seed):
    """References of 3-15 words; hypotheses drop, repeat, swap and replace some of them: most n-gram orders match,
    so the scores are far from 0 (hypothesis' corpora above are often 0)."""
    generator = torch.Generator().manual_seed(seed)
    vocab = [f"w{i}" for i in range(30)]

    def draw(n):
        return torch.randint(n, (1,), generator=generator).item()

    references, hypotheses = [], []
    for _ in range(1 + draw(8)):
        ref = [vocab[draw(30)] for _ in range(3 + draw(13))]
        hyp = []
        for word in ref:
            roll = draw(10)
            hyp += [] if roll == 0 else [word, word] if roll == 1 else [vocab[draw(30)]] if roll == 2 else [word]
        references.append(ref)
        hypotheses.append(hyp)
    for max_n in (1, 2, 4):
        assert math.isclose(corpus_bleu(hypotheses, references, max_n), sacre(hypotheses, references, max_n),
                            rel_tol=1e-9, abs_tol=1e-9)
    # the call the contract names
    assert math.isclose(corpus_bleu(hypotheses, references),
                        sacrebleu.corpus_bleu([" ".join(h) for h in hypotheses], [[" ".join(r) for r in references]],
                                              tokenize="none", smooth_method="none", force=True).score,
                        rel_tol=1e-9, abs_tol=1e-9)


def test_bleu_edge_cases():
    cat = "the cat sat on the mat".split()
    assert corpus_bleu([cat], [cat]) == pytest.approx(100.0)
    assert corpus_bleu([[]], [cat]) == 0.0 == sacre([[]], [cat])                       # empty hypothesis
    assert corpus_bleu([[], []], [[], []]) == 0.0                                       # nothing at all
    assert corpus_bleu([["dog"] * 6], [cat]) == 0.0 == sacre([["dog"] * 6], [cat])    # a zero precision
    assert corpus_bleu([cat[:3]], [cat]) == 0.0                                         # no 4-gram
    # brevity: every n-gram of a prefix matches; c = 4 < r = 6 -> exp(1 - 6/4); a longer output is not penalised
    assert corpus_bleu([cat[:4]], [cat], 4) == pytest.approx(100 * math.exp(1 - 6 / 4))
    assert corpus_bleu([cat + ["."]], [cat], 1) == pytest.approx(100 * 6 / 7)
    # clipping: 'the' occurs twice in the reference
    assert corpus_bleu([["the"] * 4], [cat], 1) == pytest.approx(100 * 2 / 4 * math.exp(1 - 6 / 4))
    # corpus counts, not the average of sentence scores
    hyps, refs = [cat, ["a", "dog"]], [cat, ["a", "cat"]]
    assert corpus_bleu(hyps, refs, 2) == pytest.approx(sacre(hyps, refs, 2))
    assert corpus_bleu(hyps, refs, 2) != pytest.approx((100 + corpus_bleu(hyps[1:], refs[1:], 2)) / 2)
    with pytest.raises(ValueError):
        corpus_bleu([cat], [cat, cat])
    with pytest.raises(ValueError):
        corpus_bleu([], [cat])
