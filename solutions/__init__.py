"""Reference implementation of every name in the course API (instructors only).

The names come from the contract, `coursekit.api.API`: each is imported from its topic module
(`solutions/<topic>.py`) and re-exported here, so `from solutions import MultiHeadAttention` works and
`solutions.__all__` is exactly the API, in course order.
"""
import importlib as _importlib

from coursekit.api import API as _API

for _entry in _API:
    globals()[_entry.name] = getattr(_importlib.import_module(f"solutions.{_entry.topic}"), _entry.name)

__all__ = [_entry.name for _entry in _API]

del _entry
