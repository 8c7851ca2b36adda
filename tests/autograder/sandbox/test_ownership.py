"""Whose a scratch folder or a cgroup is (autograder.sandbox.ownership): the owner in its name, alive or gone."""
from __future__ import annotations

import os
import subprocess
import sys

from autograder.sandbox import ownership


def test_this_process_is_a_live_owner():
    me = ownership.owner()
    pid, started = me.split(".")
    assert int(pid) == os.getpid() and started == ownership.start_time(os.getpid())
    for name in (f"ag-ipc-{me}-abc", f"autograder-{me}-0123456789ab"):
        assert ownership.OWNED.match(name) and ownership.owner_alive(name)


def test_a_finished_process_or_a_reused_pid_is_not_alive():
    dead = subprocess.run([sys.executable, "-c", "from autograder.sandbox import ownership; print(ownership.owner())"],
                          capture_output=True, text=True, check=True).stdout.strip()
    assert not ownership.owner_alive(f"ag-db-{dead}-abc")
    pid, started = ownership.owner().split(".")
    assert not ownership.owner_alive(f"autograder-{pid}.{int(started) + 1}-abc")  # same pid, another process


def test_names_without_an_owner_are_left_alone():
    for name in ("autograder-unowned", "ag-template-old1", "not-ours"):
        assert ownership.OWNED.match(name) is None and ownership.owner_alive(name)
