"""The grading kernel's sandbox: rlimits, import shadowing, per-cell limits (one kernel, no Dask)."""
from __future__ import annotations

import resource
import time

import pytest
from nbformat.v4 import new_code_cell, new_notebook

import autograder
from autograder.grade.execute import SandboxedExecute
from autograder.grade.sandbox import GiB, Limits, kernel_manager_class, kernel_spec

SHADOW = ("for name in ('autograder.py', 'solutions.py', 'coursekit.py'):\n"
          "    open(name, 'w').write('raise SystemExit(\"shadowed\")')")


def run(cells: list[str], tmp_path, limits: Limits, fork: bool | None = None):
    nb = new_notebook(cells=[new_code_cell(c) for c in cells])
    (tmp_path / "provided.py").write_text("ANSWER = 42\n")
    executor = SandboxedExecute(limits=limits, deadline=time.monotonic() + limits.notebook_timeout,
                                skip_cells=set(), kernel_manager_class=kernel_manager_class(kernel_spec(limits), fork=fork))
    nb, _ = executor.preprocess(nb, {"metadata": {"path": str(tmp_path)}})
    return nb, executor


def text(cell) -> str:
    return "".join(o.get("text", "") for o in cell.outputs if o.get("output_type") == "stream")


def errors(cell) -> list[str]:
    return [o["ename"] for o in cell.outputs if o.get("output_type") == "error"]


@pytest.mark.parametrize("fork", [True, False], ids=["forked-kernel", "plain-kernel"])
def test_sandbox_limits_and_imports(tmp_path, fork):
    limits = Limits(cell_timeout=5, notebook_timeout=60, memory_bytes=2 * GiB, output_bytes=1000)
    nb, executor = run([
        SHADOW,
        "import autograder.checks, solutions, coursekit\nprint(autograder.__file__)\nprint(solutions.__file__)",
        "from provided import ANSWER\nprint(ANSWER)",
        "import numpy as np\nx = np.ones(4 * 1024**3 // 8)",
        "print('y' * 5000)",
        "import os\nprint(os.environ['NBGRADER_EXECUTION'], repr(os.environ['CUDA_VISIBLE_DEVICES']))",
        "while True:\n    pass",
        "print('still alive')",
    ], tmp_path, limits, fork=fork)
    package_dir = autograder.__file__.rsplit("/", 2)[0]
    shown = text(nb.cells[1]).splitlines()
    assert errors(nb.cells[1]) == [] and all(line.startswith(package_dir) for line in shown), shown
    assert text(nb.cells[2]).strip() == "42"  # the working directory stays importable, last
    assert errors(nb.cells[3]) == ["MemoryError"]  # 4 GiB > the 2 GiB cap
    assert len(text(nb.cells[4])) < 1000 and "output truncated by the grader" in text(nb.cells[4])
    assert text(nb.cells[5]).split() == ["autograde", "''"]
    assert "CellTimeoutError" in errors(nb.cells[6])  # interrupted at the cell limit, then the kernel goes on
    assert text(nb.cells[7]).strip() == "still alive"
    assert any("output truncated" in note for note in executor.notes)


def test_notebook_deadline_stops_later_cells(tmp_path):
    limits = Limits(cell_timeout=30, notebook_timeout=4, memory_bytes=2 * GiB)
    nb, _ = run(["import time\ntime.sleep(10)", "print('never')"], tmp_path, limits)
    assert errors(nb.cells[1]) == ["NotebookTimeout"]
    assert "never" not in text(nb.cells[1])


def test_gpu_kernel_is_pinned_and_capped_on_its_data_segment(tmp_path):
    """A kernel given GPU "1" sees only that GPU, and its memory cap moves from RLIMIT_AS to RLIMIT_DATA (CUDA maps
    far more address space than it uses). No GPU is needed to check what the kernel is started with."""
    limits = Limits(cell_timeout=20, notebook_timeout=60, memory_bytes=2 * GiB)
    nb = new_notebook(cells=[new_code_cell(
        "import os, resource\n"
        "print(os.environ['CUDA_VISIBLE_DEVICES'], resource.getrlimit(resource.RLIMIT_DATA)[0],"
        " resource.getrlimit(resource.RLIMIT_AS)[0])")])
    executor = SandboxedExecute(limits=limits, deadline=time.monotonic() + 60, skip_cells=set(),
                                kernel_manager_class=kernel_manager_class(kernel_spec(limits, gpu="1")))
    nb, _ = executor.preprocess(nb, {"metadata": {"path": str(tmp_path)}})
    assert text(nb.cells[0]).split() == ["1", str(2 * GiB), str(resource.RLIM_INFINITY)]


def test_each_dask_worker_gets_its_own_gpu(monkeypatch):
    """assigned_gpu("auto") on a real LocalCluster: worker k gets GPU k mod n of CUDA_VISIBLE_DEVICES."""
    from distributed import Client, LocalCluster

    from autograder.grade.worker import assigned_gpu

    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "0,1")
    with LocalCluster(n_workers=3, threads_per_worker=1, processes=True, dashboard_address=":0",
                      memory_limit=0) as cluster, Client(cluster) as client:
        names = {address: info["name"] for address, info in client.scheduler_info()["workers"].items()}
        # as in grading: inside a task on that worker
        gpus = {address: client.submit(assigned_gpu, "auto", workers=[address], pure=False).result()
                for address in names}
    assert sorted(gpus.values()) == ["0", "0", "1"]
    assert all(gpus[address] == str(int(names[address]) % 2) for address in gpus)
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")
    assert assigned_gpu("auto") is None and assigned_gpu("3") == "3"
