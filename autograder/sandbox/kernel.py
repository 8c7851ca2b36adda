"""The kernel spec and kernel manager that enforce the limits of one grading kernel (limits.py).

Each submission gets a new kernel in its own jail (jail.py: bubblewrap, its own PID namespace, no network, a
minimal read-only view of the environment without `solutions` and `autograder`) and its own cgroup (cgroup.py:
the TOTAL memory, number of processes and CPU cores of everything the submission starts). The kernel starts as
`python -s -P -m autograder.sandbox.launcher ...` OUTSIDE the jail: it joins the cgroup, sets the rlimits and
becomes bwrap, whose child becomes ipykernel. The grader talks to the kernel over Unix sockets (ipc transport)
in a per-kernel folder on a tmpfs (scratch.py). When the kernel stops (or is killed), the jail's PID namespace
ends every process of the submission, and the kernel manager kills whatever the cgroup still holds, deletes the
kernel's folders and removes the cgroup.

On a machine with GPUs the address-space cap is not used (CUDA maps far more virtual memory than it uses);
the per-process cap becomes a cap on the data segment instead (RLIMIT_DATA), and the worker pins the kernel to
one GPU with CUDA_VISIBLE_DEVICES.

The limits are nbgrader configuration, set in the course's nbgrader_config.py like any other nbgrader setting:
the per-cell time limit and the kernel start-up time are nbgrader's own `Execute.timeout` and
`Execute.startup_timeout` (one value for `nbgrader autograde` and for this grader), the rest are the traits of
`SandboxLimits` (`c.SandboxLimits.memory_bytes = ...`). `course_limits(config)` reads them into a `Limits`, the
plain value that travels with every grading job (and into its content hash).

With `c.SandboxLimits.warm_template = True` (the default) the kernel is not a new Python: the launcher has the
process's warm template (zygote.py) fork it, in fresh namespaces of its own, in the submission's cgroup, without
capabilities. A local run starts the template before its workers (`warm_up`, engine.warm_templates), which
inherit it; elsewhere the kernel manager starts one on the process's first kernel. It puts the kernel's socket and
connection folders in the template's exchange folders (zygote.Template); kernels on a GPU, or with an address-space
cap too small for what the template maps, and every kernel with `c.SandboxLimits.warm_template = False`, start
cold, each in a new bwrap jail.

AUTOGRADER_UNSAFE_NO_JAIL=1 runs kernels as plain processes (rlimits and the cgroup still apply): only for a
developer's own notebooks where bubblewrap is missing.
"""
from __future__ import annotations

import os
import sys

from jupyter_client.kernelspec import KernelSpec
from jupyter_client.manager import AsyncKernelManager

from autograder.sandbox import cgroup, jail, scratch, zygote
from autograder.sandbox.limits import Limits


def kernel_spec(limits: Limits, gpu: str | None = None, extra_env: dict | None = None) -> KernelSpec:
    """A python3 kernel spec whose kernel runs under `limits` (and on GPU `gpu`, when given)."""
    env = {
        "NBGRADER_EXECUTION": "autograde",
        "COURSE_JUDGE": "1",  # the kernel-side probes of the judge (coursekit.probe) read it
        "MPLBACKEND": "Agg",
        "PYTHONHASHSEED": "0",
        "PYDEVD_DISABLE_FILE_VALIDATION": "1",
        "OMP_NUM_THREADS": "1",  # one worker = one core; the cluster decides the parallelism
        "MKL_NUM_THREADS": "1",
        "CUDA_VISIBLE_DEVICES": "" if gpu is None else str(gpu),
    }
    env.update(extra_env or {})
    argv = [
        sys.executable, "-s", "-P", "-m", "autograder.sandbox.launcher",
        "--memory-bytes", str(int(limits.memory_bytes)), "--rlimit", "data" if gpu is not None else "as",
        "--disk-bytes", str(int(limits.disk_bytes)), "--processes", str(int(limits.processes)),
        *(["--gpu"] if gpu is not None else []),
        *[arg for name in sorted(env) for arg in ("--keep-env", name)],
        "--", "-f", "{connection_file}",
    ]
    # interrupts go over the control channel: a signal to bwrap would not reach the kernel inside the jail
    return KernelSpec(argv=argv, display_name="Python 3 (grading jail)", language="python", env=env,
                      interrupt_mode="message")


def template_env(spec: KernelSpec) -> dict[str, str]:
    """The environment of a kernel of `spec` forked from a warm template: what its template is made for."""
    passed = {name: os.environ[name] for name in jail.PASSED_ENV if name in os.environ}
    return jail.kernel_env({**passed, **spec.env, "JPY_PARENT_PID": "1"})


def warm_up(limits: Limits) -> zygote.Template | None:
    """Start (or find) this process's warm template for CPU kernels under `limits`, where they use one, before
    local workers are forked from this process: they inherit it (zygote.py). None where none is used."""
    if not limits.warm_template or jail.bwrap_path() is None:
        return None
    return fitting_template(kernel_spec(limits), limits)


def fitting_template(spec: KernelSpec, limits: Limits) -> zygote.Template | None:
    """This process's warm template for kernels of `spec`, started if needed, where a kernel under `limits` fits in
    it: the address-space cap (RLIMIT_AS; not on GPU workers) counts what the template has mapped."""
    made = zygote.template(template_env(spec))
    return made if made is not None and zygote.fits(made, int(limits.memory_bytes)) else None


MAX_SOCKET_PATH = 107  # bytes of a Unix socket's path on Linux (sun_path holds 108, the last one NUL)


class SandboxKernelManager(AsyncKernelManager):
    """An AsyncKernelManager that launches `sandbox_spec` whatever kernel name the notebook asks for, each kernel in
    its own cgroup (capped by `sandbox_limits`) and, when `sandbox_jailed`, its own jail. `kernel_manager_class`
    makes one for a run."""

    sandbox_spec: KernelSpec | None = None
    sandbox_limits: Limits = Limits()
    sandbox_jailed: bool = True
    sandbox_clock = None  # the notebook's SubmissionClock (clock.py): counts the CPU time of each kernel's cgroup
    submission_cgroup: cgroup.Cgroup | None = None
    ipc_dir: str | None = None
    connection_dir: str | None = None
    template: zygote.Template | None = None  # the warm template this kernel is forked from (zygote.py)

    @property
    def kernel_spec(self):  # noqa: D401 - property of jupyter_client's API
        return self.sandbox_spec

    def _template(self) -> zygote.Template | None:
        """The worker's warm template for this kernel, where it is used (jailed, no GPU, not turned off)."""
        spec = self.sandbox_spec
        if not (self.sandbox_jailed and self.sandbox_limits.warm_template and spec is not None
                and "--gpu" not in spec.argv):
            return None
        return fitting_template(spec, self.sandbox_limits)

    async def _async_pre_start_kernel(self, **kw):
        if self.sandbox_jailed and self.ipc_dir is None:
            # sockets in a folder bound writable into the jail (no network there), on a tmpfs whose pages the
            # submission's cgroup pays for; the connection file apart, bound read-only (scratch.py). From a
            # warm template: each in its exchange folder on the same file system, which its jail sees
            self.template = self._template()
            made = self.template
            self.ipc_dir = scratch.mkdtemp("ipc", made.exchange if made else scratch.socket_root())
            self.connection_dir = scratch.mkdtemp("conn", made.files if made else None)
            self.transport = "ipc"
            self.connection_file = os.path.join(self.connection_dir, "kernel.json")
            self.ip = os.path.join(self.ipc_dir, "k")
            longest = f"{self.ip}-99"  # jupyter_client's sockets are <ip>-<n>, n = 1..5
            if len(os.fsencode(longest)) > MAX_SOCKET_PATH:
                for name in ("ipc_dir", "connection_dir"):
                    scratch.remove(getattr(self, name))
                    setattr(self, name, None)
                raise ValueError(f"the kernel's socket path {longest} is longer than the {MAX_SOCKET_PATH} bytes a "
                                 f"Unix socket allows: set ${scratch.SOCKET_ROOT_ENV} to a folder with a shorter path")
        if self.submission_cgroup is None:
            limits = self.sandbox_limits
            self.submission_cgroup = cgroup.create(int(limits.memory_bytes), int(limits.processes),
                                                   float(limits.cpus))
            if self.sandbox_clock is not None:
                self.sandbox_clock.attach(self.submission_cgroup)
        return await super()._async_pre_start_kernel(**kw)

    def format_kernel_cmd(self, extra_arguments=None):
        cmd = super().format_kernel_cmd(extra_arguments)
        per_kernel = []
        for folder in (self.submission_cgroup.dirs if self.submission_cgroup else []):
            per_kernel += ["--cgroup", folder]
        if self.ipc_dir:
            per_kernel += ["--ipc-dir", self.ipc_dir, "--connection-dir", self.connection_dir]
        if self.template is not None:
            per_kernel += ["--template", self.template.socket, "--template-files", self.template.files]
        at = cmd.index("--")
        return cmd[:at] + per_kernel + cmd[at:]

    def kill_submission(self) -> None:
        """Every process of the submission ends now (the jail's namespace goes with its first process)."""
        if self.provisioner is not None and getattr(self.provisioner, "process", None) is not None:
            try:
                self.provisioner.process.kill()
            except OSError:
                pass
        if self.submission_cgroup is not None:
            self.submission_cgroup.kill_all()

    async def _async_kill_kernel(self, restart: bool = False) -> None:
        self.kill_submission()
        await super()._async_kill_kernel(restart=restart)

    async def _async_cleanup_resources(self, restart: bool = False) -> None:
        try:
            await super()._async_cleanup_resources(restart=restart)
        finally:
            if self.submission_cgroup is not None:  # after the notebook: nothing of it survives
                self.submission_cgroup.kill_all()
            for name in ("ipc_dir", "connection_dir"):  # even a `chmod 0` folder the submission left; before
                if getattr(self, name) is not None:  # the cgroup goes, which pays for the tmpfs pages
                    scratch.remove(getattr(self, name))
                    setattr(self, name, None)
            if self.sandbox_clock is not None:  # every process has ended: the group's final CPU count
                self.sandbox_clock.detach()
            if self.submission_cgroup is not None:
                self.submission_cgroup.remove()
                self.submission_cgroup = None

    cleanup_resources = _async_cleanup_resources  # nbclient calls this name


def kernel_manager_class(spec: KernelSpec, limits: Limits, jailed: bool | None = None, clock=None) -> type:
    """A SandboxKernelManager class that launches `spec` whatever kernel name the notebook asks for, each kernel in
    its own jail and cgroup, whose CPU time `clock` (a clock.SubmissionClock) counts. `jailed` defaults to: unless
    AUTOGRADER_UNSAFE_NO_JAIL=1; a jail that cannot be made raises jail.JailUnavailable here, before any student
    code runs."""
    jailed = not jail.unsafe() if jailed is None else jailed
    if jailed:
        jail.bwrap_path()  # raises JailUnavailable (bwrap missing or unusable)

    class ForThisRun(SandboxKernelManager):
        """SandboxKernelManager with this run's kernel spec, limits and jail."""

        sandbox_spec, sandbox_limits, sandbox_jailed, sandbox_clock = spec, limits, jailed, clock

    return ForThisRun


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
