"""Numerical tolerances and device set-up for every comparison with the reference.

This is the one place where tolerances are stated: the hidden checks (`autograder.checks`) and the proofs of the
reference (`tests/solutions`) both read them from here.
"""
from __future__ import annotations

import torch

# float32 on CPU: the whole course compares modules at this precision.
CPU_FLOAT32 = {"atol": 1e-5, "rtol": 1e-4}
# float32 on CUDA with TF32 disabled: kernels sum in a different order, so allow a little more.
CUDA_FLOAT32 = {"atol": 1e-4, "rtol": 1e-3}
# float64 anywhere (used by tests that need exactness beyond float32 noise).
FLOAT64 = {"atol": 1e-10, "rtol": 1e-8}


def tolerance(device: torch.device | str = "cpu", dtype: torch.dtype = torch.float32) -> dict[str, float]:
    """`atol`/`rtol` for comparing tensors of `dtype` computed on `device`."""
    if dtype == torch.float64:
        return dict(FLOAT64)
    return dict(CUDA_FLOAT32 if torch.device(device).type == "cuda" else CPU_FLOAT32)


def disable_tf32() -> None:
    """TF32 matmuls differ from float32 by ~1e-3: switch them off before any comparison on GPU."""
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False


def grading_device() -> torch.device:
    """CUDA when available (TF32 off), else CPU. `COURSE_DEVICE` overrides, as in `coursekit.get_device`."""
    import os

    name = os.environ.get("COURSE_DEVICE")
    if name:
        device = torch.device(name)
    else:
        device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if device.type == "cuda":
        disable_tf32()
    return device


def available_devices() -> list[torch.device]:
    """CPU always, plus the first CUDA device when one is present (for tests parametrized over devices)."""
    devices = [torch.device("cpu")]
    if torch.cuda.is_available():
        disable_tf32()
        devices.append(torch.device("cuda"))
    return devices
