"""The first process of a grading kernel: set its limits, then become ipykernel.

    python -P -s -m autograder.grade.launcher --memory-bytes N --rlimit as -- -f CONNECTION_FILE

resource limits survive os.execv, so everything the student's code does in the kernel runs under them.
"""
from __future__ import annotations

import argparse
import os
import resource
import sys

# Run first in the kernel, before any student cell (see kernel_startup.py).
STARTUP = "import autograder.grade.kernel_startup"


def apply_limits(memory_bytes: int, which: str) -> None:
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))  # a segfault leaves no multi-GB core file behind
    if memory_bytes > 0:
        kind = resource.RLIMIT_DATA if which == "data" else resource.RLIMIT_AS
        resource.setrlimit(kind, (memory_bytes, memory_bytes))


def parse(argv: list[str]) -> argparse.Namespace:
    """The launcher's arguments: memory_bytes, rlimit, kernel_args (what ipykernel gets, e.g. -f FILE)."""
    parser = argparse.ArgumentParser(prog="autograder.grade.launcher")
    parser.add_argument("--memory-bytes", type=int, default=0)
    parser.add_argument("--rlimit", choices=["as", "data"], default="as")
    parser.add_argument("kernel_args", nargs=argparse.REMAINDER)
    args = parser.parse_args(argv)
    args.kernel_args = [a for a in args.kernel_args if a != "--"]
    return args


def ipykernel_args(kernel_args: list[str]) -> list[str]:
    """ipykernel's command-line arguments: the startup line, quiet logging, then the connection file etc."""
    return [f"--IPKernelApp.exec_lines={STARTUP}", "--IPKernelApp.log_level=ERROR", *kernel_args]


def main(argv: list[str] | None = None) -> None:
    args = parse(sys.argv[1:] if argv is None else argv)
    apply_limits(args.memory_bytes, args.rlimit)
    os.execv(sys.executable, [sys.executable, "-P", "-s", "-m", "ipykernel_launcher",
                              *ipykernel_args(args.kernel_args)])


if __name__ == "__main__":
    main()
