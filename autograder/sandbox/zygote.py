"""The warm template of a grading worker (the zygote pattern of Android and Chromium's sandbox).

Without it, every submission's kernel pays its own Python, ipykernel, torch, numpy, matplotlib and coursekit
start-up (about 1.7 s of CPU). With it, each worker process keeps one template per kernel environment: a jail
(jail.template_command) whose program (template_main.py, run as text: nothing of `autograder` is importable in
a jail) has imported those libraries and, per submission, forks a child that makes its own fresh namespaces,
joins the submission's cgroup, drops every capability and becomes that submission's ipykernel
(template_main.py's doc says how). The template never runs a submission's code.

    worker (kernel manager)  --starts-->  launcher --template SOCKET  --connects-->  template (in its jail)
                                            | moves the child into the cgroup          | forks the child

Who starts it: a grading run on local workers starts it in the grading process before the workers (`warm_up`), and
the workers, forked from that process, inherit it: one template per run, shared by its workers, and kept for the
process's later runs (at most KEEP templates per process, the least recently used stopped first). A worker of an
existing cluster (--scheduler), or any process without one, starts its own on its first kernel. A template lives
as long as the process that started it: it exits when every copy of that process's end of a pipe has closed (the
process and the workers it forked ended, even by SIGKILL), and its jail, kernels included, goes with it. Only its
owner stops it; a worker that finds its inherited template dead starts its own. A template that died or cannot be
reached is started again on the next kernel; one that cannot start at all leaves the worker on the cold path (a new
jail per kernel, jail.bwrap_command), said once in the log. On by default; `c.SandboxLimits.warm_template = False`
turns it off (docs/grading-config.md, docs/threat-model.md).
"""
from __future__ import annotations

import atexit
import logging
import os
import subprocess
import sys
import tempfile
import threading
import time

from autograder.errors import AutograderError
from autograder.sandbox import jail, scratch

log = logging.getLogger("autograder.grade")

# imported by the template once, before any fork: what a grading kernel imports anyway. The course's notebooks
# also import, from their first exercise on: coursekit's checks, probes and plots, the inline backend, sympy
# (through torch's symbolic shapes, on the first nn.MultiheadAttention) and torch._dynamo (every torch.optim
# optimizer imports it when built: 02, 04 and 06-11; 0.6-1.5 CPU-s, 40 MiB of address space). Not seaborn or gensim:
# each maps 200-400 MiB more address space, which the address-space cap would count in every kernel (fits, below).
# coursekit's heatmaps draw with matplotlib alone, so only 07's own strip plot imports seaborn (with pandas and
# scipy: 1.7 s), and coursekit.tokenize loads nltk's tokenizer without the rest of nltk (coursekit/text.py).
# ipykernel.debugger: ipykernel imports it (and debugpy) while it builds every kernel, 0.17 CPU-s each; it starts
# no thread. After these imports the template freezes its objects (gc.freeze, template_main.serve).
PRELOAD = ("ipykernel.kernelapp", "ipykernel.ipkernel", "ipykernel.zmqshell", "numpy", "torch", "matplotlib",
           "matplotlib.pyplot", "coursekit", "coursekit.probe", "coursekit.checks.toolkit", "coursekit.plots",
           "coursekit.criteria", "coursekit.mistakes", "coursekit.tolerance", "coursekit.diagrams",
           "matplotlib_inline.backend_inline", "torch.fx.experimental.symbolic_shapes", "torch._dynamo",
           "ipykernel.debugger")
START_TIMEOUT = 120.0  # seconds for the template to import PRELOAD on a busy machine
PING_TIMEOUT = 20.0  # seconds for a template's child to answer (a fork, on a busy machine)
SOCKET = "t.sock"
SOURCE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "template_main.py")


class TemplateUnavailable(AutograderError, RuntimeError):
    """The warm template could not be started; the worker grades on the cold path."""


class Template:
    """One running template: its jail's process, its two exchange folders and its socket.

    `exchange`, on the tmpfs of the kernels' sockets (scratch.socket_root), holds the template's socket and each
    kernel's socket folder; `files`, in the temporary folder (as a cold kernel's connection folder), holds its
    program, its log, each kernel's connection folder and the launcher's copy of each submission. So a submission
    that fills its socket folder's tmpfs stops no classmate's kernel, as on the cold path."""

    def __init__(self, env: dict[str, str]):
        self.env = dict(env)
        self.exchange = scratch.mkdtemp("tpl", scratch.socket_root())
        self.files = scratch.mkdtemp("tplf")
        self.socket = os.path.join(self.exchange, SOCKET)
        self.process: subprocess.Popen | None = None
        self.lifeline: int | None = None  # the worker's end of the template's lifeline pipe
        self.started_s: float | None = None  # wall seconds from launch to ready
        self.address_space_bytes = 0  # what every kernel forked from it has mapped from the start
        self.modules = 0  # modules imported
        self.rss_bytes = 0  # its resident memory once ready, shared copy-on-write with every kernel
        self.owner = os.getpid()  # the process that started it; a worker forked from it only uses it

    def start(self) -> "Template":
        from autograder.sandbox.kernel import MAX_SOCKET_PATH

        if len(os.fsencode(self.socket)) > MAX_SOCKET_PATH:
            self.stop()
            raise TemplateUnavailable(f"its socket path {self.socket} is longer than a Unix socket allows")
        bwrap = jail.bwrap_path()
        if bwrap is None:
            raise TemplateUnavailable("no jail (AUTOGRADER_UNSAFE_NO_JAIL=1): the template needs one")
        program = os.path.join(self.files, "template_main.py")
        with open(SOURCE, encoding="utf-8") as src, open(program, "w", encoding="utf-8") as dst:
            dst.write(src.read())
        # the template's lifeline: it exits when this end closes (the worker ended, however), and its jail with it
        lifeline, self.lifeline = os.pipe()
        command = [sys.executable, "-s", "-P", program, self.socket, ",".join(PRELOAD), str(lifeline),
                   self.exchange, self.files]
        argv = jail.template_command(bwrap, exchange=(self.exchange, self.files), env=self.env, command=command)
        at = argv.index("--")
        from autograder.sandbox.launcher import args_fd

        fd = args_fd(argv[1:at])
        began = time.monotonic()
        errors = open(os.path.join(self.files, "template.log"), "wb")
        try:
            # as the kernel's jail: an empty environment, nothing of the grader on its stdin/stdout/stderr
            self.process = subprocess.Popen([bwrap, "--args", str(fd), *argv[at:]], env={}, pass_fds=(fd, lifeline),
                                            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                            stderr=errors, start_new_session=True)
        finally:
            os.close(fd)
            os.close(lifeline)
            errors.close()
        ready = self.socket + ".ready"
        while not os.path.exists(ready):
            if self.process.poll() is not None:
                with open(errors.name, "rb") as fh:
                    err = fh.read().decode(errors="replace").strip()[-2000:]
                self.stop()
                raise TemplateUnavailable(f"the warm template exited ({self.process.returncode}): {err}")
            if time.monotonic() - began > START_TIMEOUT:
                self.stop()
                raise TemplateUnavailable(f"the warm template was not ready in {START_TIMEOUT:.0f} s")
            time.sleep(0.02)
        self.started_s = time.monotonic() - began
        import json

        with open(ready, encoding="utf-8") as fh:
            facts = json.load(fh)
        self.address_space_bytes, self.modules = int(facts["address_space_bytes"]), int(facts["modules"])
        self.rss_bytes = int(facts["rss_bytes"])
        self.probe()
        return self

    def probe(self) -> None:
        """One child through the whole set-up (namespaces, mounts, capabilities dropped), without a kernel: the
        template is only used where that works."""
        probe = scratch.mkdtemp("probe", self.files)
        try:
            request = {"probe": True, "kernel_args": [], "env": self.env, "submission": probe, "notebook_dir": jail.NOTEBOOK_DIR, "ipc_dir": probe,
                       "connection_dir": probe, "disk_bytes": 1 << 20, "rlimits": {}}
            code = fork_kernel(self.socket, request)
            if code != 0:
                raise TemplateUnavailable(f"the warm template's check ended with {code}")
        except TemplateUnavailable:
            self.stop()
            raise
        finally:
            scratch.remove(probe)

    def owned(self) -> bool:
        """Whether this process started it (a forked worker's copy is not its own: it cannot wait for it)."""
        return self.owner == os.getpid()

    def alive(self) -> bool:
        if self.process is None or not (os.path.exists(self.socket) and os.path.isdir(self.files)):
            return False  # (a folder cleaned under a long-lived process leaves it unusable)
        if self.owned():
            return self.process.poll() is None
        # not our child: poll() would say it ended (waitpid fails with ECHILD); its bwrap's /proc entry tells
        try:
            with open(f"/proc/{self.process.pid}/stat", "rb") as fh:
                return fh.read().rsplit(b")", 1)[1].split()[0] not in (b"Z", b"X")
        except (OSError, IndexError):
            return False

    def healthy(self) -> bool:
        """Alive, and it answers: one forked child says "pong" within PING_TIMEOUT."""
        if not self.alive():
            return False
        import socket

        conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        conn.settimeout(PING_TIMEOUT)
        try:
            conn.connect(self.socket)
            conn.sendall(b'{"ping": true}\n')
            return _line(conn, bytearray()) == "pong"
        except OSError:
            return False
        finally:
            conn.close()

    def stop(self) -> None:
        """End the template and remove its folders; in a process that did not start it, only forget it (its owner
        stops it: it may serve that owner's other workers)."""
        if self.lifeline is not None:  # the template ends once every copy of this end is closed
            os.close(self.lifeline)
            self.lifeline = None
        if not self.owned():
            return
        if self.process is not None and self.process.poll() is None:
            self.process.kill()  # bwrap, the template's PID 1: its namespace takes every process with it
            try:
                self.process.wait(10)
            except subprocess.TimeoutExpired:
                pass
        scratch.remove(self.exchange)
        scratch.remove(self.files)


def _line(conn, pending: bytearray) -> str:
    while b"\n" not in pending:
        chunk = conn.recv(4096)
        if not chunk:
            return ""
        pending += chunk
    line, _, rest = bytes(pending).partition(b"\n")
    pending[:] = rest
    return line.decode(errors="replace")


def fork_kernel(socket_path: str, request: dict, cgroup_dirs=(), on_started=None) -> int:
    """Ask the template at `socket_path` for a kernel (template_main.py): its child says "ready", whose message
    credentials give its pid in this process's PID namespace; it goes into the submission's cgroup (each folder of
    `cgroup_dirs`) before it makes its namespaces ("go"); `on_started()` once the kernel has its own copy of the
    submission; returns the kernel's exit code when it ends. Raises TemplateUnavailable when the template fails."""
    import json
    import socket
    import struct

    conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    conn.settimeout(PING_TIMEOUT)  # until the kernel is made; then as long as it lives
    try:
        conn.setsockopt(socket.SOL_SOCKET, socket.SO_PASSCRED, 1)
        try:
            conn.connect(socket_path)
        except OSError as exc:
            raise TemplateUnavailable(f"the warm template cannot be reached: {exc}") from exc
        conn.sendall(json.dumps(request).encode() + b"\n")
        data, ancillary, _flags, _addr = conn.recvmsg(64, socket.CMSG_SPACE(struct.calcsize("3i")))
        child = next((struct.unpack("3i", cdata[:12])[0] for level, kind, cdata in ancillary
                      if level == socket.SOL_SOCKET and kind == socket.SCM_CREDENTIALS), 0)
        if data != b"ready\n" or child <= 0:
            raise TemplateUnavailable(f"the warm template answered {data!r}")
        for folder in cgroup_dirs:  # before it makes its namespaces: everything it starts is counted
            with open(os.path.join(folder, "cgroup.procs"), "w") as fh:
                fh.write(str(child))
        conn.sendall(b"go\n")
        pending = bytearray()
        while True:
            line = _line(conn, pending)
            if line == "started":
                conn.settimeout(None)
                if on_started is not None:
                    on_started()
            elif line.startswith("exit "):
                return int(line.split()[1])
            else:
                raise TemplateUnavailable(f"the warm template's child: {line or 'ended without a word'}")
    except socket.timeout as exc:
        raise TemplateUnavailable(f"the warm template did not answer in {PING_TIMEOUT:.0f} s") from exc
    finally:
        conn.close()


_templates: dict[tuple, Template] = {}  # by key, least recently used first
_failed: set[tuple] = set()
_lock = threading.Lock()
KEEP = 2  # templates one process keeps (each holds ~260 MB resident); the least recently used is stopped first


# a kernel forked from the template needs this much address space beyond what the template maps (when its cap is
# RLIMIT_AS): below, it starts cold, where only what the notebook imports counts
ADDRESS_SPACE_HEADROOM = 1 << 30


def fits(made: Template, address_space_cap: int) -> bool:
    """Whether a kernel whose address space is capped at `address_space_cap` (0: no cap) can be forked from `made`."""
    return address_space_cap <= 0 or address_space_cap >= made.address_space_bytes + ADDRESS_SPACE_HEADROOM


def template(env: dict[str, str]) -> Template | None:
    """This worker's template for kernels with environment `env`, started (again) if needed; None where none can
    start (the cause is logged once, and the worker grades on the cold path)."""
    key = (scratch.socket_root(), tempfile.gettempdir(), *sorted(env.items()))
    with _lock:
        found = _templates.pop(key, None)
        if found is not None and found.healthy():
            _templates[key] = found  # the most recently used, last
            return found
        if found is not None:
            log.warning("the warm template of this worker died or does not answer; starting a new one")
            found.stop()
        if key in _failed:
            return None
        while len(_templates) >= KEEP:
            _templates.pop(next(iter(_templates))).stop()
        try:
            made = Template(env).start()
        except (TemplateUnavailable, OSError) as exc:
            _failed.add(key)
            log.warning("no warm template (%s): every kernel starts cold", exc)
            return None
        _templates[key] = made
        return made


def stop_all() -> None:
    with _lock:
        for made in _templates.values():
            made.stop()
        _templates.clear()


atexit.register(stop_all)
