"""One control group per submission: a cap on the TOTAL memory, number of processes and CPU of everything it starts.

An rlimit caps one process; five children of 1.5 GiB each still hold 7.5 GiB. A cgroup caps the sum:

- cgroup v1 (memory, pids and cpu controllers mounted apart, e.g. /sys/fs/cgroup/memory): a child group
  `autograder-<owner>-<id>` of the parent group (below) in each controller, with `memory.limit_in_bytes` (and
  `memory.memsw.limit_in_bytes` where swap is accounted), `pids.max`, and `cpu.cfs_quota_us` per
  `cpu.cfs_period_us` (`Limits.cpus` cores) with the default `cpu.shares`; also in the `cpuacct` controller when
  it is mounted apart from `cpu`, whose `cpuacct.usage` counts the submission's CPU time (`Cgroup.cpuacct_dir`);
- cgroup v2 (one unified tree with the memory, pids and cpu controllers): a child group of the parent group,
  with `memory.max`, `memory.swap.max` = 0, `pids.max`, `cpu.max` and `cpu.weight` (its `cpu.stat` counts the
  CPU time). This needs a delegated parent whose `cgroup.subtree_control` can enable the controllers (root, a
  unit or scope with `Delegate=yes`, or a subtree the admin delegated as deploy/one-machine/cgroups.sh does). A
  v2 group that enables controllers for its children may hold no process itself (the "no internal process"
  rule): the processes of the parent (the grader's own, when the delegated group is its own) first move into
  its leaf `service/`, and a process found in such a leaf makes its groups beside it.

The parent group is `$AUTOGRADER_CGROUP_PARENT` when set (a cgroup path as /proc/self/cgroup writes it, e.g.
`/transformers101`: the subtree an install delegates to the grader's account, so that it needs no root; in v1 the
same path in every controller; in v2 it must hold this process's own group, since v2 moves a process only within
the subtree delegated to its account), else this process's own group.

CPU: the quota caps the cores ALL the submission's processes use together; a process cannot leave its cgroup
(`setsid`, double forks and new sessions stay in it; the jail has its own cgroup namespace and no cgroup file
system), so 400 spinning children share `Limits.cpus` cores, and the equal weight shares the machine's cores
between submissions when they are scarce. A machine without a (writable) cpu controller gets groups without the
CPU cap, and a log line says the CPU is not capped.

`create(...)` returns None when no group can be made (no controller, read-only /sys/fs/cgroup as in an
unprivileged Kubernetes pod, an account's group that nobody delegated to it...): the caller then falls back to
per-process rlimits (RLIMIT_AS/RLIMIT_DATA per process, RLIMIT_NPROC per user) and says once in the log what that
leaves uncapped (total memory, CPU). Set AUTOGRADER_CGROUPS=0 to never use cgroups.

The launcher moves itself into the group (`join`) before it becomes the jail, so every process of the submission
is counted; after the notebook, `remove()` kills whatever is still in the group and deletes it. A group whose
worker died before that (its owner is in its name) is removed by the next run's `sweep()` (scratch.sweep).
"""
from __future__ import annotations

import errno
import logging
import os
import signal
import time
import uuid

from autograder.sandbox.ownership import OWNED, owner, owner_alive

log = logging.getLogger("autograder.grade")
ROOT = "/sys/fs/cgroup"
ENV = "AUTOGRADER_CGROUPS"
PARENT_ENV = "AUTOGRADER_CGROUP_PARENT"
LEAF = "service"  # v2: where the processes of a group go that enables controllers for the groups made in it
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
    """A created group: `dirs` are its folders (one per v1 controller, one for v2); `cpuacct_dir` the one that
    counts its CPU time (v1 `cpuacct.usage`, v2 `cpu.stat`), None where no controller accounts it."""

    def __init__(self, dirs: list[str], version: int, cpuacct_dir: str | None = None):
        self.dirs = dirs
        self.version = version
        self.cpuacct_dir = cpuacct_dir

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
    key = reason.split(": '")[0]  # once per process and reason, whatever group name the error quotes
    if key not in _warned:
        _warned.add(key)
        log.warning("no per-submission cgroup (%s): falling back to per-process limits (memory per process with "
                    "RLIMIT_AS/RLIMIT_DATA, processes per user with RLIMIT_NPROC); NOT enforced: the total memory "
                    "of a submission (what it writes to its tmpfs folders included) and its CPU use (a "
                    "submission's processes compete with its classmates' for every core)", reason)


def _no_cpu(reason: str) -> None:
    if reason not in _warned:
        _warned.add(reason)
        log.warning("no CPU cap for submissions (%s): their memory and processes are capped, but NOT their CPU use "
                    "(a submission's processes compete with its classmates' for every core)", reason)


def _no_cpuacct(reason: str) -> None:
    if reason not in _warned:
        _warned.add(reason)
        log.warning("no CPU accounting for submissions (%s): their groups do not count their CPU time", reason)


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
    """A new group under the parent group (the delegated one of $AUTOGRADER_CGROUP_PARENT, else this process's
    own) with the caps (0 = no cap): total memory, processes, and CPU cores (`cpus`, a quota per period; without a
    cpu controller the group is made without it, said once in the log). None where no group can be made (the
    caller falls back to rlimits)."""
    if not enabled():
        _fallback(f"{ENV}=0")
        return None
    name = name or f"autograder-{owner()}-{uuid.uuid4().hex[:12]}"
    groups = _own_groups(proc_cgroup)
    made: list[str] = []  # the folders made so far, removed again if a later step fails
    try:
        if _is_v1(root, groups):
            version = 1
            cpuacct_dir = _make_v1(root, _v1_parents(groups), name, made, memory_bytes, max_processes, cpus)
        elif "" in groups and os.path.exists(os.path.join(root, "cgroup.controllers")):
            version = 2
            _make_v2(root, _v2_parent(root, groups[""]), name, made, memory_bytes, max_processes, cpus)
            cpuacct_dir = made[0]
        else:
            _fallback("no memory and pids cgroup controllers found")
            return None
    except OSError as exc:
        for folder in reversed(made):
            _rmdir_quietly(folder)
        _fallback(f"cgroups are not writable here: {exc}")
        return None
    return Cgroup(made, version, cpuacct_dir)


def delegated_parent() -> str | None:
    """The parent group of $AUTOGRADER_CGROUP_PARENT as a cgroup path ("/transformers101"), None when unset."""
    value = os.environ.get(PARENT_ENV, "").strip()
    return "/" + value.strip("/") if value else None


def _is_v1(root: str, groups: dict[str, str]) -> bool:
    return "memory" in groups and "pids" in groups and os.path.isdir(os.path.join(root, "memory"))


def _v1_parents(groups: dict[str, str]) -> dict[str, str]:
    """v1 controller -> the cgroup path of the parent group in it: the delegated one in every controller, else
    this process's own group in each."""
    parent = delegated_parent()
    return dict(groups) if parent is None else {controller: parent for controller in groups}


def _v2_parent(root: str, own: str) -> str:
    """The folder of the v2 parent group. The delegated one must hold this process's group (v2 lets an account
    move a process only within the subtree delegated to it; root may move any). Without one: this process's own
    group, or the group above when this process sits in a leaf `service/` (moved there by `_vacate`)."""
    parent = delegated_parent()
    if parent is None:
        parent = os.path.dirname(own) if os.path.basename(own) == LEAF else own
    elif os.geteuid() != 0 and not (parent == "/" or own == parent or own.startswith(parent + "/")):
        raise OSError(f"{PARENT_ENV}={parent} does not hold this process's cgroup {own}: cgroup v2 moves a "
                      f"process only within the subtree delegated to its account")
    return os.path.join(root, parent.lstrip("/"))


def _v1_folder(root: str, parents: dict[str, str], controller: str, name: str = "") -> str | None:
    """The folder of group `name` (or of the parent, with no name) in v1 `controller`; None where that controller
    is not mounted."""
    if controller not in parents or not os.path.isdir(os.path.join(root, controller)):
        return None
    return os.path.join(root, controller, parents[controller].lstrip("/"), name).rstrip("/")


def _make_v1(root: str, parents: dict[str, str], name: str, made: list[str], memory_bytes: int,
             max_processes: int, cpus: float) -> str | None:
    """The v1 group `name` in the memory and pids controllers (and cpu, when asked and writable; cpuacct), its
    folders appended to `made`. Returns the folder that counts its CPU time (None: none does)."""
    for controller in ("memory", "pids"):
        parent = _v1_folder(root, parents, controller)
        if not os.path.isdir(parent):
            raise OSError(f"the parent group {parent} is missing ({PARENT_ENV}={delegated_parent()}: the install's "
                          "cgroup script makes it, at boot too)")
        folder = _v1_folder(root, parents, controller, name)
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
        _add_cpu_v1(root, parents, name, made, cpus)
    return _add_cpuacct_v1(root, parents, name, made)


def _add_cpuacct_v1(root: str, parents: dict[str, str], name: str, made: list[str]) -> str | None:
    """The v1 cpuacct controller's part of the group, whose `cpuacct.usage` counts its CPU time: the cpu folder
    when the two controllers are mounted together (`cpu,cpuacct`), else a folder of its own (appended to `made`).
    None (said once in the log) where there is none or it is not writable."""
    folder = _v1_folder(root, parents, "cpuacct", name)
    if folder is None:
        _no_cpuacct("no cpuacct cgroup controller found")
        return None
    same = [d for d in made if os.path.realpath(d) == os.path.realpath(folder)]
    if same:
        return same[0]
    try:
        os.mkdir(folder)
    except OSError as exc:
        _no_cpuacct(f"the cpuacct cgroup controller is not writable here: {exc}")
        return None
    made.append(folder)
    return folder


def _add_cpu_v1(root: str, parents: dict[str, str], name: str, made: list[str], cpus: float) -> None:
    """The v1 cpu controller's part of the group (appended to `made`); without it (none, or not writable) the group
    stays without a CPU cap, said once in the log."""
    folder = _v1_folder(root, parents, "cpu", name)
    if folder is None:
        _no_cpu("no cpu cgroup controller found")
        return
    try:
        os.mkdir(folder)
        made.append(folder)
        _write_cpu_v1(folder, cpus)
    except OSError as exc:
        if made[-1] == folder:
            made.pop()
            _rmdir_quietly(folder)
        _no_cpu(f"the cpu cgroup controller is not writable here: {exc}")


def _make_v2(root: str, parent: str, name: str, made: list[str], memory_bytes: int, max_processes: int,
             cpus: float) -> None:
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
        _enable(root, parent, wanted)
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


def _enable(root: str, parent: str, controllers: list[str]) -> None:
    """Enable `controllers` for the groups made in `parent`. v2's no-internal-process rule: a group that does may
    hold no process itself (the hierarchy's root excepted), so the parent's processes move into its leaf first
    (`_vacate`; the grader's own, when the parent is the group delegated to it). A process that forks meanwhile
    makes the kernel refuse (EBUSY): moved too, once more."""
    control = os.path.join(parent, "cgroup.subtree_control")
    line = " ".join(f"+{c}" for c in controllers)
    if os.path.realpath(parent) != os.path.realpath(root):
        _vacate(parent)
    try:
        _write(control, line)
    except OSError as exc:
        if exc.errno != errno.EBUSY:
            raise
        _vacate(parent)  # a namespace's root (a container's cgroup) is not exempt, or a process forked
        _write(control, line)


def _vacate(parent: str) -> None:
    """Move every process of the v2 group `parent` into its leaf LEAF (made when missing)."""
    pids = _read(os.path.join(parent, "cgroup.procs")).split()
    if not pids:
        return
    leaf = os.path.join(parent, LEAF)
    os.makedirs(leaf, exist_ok=True)
    for pid in pids:
        try:
            _write(os.path.join(leaf, "cgroup.procs"), pid)
        except ProcessLookupError:  # ended meanwhile
            pass


def _rmdir_quietly(folder: str) -> None:
    try:
        os.rmdir(folder)
    except OSError:
        pass


def _parents(root: str, proc_cgroup: str) -> list[str]:
    """The folders `create` makes new groups in (one per v1 controller, a folder shared by two controllers
    mounted together once; one for v2)."""
    groups = _own_groups(proc_cgroup)
    if _is_v1(root, groups):
        parents = _v1_parents(groups)
        folders: dict[str, str] = {}  # real path -> folder
        for controller in ("memory", "pids", "cpu", "cpuacct"):
            folder = _v1_folder(root, parents, controller)
            if folder is not None:
                folders.setdefault(os.path.realpath(folder), folder)
        return list(folders.values())
    if "" in groups:
        try:
            return [_v2_parent(root, groups[""])]
        except OSError:
            return []
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
