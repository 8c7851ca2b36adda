"""Grading benchmark: prints a markdown report (date, machine, numbers).

    python bench/grading.py                       # 8 submissions of 03_attention (the real course)
    python bench/grading.py --synthetic --submissions 4    # the tiny synthetic course: a quick smoke run

Measured on the same submissions, each in a fresh copy of the course:
1. plain sequential `nbgrader autograde` vs `autograder grade --workers 2` (goal: speed-up >= 1.8x), with kernels
   in their jail (the default) and without it (AUTOGRADER_UNSAFE_NO_JAIL=1, for comparison only);
2. per-submission overhead: our worker (`grade_job`, jail + limits + scoring) vs bare execution of the same
   notebook with nbclient, both sequential in this process (goal: <= 1.10x), again jailed and not;
3. a distributed run: a real `dask scheduler` and two `dask worker` processes on 127.0.0.1 over TLS, through --scheduler.
Run it on an otherwise idle machine: on a shared one the numbers are noise.
"""
from __future__ import annotations

import argparse
import dataclasses
import datetime
import os
import platform
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

BIN = Path(sys.executable).parent


def build_class(root: Path, assignment: str | None, count: int) -> tuple[Path, str]:
    """A released course under root/course with `count` collected submissions; returns (course, assignment)."""
    import nbformat

    from autograder.submissions.collect import collect
    from autograder.demo.students import demo_students

    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "fixtures"))
    from synthetic_course import synthetic_course, synthetic_submission  # the tests' tiny course, one copy

    inbox = root / "inbox"
    if assignment is None:
        course = synthetic_course(root / "course")
        assignment = "ps1"
        kinds = ["solution", "mistake", "blank", "solution"]
        notebooks = [synthetic_submission(course, kinds[i % len(kinds)]) for i in range(count)]
    else:
        from autograder.demo.run import prepare_course
        from autograder.publish.release import release

        course = prepare_course(root / "demo", [assignment])
        release([assignment], course_root=course, exercises_dir=root / "demo" / "exercises")
        source = nbformat.read(course / "source" / assignment / f"{assignment}.ipynb", as_version=4)
        blank = nbformat.read(course / "release" / assignment / f"{assignment}.ipynb", as_version=4)
        pool = [text for text, _ in demo_students(source, blank, 6).values() if "hostile" not in text]
        notebooks = [pool[i % len(pool)] for i in range(count)]
    for index, text in enumerate(notebooks):
        path = inbox / f"student{index:02d}" / assignment / f"{assignment}.ipynb"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    collect(course, inbox)
    return course, assignment


def fresh_copy(course: Path, name: str) -> Path:
    target = course.parent / name
    if target.exists():
        shutil.rmtree(target)
    shutil.copytree(course, target, ignore=shutil.ignore_patterns("autograded", "feedback", "reports"))
    return target


def timed(command: list[str], cwd: Path, extra_env: dict | None = None) -> float:
    env = {**os.environ, "PATH": f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}", **(extra_env or {})}
    started = time.perf_counter()
    subprocess.run(command, cwd=cwd, env=env, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return time.perf_counter() - started


def bare_nbclient_seconds(course: Path, assignment: str) -> list[float]:
    """Each submitted notebook executed as-is by nbclient, in a temp folder holding the assignment's files."""
    import nbformat
    from nbclient import NotebookClient

    times = []
    for path in sorted((course / "submitted").glob(f"*/{assignment}/{assignment}.ipynb")):
        nb = nbformat.read(path, as_version=4)
        with tempfile.TemporaryDirectory() as run_dir:
            for extra in (course / "source" / assignment).iterdir():
                if extra.is_file() and extra.suffix != ".ipynb":
                    shutil.copy(extra, run_dir)
            started = time.perf_counter()
            NotebookClient(nb, timeout=600, allow_errors=True, kernel_name="python3",
                           resources={"metadata": {"path": run_dir}}).execute()
            times.append(time.perf_counter() - started)
    return times


def worker_seconds(course: Path, assignment: str, jailed: bool) -> list[float]:
    from autograder.grade.plan import build_jobs
    from autograder.grade.worker import grade_job

    from autograder.course.coursedir import nbgrader_config
    from autograder.sandbox.limits import course_limits

    jobs = build_jobs(course, f"sqlite:///{course / 'gradebook.db'}", assignment, force=True,
                      limits=course_limits(nbgrader_config(course))).jobs
    previous = os.environ.get("AUTOGRADER_UNSAFE_NO_JAIL")
    os.environ["AUTOGRADER_UNSAFE_NO_JAIL"] = "0" if jailed else "1"
    try:
        # warm-up: the worker process's one-time set-up (template gradebook, the jail's checks) is not per
        # submission; the end-to-end rows include it
        grade_job(dataclasses.replace(jobs[0], gpu=None))
        times = []
        for job in jobs:
            job = dataclasses.replace(job, gpu=None)
            started = time.perf_counter()
            grade_job(job)
            times.append(time.perf_counter() - started)
    finally:
        if previous is None:
            os.environ.pop("AUTOGRADER_UNSAFE_NO_JAIL", None)
        else:
            os.environ["AUTOGRADER_UNSAFE_NO_JAIL"] = previous
    return times


def distributed_seconds(course: Path, assignment: str) -> float:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    address = f"tls://127.0.0.1:{port}"
    from autograder.grade.cluster import self_signed_credentials

    tls = self_signed_credentials(tempfile.mkdtemp())
    tls_args = ["--tls-ca-file", str(tls["ca"]), "--tls-cert", str(tls["cert"]), "--tls-key", str(tls["key"])]
    with open(course / "nbgrader_config.py", "a") as config:
        config.write("".join(f"c.GradingCluster.tls_{name} = {str(tls[key])!r}\n"
                             for name, key in (("ca_file", "ca"), ("cert", "cert"), ("key", "key"))))
    env = {**os.environ, "PATH": f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}"}
    procs = [subprocess.Popen([str(BIN / "dask"), "scheduler", "--host", "127.0.0.1", "--port", str(port),
                               "--protocol", "tls", "--no-dashboard", *tls_args], env=env,
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)]
    procs += [subprocess.Popen([str(BIN / "dask"), "worker", address, "--nthreads", "1", "--memory-limit", "0",
                                "--no-dashboard", "--name", str(i), *tls_args], env=env, cwd=tempfile.mkdtemp(),
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL) for i in range(2)]
    try:
        from distributed import Client
        from distributed.security import Security

        security = Security(tls_ca_file=str(tls["ca"]), tls_client_cert=str(tls["cert"]),
                            tls_client_key=str(tls["key"]), require_encryption=True)
        for _ in range(60):
            try:
                with Client(address, timeout="5s", security=security) as client:
                    client.wait_for_workers(2, timeout=120)
                break
            except OSError:
                time.sleep(1)
        return timed([sys.executable, "-m", "autograder", "grade", assignment, "--course-dir", str(course),
                      "--scheduler", address, "--force"], course)
    finally:
        for proc in procs:
            proc.terminate()
        for proc in procs:
            proc.wait(timeout=30)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--assignment", default="03_attention")
    parser.add_argument("--synthetic", action="store_true", help="use the tiny synthetic course")
    parser.add_argument("--submissions", type=int, default=8)
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="bench-grading-") as tmp:
        course, assignment = build_class(Path(tmp), None if args.synthetic else args.assignment, args.submissions)
        plain_course = fresh_copy(course, "plain")
        plain = timed([str(BIN / "nbgrader"), "autograde", assignment, "--force",
                       f"--CourseDirectory.root={plain_course}"], plain_course)
        ours = timed([sys.executable, "-m", "autograder", "grade", assignment, "--workers", "2", "--force",
                      "--course-dir", str(fresh_copy(course, "ours"))], course.parent)
        ours_plain = timed([sys.executable, "-m", "autograder", "grade", assignment, "--workers", "2", "--force",
                            "--course-dir", str(fresh_copy(course, "ours-plain"))], course.parent,
                           {"AUTOGRADER_UNSAFE_NO_JAIL": "1"})
        bare = bare_nbclient_seconds(course, assignment)
        worker = worker_seconds(fresh_copy(course, "overhead"), assignment, jailed=True)
        worker_plain = worker_seconds(fresh_copy(course, "overhead-plain"), assignment, jailed=False)
        distributed = distributed_seconds(fresh_copy(course, "distributed"), assignment)
    load = os.getloadavg()
    print(f"# Grading benchmark ({datetime.datetime.now(datetime.timezone.utc):%Y-%m-%d %H:%M} UTC)\n")
    print(f"Machine: {platform.node()}, {platform.processor() or platform.machine()}, {os.cpu_count()} cores, "
          f"Python {platform.python_version()}, load average {load[0]:.1f}/{load[1]:.1f}/{load[2]:.1f}\n")
    print(f"{args.submissions} submissions of `{assignment}`.\n")
    print("| measurement | seconds | ratio | goal |\n|---|---:|---:|---|")
    print(f"| plain sequential `nbgrader autograde` | {plain:.1f} | | |")
    print(f"| `autograder grade --workers 2` (incl. cluster start) | {ours:.1f} | {plain / ours:.2f}x faster "
          f"| >= 1.8x |")
    print(f"| same, without the jail (`AUTOGRADER_UNSAFE_NO_JAIL=1`) | {ours_plain:.1f} | "
          f"{plain / ours_plain:.2f}x faster | |")
    print(f"| bare nbclient, mean per notebook | {statistics.mean(bare):.2f} | | |")
    print(f"| our worker (`grade_job`), mean per notebook | {statistics.mean(worker):.2f} | "
          f"{statistics.mean(worker) / statistics.mean(bare):.2f}x | <= 1.10x |")
    print(f"| our worker, without the jail | {statistics.mean(worker_plain):.2f} | "
          f"{statistics.mean(worker_plain) / statistics.mean(bare):.2f}x | <= 1.10x |")
    print(f"| `--scheduler` with 2 `dask worker` processes | {distributed:.1f} | {plain / distributed:.2f}x faster "
          f"| |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
