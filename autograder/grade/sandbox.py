"""Limits of one grading kernel, and the kernel spec that enforces them.

The kernel starts as `python -P -s -m autograder.grade.launcher ...`, which sets the rlimits on its own process
and then replaces itself with ipykernel (os.execv keeps the limits). `-P` keeps the kernel's working directory off
the front of sys.path, and the launcher's startup line moves it to the END, so a file such as `autograder.py` or
`solutions.py` written next to the notebook can never shadow the installed packages (the notebook can still
`from provided import ...`).

On a machine with GPUs the address-space cap is not used (CUDA maps far more virtual memory than it uses);
the cap becomes a cap on the data segment instead (RLIMIT_DATA), and the worker pins the kernel to one GPU
with CUDA_VISIBLE_DEVICES.
"""
from __future__ import annotations

import dataclasses
import os
import sys
import uuid

from jupyter_client.kernelspec import KernelSpec
from jupyter_client.manager import AsyncKernelManager
from jupyter_client.provisioning import LocalProvisioner

GiB = 1024**3
MiB = 1024**2


@dataclasses.dataclass(frozen=True)
class Limits:
    """What one submission may use while it is graded."""

    cell_timeout: float = 120.0  # seconds for any one cell
    notebook_timeout: float = 600.0  # seconds for the whole notebook (cells left when it runs out are not run)
    memory_bytes: int = 6 * GiB  # cap on the kernel process (0 = no cap)
    output_bytes: int = 1 * MiB  # per cell; the rest is dropped with a note
    kernel_restarts: int = 2  # a cell that kills the kernel is skipped and the notebook re-run, at most this often
    startup_timeout: float = 120.0  # seconds for the kernel to come up

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, data: dict | None) -> "Limits":
        return cls(**(data or {}))


def kernel_spec(limits: Limits, gpu: str | None = None, extra_env: dict | None = None) -> KernelSpec:
    """A python3 kernel spec whose kernel runs under `limits` (and on GPU `gpu`, when given)."""
    rlimit = "data" if gpu is not None else "as"
    argv = [
        sys.executable, "-P", "-s", "-m", "autograder.grade.launcher",
        "--memory-bytes", str(int(limits.memory_bytes)), "--rlimit", rlimit,
        "--", "-f", "{connection_file}",
    ]
    env = {
        "NBGRADER_EXECUTION": "autograde",
        "MPLBACKEND": "Agg",
        "PYTHONHASHSEED": "0",
        "PYDEVD_DISABLE_FILE_VALIDATION": "1",
        "OMP_NUM_THREADS": "1",  # one worker = one core; the cluster decides the parallelism
        "MKL_NUM_THREADS": "1",
        "CUDA_VISIBLE_DEVICES": "" if gpu is None else str(gpu),
    }
    env.update(extra_env or {})
    return KernelSpec(argv=argv, display_name="Python 3 (grading sandbox)", language="python", env=env,
                      interrupt_mode="signal", metadata={})


class ForkedKernelProvisioner(LocalProvisioner):
    """LocalProvisioner whose kernel is forked by this worker's fork server (autograder.grade.forkserver);
    when the server is unavailable, the kernel is launched the plain way."""

    async def launch_kernel(self, cmd: list[str], **kwargs):
        from autograder.grade import forkserver

        cwd = kwargs.get("cwd") or os.getcwd()
        try:
            process = forkserver.fork_kernel(dict(self.kernel_spec.env), cmd, env=kwargs.get("env") or {}, cwd=cwd)
        except forkserver.ForkServerUnavailable as exc:
            self.log.warning("%s; launching the kernel the plain way", exc)
            return await super().launch_kernel(cmd, **kwargs)
        self.process = process
        self.pid = self.pgid = process.pid  # the kernel leads its own session and process group
        self.cwd = cwd
        return self.connection_info


def kernel_manager_class(spec: KernelSpec, fork: bool | None = None) -> type:
    """An AsyncKernelManager class that launches `spec` whatever kernel name the notebook asks for; its kernels
    are forked from a fork server (`fork`, default: unless AUTOGRADER_FORK_KERNELS=0 or not on Linux)."""
    from autograder.grade import forkserver

    use_fork = forkserver.enabled() if fork is None else fork

    class SandboxKernelManager(AsyncKernelManager):
        @property
        def kernel_spec(self):  # noqa: D401 - property of jupyter_client's API
            return spec

        async def _async_pre_start_kernel(self, **kw):
            if use_fork and self.provisioner is None:  # as jupyter_client would, with our provisioner class
                self.kernel_id = self.kernel_id or kw.pop("kernel_id", None) or str(uuid.uuid4())
                self.provisioner = ForkedKernelProvisioner(kernel_id=self.kernel_id, kernel_spec=spec, parent=self)
            return await super()._async_pre_start_kernel(**kw)

    return SandboxKernelManager


def visible_gpus() -> list[str]:
    """GPU indices a worker may hand out (empty on a CPU-only machine); never initialises CUDA here."""
    import os
    import subprocess

    declared = os.environ.get("CUDA_VISIBLE_DEVICES")
    if declared is not None:
        return [g for g in declared.split(",") if g.strip() and g.strip() != "-1"]
    try:
        out = subprocess.run(["nvidia-smi", "--query-gpu=index", "--format=csv,noheader"],
                             capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.SubprocessError):
        return []
    return [line.strip() for line in out.stdout.splitlines() if line.strip()] if out.returncode == 0 else []
