"""The course's numerical tolerances: the one place where they are stated.

Both check layers read them from here: the public self-checks (`coursekit.checks`) and, through
`autograder/checks/kit/tolerance.py` (which adds the grading device), the hidden checks and the proofs of the reference
(`tests/solutions`). Each is an `atol`/`rtol` pair (a dict to splat into `torch.allclose`) or one named bound, with the
reason it has that size.
"""
from __future__ import annotations

# float32 on CPU: the whole course compares modules at this precision.
CPU_FLOAT32 = {"atol": 1e-5, "rtol": 1e-4}
# float32 on CUDA with TF32 disabled: kernels sum in a different order, so allow a little more.
CUDA_FLOAT32 = {"atol": 1e-4, "rtol": 1e-3}
# float64 anywhere (used by tests that need exactness beyond float32 noise).
FLOAT64 = {"atol": 1e-10, "rtol": 1e-8}
