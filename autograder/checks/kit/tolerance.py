"""The grading device and the tolerance of a comparison on it.

The tolerances themselves are stated once, in `coursekit/tolerance.py` (the public self-checks read them too); this
module picks the one for a device and dtype. The hidden checks (`autograder.checks`) and the proofs of the reference
(`tests/solutions`) read them through here.
"""
from __future__ import annotations

import torch

from coursekit.tolerance import CPU_FLOAT32, CUDA_FLOAT32, FLOAT64  # noqa: F401 (re-exported for the checks)


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
