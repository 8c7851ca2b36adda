"""Run a few lines of Python through the submission jail itself (bubblewrap), as a student's kernel would see the
machine: what the trained-model tests use to show that held-out data is out of the jail's reach."""
from __future__ import annotations

import subprocess
import sys

from autograder.sandbox import jail


def run_in_jail(code: str, tmp_path) -> str:
    """`code`'s standard output, run by this Python inside a fresh jail (its notebook folder: `tmp_path`)."""
    ipc = tmp_path / "ipc"
    ipc.mkdir()
    argv = jail.bwrap_command(jail.bwrap_path(), kernel_cmd=[sys.executable, "-s", "-c", code], ipc_dir=str(ipc),
                              notebook_src=str(tmp_path), disk_bytes=16 * 1024**2, env={})
    out = subprocess.run(argv, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    return out.stdout
