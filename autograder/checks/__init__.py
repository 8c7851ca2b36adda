"""Hidden checks of the course notebooks: `check_<api_name>(obj)` for every exercise.

A grade cell contains only, e.g.:

    from coursekit.probe import hand_in
    hand_in("multi_head_attention", MultiHeadAttention)

and the grader's judge step (autograder/grade/judge.py) then runs `check_multi_head_attention` HERE, in the
grader's process, with `RemoteObject`s standing for the handed-in objects (see `kit/remote.py`). A check passes
silently or raises `AssertionError` with a message for the student.

One folder per topic of the course API (`<topic>/`, `coursekit.api.TOPICS`), holding that topic's `check_*`
functions (`checks.py`, or one module per part for the large topics: `gpt/`, `translation/`; the module of each
check is `coursekit.api.check_modules()`) and `mistakes.py`, the reference recomputed with one typical mistake
switched on and the table from each mistake id to its variant. A topic folder imports only `kit/`, `stand_ins`,
`solutions`, `coursekit` and the `mistakes` of its own or earlier topics (tests/test_architecture.py). Checks are
imported lazily, on first use. Beside the topics:

- `kit/`          the checking framework, readable on its own (its `__init__.py` maps it).
- `stand_ins.py`  the course's stand-ins for parts that failed their own check (lent only after that check; the kernel
                  receives them compiled, never their text).
"""
from __future__ import annotations

import importlib

from coursekit.api import check_modules as _check_modules

# check name -> dotted module under autograder.checks defining it, from the course API (coursekit/api.py): each API
# name's check lives in its topic's folder (`attention.checks`, `gpt.bpe`, `transformer.kv_cache`); graded results
# that are not API names (07's trained classifier: `classifier.trained`) are listed there too.
_TOPIC_OF = _check_modules()

__all__ = sorted(_TOPIC_OF)


def __getattr__(name: str):
    topic = _TOPIC_OF.get(name)
    if topic is None:
        raise AttributeError(f"module 'autograder.checks' has no attribute {name!r}")
    module = importlib.import_module(f"autograder.checks.{topic}")
    return getattr(module, name)


def __dir__():
    return sorted(set(globals()) | set(__all__))
