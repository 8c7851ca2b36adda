"""One control group per submission: a cap on the TOTAL memory, number of processes and CPU of everything it starts.

An rlimit caps one process; five children of 1.5 GiB each still hold 7.5 GiB. A cgroup caps the sum:

- cgroup v1 (memory, pids and cpu controllers mounted apart, e.g. /sys/fs/cgroup/memory): a child group
  `autograder-<owner>-<id>` of this process's own group in each controller, with `memory.limit_in_bytes` (and
  `memory.memsw.limit_in_bytes` where swap is accounted), `pids.max`, and `cpu.cfs_quota_us` per
  `cpu.cfs_period_us` (`Limits.cpus` cores) with the default `cpu.shares`;
- cgroup v2 (one unified tree with the memory, pids and cpu controllers): a child group of this process's own
  group, with `memory.max`, `memory.swap.max` = 0, `pids.max`, `cpu.max` and `cpu.weight`. This needs a
  delegated group whose `cgroup.subtree_control` can enable the controllers (root, or e.g.
  `systemd-run --scope -p Delegate=yes`).

CPU: the quota caps the cores ALL the submission's processes use together; a process cannot leave its cgroup
(`setsid`, double forks and new sessions stay in it; the jail has its own cgroup namespace and no cgroup file
system), so 400 spinning children share `Limits.cpus` cores, and the equal weight shares the machine's cores
between submissions when they are scarce. A machine without a (writable) cpu controller gets groups without the
CPU cap, and a log line says the CPU is not capped.

`create(...)` returns None when no group can be made (no controller, read-only /sys/fs/cgroup as in an
unprivileged Kubernetes pod, a v2 group that holds processes itself...): the caller then falls back to per-process
rlimits (RLIMIT_AS/RLIMIT_DATA per process, RLIMIT_NPROC per user) and says once in the log what that leaves
uncapped (total memory, CPU). Set AUTOGRADER_CGROUPS=0 to never use cgroups.

The launcher moves itself into the group (`join`) before it becomes the jail, so every process of the submission
is counted; after the notebook, `remove()` kills whatever is still in the group and deletes it. A group whose
worker died before that (its owner is in its name) is removed by the next run's `sweep()` (scratch.sweep).
"""
from __future__ import annotations

import logging
import os
import signal
import time
import uuid

from autograder.sandbox.ownership import OWNED, owner, owner_alive

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


CPU_PERIOD_US = 100_000  # the quota is given per 100 ms (the kernel's default period)
CPU_WEIGHT = 100  # v2 cpu.weight (v1 cpu.shares 1024): every submission the same share when cores are scarce


def _fallback(reason: str) -> None:
    if reason not in _warned:
        _warned.add(reason)
        log.warning("no per-submission cgroup (%s): falling back to per-process limits (memory per process with "
                    "RLIMIT_AS/RLIMIT_DATA, processes per user with RLIMIT_NPROC); NOT enforced: the total memory "
                    "of a submission (what it writes to its tmpfs folders included) and its CPU use (a "
                    "submission's processes compete with its classmates' for every core)", reason)


def _no_cpu(reason: str) -> None:
    if reason not in _warned:
        _warned.add(reason)
        log.warning("no CPU cap for submissions (%s): their memory and processes are capped, but NOT their CPU use "
                    "(a submission's processes compete with its classmates' for every core)", reason)


def enabled() -> bool:
    return os.environ.get(ENV, "1") != "0"


def cpu_quota_us(cpus: float) -> int:
    """Microseconds of CPU time per CPU_PERIOD_US for `cpus` cores (at least the kernel's minimum, 1 ms)."""
    return max(1000, int(round(cpus * CPU_PERIOD_US)))


def _write_cpu_v1(folder: str, cpus: float) -> None:
    _write(os.path.join(folder, "cpu.cfs_period_us"), str(CPU_PERIOD_US))
    _write(os.path.join(folder, "cpu.cfs_quota_us"), str(cpu_quota_us(cpus)))
    _write(os.path.join(folder, "cpu.shares"), "1024")


def _write_cpu_v2(folder: str, cpus: float) -> None:
    _write(os.path.join(folder, "cpu.max"), f"{cpu_quota_us(cpus)} {CPU_PERIOD_US}")
    _write(os.path.join(folder, "cpu.weight"), str(CPU_WEIGHT))


def create(memory_bytes: int, max_processes: int, cpus: float = 0.0, root: str = ROOT,
           proc_cgroup: str = "/proc/self/cgroup", name: str | None = None) -> Cgroup | None:
    """A new group under this process's own group with the caps (0 = no cap): total memory, processes, and CPU
    cores (`cpus`, a quota per period; without a cpu controller the group is made without it, said once in the
    log). None where no group can be made (the caller falls back to rlimits)."""
    if not enabled():
        _fallback(f"{ENV}=0")
        return None
    name = name or f"autograder-{owner()}-{uuid.uuid4().hex[:12]}"
    groups = _own_groups(proc_cgroup)
    made: list[str] = []  # the folders made so far, removed again if a later step fails
    try:
        if "memory" in groups and "pids" in groups and os.path.isdir(os.path.join(root, "memory")):
            version = 1
            _make_v1(root, groups, name, made, memory_bytes, max_processes, cpus)
        elif "" in groups and os.path.exists(os.path.join(root, "cgroup.controllers")):
            version = 2
            _make_v2(os.path.join(root, groups[""].lstrip("/")), name, made, memory_bytes, max_processes, cpus)
        else:
            _fallback("no memory and pids cgroup controllers found")
            return None
    except OSError as exc:
        for folder in reversed(made):
            _rmdir_quietly(folder)
        _fallback(f"cgroups are not writable here: {exc}")
        return None
    return Cgroup(made, version)


def _make_v1(root: str, groups: dict[str, str], name: str, made: list[str], memory_bytes: int, max_processes: int,
             cpus: float) -> None:
    """The v1 group `name` in the memory and pids controllers (and cpu, when asked and writable), its folders
    appended to `made`."""
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
    if cpus > 0:
        _add_cpu_v1(root, groups, name, made, cpus)


def _add_cpu_v1(root: str, groups: dict[str, str], name: str, made: list[str], cpus: float) -> None:
    """The v1 cpu controller's part of the group (appended to `made`); without it (none, or not writable) the group
    stays without a CPU cap, said once in the log."""
    if not ("cpu" in groups and os.path.isdir(os.path.join(root, "cpu"))):
        _no_cpu("no cpu cgroup controller found")
        return
    folder = os.path.join(root, "cpu", groups["cpu"].lstrip("/"), name)
    try:
        os.mkdir(folder)
        made.append(folder)
        _write_cpu_v1(folder, cpus)
    except OSError as exc:
        if made[-1] == folder:
            made.pop()
            _rmdir_quietly(folder)
        _no_cpu(f"the cpu cgroup controller is not writable here: {exc}")


def _make_v2(parent: str, name: str, made: list[str], memory_bytes: int, max_processes: int, cpus: float) -> None:
    """The v2 group `name` under `parent` (its controllers enabled there first), its folder appended to `made`."""
    available = _read(os.path.join(parent, "cgroup.controllers")).split()
    if not {"memory", "pids"} <= set(available):
        raise OSError(f"the memory and pids controllers are not available in {parent}")
    wanted = ["memory", "pids"]
    if cpus > 0:
        if "cpu" in available:
            wanted.append("cpu")
        else:
            _no_cpu(f"the cpu controller is not available in {parent}")
    enabled_here = _read(os.path.join(parent, "cgroup.subtree_control")).split()
    if not set(wanted) <= set(enabled_here):
        _write(os.path.join(parent, "cgroup.subtree_control"), " ".join(f"+{c}" for c in wanted))
    folder = os.path.join(parent, name)
    os.mkdir(folder)
    made.append(folder)
    if memory_bytes > 0:
        _write(os.path.join(folder, "memory.max"), str(memory_bytes))
        if os.path.exists(os.path.join(folder, "memory.swap.max")):
            _write(os.path.join(folder, "memory.swap.max"), "0")
    if max_processes > 0:
        _write(os.path.join(folder, "pids.max"), str(max_processes))
    if "cpu" in wanted:
        _write_cpu_v2(folder, cpus)


def _rmdir_quietly(folder: str) -> None:
    try:
        os.rmdir(folder)
    except OSError:
        pass


def _parents(root: str, proc_cgroup: str) -> list[str]:
    """The folders this process's groups are in (where `create` makes new groups)."""
    groups = _own_groups(proc_cgroup)
    if "memory" in groups and os.path.isdir(os.path.join(root, "memory")):
        return [os.path.join(root, c, groups[c].lstrip("/")) for c in ("memory", "pids", "cpu")
                if c in groups and os.path.isdir(os.path.join(root, c))]
    if "" in groups:
        return [os.path.join(root, groups[""].lstrip("/"))]
    return []


def sweep(root: str = ROOT, proc_cgroup: str = "/proc/self/cgroup") -> list[str]:
    """Kill and remove the groups whose owner (named in the group, ownership.owner) is gone: a worker killed
    mid-run. Returns the folders removed."""
    if not enabled():
        return []
    by_name: dict[str, list[str]] = {}
    for parent in _parents(root, proc_cgroup):
        try:
            names = os.listdir(parent)
        except OSError:
            continue
        for entry in names:
            if entry.startswith("autograder-") and OWNED.match(entry) and not owner_alive(entry):
                by_name.setdefault(entry, []).append(os.path.join(parent, entry))
    removed = []
    for dirs in by_name.values():
        group = Cgroup(dirs, 2 if len(dirs) == 1 and "/memory/" not in dirs[0] else 1)
        group.remove()
        removed += [d for d in dirs if not os.path.exists(d)]
    return removed
