"""Shared set-up of the hidden-check tests.

- `variants` (correct and wrong student answers) is importable under any pytest import mode.
- every hidden check runs with per-submission draws (autograder/checks/kit/draws.py): the salt
  TEST_SALT, or AUTOGRADER_TEST_SALT=<int> to try another submission's inputs (0: the fixed inputs the checks were
  written with). A test marked `fixed_inputs` runs without a salt.
- torch runs single-threaded in these tests (restored afterwards): they run many tiny models, and on a shared
  2-core machine intra-op threads mostly wait for each other (measured: the greedy-decoding tests took 8 s
  single-threaded instead of 59 s).
"""
from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest
import torch

from autograder.checks.kit.draws import salted

_HERE = str(Path(__file__).resolve().parent)
if _HERE not in sys.path:
    sys.path.insert(0, _HERE)


@pytest.fixture(autouse=True)
def _single_thread():
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


TEST_SALT = int(os.environ.get("AUTOGRADER_TEST_SALT", "0x5eed2026"), 0)


@pytest.fixture(autouse=True)
def _per_submission_inputs(request):
    if request.node.get_closest_marker("fixed_inputs"):
        yield
        return
    with salted(TEST_SALT):
        yield
