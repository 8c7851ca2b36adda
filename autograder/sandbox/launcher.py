"""The first process of a grading kernel, OUTSIDE the jail: join the submission's cgroup, set the rlimits, then
become bubblewrap, whose jail runs ipykernel (see jail.py). Nothing of `autograder` runs inside the jail.

    python -s -P -m autograder.sandbox.launcher --memory-bytes N --rlimit as --disk-bytes N --processes N
           [--cgroup DIR ...] [--ipc-dir DIR --connection-dir DIR] [--gpu] [--keep-env NAME ...]
           [--template SOCKET --template-files DIR]
           -- -f CONNECTION_FILE

The working folder it is started in is the worker's copy of the submission folder. Resource limits survive
execve, so every process of the submission runs under them:
- RLIMIT_AS (or RLIMIT_DATA on a GPU machine: CUDA maps far more address space than it uses): per process, a
  first line that makes one huge allocation fail with MemoryError instead of waking the OOM killer;
- RLIMIT_FSIZE: no single file over the disk cap (a second line behind the size-limited tmpfs);
- RLIMIT_CORE 0: a crash leaves no core file;
- RLIMIT_NPROC: only when no cgroup could be made (the fallback; it counts per user, and the kernel ignores it
  for uid 0).
Without `--ipc-dir` (AUTOGRADER_UNSAFE_NO_JAIL=1), it becomes ipykernel directly, as before the jail. With
`--template SOCKET` it starts nothing itself: the worker's warm template forks the kernel (zygote.fork_kernel),
this process moves that child into the submission's cgroup and stays until the kernel ends, with its exit code.

bwrap is started with nothing of the grader (`exec_quietly`): it is the jail's PID 1, whose /proc entries the
submission can read.
"""
from __future__ import annotations

import argparse
import os
import resource
import sys

# The kernel's first line: the notebook folder stays importable (`from provided import ...`), but LAST on
# sys.path, so a file the notebook writes (numpy.py...) cannot shadow an installed package. No import needed.
STARTUP = "__import__('sys').path.append('')"


RLIMIT_OF = {"core": resource.RLIMIT_CORE, "as": resource.RLIMIT_AS, "data": resource.RLIMIT_DATA,
             "fsize": resource.RLIMIT_FSIZE, "nproc": resource.RLIMIT_NPROC}  # template_main.RLIMITS names them too


def rlimits(memory_bytes: int, which: str, disk_bytes: int = 0, processes: int = 0) -> dict[str, int]:
    """The kernel's rlimits by name ({"core": 0, "as": N...}): set here, or by the template's child it forks."""
    chosen = {"core": 0}  # a segfault leaves no multi-GB core file behind
    if memory_bytes > 0:
        chosen[which] = memory_bytes
    if disk_bytes > 0:
        chosen["fsize"] = disk_bytes
    if processes > 0:
        chosen["nproc"] = processes
    return chosen


def apply_limits(memory_bytes: int, which: str, disk_bytes: int = 0, processes: int = 0) -> None:
    for name, value in rlimits(memory_bytes, which, disk_bytes, processes).items():
        resource.setrlimit(RLIMIT_OF[name], (value, value))


def parse(argv: list[str]) -> argparse.Namespace:
    """The launcher's arguments; kernel_args is what ipykernel gets (e.g. -f FILE)."""
    parser = argparse.ArgumentParser(prog="autograder.sandbox.launcher")
    parser.add_argument("--memory-bytes", type=int, default=0)
    parser.add_argument("--rlimit", choices=["as", "data"], default="as")
    parser.add_argument("--disk-bytes", type=int, default=0)
    parser.add_argument("--processes", type=int, default=0)
    parser.add_argument("--cgroup", action="append", default=[], help="a folder of the submission's cgroup")
    parser.add_argument("--ipc-dir", default=None, help="the kernel's socket folder; given: run in the jail")
    parser.add_argument("--connection-dir", default=None, help="the connection file's folder (read-only in the jail)")
    parser.add_argument("--gpu", action="store_true")
    parser.add_argument("--template", default=None, help="a warm template's socket (zygote.py): fork the kernel there")
    parser.add_argument("--template-files", default=None, help="that template's folder for the submission's copy")
    parser.add_argument("--keep-env", action="append", default=[], help="a variable passed into the jail")
    parser.add_argument("kernel_args", nargs=argparse.REMAINDER)
    args = parser.parse_args(argv)
    if (args.template is None) != (args.template_files is None):
        parser.error("--template and --template-files go together")
    args.kernel_args = [a for a in args.kernel_args if a != "--"]
    return args


def ipykernel_args(kernel_args: list[str]) -> list[str]:
    """ipykernel's command-line arguments: the startup line, quiet logging, then the connection file etc."""
    return [f"--IPKernelApp.exec_lines={STARTUP}", "--IPKernelApp.log_level=ERROR", *kernel_args]


def kernel_command(kernel_args: list[str]) -> list[str]:
    return [sys.executable, "-s", "-P", "-m", "ipykernel_launcher", *ipykernel_args(kernel_args)]


def main(argv: list[str] | None = None) -> None:
    args = parse(sys.argv[1:] if argv is None else argv)
    for folder in args.cgroup:  # before anything else: every later process of the submission is counted
        with open(os.path.join(folder, "cgroup.procs"), "w") as fh:
            fh.write(str(os.getpid()))
    if args.ipc_dir is None:  # AUTOGRADER_UNSAFE_NO_JAIL=1
        apply_limits(args.memory_bytes, args.rlimit, args.disk_bytes, 0 if args.cgroup else args.processes)
        os.execv(sys.executable, kernel_command(args.kernel_args))
    import shutil

    from autograder.sandbox import jail

    bwrap = shutil.which("bwrap")  # the worker checked that it works (jail.bwrap_path); not probed again here
    if bwrap is None:
        raise SystemExit(f"autograder.sandbox.launcher: bwrap not found: {jail.INSTALL_HINT}")
    env = {name: os.environ[name] for name in [*args.keep_env, *jail.PASSED_ENV] if name in os.environ}
    env.update({k: v for k, v in os.environ.items() if k.startswith("JPY_")})
    # not the worker's pid: inside the PID namespace the kernel's parent is PID 1 (bwrap's init), which ipykernel
    # would take for an orphaned kernel. 1 means "no parent to watch" (--die-with-parent ties the jail to the worker)
    env["JPY_PARENT_PID"] = "1"
    if args.template is not None:
        raise SystemExit(from_template(args, jail.kernel_env(env)))
    argv = jail.bwrap_command(bwrap, kernel_cmd=kernel_command(args.kernel_args), ipc_dir=args.ipc_dir,
                              connection_dir=args.connection_dir, notebook_src=os.getcwd(),
                              disk_bytes=args.disk_bytes, env=env, gpu=args.gpu)
    apply_limits(args.memory_bytes, args.rlimit, args.disk_bytes, 0 if args.cgroup else args.processes)
    at = argv.index("--")
    exec_quietly(bwrap, argv[1:at], argv[at:])


def from_template(args: argparse.Namespace, env: dict[str, str]) -> int:
    """Have the warm template at `args.template` fork this submission's kernel (zygote.fork_kernel) from a copy of
    the submission's folder in the template's files folder; the exit code is the kernel's."""
    import shutil

    from autograder.sandbox import jail, scratch, zygote

    submission = scratch.mkdtemp("sub", args.template_files)
    try:
        shutil.copytree(os.getcwd(), submission, symlinks=True, dirs_exist_ok=True)
        request = {"kernel_args": ipykernel_args(args.kernel_args), "env": env, "submission": submission, "notebook_dir": jail.NOTEBOOK_DIR, "ipc_dir": args.ipc_dir,
                   "connection_dir": args.connection_dir, "disk_bytes": args.disk_bytes,
                   "rlimits": rlimits(args.memory_bytes, args.rlimit, args.disk_bytes,
                                      0 if args.cgroup else args.processes)}
        return zygote.fork_kernel(args.template, request, args.cgroup,
                                  on_started=lambda: scratch.remove(submission))
    except zygote.TemplateUnavailable as exc:
        print(f"autograder.sandbox.launcher: {exc}", file=sys.stderr)
        return 1
    finally:
        scratch.remove(submission)


# What bwrap itself is started with. PID 1 of the jail IS this bwrap process: the submission can read its
# /proc/1/environ, /proc/1/cmdline and reopen /proc/1/fd/*. So it gets no environment at all (the kernel's
# variables are passed with --setenv, inside the argument list), its argument list comes through a file
# descriptor that bwrap closes after reading it (`--args FD`: its cmdline is `bwrap --args 3 -- <the kernel's
# command line>`, which the kernel's own /proc/2/cmdline shows anyway), and its stdin/stdout/stderr are
# /dev/null, never the grader's terminal or log.
BWRAP_ENV: dict[str, str] = {}


def exec_quietly(bwrap: str, options: list[str], command: list[str]) -> None:
    """Become `bwrap options... -- command...` with an empty environment, the options passed through a file
    descriptor (bwrap reads the command from its own argv only) and stdin/stdout/stderr on /dev/null. Never
    returns."""
    fd = args_fd(options)
    null = os.open(os.devnull, os.O_RDWR)
    for target in (0, 1, 2):  # last: an error before this point still reaches the worker's log
        os.dup2(null, target)
    if null > 2:
        os.close(null)
    os.execve(bwrap, [bwrap, "--args", str(fd), *command], BWRAP_ENV)


def args_fd(args: list[str]) -> int:
    """A file descriptor (inherited by exec, at offset 0) holding `args` NUL-separated, as bwrap's --args reads."""
    data = b"".join(arg.encode() + b"\0" for arg in args)
    fd = os.memfd_create("bwrap-args", 0)  # Linux (as bwrap); no MFD_CLOEXEC: bwrap must inherit it
    os.write(fd, data)
    os.lseek(fd, 0, os.SEEK_SET)
    os.set_inheritable(fd, True)
    return fd


if __name__ == "__main__":
    main()
