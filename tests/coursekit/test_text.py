"""coursekit.text.tokenize."""
import nltk.data
import pytest

import coursekit.text as text_module
from coursekit.text import decode_yelp_escapes, tokenize


def test_lowercases_and_keeps_negation():
    assert tokenize("The food WASN'T great") == ["the", "food", "was", "n't", "great"]
    assert "n't" in tokenize("I can't recommend it")
    assert tokenize("not bad") == ["not", "bad"]


def test_splits_periods_between_sentences():
    assert tokenize("Great food. Bad service!") == ["great", "food", ".", "bad", "service", "!"]


def test_decodes_yelp_escapes_first():
    raw = 'Line one.\\nLine two said \\"wow\\".'
    assert decode_yelp_escapes(raw) == 'Line one.\nLine two said "wow".'
    tokens = tokenize(raw)
    assert "\\n" not in "".join(tokens) and "n" not in tokens
    assert tokens == ["line", "one", ".", "line", "two", "said", '"', "wow", '"', "."]


def test_plain_double_quotes_and_curly_apostrophes():
    assert tokenize('the "special" roll') == ["the", '"', "special", '"', "roll"]
    assert tokenize("it wasn\u2019t") == ["it", "was", "n't"]


def test_empty_and_whitespace_give_no_tokens():
    assert tokenize("") == []
    assert tokenize("  \\n \n ") == []


def test_rejects_non_strings():
    with pytest.raises(TypeError):
        tokenize(None)
    with pytest.raises(TypeError):
        tokenize(["a", "b"])


def test_needs_no_downloaded_nltk_data(monkeypatch):
    def no_data(*args, **kwargs):
        raise LookupError("nltk data is not available on the course machines")

    monkeypatch.setattr(nltk.data, "find", no_data)
    monkeypatch.setattr(nltk.data, "load", no_data)
    monkeypatch.setattr(text_module, "_word_tokenizer", None)  # build the tokenizer again under the patch
    assert tokenize("Not great. Never disappointing!") == ["not", "great", ".", "never", "disappointing", "!"]


def test_sentence_punctuation_before_quotes_and_brackets():
    assert tokenize('He said "yes." Then (really.) left...') == [
        "he", "said", '"', "yes", ".", '"', "then", "(", "really", ".", ")", "left", "..."]
    assert tokenize("It cost 5.50 dollars.") == ["it", "cost", "5.50", "dollars", "."]


LEAN_RUN = r"""
import json, sys
import coursekit
from coursekit.data.yelp import load_yelp
texts, _ = load_yelp(source="synthetic", split="train", limit=3000, seed=0)
texts += [open(path, encoding="utf-8").read() for path in sys.argv[1:]]
tokens = [coursekit.tokenize(t) for t in texts]
heavy = sorted({m.split(".")[0] for m in sys.modules} & {"nltk", "scipy", "sklearn", "pandas"})
print(json.dumps({"tokens": tokens, "heavy": heavy, "texts": texts}))
"""


def test_the_tokenizer_loads_without_all_of_nltk_and_splits_as_nltk_does(tmp_path, monkeypatch):
    """In a fresh process, tokenizing imports none of nltk's package code (which brings scikit-learn, pandas and
    scipy: 2.5 CPU-s per kernel) and leaves no nltk module behind; the tokens are those of nltk's own
    NLTKWordTokenizer imported the usual way (this process imported nltk), on 3,000 synthetic reviews and text
    built to reach nltk's rules (contractions, quotes, brackets, ellipses, numbers, URLs, emoji)."""
    import json
    import subprocess
    import sys

    from nltk.tokenize import NLTKWordTokenizer

    tricky = tmp_path / "tricky.txt"
    tricky.write_text('I can\'t, won\'t & shouldn\'t -- "really?" (yes...) [ok] {x} 3.5/5 stars, $12.99; '
                      'see https://example.com/a?b=c&d. gonna wanna gimme "quoted" \u2019tis \U0001F600 '
                      "e-mail: a@b.c -- 10,000 people... 'single' quotes!?", encoding="utf-8")
    run = subprocess.run([sys.executable, "-c", LEAN_RUN, str(tricky)], capture_output=True, text=True, check=True)
    lean = json.loads(run.stdout)
    assert lean["heavy"] == []
    monkeypatch.setattr(text_module, "_word_tokenizer", NLTKWordTokenizer())  # nltk's class from the whole package
    assert isinstance(text_module._word_tokenizer, NLTKWordTokenizer)
    assert lean["tokens"] == [tokenize(t) for t in lean["texts"]]
    assert len(lean["tokens"]) == 3001 and any("n't" in t for t in lean["tokens"])
