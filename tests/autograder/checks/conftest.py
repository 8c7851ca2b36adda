"""Shared set-up of the hidden-check tests.

- `variants` (correct and wrong student answers) is importable under any pytest import mode.
- torch runs single-threaded here: these tests run many tiny models, and on a shared 2-core machine intra-op
  threads mostly wait for each other (measured: the greedy-decoding tests take 8 s instead of 59 s).
"""
from __future__ import annotations

import sys
from pathlib import Path

import torch

_HERE = str(Path(__file__).resolve().parent)
if _HERE not in sys.path:
    sys.path.insert(0, _HERE)

torch.set_num_threads(1)
