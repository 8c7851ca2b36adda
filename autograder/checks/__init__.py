"""Hidden checks of the course notebooks: `check_<api_name>(obj)` for every exercise.

A grade cell contains only, e.g.:

    from coursekit.probe import hand_in
    hand_in("multi_head_attention", MultiHeadAttention)

and the grader's judge step (autograder/grade/judge.py) then runs `check_multi_head_attention` HERE, in the
grader's process, with `RemoteObject`s standing for the handed-in objects (see `remote.py`). A check passes
silently or raises `AssertionError` with a message for the student. The topic modules (`<topic>.py`, one per topic of
the course API, plus `kv_cache.py`, `trained_classifier.py` and `trained_gpt.py`: `coursekit.api.check_modules()`)
are imported lazily, on first use of one of their checks. Beside them:

- `remote.py`        the grader's side of the probe: `RemoteObject`, the channel to the kernel, strict decoding.
- `toolkit.py`       what every check uses: calls, comparisons on the grading device, `fail(..., mistake=id)`.
- `tolerance.py`     the grading device and the tolerances (the only place they are set).
- `probe_inputs.py`  per-submission probe inputs: seeds, sizes and texts drawn from this submission's salt.
- `criteria.py`      partial credit by criterion: stated edge cases cost their share, not the whole exercise.
- `parts.py`         follow-through credit: a composite is judged given working parts (the parts graph's use).
- `stand_ins.py`     the course's stand-ins for parts that failed their own check (lent only after that check).
- `trained_weights.py` a trained model's weights taken out of the kernel and judged in the reference architecture.
- `known_mistakes/`  the reference recomputed with one typical mistake switched on, per topic.
"""
from __future__ import annotations

import importlib

from coursekit.api import check_modules as _check_modules

# check name -> module of autograder/checks/ defining it, from the course API (coursekit/api.py): each API name's
# check lives in its topic's module, except where the API says otherwise (06's key/value cache in kv_cache.py);
# graded results that are not API names (07's trained classifier) are listed there too.
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
