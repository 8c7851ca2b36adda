"""Shared set-up of the hidden-check tests.

- `variants` (correct and wrong student answers) is importable under any pytest import mode.
- torch runs single-threaded in these tests (restored afterwards): they run many tiny models, and on a shared
  2-core machine intra-op threads mostly wait for each other (measured: the greedy-decoding tests took 8 s
  single-threaded instead of 59 s).
"""
from __future__ import annotations

import sys
from pathlib import Path

import pytest
import torch

_HERE = str(Path(__file__).resolve().parent)
if _HERE not in sys.path:
    sys.path.insert(0, _HERE)


@pytest.fixture(autouse=True)
def _single_thread():
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)
