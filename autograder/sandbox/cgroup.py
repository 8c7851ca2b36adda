"""One control group per submission: a cap on the TOTAL memory and number of processes of everything it starts.

An rlimit caps one process; five children of 1.5 GiB each still hold 7.5 GiB. A cgroup caps the sum:

- cgroup v1 (memory and pids controllers mounted apart, e.g. /sys/fs/cgroup/memory): a child group
  `autograder-<id>` of this process's own group in each controller, with `memory.limit_in_bytes` (and
  `memory.memsw.limit_in_bytes` where swap is accounted) and `pids.max`;
- cgroup v2 (one unified tree with the memory and pids controllers): a child group of this process's own group,
  with `memory.max`, `memory.swap.max` = 0 and `pids.max`. This needs a delegated group whose
  `cgroup.subtree_control` can enable both controllers (root, or e.g. `systemd-run --scope -p Delegate=yes`).

`create(...)` returns None when no group can be made (no controller, read-only /sys/fs/cgroup as in an
unprivileged Kubernetes pod, a v2 group that holds processes itself...): the caller then falls back to per-process
rlimits (RLIMIT_AS/RLIMIT_DATA per process, RLIMIT_NPROC per user) and says so once in the log. Set
AUTOGRADER_CGROUPS=0 to never use cgroups.

The launcher moves itself into the group (`join`) before it becomes the jail, so every process of the submission
is counted; after the notebook, `remove()` kills whatever is still in the group and deletes it.
"""
from __future__ import annotations

import logging
import os
import signal
import time
import uuid

log = logging.getLogger("autograder.grade")
ROOT = "/sys/fs/cgroup"
ENV = "AUTOGRADER_CGROUPS"
_warned: set[str] = set()


def _own_groups(proc_cgroup: str = "/proc/self/cgroup") -> dict[str, str]:
    """controller -> this process's group path ("" is the v2 unified hierarchy)."""
    groups = {}
    try:
        with open(proc_cgroup) as fh:
            for line in fh:
                _, controllers, path = line.rstrip("\n").split(":", 2)
                for controller in controllers.split(","):
                    groups[controller] = path
    except OSError:
        pass
    return groups


def _write(path: str, value: str) -> None:
    with open(path, "w") as fh:
        fh.write(value)


def _read(path: str) -> str:
    with open(path) as fh:
        return fh.read()


class Cgroup:
    """A created group: `dirs` are its folders (one per v1 controller, one for v2)."""

    def __init__(self, dirs: list[str], version: int):
        self.dirs = dirs
        self.version = version

    def __repr__(self) -> str:
        return f"Cgroup(v{self.version}, {self.dirs})"

    def join(self, pid: int | None = None) -> None:
        """Move process `pid` (default: this one) into the group, in every controller."""
        for folder in self.dirs:
            _write(os.path.join(folder, "cgroup.procs"), str(pid or os.getpid()))

    def pids(self) -> set[int]:
        found: set[int] = set()
        for folder in self.dirs:
            try:
                found.update(int(p) for p in _read(os.path.join(folder, "cgroup.procs")).split())
            except (OSError, ValueError):
                pass
        return found

    def kill_all(self, timeout: float = 5.0) -> None:
        """SIGKILL every process of the group, until none is left (new forks are caught by the next round)."""
        if self.version == 2 and os.path.exists(os.path.join(self.dirs[0], "cgroup.kill")):
            try:
                _write(os.path.join(self.dirs[0], "cgroup.kill"), "1")
            except OSError:
                pass
        deadline = time.monotonic() + timeout
        while True:
            pids = self.pids()
            if not pids or time.monotonic() > deadline:
                return
            for pid in pids:
                try:
                    os.kill(pid, signal.SIGKILL)
                except (ProcessLookupError, PermissionError):
                    pass
            time.sleep(0.02)

    def remove(self) -> None:
        """Kill what is left and delete the group (a dying process can hold it a moment: retried briefly)."""
        self.kill_all()
        for folder in self.dirs:
            for _ in range(50):
                try:
                    os.rmdir(folder)
                    break
                except FileNotFoundError:
                    break
                except OSError:
                    time.sleep(0.02)
            else:
                log.warning("could not remove cgroup %s", folder)


def _fallback(reason: str) -> None:
    if reason not in _warned:
        _warned.add(reason)
        log.warning("no per-submission cgroup (%s): falling back to per-process limits (memory per process with "
                    "RLIMIT_AS/RLIMIT_DATA, processes per user with RLIMIT_NPROC); the total memory of a submission "
                    "is not capped", reason)


def enabled() -> bool:
    return os.environ.get(ENV, "1") != "0"


def create(memory_bytes: int, max_processes: int, root: str = ROOT, proc_cgroup: str = "/proc/self/cgroup",
           name: str | None = None) -> Cgroup | None:
    """A new group under this process's own group with the two caps (0 = no cap); None where none can be made."""
    if not enabled():
        _fallback(f"{ENV}=0")
        return None
    name = name or f"autograder-{uuid.uuid4().hex[:12]}"
    groups = _own_groups(proc_cgroup)
    made: list[str] = []
    try:
        if "memory" in groups and "pids" in groups and os.path.isdir(os.path.join(root, "memory")):
            version = 1
            for controller in ("memory", "pids"):
                folder = os.path.join(root, controller, groups[controller].lstrip("/"), name)
                os.mkdir(folder)
                made.append(folder)
            memory_dir, pids_dir = made
            if memory_bytes > 0:
                _write(os.path.join(memory_dir, "memory.limit_in_bytes"), str(memory_bytes))
                memsw = os.path.join(memory_dir, "memory.memsw.limit_in_bytes")
                if os.path.exists(memsw):  # swap counts too: a submission cannot push its excess to swap
                    _write(memsw, str(memory_bytes))
            if max_processes > 0:
                _write(os.path.join(pids_dir, "pids.max"), str(max_processes))
        elif "" in groups and os.path.exists(os.path.join(root, "cgroup.controllers")):
            version = 2
            parent = os.path.join(root, groups[""].lstrip("/"))
            available = _read(os.path.join(parent, "cgroup.controllers")).split()
            if not {"memory", "pids"} <= set(available):
                raise OSError(f"the memory and pids controllers are not available in {parent}")
            enabled_here = _read(os.path.join(parent, "cgroup.subtree_control")).split()
            if not {"memory", "pids"} <= set(enabled_here):
                _write(os.path.join(parent, "cgroup.subtree_control"), "+memory +pids")
            folder = os.path.join(parent, name)
            os.mkdir(folder)
            made.append(folder)
            if memory_bytes > 0:
                _write(os.path.join(folder, "memory.max"), str(memory_bytes))
                if os.path.exists(os.path.join(folder, "memory.swap.max")):
                    _write(os.path.join(folder, "memory.swap.max"), "0")
            if max_processes > 0:
                _write(os.path.join(folder, "pids.max"), str(max_processes))
        else:
            _fallback("no memory and pids cgroup controllers found")
            return None
    except OSError as exc:
        for folder in reversed(made):
            try:
                os.rmdir(folder)
            except OSError:
                pass
        _fallback(f"cgroups are not writable here: {exc}")
        return None
    return Cgroup(made, version)
