"""The kernel fork server: kernels come from it by default, each is a new process, and anything wrong with the
server falls back to the plain launch (one kernel at a time, no Dask)."""
from __future__ import annotations

import os
import subprocess
import sys
import time

import pytest
from nbformat.v4 import new_code_cell, new_notebook

from autograder.grade import forkserver
from autograder.grade.execute import SandboxedExecute
from autograder.grade.sandbox import GiB, Limits, kernel_manager_class, kernel_spec

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the fork server is Linux-only")

LIMITS = Limits(cell_timeout=20, notebook_timeout=90, memory_bytes=3 * GiB)
# What a kernel reports about itself: its parent, whether torch was there before any import, its process group,
# its folder, a marker global and a draw from numpy's global generator.
PROBE = ("import os, sys\n"
         "print(os.getppid(), 'torch' in sys.modules, os.getpid() == os.getpgid(0), os.getcwd())\n"
         "print(globals().get('MARK', 'clean'), __import__('numpy').random.randint(1 << 30))\n"
         "MARK = 'set'")


@pytest.fixture(autouse=True)
def fresh_servers():
    forkserver.shutdown_servers()
    yield
    forkserver.shutdown_servers()


def run(cells, tmp_path, fork=None):
    nb = new_notebook(cells=[new_code_cell(c) for c in cells])
    executor = SandboxedExecute(limits=LIMITS, deadline=time.monotonic() + LIMITS.notebook_timeout, skip_cells=set(),
                                kernel_manager_class=kernel_manager_class(kernel_spec(LIMITS), fork=fork))
    nb, _ = executor.preprocess(nb, {"metadata": {"path": str(tmp_path)}})
    return ["".join(o.get("text", "") for o in cell.outputs if o.get("output_type") == "stream").split()
            for cell in nb.cells]


def server_pids() -> set[int]:
    return {server._proc.pid for server in forkserver._SERVERS.values()}


def test_kernels_are_forked_fresh_processes_in_their_own_session(tmp_path):
    first = run([PROBE], tmp_path, fork=True)[0]
    second = run([PROBE], tmp_path, fork=True)[0]
    servers = server_pids()
    assert len(servers) == 1, "one server per kernel environment"
    assert int(first[0]) in servers and first[1:3] == ["True", "True"], first  # forked, torch preloaded, own group
    assert first[3] == str(tmp_path)
    assert first[4] == second[4] == "clean"  # nothing of the first notebook reaches the second
    assert first[5] != second[5], "numpy's global generator is seeded anew, as in a new process"


def test_plain_launch_when_disabled(tmp_path, monkeypatch):
    monkeypatch.setenv("AUTOGRADER_FORK_KERNELS", "0")
    shown = run([PROBE], tmp_path)[0]
    assert forkserver._SERVERS == {} and int(shown[0]) == os.getpid() and shown[1] == "False"


def test_refusing_server_falls_back_to_the_plain_launch(tmp_path, monkeypatch):
    # pandas starts a thread (pyarrow's jemalloc) at import: the server must refuse to fork after that
    monkeypatch.setenv("AUTOGRADER_FORK_PRELOAD", "pandas")
    shown = run([PROBE], tmp_path, fork=True)[0]
    assert int(shown[0]) == os.getpid(), "the kernel was launched the plain way"
    (refused,) = forkserver._SERVERS.values()
    assert "threads" in refused.refusal
    run(["pass"], tmp_path, fork=True)  # the refusal is remembered: no new server is started for the next kernel
    assert list(forkserver._SERVERS.values()) == [refused]
    server = forkserver.ForkServer({**os.environ, "AUTOGRADER_FORK_PRELOAD": "pandas"})
    with pytest.raises(forkserver.ForkServerUnavailable, match="threads"):
        server.preloaded
    server.close()


def test_dead_server_is_replaced(tmp_path):
    run(["pass"], tmp_path, fork=True)
    (old,) = forkserver._SERVERS.values()
    old._proc.kill()
    old._proc.wait()
    shown = run([PROBE], tmp_path, fork=True)[0]
    assert int(shown[0]) in server_pids() and old._proc.pid not in server_pids()


def test_server_leaves_when_its_worker_dies(tmp_path):
    """The worker is killed without cleaning up: the server reads end of input and exits, no orphan stays."""
    code = ("import os, sys\n"
            "from autograder.grade import forkserver\n"
            "server = forkserver.server_for({'OMP_NUM_THREADS': '1'})\n"
            "print(server._proc.pid, server.preloaded, flush=True)\n"
            "os._exit(0)\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True)
    pid = int(out.stdout.split()[0])
    assert "torch" in out.stdout
    for _ in range(100):
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return
        time.sleep(0.1)
    pytest.fail(f"fork server {pid} outlived its worker")


def test_bad_request_is_answered_and_server_keeps_serving():
    server = forkserver.server_for({"OMP_NUM_THREADS": "1", "AUTOGRADER_FORK_PRELOAD": ""})
    assert server.preloaded == []
    server._proc.stdin.write("not json\n")
    server._proc.stdin.flush()
    with pytest.raises(forkserver.ForkServerUnavailable, match="bad request"):
        server._read(10)
    assert server.alive
    # a child whose set-up fails (missing folder) exits at once and is reaped by the system
    pid = server.fork(cwd="/nonexistent/folder", env={}, memory_bytes=0, rlimit="as", kernel_args=[])
    process = forkserver.ForkedKernelProcess(pid)
    assert process.wait(timeout=30) == -1
    assert server.alive
