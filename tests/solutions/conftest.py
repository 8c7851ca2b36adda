"""Fixtures shared by the proofs of the reference: one test per available device (CUDA only when present)."""
from __future__ import annotations

import sys
from pathlib import Path

import pytest
import torch

from autograder.checks.kit.tolerance import available_devices

# The tests import their helpers as `solutions_compare`; make that work under every pytest import mode
# (prepend, append, importlib) and whether or not tests/ becomes a package.
_HERE = str(Path(__file__).resolve().parent)
if _HERE not in sys.path:
    sys.path.insert(0, _HERE)


@pytest.fixture(params=available_devices(), ids=lambda d: d.type)
def device(request) -> torch.device:
    return request.param
