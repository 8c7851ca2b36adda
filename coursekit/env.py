"""The environment of a notebook: random seeds, the compute device, and whether nbgrader is grading it."""
from __future__ import annotations

import os
import random

import numpy as np
import torch

__all__ = ["set_seed", "get_device", "grading_mode", "DEVICE_ENV", "GRADING_ENV"]

DEVICE_ENV = "COURSE_DEVICE"  # e.g. COURSE_DEVICE=cpu forces the CPU on a GPU machine
GRADING_ENV = "NBGRADER_EXECUTION"  # nbgrader sets it ("autograde", "validate") while it executes a notebook


def set_seed(seed: int) -> torch.Generator:
    """Seed Python's `random`, NumPy, PyTorch (CPU and every CUDA device) with `seed`.

    Returns a CPU `torch.Generator` seeded with the same value, for code that wants its own stream
    (e.g. `torch.randn(..., generator=g)` or a DataLoader) without touching the global one.
    """
    if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)):
        raise TypeError(f"seed must be an int, got {type(seed).__name__}")
    seed = int(seed)
    if not 0 <= seed < 2**32:
        raise ValueError(f"seed must be in [0, 2**32), got {seed}")
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)  # also seeds every CUDA device
    if torch.cuda.is_available():
        torch.cuda.manual_seed_all(seed)
    generator = torch.Generator()
    generator.manual_seed(seed)
    return generator


def get_device() -> torch.device:
    """The device to compute on: CUDA when available, else the CPU.

    The environment variable COURSE_DEVICE overrides the choice ("cpu", "cuda", "cuda:1", ...).
    Asking for CUDA on a machine without it raises a RuntimeError instead of failing later.
    """
    requested = os.environ.get(DEVICE_ENV, "").strip()
    if not requested:
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    try:
        device = torch.device(requested)
    except RuntimeError as error:
        raise ValueError(f"{DEVICE_ENV}={requested!r} is not a device name (try 'cpu' or 'cuda')") from error
    if device.type == "cuda":
        if not torch.cuda.is_available():
            raise RuntimeError(f"{DEVICE_ENV}={requested!r} but CUDA is not available on this machine")
        if device.index is not None and device.index >= torch.cuda.device_count():
            raise RuntimeError(
                f"{DEVICE_ENV}={requested!r} but only {torch.cuda.device_count()} CUDA device(s) are present"
            )
    return device


def grading_mode() -> bool:
    """True while nbgrader executes the notebook (the environment variable NBGRADER_EXECUTION is set).

    Notebooks use it to train on less data or skip slow demos when the autograder runs them.
    """
    return GRADING_ENV in os.environ
