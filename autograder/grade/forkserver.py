"""A fork server for grading kernels: the heavy imports happen once per worker, each notebook gets a fresh fork.

Starting a kernel the plain way costs about 2 s of CPU before the first student line runs: ipykernel, torch,
numpy, matplotlib, coursekit and the checks are imported again for every notebook. Here one long-lived process
per worker (the *server*) imports them once; for each kernel it forks a child that sets its own limits and
becomes ipykernel. Every notebook still runs in its own new process (no state is shared between students), and
the kernel starts as if launched by `autograder.grade.launcher`: the same arguments, environment, working folder
and rlimits, in a new session (so interrupts and kills reach the kernel's whole process group).

    server process:  python -P -s -m autograder.grade.forkserver    (stdin/stdout: one JSON line per request)
    request:  {"cwd": ..., "env": {...}, "memory_bytes": N, "rlimit": "as", "kernel_args": ["-f", FILE]}
    reply:    {"pid": PID}  (the server's first line is {"ready": true, "preloaded": [...]} or {"error": ...})

Safety: a process may only be forked while it has a single thread and no CUDA context, so the server checks both
after its imports (pandas/pyarrow, for example, start a jemalloc thread: they are not preloaded; importing torch
does not touch CUDA, each kernel initialises it in its own process) and refuses to serve otherwise.
Whenever the server is unavailable the kernel is launched the plain way (`ForkedKernelProvisioner` falls back
to jupyter_client's LocalProvisioner). The server reaps nothing itself: SIGCHLD is ignored, so the system reaps
its children, and the kernel's liveness is checked with signal 0.

Set AUTOGRADER_FORK_KERNELS=0 to launch every kernel the plain way (it is also off on non-Linux systems), and
AUTOGRADER_FORK_PRELOAD=mod1,mod2 to choose what the server imports (default: PRELOAD below).
"""
from __future__ import annotations

import atexit
import importlib
import json
import os
import selectors
import signal
import subprocess
import sys
import tempfile
import threading
import time

# Imported once by the server. Only modules that start no thread at import (see the module doc).
PRELOAD = (
    "ipykernel.kernelapp", "numpy", "torch", "torch.nn", "torch.nn.functional", "matplotlib", "matplotlib.pyplot",
    "coursekit", "coursekit.plots", "coursekit.checks", "autograder.checks", "gensim.models",
)


def enabled() -> bool:
    return sys.platform.startswith("linux") and os.environ.get("AUTOGRADER_FORK_KERNELS", "1") != "0"


# ---------------------------------------------------------------------------------------------------------------
# server side (its own process)


def thread_count() -> int:
    return len(os.listdir("/proc/self/task"))


def preload(modules=None) -> list[str]:
    """Import `modules` (default: $AUTOGRADER_FORK_PRELOAD, comma-separated, else PRELOAD); returns those loaded."""
    if modules is None:
        chosen = os.environ.get("AUTOGRADER_FORK_PRELOAD")
        modules = PRELOAD if chosen is None else [m.strip() for m in chosen.split(",") if m.strip()]
    loaded = []
    for name in modules:
        try:
            importlib.import_module(name)
            loaded.append(name)
        except Exception:  # noqa: BLE001 - a missing optional module only means less is preloaded
            pass
    return loaded


def become_kernel(request: dict) -> None:
    """In the forked child: new session, the kernel's folder, environment and limits, then ipykernel. Never returns."""
    code = 1
    try:
        os.setsid()
        signal.signal(signal.SIGCHLD, signal.SIG_DFL)
        signal.signal(signal.SIGINT, signal.default_int_handler)
        devnull = os.open(os.devnull, os.O_RDWR)
        os.dup2(devnull, 0)
        os.dup2(devnull, 1)  # fd 2 stays the worker's stderr, as for a plainly launched kernel
        os.close(devnull)
        os.chdir(request["cwd"])
        os.environ.clear()
        os.environ.update(request["env"])
        from autograder.grade.launcher import apply_limits, ipykernel_args

        apply_limits(int(request.get("memory_bytes", 0)), request.get("rlimit", "as"))
        if "numpy" in sys.modules:  # as in a new process (Python's `random` reseeds itself after a fork)
            sys.modules["numpy"].random.seed()
        args = ipykernel_args(list(request["kernel_args"]))
        sys.argv = ["ipykernel_launcher", *args]
        from ipykernel.kernelapp import IPKernelApp

        IPKernelApp.launch_instance(argv=args)
        code = 0
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
    except BaseException:  # noqa: BLE001 - report and leave; the child must never return to the server loop
        import traceback

        traceback.print_exc()
    finally:
        try:
            atexit._run_exitfuncs()
            sys.stdout.flush()
            sys.stderr.flush()
        finally:
            os._exit(code)


def serve(requests, replies) -> None:
    """Answer each request line with the pid of a new kernel; stops at end of input (the worker went away)."""
    def reply(message: dict) -> None:
        replies.write(json.dumps(message) + "\n")
        replies.flush()

    loaded = preload()
    threads = thread_count()
    if threads != 1:
        reply({"error": f"the server has {threads} threads after its imports; forking is not safe"})
        return
    torch = sys.modules.get("torch")
    if torch is not None and torch.cuda.is_initialized():  # a CUDA context cannot be used in a forked child
        reply({"error": "CUDA was initialised by a preloaded module; forking is not safe"})
        return
    signal.signal(signal.SIGCHLD, signal.SIG_IGN)  # the system reaps finished kernels
    reply({"ready": True, "preloaded": loaded})
    for line in requests:
        try:
            request = json.loads(line)
        except ValueError as exc:
            reply({"error": f"bad request: {exc}"})
            continue
        pid = os.fork()
        if pid == 0:
            requests.close()
            replies.close()
            become_kernel(request)
        reply({"pid": pid})


def main() -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C in the instructor's terminal is the worker's business
    requests = os.fdopen(os.dup(0), "r")
    replies = os.fdopen(os.dup(1), "w")
    devnull = os.open(os.devnull, os.O_RDWR)
    os.dup2(devnull, 0)
    os.dup2(2, 1)  # stray prints of preloaded modules must not corrupt the reply channel
    serve(requests, replies)


# ---------------------------------------------------------------------------------------------------------------
# worker side


class ForkServerUnavailable(RuntimeError):
    """The server could not start or stopped; the caller launches the kernel the plain way."""


class ForkServer:
    """One server process started with `env`; `fork(...)` returns a new kernel's pid."""

    def __init__(self, env: dict[str, str], startup_timeout: float = 120.0):
        self._lock = threading.Lock()
        self._proc = subprocess.Popen(
            [sys.executable, "-P", "-s", "-m", "autograder.grade.forkserver"], env=env, cwd=tempfile.gettempdir(),
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, bufsize=1)
        self._startup_timeout = startup_timeout
        self._ready: dict | None = None
        self.refusal: str | None = None  # why the server could not start, once known

    def _read(self, timeout: float) -> dict:
        with selectors.DefaultSelector() as selector:
            selector.register(self._proc.stdout, selectors.EVENT_READ)
            if not selector.select(timeout):
                raise ForkServerUnavailable(f"the kernel fork server did not answer within {timeout:g} s")
        line = self._proc.stdout.readline()
        if not line:
            raise ForkServerUnavailable(f"the kernel fork server stopped (exit code {self._proc.poll()})")
        message = json.loads(line)
        if "error" in message:
            raise ForkServerUnavailable(f"the kernel fork server refused: {message['error']}")
        return message

    @property
    def alive(self) -> bool:
        return self._proc.poll() is None

    @property
    def preloaded(self) -> list[str]:
        with self._lock:
            self._wait_ready()
        return list(self._ready["preloaded"])

    def _wait_ready(self) -> None:
        if self.refusal is not None:
            raise ForkServerUnavailable(self.refusal)
        if self._ready is None:
            try:
                self._ready = self._read(self._startup_timeout)
            except (ForkServerUnavailable, ValueError) as exc:
                self.refusal = str(exc)  # it would fail the same way again: not retried in this process
                raise ForkServerUnavailable(self.refusal) from exc

    def fork(self, *, cwd: str, env: dict[str, str], memory_bytes: int, rlimit: str, kernel_args: list[str]) -> int:
        request = {"cwd": cwd, "env": env, "memory_bytes": memory_bytes, "rlimit": rlimit, "kernel_args": kernel_args}
        with self._lock:
            try:
                self._wait_ready()
                self._proc.stdin.write(json.dumps(request) + "\n")
                self._proc.stdin.flush()
                return int(self._read(30.0)["pid"])
            except (OSError, ValueError, KeyError) as exc:
                self.close()
                raise ForkServerUnavailable(f"the kernel fork server failed: {exc}") from exc
            except ForkServerUnavailable:
                self.close()
                raise

    def close(self) -> None:
        if self._proc.poll() is None:
            try:
                self._proc.stdin.close()  # end of input: the server leaves
                self._proc.wait(timeout=5)
            except (OSError, subprocess.TimeoutExpired):
                self._proc.kill()
                self._proc.wait()


_SERVERS: dict[tuple, ForkServer] = {}
_SERVERS_LOCK = threading.Lock()


def server_for(spec_env: dict[str, str]) -> ForkServer:
    """This process's server for kernels with the kernel-spec environment `spec_env` (one per distinct env:
    variables such as OMP_NUM_THREADS, PYTHONHASHSEED or CUDA_VISIBLE_DEVICES act when a process starts)."""
    key = tuple(sorted(spec_env.items()))
    with _SERVERS_LOCK:
        server = _SERVERS.get(key)
        if server is not None and server.refusal is not None:
            raise ForkServerUnavailable(server.refusal)  # the plain launch from now on, without a new attempt
        if server is None or not server.alive:  # a server that stopped after it served (killed) is replaced
            server = _SERVERS[key] = ForkServer({**os.environ, **spec_env})
        return server


def shutdown_servers() -> None:
    with _SERVERS_LOCK:
        for server in _SERVERS.values():
            server.close()
        _SERVERS.clear()


class ForkedKernelProcess:
    """The parts of subprocess.Popen that jupyter_client's LocalProvisioner uses, for a kernel forked by the
    server (not our child: liveness is probed with signal 0, the exit code is not known and reported as -1)."""

    stdin = stdout = stderr = None

    def __init__(self, pid: int):
        self.pid = pid
        self.returncode: int | None = None

    def poll(self) -> int | None:
        if self.returncode is None:
            try:
                os.kill(self.pid, 0)
            except ProcessLookupError:
                self.returncode = -1
            except PermissionError:  # the pid was reused by another user's process: ours is gone
                self.returncode = -1
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        deadline = None if timeout is None else time.monotonic() + timeout
        while self.poll() is None:
            if deadline is not None and time.monotonic() > deadline:
                raise subprocess.TimeoutExpired(f"kernel {self.pid}", timeout)
            time.sleep(0.02)
        return self.returncode

    def send_signal(self, signum: int) -> None:
        os.kill(self.pid, signum)

    def terminate(self) -> None:
        self.send_signal(signal.SIGTERM)

    def kill(self) -> None:
        self.send_signal(signal.SIGKILL)


atexit.register(shutdown_servers)  # a worker that exits normally closes its servers (they also leave at EOF)


def fork_kernel(spec_env: dict[str, str], cmd: list[str], env: dict[str, str], cwd: str) -> ForkedKernelProcess:
    """A kernel for the launcher command `cmd` (see sandbox.kernel_spec), forked by this process's server."""
    from autograder.grade.launcher import parse

    if "autograder.grade.launcher" not in cmd:
        raise ForkServerUnavailable("not a sandbox kernel command")
    args = parse(cmd[cmd.index("autograder.grade.launcher") + 1:])
    pid = server_for(spec_env).fork(cwd=str(cwd), env=env, memory_bytes=args.memory_bytes, rlimit=args.rlimit,
                                    kernel_args=args.kernel_args)
    return ForkedKernelProcess(pid)


if __name__ == "__main__":
    main()
