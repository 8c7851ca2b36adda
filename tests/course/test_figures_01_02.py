"""What the sub-word demo of notebook 01 and the position demos of notebook 02 show: the point the prose makes must
be what the cells compute.

Each test runs cells of the source notebook (taken from the .ipynb, so an edit of the notebook is tested) with the
reference implementation, on the notebook's own data, and checks the numbers behind the figure or table.
"""
from __future__ import annotations

import math
from collections import Counter

import numpy as np
import pytest
from notebook_cells import notebook_cell, plt, run_showing


def _run(assignment: str, cell_ids: list[str], namespace: dict) -> list:
    """Execute cells in order; plt.show() records the open figures instead of showing them."""
    return run_showing([(cell_id, notebook_cell(assignment, cell_id)) for cell_id in cell_ids], namespace)


@pytest.fixture(scope="module")
def notebook01():
    """The state of notebook 01 before its BPE section (full mode), with the reference build_vocab and encode."""
    import coursekit
    from solutions import build_vocab, encode

    texts, _ = coursekit.load_yelp(source="synthetic", split="train", limit=2000, seed=0)
    tokenized = [coursekit.tokenize(text) for text in texts]
    vocab = build_vocab(tokenized, min_freq=2)
    namespace = {"coursekit": coursekit, "Counter": Counter, "np": np, "texts": texts, "tokenized": tokenized,
                 "vocab": vocab, "itos": {i: t for t, i in vocab.items()}, "encode": encode}
    try:
        figures = _run("01_tokens_and_embeddings", ["01-bpe-learn", "01-bpe-split", "01-bpe-tradeoff",
                                                    "01-bpe-unknown"], namespace)
        yield namespace, figures
    finally:
        plt.close("all")


def test_01_merges_learned_on_the_reviews_split_new_words_into_known_pieces(notebook01):
    from coursekit import bpe

    namespace, _ = notebook01
    merges, word_counts = namespace["merges"], namespace["word_counts"]
    assert len(merges) == 300
    counts = [m.count for m in merges]
    assert counts[0] == max(counts), "the first merge is the most frequent pair"
    known = set(bpe.bpe_vocabulary(word_counts, merges))
    for word in namespace["words"]:
        pieces = bpe.segment(word, merges)
        assert "".join(pieces) == word + bpe.END_OF_WORD
        assert set(pieces) <= known, f"{word} is split into a piece the vocabulary lacks: {pieces}"
    unseen = [w for w in namespace["words"] if w not in namespace["vocab"]]
    assert len(unseen) >= 3, "the table shows new words (word-level <unk>)"
    assert any(len(bpe.segment(w, merges)) < len(bpe.segment(w, merges[:30])) for w in unseen), \
        "more merges give longer pieces"


def test_01_tradeoff_curve_runs_from_characters_to_a_word_sized_vocabulary(notebook01):
    namespace, figures = notebook01
    (figure,) = [f for f in figures if f.axes and f.axes[0].get_xlabel() == "vocabulary size"]
    bpe_line, word_point = figure.axes[0].lines[:2]
    sizes, lengths = np.asarray(bpe_line.get_xdata()), np.asarray(bpe_line.get_ydata())
    assert (np.diff(sizes) > 0).all() and (np.diff(lengths) < 0).all(), "each merge: bigger vocabulary, fewer tokens"
    words_per_review = float(np.asarray(word_point.get_ydata())[0])
    assert lengths[0] > 3 * words_per_review, "characters make reviews several times longer than words"
    assert sizes[0] < 60, "no merges: the vocabulary is the alphabet"


def test_01_word_level_loses_new_words_and_bpe_only_unseen_characters(notebook01):
    namespace, _ = notebook01
    (_, _, _, word_unknown, word_total), (_, _, _, bpe_unknown, _) = namespace["rows"]
    assert len(word_unknown) / word_total > 0.3
    assert bpe_unknown == ["!"]
    assert not any("!" in text for text in namespace["texts"]), "the prose says the reviews have no '!'"


def test_02_projections_make_the_score_depend_on_more_than_the_distance():
    import torch

    from solutions import sinusoidal_positional_encoding

    namespace = {"torch": torch, "np": np, "math": math, "pe": sinusoidal_positional_encoding(100, 64)}
    try:
        figures = _run("02_positional_encoding", ["02-011", "02-proj"], namespace)
        assert len(figures) == 2
        dots, projected = namespace["dots"], namespace["projected"]
        assert float(dots.max() - dots.min()) < 1e-3, "raw PE[p]·PE[p+k] is the same at every p"
        spread = float(projected.max() - projected.min())
        assert spread > float(namespace["scores"].std()), f"q·k at a fixed distance varies too little: {spread}"
    finally:
        plt.close("all")


def test_02_trained_table_has_a_band_and_untrained_rows_stay_noise():
    import torch
    from torch import nn

    from solutions import LearnedPositionalEmbedding, sinusoidal_positional_encoding

    namespace = {"torch": torch, "nn": nn, "np": np, "math": math, "FAST": False,
                 "LearnedPositionalEmbedding": LearnedPositionalEmbedding,
                 "sinusoidal_positional_encoding": sinusoidal_positional_encoding}
    try:
        (figure,) = _run("02_positional_encoding", ["02-022", "02-learned-compare"], namespace)
        assert len(figure.axes[0].get_images()) == 1 and len(figure.axes[1].get_images()) == 1
        losses = namespace["losses"]
        assert losses[-1] < 0.1 * losses[0], f"the table did not learn the task: {losses[0]:.3f} -> {losses[-1]:.3f}"
        similarity, train_len = namespace["similarity"], namespace["TRAIN_LEN"]
        trained = np.mean([similarity[p, p + 1].item() for p in range(train_len - 1)])
        far = np.mean([similarity[p, p + 10].item() for p in range(train_len - 10)])
        untrained = np.mean([similarity[p, p + 1].item() for p in range(train_len, similarity.shape[0] - 1)])
        assert trained > 0.8 and far < trained - 0.5, f"no band: neighbours {trained:.2f}, distance 10 {far:.2f}"
        assert abs(untrained) < 0.3, f"rows never trained should be unrelated noise, got {untrained:.2f}"
    finally:
        plt.close("all")
