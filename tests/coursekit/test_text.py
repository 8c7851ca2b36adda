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
