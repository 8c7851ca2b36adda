"""Turning review text into word tokens.

`tokenize` is the one tokenizer of the course: every notebook and the autograder call it, so a vocabulary built
in one place fits the ids produced in another. It uses nltk's rule-based word tokenizer, which needs no downloaded
nltk data (punkt and stopwords are not available on the course machines).
"""
from __future__ import annotations

import importlib.util
import re
import sys
import threading

from .data.yelp_format import decode_yelp_escapes  # the Yelp files' literal escapes (backslash-n, backslash-quote)

__all__ = ["decode_yelp_escapes", "tokenize"]

# Curly quotes are straightened so "wasn’t" splits like "wasn't".
_CURLY = str.maketrans({"\u2019": "'", "\u2018": "'", "\u201c": '"', "\u201d": '"'})

# nltk only splits a period off the END of its input ("great. the" would keep "great."), so sentence-final
# punctuation -- . ! ? (or a run like "...") before whitespace, a closing quote/bracket or the end -- is set
# apart first. One nltk call per review is about four times faster than one call per sentence.
_SENTENCE_END = re.compile(r"([.!?]+)(?=[\"')\]]*(?:\s|$))")

# nltk writes opening/closing double quotes as `` and ''; the course keeps a plain ".
_QUOTE_TOKENS = {"``": '"', "''": '"'}

_word_tokenizer = None  # built on first use: importing nltk costs time at `import coursekit`
_loading = threading.Lock()  # one thread of this process loads it; the others wait for it


def _nltk_word_tokenizer_class() -> type:
    """nltk's NLTKWordTokenizer, without running `nltk/__init__.py` unless nltk is imported already.

    That file imports all of nltk, and through it scikit-learn, pandas and scipy: 2.5 CPU-s and 440 MiB of address
    space in every kernel that tokenizes (a student's, and each graded submission's), for a class that needs only
    the regular expressions of `nltk.tokenize.destructive` and a few small modules. Its packages stand in sys.modules
    as bare packages (their `__path__`, not their code) while it loads; then every nltk module loaded here leaves
    sys.modules again, so that a later `import nltk` builds the whole package as usual. The class is nltk's own:
    tests/coursekit/test_text.py checks it tokenizes as `nltk.tokenize.NLTKWordTokenizer` does."""
    if "nltk" in sys.modules:
        from nltk.tokenize import NLTKWordTokenizer
        return NLTKWordTokenizer
    before = set(sys.modules)
    try:
        for name in ("nltk", "nltk.tokenize"):
            spec = importlib.util.find_spec(name)
            if spec is None:
                raise ModuleNotFoundError(f"No module named {name!r}", name=name)
            sys.modules[name] = importlib.util.module_from_spec(spec)  # __path__ set, __init__ not run
        return importlib.import_module("nltk.tokenize.destructive").NLTKWordTokenizer
    finally:
        for name in set(sys.modules) - before:
            if name == "nltk" or name.startswith("nltk."):
                del sys.modules[name]


def _nltk_tokenizer():
    global _word_tokenizer
    with _loading:
        if _word_tokenizer is None:
            _word_tokenizer = _nltk_word_tokenizer_class()()
    return _word_tokenizer


def tokenize(text: str) -> list[str]:
    """Lowercased word tokens of one review.

    >>> tokenize("The food wasn't great.\\\\nService: fine!")
    ['the', 'food', 'was', "n't", 'great', '.', 'service', ':', 'fine', '!']

    Contractions keep their negation as a token of its own ("wasn't" -> "was", "n't"), punctuation is kept.
    """
    if not isinstance(text, str):
        raise TypeError(f"tokenize expects a str, got {type(text).__name__}")
    text = decode_yelp_escapes(text).translate(_CURLY).lower()
    text = _SENTENCE_END.sub(r" \1", text)
    return [_QUOTE_TOKENS.get(token, token) for token in _nltk_tokenizer().tokenize(text)]
