"""Every temporary folder of a grading run: where it lives, whose it is, and that none outlives the run.

A run makes a few folders: the kernel's socket folder (`ag-ipc-`, the only one bound writable into the jail),
its connection file's folder (`ag-conn-`, bound read-only), the private gradebook (`ag-db-`) and the copy of the
submission folder (`ag-run-`). Each name carries its owner, `ag-<kind>-<pid>.<start time>-<random>` (the start
time tells a live process from a later one that got the same pid; ownership.py), so that:

- `remove(path)` deletes a folder even where the submission left a `chmod 0` folder in it (as a non-root grader
  could not otherwise);
- `sweep()`, called at the start of every run, deletes the folders (and the cgroups, cgroup.sweep) of owners
  that are gone: a worker killed mid-run leaves nothing for longer than until the next run on its machine.

The socket folder lives on a tmpfs (`socket_root()`: $AUTOGRADER_IPC_ROOT, else /dev/shm), never on the worker's
disk: what a submission writes there is memory, charged to its own cgroup (memory.limit_in_bytes / memory.max),
so it cannot fill the disk the gradebooks live on. Where no such tmpfs is writable, it falls back to the
temporary folder and says once in the log that the submission's writes there are on the disk.
"""
from __future__ import annotations

import contextlib
import logging
import os
import shutil
import stat
import tempfile
import time

from autograder.sandbox import cgroup
from autograder.sandbox.ownership import OWNED, owner, owner_alive

log = logging.getLogger("autograder.grade")
SOCKET_ROOT_ENV = "AUTOGRADER_IPC_ROOT"
LEGACY_TEMPLATE_AGE = 3600.0  # `ag-template-*` folders of earlier versions (one per worker, never removed)
SWEEP_EVERY = 30.0  # seconds between two sweeps of one process
_warned: set[str] = set()
_last_sweep: dict[int, float] = {}


def mkdtemp(kind: str, root: str | None = None) -> str:
    """A new folder `ag-<kind>-<owner>-<random>` (mode 0700) in `root` (default: the temporary folder)."""
    path = tempfile.mkdtemp(prefix=f"ag-{kind}-{owner()}-", dir=root)
    os.chmod(path, 0o700)
    return path


def _unlock(path: str) -> None:
    """Give the owner rwx on every folder below `path` (a submission may have left one at mode 0)."""
    for top, dirs, _files in os.walk(path):
        for name in dirs:
            folder = os.path.join(top, name)
            try:
                if not os.path.islink(folder):
                    os.chmod(folder, stat.S_IRWXU)
            except OSError:
                pass


def remove(path: str) -> bool:
    """Delete the folder `path` and everything in it; True when it is gone."""
    if not os.path.lexists(path):
        return True
    try:
        os.chmod(path, stat.S_IRWXU)
    except OSError:
        pass
    _unlock(path)
    shutil.rmtree(path, ignore_errors=True)
    if os.path.lexists(path):
        log.warning("could not remove the temporary folder %s", path)
        return False
    return True


@contextlib.contextmanager
def folder(kind: str, root: str | None = None):
    """A scratch folder for the duration of a `with` block, removed after it whatever happened."""
    path = mkdtemp(kind, root)
    try:
        yield path
    finally:
        remove(path)


def _fs_type(path: str) -> str | None:
    """The file system type of the mount that holds `path` (/proc/self/mounts)."""
    best, kind = "", None
    try:
        with open("/proc/self/mounts") as fh:
            for line in fh:
                fields = line.split()
                if len(fields) < 3:
                    continue
                point = fields[1].replace("\\040", " ")
                if (path == point or path.startswith(point.rstrip("/") + "/")) and len(point) >= len(best):
                    best, kind = point, fields[2]
    except OSError:
        return None
    return kind


def _warn(reason: str) -> None:
    if reason not in _warned:
        _warned.add(reason)
        log.warning(reason)


def socket_root() -> str | None:
    """Where kernels' socket folders go: $AUTOGRADER_IPC_ROOT, else /dev/shm when it is a writable tmpfs; None
    (the temporary folder, on the worker's disk) otherwise, said once in the log."""
    chosen = os.environ.get(SOCKET_ROOT_ENV)
    if chosen:
        if not os.path.isdir(chosen):
            raise ValueError(f"{SOCKET_ROOT_ENV}={chosen} is not a folder")
        return os.path.realpath(chosen)
    if os.path.isdir("/dev/shm") and os.access("/dev/shm", os.W_OK | os.X_OK) and _fs_type("/dev/shm") == "tmpfs":
        return "/dev/shm"
    _warn(f"no writable tmpfs at /dev/shm (set {SOCKET_ROOT_ENV} to one): the kernels' socket folders are in "
          f"{tempfile.gettempdir()}, so what a submission writes there is on the worker's disk, capped per file "
          "(RLIMIT_FSIZE) but not in total")
    return None


def roots() -> list[str]:
    """The folders scratch folders are made in."""
    found = [tempfile.gettempdir()]
    try:
        shm = socket_root()
    except ValueError:
        shm = None
    if shm and shm not in found:
        found.append(shm)
    return found


def sweep(force: bool = False) -> list[str]:
    """Delete what dead owners left: scratch folders in `roots()` (ours: same uid), also inside a live warm
    template's folders, and cgroups (cgroup.sweep), plus the `ag-template-*` folders earlier versions left, once an
    hour old. At most once per SWEEP_EVERY seconds per process unless `force`. Returns what was removed."""
    now = time.monotonic()
    if not force and now - _last_sweep.get(os.getpid(), -SWEEP_EVERY) < SWEEP_EVERY:
        return []
    _last_sweep[os.getpid()] = now
    removed = []
    for root in roots():
        removed += _sweep_folder(root, legacy=True)
    removed += cgroup.sweep()
    if removed:
        log.info("removed %d temporary folders and cgroups of grading runs that ended without cleaning up",
                 len(removed))
    return removed


def _sweep_folder(root: str, legacy: bool) -> list[str]:
    """Remove our folders in `root` whose owner is gone (and, with `legacy`, old `ag-template-*` ones); inside a
    live warm template's folders (`ag-tpl-*`, `ag-tplf-*`: zygote.py), the folders of kernels whose worker is gone."""
    removed = []
    try:
        entries = list(os.scandir(root))
    except OSError:
        return removed
    for entry in entries:
        try:
            info = entry.stat(follow_symlinks=False)
        except OSError:
            continue
        if not stat.S_ISDIR(info.st_mode) or info.st_uid != os.geteuid():
            continue
        ours = OWNED.match(entry.name) and entry.name.startswith("ag-")
        dead = ours and not owner_alive(entry.name)
        old = legacy and entry.name.startswith("ag-template-") and time.time() - info.st_mtime > LEGACY_TEMPLATE_AGE
        if (dead or old) and remove(entry.path):
            removed.append(entry.path)
        elif legacy and ours and not dead and entry.name.startswith("ag-tpl"):
            removed += _sweep_folder(entry.path, legacy=False)
    return removed
