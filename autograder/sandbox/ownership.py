"""Whose a scratch folder or a cgroup is: the owner in its name, and whether that owner still runs.

Every scratch folder (scratch.py, `ag-<kind>-<owner>-<random>`) and every per-submission cgroup (cgroup.py,
`autograder-<owner>-<random>`) carries its owner, `<pid>.<start time>`: the start time tells a live process from a
later one that got the same pid. So the next run's sweeps (`scratch.sweep`, `cgroup.sweep`) remove what a worker
killed mid-run left, and nothing of a worker that still runs.
"""
from __future__ import annotations

import os
import re

OWNED = re.compile(r"^(?:ag-[a-z]+|autograder)-(\d+)\.(\d+)-")  # scratch folders and cgroups


def start_time(pid: int) -> str | None:
    """The start time of process `pid` (clock ticks since boot, /proc/PID/stat field 22); None when it is gone."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as fh:
            fields = fh.read().rsplit(b")", 1)[1].split()
    except (OSError, IndexError):
        return None
    return fields[19].decode() if len(fields) > 19 else None


def owner() -> str:
    """This process as an owner: `<pid>.<start time>`."""
    pid = os.getpid()
    return f"{pid}.{start_time(pid) or 0}"


def owner_alive(name: str) -> bool:
    """Whether the owner named in a scratch folder's or cgroup's name still runs (True for other names)."""
    match = OWNED.match(name)
    if match is None:
        return True
    return start_time(int(match.group(1))) == match.group(2)
