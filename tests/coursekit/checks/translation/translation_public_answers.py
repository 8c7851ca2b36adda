"""Helpers of the public-check tests of notebook 10 (test_loss.py, test_beam.py, test_bleu.py): a wrong answer built
from an answer with one mistake switched on, and one that ignores an argument."""
from __future__ import annotations

import inspect


def variant(function, mistake):
    """`function` (an answer with a `mistake=` switch) with `mistake` switched on."""
    def wrong(*args, **kwargs):
        return function(*args, **kwargs, mistake=mistake)
    wrong.__name__ = f"{function.__name__}_{mistake}"
    return wrong


def fixed(function, **fixed_arguments):
    """`function` with some of its keyword arguments fixed at the default: it ignores what the caller passes."""
    names = list(fixed_arguments)

    def wrong(*args, **kwargs):
        bound = inspect.signature(function).bind(*args, **kwargs)
        bound.apply_defaults()
        arguments = {**bound.arguments, **fixed_arguments}
        return function(**{k: v for k, v in arguments.items() if k != "mistake"})
    wrong.__name__ = f"{function.__name__}_ignores_{'_'.join(names)}"
    return wrong
