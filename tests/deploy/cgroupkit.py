"""The grader's cgroups seen from outside while it grades: the submission groups (autograder-*) that appear in the
subtree delegated to the grader account, which account made each, the limits written into it, and whether the
submission's processes ran in it. Works on cgroup v1 (memory, pids, cpu and cpuacct hierarchies) and v2.

    with CgroupWatch("/transformers101") as watch:
        ...grade...
    assert_each_capped(watch.groups, grader, limits, at_least=2)
"""
from __future__ import annotations

import os
import pwd
import threading
from dataclasses import dataclass
from pathlib import Path

from autograder.sandbox import cgroup

CGROUP_ROOT = Path("/sys/fs/cgroup")


@dataclass
class SeenGroup:
    owner: str  # the account that made it
    memory_bytes: int
    processes: int  # pids.max (-1: no cap)
    cpu_quota_us: int  # per cgroup.CPU_PERIOD_US (-1: no cap)
    accounted: bool  # a file counts its CPU time (v1 cpuacct.usage, v2 cpu.stat)
    populated: bool  # processes were seen in it


def _number(text: str) -> int:
    text = text.split()[0]
    return -1 if text == "max" else int(text)


def _read_v1(base: Path, name: str) -> SeenGroup:
    folders = {c: base / c / name for c in ("memory", "pids", "cpu", "cpuacct")}
    members = any((folder / "cgroup.procs").read_text().split() for folder in folders.values())
    return SeenGroup(owner=pwd.getpwuid(folders["memory"].stat().st_uid).pw_name,
                     memory_bytes=_number((folders["memory"] / "memory.limit_in_bytes").read_text()),
                     processes=_number((folders["pids"] / "pids.max").read_text()),
                     cpu_quota_us=_number((folders["cpu"] / "cpu.cfs_quota_us").read_text()),
                     accounted=(folders["cpuacct"] / "cpuacct.usage").exists(), populated=members)


def _read_v2(folder: Path) -> SeenGroup:
    return SeenGroup(owner=pwd.getpwuid(folder.stat().st_uid).pw_name,
                     memory_bytes=_number((folder / "memory.max").read_text()),
                     processes=_number((folder / "pids.max").read_text()),
                     cpu_quota_us=_number((folder / "cpu.max").read_text()),
                     accounted=(folder / "cpu.stat").exists(),
                     populated=bool((folder / "cgroup.procs").read_text().split()))


class CgroupWatch:
    """Polls the delegated parent `parent` (a cgroup path: AUTOGRADER_CGROUP_PARENT) every `interval` seconds in a
    thread of its own while the `with` block runs. `groups`: name -> the last reading of each submission group
    (`populated` stays True once processes were seen in it)."""

    def __init__(self, parent: str, root: Path = CGROUP_ROOT, interval: float = 0.02):
        self.v2 = (root / "cgroup.controllers").exists()
        self.base = root / parent.lstrip("/") if self.v2 else root
        self.listed = self.base if self.v2 else root / "memory" / parent.lstrip("/")
        self.parent, self.interval = parent.lstrip("/"), interval
        self.groups: dict[str, SeenGroup] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> "CgroupWatch":
        assert self.listed.is_dir(), f"no delegated cgroup at {self.listed}"
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join()

    def _run(self) -> None:
        while not self._stop.is_set():
            self.poll()
            self._stop.wait(self.interval)

    def poll(self) -> None:
        for name in os.listdir(self.listed):
            if not name.startswith("autograder-"):
                continue
            try:
                seen = (_read_v2(self.base / name) if self.v2
                        else _read_v1(self.base, f"{self.parent}/{name}".lstrip("/")))
            except (OSError, ValueError, IndexError):  # made or removed between two reads: the next poll sees it
                continue
            seen.populated = seen.populated or (name in self.groups and self.groups[name].populated)
            self.groups[name] = seen


def assert_each_capped(groups: dict[str, SeenGroup], owner: str, limits, at_least: int) -> None:
    """At least `at_least` submission groups held processes (a group seen empty is a grading run's check that it can
    make one, removed at once), and each of those was made by `owner`, with the memory, process and CPU caps of
    `limits` (autograder's Limits), and counts its CPU time."""
    ran = {name: seen for name, seen in groups.items() if seen.populated}
    assert len(ran) >= at_least, f"{len(ran)} submission cgroups held processes, {at_least} expected: {groups}"
    expected = dict(owner=owner, memory_bytes=int(limits.memory_bytes), processes=int(limits.processes),
                    cpu_quota_us=cgroup.cpu_quota_us(limits.cpus) if limits.cpus > 0 else -1, accounted=True,
                    populated=True)
    for name, seen in ran.items():
        assert vars(seen) == expected, f"{name}: {seen}, expected {expected}"
    assert {seen.owner for seen in groups.values()} == {owner}, groups
