"""Student-side helpers of the Transformer course: environment, text, data, loaders, plots, public checks.

Heavy libraries (nltk, gensim) are imported only when a helper that needs them is first used.
"""
from .data import load_yelp
from .env import get_device, grading_mode, set_seed
from .handout import require_provided
from .text import tokenize

__all__ = ["set_seed", "get_device", "grading_mode", "tokenize", "load_yelp", "require_provided"]
