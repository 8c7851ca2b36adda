"""Per-notebook overhead of the grading jail: kernel start + run of a small notebook, jailed vs not, side by side.

    python bench/jail.py              # 8 rounds; each round runs the same notebook once jailed, once not
    python bench/jail.py --rounds 3

Both sides use the same SandboxedExecute, limits and launcher; the only difference is the jail (bubblewrap,
namespaces, the ipc sockets, the copy of the notebook folder) and the per-submission cgroup, which the
unjailed side also gets. A third column runs the kernel with neither (AUTOGRADER_CGROUPS=0, no jail). Rounds
alternate the order so that a load change on a shared machine hits both sides alike. Prints a markdown table.
"""
from __future__ import annotations

import argparse
import datetime
import os
import platform
import statistics
import sys
import tempfile
import time

CELLS = ["import numpy as np\nx = np.arange(10)", "from provided import ANSWER\nprint(ANSWER + int(x.sum()))",
         "import coursekit\nprint(coursekit.__name__)"]


def one_run(folder: str, jailed: bool, cgroups: bool) -> float:
    from nbformat.v4 import new_code_cell, new_notebook

    from autograder.sandbox.execute import SandboxedExecute
    from autograder.sandbox.kernel import kernel_manager_class, kernel_spec
    from autograder.sandbox.limits import Limits

    os.environ["AUTOGRADER_CGROUPS"] = "1" if cgroups else "0"
    limits = Limits(cell_timeout=120, notebook_timeout=300)
    nb = new_notebook(cells=[new_code_cell(c) for c in CELLS])
    started = time.perf_counter()
    executor = SandboxedExecute(limits=limits, deadline=time.monotonic() + 300, skip_cells=set(),
                                kernel_manager_class=kernel_manager_class(kernel_spec(limits), limits, jailed=jailed))
    nb, _ = executor.preprocess(nb, {"metadata": {"path": folder}})
    seconds = time.perf_counter() - started
    out = "".join(o.get("text", "") for o in nb.cells[1].outputs)
    assert out.strip() == "87", nb.cells[1].outputs
    return seconds


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=8)
    args = parser.parse_args(argv)
    sides = {"jailed (bwrap + cgroup)": (True, True), "not jailed, cgroup": (False, True),
             "neither": (False, False)}
    times: dict[str, list[float]] = {name: [] for name in sides}
    with tempfile.TemporaryDirectory(prefix="bench-jail-") as folder:
        with open(os.path.join(folder, "provided.py"), "w") as fh:
            fh.write("ANSWER = 42\n")
        one_run(folder, True, True)  # warm-up: file caches, the jail's one-time check
        one_run(folder, False, True)
        for round_ in range(args.rounds):
            order = list(sides) if round_ % 2 == 0 else list(reversed(sides))
            for name in order:
                times[name].append(one_run(folder, *sides[name]))
    load = os.getloadavg()
    print(f"# Jail overhead ({datetime.datetime.now(datetime.timezone.utc):%Y-%m-%d %H:%M} UTC)\n")
    print(f"Machine: {platform.node()}, {platform.processor() or platform.machine()}, {os.cpu_count()} cores, "
          f"Python {platform.python_version()}, load average {load[0]:.1f}/{load[1]:.1f}/{load[2]:.1f}\n")
    print(f"Kernel start + a 3-cell notebook (numpy, provided.py, coursekit), {args.rounds} rounds.\n")
    base = statistics.median(times["neither"])
    print("| kernel | median s | min s | max s | vs neither |\n|---|---:|---:|---:|---:|")
    for name, values in times.items():
        med = statistics.median(values)
        print(f"| {name} | {med:.2f} | {min(values):.2f} | {max(values):.2f} | {med - base:+.2f} s |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
