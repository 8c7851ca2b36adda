"""Hidden check of notebook 10's trained model: the handed-in weights are loaded into the contract's Transformer and
its greedy translations of held-out Multi30k captions (pairs the jail does not show the kernel) are scored here with
the grader's own vocabularies; an untrained model fails, a trained one passes, a lookup model earns nothing, other
architectures and vocabularies fail readably."""
from __future__ import annotations

import gzip
import json
import os

import pytest
import torch
from torch import nn

import solutions
from autograder.checks.translation import trained as checks
from autograder.course import heldout_translation as heldout
from autograder.sandbox import jail
from jailed import run_in_jail
from coursekit.multi30k import load_multi30k, multi30k_dir, tokenize_caption, tokenized_multi30k


@pytest.fixture(scope="module")
def vocabularies():
    return checks.grader_vocabularies()


def _transformer(de_vocab, en_vocab, seed=0, **sizes):
    torch.manual_seed(seed)
    config = dict(d_model=32, num_heads=4, d_ff=64, num_layers=1, max_len=128, dropout=0.0) | sizes
    return solutions.Transformer(len(de_vocab), len(en_vocab), **config)


# ------------------------------------------------------------------------------------------------ held out
def test_the_held_out_pairs_are_test_captions_found_nowhere_else():
    test, public = load_multi30k("test_2016_flickr"), load_multi30k("train") + load_multi30k("val")
    pairs = heldout.heldout_pairs()
    assert len(pairs) == heldout.HELDOUT_PAIRS and pairs == test[heldout.HELDOUT_START:]
    german, english = {de for de, _ in public}, {en for _, en in public}
    assert not [p for p in pairs if p[0] in german or p[1] in english]


def test_the_jail_sees_test_files_without_the_held_out_pairs(tmp_path):
    """The masked copies keep 1,000 lines, stay parallel (each line pair is a real test or val pair, in place), and
    hold none of the held-out captions, in either language; the jail binds them over the data folder's files."""
    folder = multi30k_dir()
    test, val = load_multi30k("test_2016_flickr"), load_multi30k("val")
    held_de = {de for de, _ in heldout.heldout_pairs()}
    held_en = {en for _, en in heldout.heldout_pairs()}
    copies = {}
    for language in heldout.LANGUAGES:
        source = os.path.join(str(folder), f"test_2016_flickr.{language}.gz")
        copy = jail.masked_multi30k_file(source)
        assert os.path.basename(copy) == os.path.basename(source)
        copies[language] = copy
        (tmp_path / os.path.basename(copy)).write_bytes(open(copy, "rb").read())
    for name in ("val.de.gz", "val.en.gz", "train.de.gz", "train.en.gz"):   # load_multi30k reads a whole folder
        (tmp_path / name).symlink_to(folder / name)
    seen = load_multi30k("test_2016_flickr", folder=tmp_path)
    assert len(seen) == len(test) == 1000
    assert seen == test[:heldout.HELDOUT_START] + val[:heldout.HELDOUT_PAIRS]
    assert not [p for p in seen if p[0] in held_de or p[1] in held_en]
    text = "".join(gzip.decompress(open(copy, "rb").read()).decode("utf-8") for copy in copies.values())
    assert not [line for line in held_de | held_en if line in text], "a held-out caption is readable"

    argv = jail.bwrap_command("bwrap", kernel_cmd=["python"], ipc_dir=str(tmp_path), notebook_src=str(tmp_path),
                              disk_bytes=0, env={})
    data_dir = jail.view()[3]
    bound = [argv[i + 1:i + 3] for i, a in enumerate(argv) if a == "--ro-bind"]
    for name in heldout.MASKED_FILES:
        target = os.path.join(data_dir, "multi30k", name)
        over = bound.index([jail.masked_multi30k_file(os.path.realpath(target)), target])
        assert bound.index([data_dir, data_dir]) < over       # bound over the data folder's file, after the folder


def test_a_jailed_kernel_reads_the_test_split_without_the_held_out_pairs(tmp_path):
    """Through bwrap itself: coursekit's reader in the jail gets 1,000 parallel pairs, none of them held out."""
    code = ("import json\nfrom coursekit.multi30k import load_multi30k\n"
            "print(json.dumps(load_multi30k('test_2016_flickr')))")
    stdout = run_in_jail(code, tmp_path)
    seen = [tuple(pair) for pair in json.loads(stdout)]
    test, val = load_multi30k("test_2016_flickr"), load_multi30k("val")
    assert seen == test[:heldout.HELDOUT_START] + val[:heldout.HELDOUT_PAIRS]
    assert not set(seen) & set(heldout.heldout_pairs())


# ------------------------------------------------------------------------------------------------ the vocabularies
def test_the_grader_builds_the_contracts_vocabularies(vocabularies):
    """build_vocab(train tokens, min_freq=2) per language (the contract's sizes: about 7,900 and 5,900 types), and
    what the notebook's data preparation builds with 01's functions."""
    de_vocab, en_vocab = vocabularies
    german, english = tokenized_multi30k("train")
    assert de_vocab == solutions.build_vocab(german, min_freq=2) and en_vocab == solutions.build_vocab(english, 2)
    assert 7_500 < len(de_vocab) < 8_300 and 5_500 < len(en_vocab) < 6_300
    assert [de_vocab[t] for t in ("<pad>", "<unk>", "<bos>", "<eos>")] == [0, 1, 2, 3]
    training = pytest.importorskip("coursekit.translation_training")
    data = training.prepare_translation_data(solutions.build_vocab, solutions.encode)
    assert (data.de_vocab, data.en_vocab) == (de_vocab, en_vocab)


def test_a_different_vocabulary_fails_readably(vocabularies):
    de_vocab, en_vocab = vocabularies
    model = _transformer(de_vocab, en_vocab)
    other = solutions.build_vocab(tokenized_multi30k("train")[1], min_freq=1)
    with pytest.raises(AssertionError, match="English vocabulary is not build_vocab"):
        checks.check_trained_translator(model, de_vocab, other)
    with pytest.raises(AssertionError, match="German vocabulary as a dict"):
        checks.check_trained_translator(model, ["<pad>"], en_vocab)
    small = _transformer(de_vocab, other)
    with pytest.raises(AssertionError, match="vocabulary sizes") as info:
        checks.check_trained_translator(small)
    assert f"{len(other)}" in str(info.value)


# ------------------------------------------------------------------------------------------------ the score
def test_an_untrained_model_fails_with_its_bleu(vocabularies):
    """Random weights (or weights a loss without gradient left as they were) translate nothing right: BLEU 0."""
    de_vocab, en_vocab = vocabularies
    model = _transformer(de_vocab, en_vocab)
    with pytest.raises(AssertionError, match="does not translate held-out captions well enough") as info:
        checks.check_trained_translator(model, de_vocab, en_vocab)
    assert "got:      0.00" in str(info.value)


def test_the_bleu_is_the_contract_models_on_the_given_pairs(vocabularies):
    """trained_bleu decodes with the contract's Transformer holding the handed-in weights (never the handed-in object,
    here a decoy that cannot translate):
    recomputed here with the reference's greedy decoding and sacrebleu, on pairs where an untrained model's
    translations overlap the references (its own outputs, read back as references)."""
    import sacrebleu

    de_vocab, en_vocab = vocabularies
    model = _transformer(de_vocab, en_vocab, seed=1).eval()
    itos = {i: t for t, i in en_vocab.items()}
    pairs = load_multi30k("val")[:40]
    src = solutions.pad_batch([[de_vocab.get(t, 1) for t in tokenize_caption(de)] for de, _ in pairs])
    ys = solutions.greedy_decode(model, src, checks.MAX_DECODE_LEN).tolist()
    hyps = [[itos[i] for i in row[:row.index(3)] if i] if 3 in row else [itos[i] for i in row if i] for row in ys]
    # references: the model's own first words plus the real English caption, so the BLEU is neither 0 nor 100
    references = [h[:4] + tokenize_caption(en) for h, (_, en) in zip(hyps, pairs)]
    pairs = [(de, " ".join(r)) for (de, _), r in zip(pairs, references)]
    expected = sacrebleu.corpus_bleu([" ".join(h) for h in hyps], [[" ".join(r) for r in references]],
                                     tokenize="none", smooth_method="none", force=True).score
    assert 0 < expected < 100

    class Decoy(nn.Module):   # the same weights; calling it would translate nothing
        def __init__(self):
            super().__init__()
            self.inner = model

        def state_dict(self, *args, **kwargs):
            return model.state_dict(*args, **kwargs)

        def forward(self, *args):
            raise RuntimeError("never called")

    from autograder.checks.kit import remote as _remote
    from coursekit import probe
    (handed,), _ = _remote.hand_in_locally((Decoy(),), {}, "bleu_test")
    try:
        assert checks.trained_bleu(handed, pairs) == pytest.approx(expected, abs=1e-9)
    finally:
        probe.ProbeState.subjects.pop("bleu_test", None)


@pytest.mark.slow
def test_a_translator_trained_in_the_grading_budget_passes(vocabularies):
    """The reference trained by the notebook's loop at the grading budget (seed 0) clears the bar; its held-out BLEU
    equals sacrebleu's on the loop's own greedy translations."""
    training = pytest.importorskip("coursekit.translation_training")
    data = training.prepare_translation_data(solutions.build_vocab, solutions.encode)
    budget = training.BUDGETS["grading"]
    torch.manual_seed(0)
    model = solutions.Transformer(len(data.de_vocab), len(data.en_vocab), **training.model_config(budget))
    training.train_translator(model, data, budget, solutions.label_smoothed_cross_entropy, solutions.noam_lr, "cpu",
                              generator=torch.Generator().manual_seed(0))
    checks.check_trained_translator(model, data.de_vocab, data.en_vocab)
    pairs = heldout.heldout_pairs()
    sources = [[data.de_vocab.get(t, 1) for t in tokenize_caption(de)] for de, _ in pairs]
    hypotheses = training.translate_corpus(model, sources, solutions.greedy_decode, data.en_itos,
                                           checks.MAX_DECODE_LEN)
    expected = training.sacrebleu_bleu(hypotheses, [tokenize_caption(en) for _, en in pairs])
    assert expected >= checks.TRAINED_MIN_BLEU
    from autograder.checks.kit import remote as _remote
    from coursekit import probe
    (handed,), _ = _remote.hand_in_locally((model,), {}, "trained_test")
    try:
        assert checks.trained_bleu(handed) == pytest.approx(expected, abs=1e-6)
    finally:
        probe.ProbeState.subjects.pop("trained_test", None)


# ------------------------------------------------------------------------------------------------ hand-ins
class Lookup(nn.Module):
    """A 'translator' that read the test captions: it answers from a table, whatever its weights."""

    def __init__(self):
        super().__init__()
        self.weight = nn.Parameter(torch.zeros(1))
        self.answers = {tuple(tokenize_caption(de)): tokenize_caption(en)
                        for de, en in load_multi30k("test_2016_flickr")}

    def forward(self, src_ids, tgt_ids):
        raise NotImplementedError


def test_a_lookup_model_earns_nothing():
    with pytest.raises(AssertionError, match="contract's names"):
        checks.check_trained_translator(Lookup())


def test_other_architectures_fail_readably(vocabularies):
    de_vocab, en_vocab = vocabularies
    with pytest.raises(AssertionError, match="needs your trained model"):
        checks.check_trained_translator("not a model")
    # one decoder layer fewer than encoder layers: not the contract's Transformer(num_layers=...)
    model = _transformer(de_vocab, en_vocab, num_layers=2)
    del model.decoder.layers[1]
    with pytest.raises(AssertionError, match="do not fit the contract's architecture") as info:
        checks.check_trained_translator(model)
    assert "decoder.layers.1" in str(info.value)
    # PyTorch's own Transformer: other names
    torch_model = nn.Transformer(d_model=32, nhead=4, num_encoder_layers=1, num_decoder_layers=1,
                                 dim_feedforward=64, batch_first=True)
    with pytest.raises(AssertionError, match="contract's names"):
        checks.check_trained_translator(torch_model)
    # a wider feed-forward in the decoder than in the encoder: a shape the contract's model does not have
    wide = _transformer(de_vocab, en_vocab)
    wide.decoder.layers[0].ffn.linear1 = nn.Linear(32, 96)
    wide.decoder.layers[0].ffn.linear2 = nn.Linear(96, 32)
    with pytest.raises(AssertionError, match="do not fit the contract's architecture") as info:
        checks.check_trained_translator(wide)
    assert "(96, 32) instead of (64, 32)" in str(info.value)
    broken = _transformer(de_vocab, en_vocab)
    with torch.no_grad():
        broken.generator.bias[0] = float("nan")
    with pytest.raises(AssertionError, match="NaN or inf"):
        checks.check_trained_translator(broken)


def test_a_model_too_large_is_refused(vocabularies):
    de_vocab, en_vocab = vocabularies
    big = _transformer(de_vocab, en_vocab, d_model=512, num_heads=8, d_ff=64)
    with pytest.raises(AssertionError, match="too large"):
        checks.check_trained_translator(big)


def test_a_source_blind_translator_stays_under_the_bar():
    """The bar is above what a model that ignores the German gets: the most common English caption shape written for
    every sentence (the training split's most frequent first-four-words, completed by a frequent caption)."""
    import collections

    from coursekit.translation_training import sacrebleu_bleu

    _, english = tokenized_multi30k("train")
    commonest = collections.Counter(" ".join(tokens) for tokens in english if len(tokens) <= 12).most_common(5)
    references = [tokenize_caption(en) for _, en in heldout.heldout_pairs()]
    for caption in [c for c, _ in commonest] + ["a man in a blue shirt is standing on the street ."]:
        blind = sacrebleu_bleu([caption.split()] * len(references), references)
        assert blind < checks.TRAINED_MIN_BLEU, (caption, blind)
