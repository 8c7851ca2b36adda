"""Grading benchmark: prints a markdown report (date, machine, numbers).

    python bench/grading.py                       # 8 submissions of 03_attention (the real course)
    python bench/grading.py --synthetic --submissions 4    # the tiny synthetic course: a quick smoke run
    python bench/grading.py --class 4             # 4 students x the light notebooks 01-06 (issue #48)
    python bench/grading.py --class 1 --assignments 01_tokens_and_embeddings,03_attention  # the smallest run

Measured on the same submissions, each in a fresh copy of the course:
1. plain sequential `nbgrader autograde` vs `autograder grade --workers 2` (goal: speed-up >= 1.8x), with kernels
   in their jail (the default) and without it (AUTOGRADER_UNSAFE_NO_JAIL=1, for comparison only);
2. per-submission overhead: our worker (`grade_job`, jail + limits + scoring) vs bare execution of the same
   notebook with nbclient, both sequential in this process (goal: <= 1.10x), again jailed and not;
3. a distributed run: a real `dask scheduler` and two `dask worker` processes on 127.0.0.1 over TLS, through --scheduler.

`--class N` (a class, `class_report`): N students x the light assignments (LIGHT_NOTEBOOKS), reference, blank and
mistaken answers mixed, graded side by side: `grade_many(..., workers=2)` over all of them in one run, plain
`nbgrader autograde` one assignment after another, and bare nbclient; notebooks per minute and core-seconds per
notebook of each, and where the time of one graded notebook goes (kernel start, the cells, the judge, write-back),
timed by wrapping the grader's own functions in this process only (`PhaseProbes`; no product code changes).
Run it on an otherwise idle machine: on a shared one the numbers are noise.
"""
from __future__ import annotations

import argparse
import contextlib
import dataclasses
import datetime
import json
import os
import platform
import resource
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


@contextlib.contextmanager
def jail_setting(jailed: bool):
    """AUTOGRADER_UNSAFE_NO_JAIL for work in this process: kernels jailed (the default) or not."""
    previous = os.environ.get("AUTOGRADER_UNSAFE_NO_JAIL")
    os.environ["AUTOGRADER_UNSAFE_NO_JAIL"] = "0" if jailed else "1"
    try:
        yield
    finally:
        if previous is None:
            os.environ.pop("AUTOGRADER_UNSAFE_NO_JAIL", None)
        else:
            os.environ["AUTOGRADER_UNSAFE_NO_JAIL"] = previous


def worker_seconds(course: Path, assignment: str, jailed: bool) -> list[float]:
    from autograder.grade.plan import build_jobs
    from autograder.grade.worker import grade_job

    from autograder.course.coursedir import nbgrader_config
    from autograder.sandbox.limits import course_limits

    jobs = build_jobs(course, f"sqlite:///{course / 'gradebook.db'}", assignment, force=True,
                      limits=course_limits(nbgrader_config(course))).jobs
    with jail_setting(jailed):
        # warm-up: the worker process's one-time set-up (template gradebook, the jail's checks) is not per
        # submission; the end-to-end rows include it
        grade_job(dataclasses.replace(jobs[0], gpu=None))
        times = []
        for job in jobs:
            job = dataclasses.replace(job, gpu=None)
            started = time.perf_counter()
            grade_job(job)
            times.append(time.perf_counter() - started)
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


# ------------------------------------------------------------------------------------------------ a class (--class N)

# The light notebooks: 01-06 (tokens and embeddings .. the full Transformer) run in seconds on a CPU; 07-10 train
# models and take minutes each. Neither coursekit.api nor the course config says which notebooks are light, so it is
# said here, once, by number; the names come from the course itself (light_assignments).
LIGHT_NOTEBOOKS = ("01", "02", "03", "04", "05", "06")
RATIO_ASSIGNMENT = "03_attention"  # issue #48's per-notebook goal: our worker vs bare nbclient on this notebook


def light_assignments() -> list[str]:
    """The course's assignments (course/source) whose number is in LIGHT_NOTEBOOKS, in course order."""
    from autograder.publish.release import find_assignments

    return [name for name in find_assignments() if name[:2] in LIGHT_NOTEBOOKS]


def build_course_class(root: Path, assignments: list[str], students: int) -> tuple[Path, dict[str, int]]:
    """A released course under root/demo/course with `students` students, each handing in every assignment;
    returns (course, {kind of answer: how many notebooks}). The answers are `build_class`'s pool (demo_students
    without the hostile one: reference, blank, the catalogue's mistakes), rotated by the assignment's place in
    the course so that every kind turns up even in a small class."""
    import nbformat

    from autograder.demo.run import prepare_course
    from autograder.demo.students import demo_students
    from autograder.publish.release import release
    from autograder.submissions.collect import collect

    course = prepare_course(root / "demo", assignments)
    release(assignments, course_root=course, exercises_dir=root / "demo" / "exercises")
    inbox = root / "inbox"
    order = light_assignments()
    kinds: dict[str, int] = {}
    for assignment in assignments:
        source = nbformat.read(course / "source" / assignment / f"{assignment}.ipynb", as_version=4)
        blank = nbformat.read(course / "release" / assignment / f"{assignment}.ipynb", as_version=4)
        pool = [(kind, text) for kind, (text, _) in demo_students(source, blank, 6).items() if "hostile" not in text]
        shift = order.index(assignment) if assignment in order else 0
        for index in range(students):
            kind, text = pool[(index + shift) % len(pool)]
            kinds[kind] = kinds.get(kind, 0) + 1
            path = inbox / f"student{index:02d}" / assignment / f"{assignment}.ipynb"
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text)
    collect(course, inbox)
    return course, kinds


# -- CPU time of a process tree ------------------------------------------------------------------------------------

def _rusage_seconds() -> float:
    """CPU seconds of this process and of its children that were waited for (getrusage)."""
    own, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


class TreeCpu:
    """The CPU seconds of everything a measured run starts (`run` for a subprocess, `here` for work in this
    process). Where this process can make a cgroup v1 `cpuacct` group (root on a cgroup v1 machine, as ours), the
    run gets one: the grader makes each submission's group inside it, so it counts every process of the tree,
    the kernels killed with their jail included (`how` = "cgroup"). getrusage deltas (RUSAGE_CHILDREN around a
    subprocess, plus RUSAGE_SELF for work in this process) are kept beside it; alone (`how` = "getrusage") they
    miss a kernel that was killed with its jail before a process of the tree reaped it."""

    def __init__(self):
        self.folder = self.home = None
        from autograder.sandbox import cgroup

        home = cgroup._v1_folder(cgroup.ROOT, cgroup._own_groups(), "cpuacct")  # this process's v1 cpuacct group
        if home is not None and not os.environ.get(cgroup.PARENT_ENV):
            folder = os.path.join(home, f"bench-grading-{os.getpid()}-{time.monotonic_ns()}")
            try:
                os.mkdir(folder)
                self.folder, self.home = folder, home
            except OSError:
                pass
        self.rusage = 0.0
        self.cgroup: float | None = None
        self.wall = 0.0

    @property
    def how(self) -> str:
        return "cgroup" if self.cgroup is not None else "getrusage"

    @property
    def seconds(self) -> float:
        return self.cgroup if self.cgroup is not None else self.rusage

    def _join(self) -> None:  # in the child, before exec: the whole tree starts inside the group
        with open(os.path.join(self.folder, "cgroup.procs"), "w") as fh:
            fh.write(str(os.getpid()))

    def run(self, command: list[str], cwd: Path, extra_env: dict | None = None) -> str:
        """Run `command` (it must succeed) inside the measured tree; returns its stdout."""
        env = {**os.environ, "PATH": f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}", **(extra_env or {})}
        before, started = _rusage_seconds(), time.perf_counter()
        done = subprocess.run(command, cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                              text=True, preexec_fn=self._join if self.folder else None)
        self.wall += time.perf_counter() - started
        self.rusage += _rusage_seconds() - before
        if done.returncode != 0:
            raise RuntimeError(f"{' '.join(command[:4])} ... failed ({done.returncode}):\n{done.stderr[-3000:]}")
        return done.stdout

    @contextlib.contextmanager
    def here(self):
        """Work done in this process (and the kernels it starts) inside the measured tree."""
        if self.folder:
            with open(os.path.join(self.folder, "cgroup.procs"), "w") as fh:
                fh.write(str(os.getpid()))
        before, started = _rusage_seconds(), time.perf_counter()
        try:
            yield self
        finally:
            self.wall += time.perf_counter() - started
            self.rusage += _rusage_seconds() - before
            if self.folder:
                with open(os.path.join(self.home, "cgroup.procs"), "w") as fh:
                    fh.write(str(os.getpid()))

    def close(self) -> None:
        """Read the group's count and remove it."""
        if not self.folder:
            return
        try:
            with open(os.path.join(self.folder, "cpuacct.usage")) as fh:
                self.cgroup = int(fh.read().strip()) / 1e9
        except (OSError, ValueError):
            self.cgroup = None
        for _ in range(100):  # a process of the run may take a moment to leave
            try:
                os.rmdir(self.folder)
                break
            except FileNotFoundError:
                break
            except OSError:
                time.sleep(0.05)
        self.folder = None


# -- the phases of one graded notebook -----------------------------------------------------------------------------

PHASES = (
    ("set-up", "set-up: private gradebook, files, nbgrader's sanitize steps"),
    ("kernel start", "kernel start: cgroup, jail, Python and ipykernel until the kernel answers"),
    ("imports cell", "first code cell (imports torch, matplotlib, coursekit)"),
    ("other cells", "the other cells"),
    ("judge", "judge: the hidden checks of the grade cells (probes into the kernel, reference computations)"),
    ("kernel stop", "kernel stop and clean-up (jail, cgroup)"),
    ("rest", "the rest of `run_notebook` (nbclient's set-up, `kernel_info`)"),
    ("write-back", "write-back: scrub, nbgrader's scoring steps, the private gradebook read back"),
)


def _proc_kib(pid: int, field: str) -> int:
    try:
        with open(f"/proc/{pid}/status") as fh:
            for line in fh:
                if line.startswith(field + ":"):
                    return int(line.split()[1])
    except (OSError, ValueError, IndexError):
        pass
    return 0


def _kernel_pids(km) -> set[int]:
    """The processes of a running submission: its cgroup's, else the kernel process."""
    group = getattr(km, "submission_cgroup", None)
    pids = group.pids() if group is not None else set()
    process = getattr(getattr(km, "provisioner", None), "process", None)
    if not pids and process is not None:
        pids = {process.pid}
    return pids


def _cgroup_peak_bytes(km) -> int | None:
    group = getattr(km, "submission_cgroup", None)
    for folder in (group.dirs if group is not None else []):
        for name in ("memory.max_usage_in_bytes", "memory.peak"):  # v1, v2
            try:
                with open(os.path.join(folder, name)) as fh:
                    return int(fh.read().split()[0])
            except (OSError, ValueError, IndexError):
                continue
    return None


class PhaseProbes:
    """Times the phases of `grade_job` in THIS process by wrapping the grader's own functions while it is entered
    (restored on exit; nothing of the product changes): worker.run_notebook (so set-up is what comes before it,
    write-back what comes after), SandboxedExecute.start_new_kernel + start_new_kernel_client (what nbclient's
    setup_kernel calls: the kernel start, until it answers), SandboxedExecute.preprocess_cell (a cell;
    JudgedExecute's calls it before judging), judge.verdict (the hidden checks) and _cleanup_kernel (the kernel's
    stop). The kernel's memory: the resident set of the submission's processes (cgroup.procs) right after the start
    (VmRSS) and at their highest (VmHWM, read before the stop), and the cgroup's own peak."""

    def __init__(self):
        self.current: dict[str, float] = {}
        self._saved: list[tuple[object, str, object, bool]] = []

    def add(self, key: str, value: float) -> None:
        self.current[key] = self.current.get(key, 0.0) + value

    def _wrap(self, owner, name: str, make) -> None:
        original = getattr(owner, name)
        self._saved.append((owner, name, owner.__dict__.get(name), name in owner.__dict__))
        setattr(owner, name, make(original))

    def __enter__(self):
        from autograder.grade import judge, worker
        from autograder.sandbox.execute import SandboxedExecute

        probes = self

        def timing(phase, after=None):
            def make(original):
                def wrapper(*args, **kwargs):
                    started = time.perf_counter()
                    try:
                        return original(*args, **kwargs)
                    finally:
                        probes.add(phase, time.perf_counter() - started)
                        if after is not None:
                            after(*args)
                return wrapper
            return make

        def started_kernel(executor, *_):
            pids = _kernel_pids(executor.km)
            probes.add("rss after start", sum(_proc_kib(pid, "VmRSS") for pid in pids) * 1024)
            probes.add("kernel starts", 1)

        def cells(original):
            def wrapper(executor, cell, resources, index):
                first = cell.cell_type == "code" and not getattr(executor, "_bench_seen_code", False)
                if cell.cell_type == "code":
                    executor._bench_seen_code = True
                started = time.perf_counter()
                try:
                    return original(executor, cell, resources, index)
                finally:
                    probes.add("imports cell" if first else "other cells", time.perf_counter() - started)
            return wrapper

        def stop(original):
            def wrapper(executor, *args, **kwargs):
                km = executor.km
                if km is not None:
                    probes.add("peak rss", sum(_proc_kib(pid, "VmHWM") for pid in _kernel_pids(km)) * 1024)
                    peak = _cgroup_peak_bytes(km)
                    if peak is not None:
                        probes.add("cgroup peak", peak)
                started = time.perf_counter()
                try:
                    return original(executor, *args, **kwargs)
                finally:
                    probes.add("kernel stop", time.perf_counter() - started)
            return wrapper

        def run_notebook(original):
            def wrapper(*args, **kwargs):
                probes.current.setdefault("run_notebook from", time.perf_counter())
                try:
                    return original(*args, **kwargs)
                finally:
                    probes.current["run_notebook to"] = time.perf_counter()
            return wrapper

        self._wrap(worker, "run_notebook", run_notebook)
        self._wrap(SandboxedExecute, "start_new_kernel", timing("kernel start"))
        self._wrap(SandboxedExecute, "start_new_kernel_client", timing("kernel start", started_kernel))
        self._wrap(SandboxedExecute, "preprocess_cell", cells)
        self._wrap(SandboxedExecute, "_cleanup_kernel", stop)
        self._wrap(judge, "verdict", timing("judge"))
        return self

    def __exit__(self, *exc) -> None:
        for owner, name, value, had in reversed(self._saved):
            if had:
                setattr(owner, name, value)
            else:
                delattr(owner, name)
        self._saved.clear()


def graded_phases(course: Path, assignments: list[str], meter: TreeCpu, warm: bool = True) -> list[dict]:
    """Every submitted notebook graded by `grade_job` in this process, one after another, jailed, as
    `worker_seconds` does (one warm-up job first, not counted), kernels forked from the worker's warm template
    (`warm`, the default: zygote.py) or each in a new jail of its own, with PhaseProbes: one dict per notebook with its
    assignment, status, wall seconds, each phase (PHASES), the kernel's CPU (its cgroups, from the result) and
    this process's CPU (the worker's own: set-up, judge, write-back)."""
    from autograder.course.coursedir import nbgrader_config
    from autograder.grade.plan import build_jobs
    from autograder.grade.worker import grade_job
    from autograder.sandbox.limits import course_limits

    from autograder.sandbox import zygote

    limits = course_limits(nbgrader_config(course), warm_template=warm)
    zygote.stop_all()  # the warm pass starts its template in its warm-up job, not counted
    jobs = [dataclasses.replace(job, gpu=None) for assignment in assignments
            for job in build_jobs(course, f"sqlite:///{course / 'gradebook.db'}", assignment, force=True,
                                  limits=limits).jobs]
    rows = []
    with jail_setting(True):
        grade_job(jobs[0])  # warm-up: the worker process's one-time set-up is not per notebook (see worker_seconds)
        with PhaseProbes() as probes, meter.here():
            for job in jobs:
                probes.current = {}
                own = time.process_time()
                started = time.perf_counter()
                result = grade_job(job)
                ended = time.perf_counter()
                row = dict(probes.current)
                first, last = row.pop("run_notebook from", started), row.pop("run_notebook to", ended)
                inside = sum(row.get(name, 0.0) for name in ("kernel start", "imports cell", "other cells",
                                                             "judge", "kernel stop"))
                row.update({"assignment": job.assignment, "status": result.status, "wall": ended - started,
                            "kernel_cpu": result.cpu_seconds, "worker_cpu": time.process_time() - own,
                            "set-up": first - started, "write-back": ended - last,
                            "rest": max(0.0, (last - first) - inside)})
                rows.append(row)
    return rows


def template_facts() -> dict:
    """Start-up wall seconds, RSS and address space of the warm template this process made (zygote.py)."""
    from autograder.sandbox import zygote

    made = next(iter(zygote._templates.values()), None)
    if made is None:
        return {}
    return {"start": made.started_s, "rss": made.rss_bytes, "vm": made.address_space_bytes, "modules": made.modules}


OURS_SCRIPT = """\
import json, sys
from autograder.course.coursedir import nbgrader_config
from autograder.grade.engine import grade_many
from autograder.sandbox.limits import course_limits
from pathlib import Path
limits = course_limits(nbgrader_config(Path(sys.argv[1])), warm_template=True)  # the course's limits, the template on
summaries = grade_many(sys.argv[1], sys.argv[2].split(","), workers=2, force=True, progress=False, limits=limits)
print("RESULT " + json.dumps({"graded": sum(len(s.graded) for s in summaries),
                              "failed": sum(len(s.failed) for s in summaries),
                              "held": sum(len(s.held) for s in summaries),
                              "refused": sum(len(s.refused) for s in summaries)}))
"""


def class_report(students: int, chosen: list[str] | None) -> int:
    """`--class N`: see the module doc. Prints the markdown report."""
    light = light_assignments()
    assignments = chosen or light
    unknown = [name for name in assignments if name not in light]
    if unknown or students < 1:
        print(f"bench/grading.py: --class needs N >= 1 and light assignments ({', '.join(light)}); got "
              f"{students}, {', '.join(unknown)}", file=sys.stderr)
        return 2
    load_before = os.getloadavg()
    meters = {name: TreeCpu() for name in ("ours", "plain", "bare", "worker", "cold")}
    try:
        with tempfile.TemporaryDirectory(prefix="bench-grading-class-") as tmp:
            course, kinds = build_course_class(Path(tmp), assignments, students)
            plain_course = fresh_copy(course, "plain")
            for assignment in assignments:  # 2. plain nbgrader, one assignment after another
                meters["plain"].run([str(BIN / "nbgrader"), "autograde", assignment, "--force",
                                     f"--CourseDirectory.root={plain_course}"], plain_course)
            # 1. ours: every assignment in one run (the CLI grades one assignment per call)
            out = meters["ours"].run([sys.executable, "-c", OURS_SCRIPT, str(fresh_copy(course, "ours")),
                                      ",".join(assignments)], course.parent)
            graded = json.loads([line for line in out.splitlines() if line.startswith("RESULT ")][-1][7:])
            bare: dict[str, list[float]] = {}
            with meters["bare"].here():  # 3. bare nbclient, in this process
                for assignment in assignments:
                    bare[assignment] = bare_nbclient_seconds(course, assignment)
            rows = graded_phases(fresh_copy(course, "phases"), assignments, meters["worker"])
            template = template_facts()
            cold = graded_phases(fresh_copy(course, "cold"), assignments, meters["cold"], warm=False)
    finally:
        for meter in meters.values():
            meter.close()
    print_class_report(students, assignments, kinds, graded, meters, bare, rows, load_before, cold, template)
    return 0


def _mean(values) -> float:
    values = list(values)
    return statistics.mean(values) if values else float("nan")


def print_class_report(students, assignments, kinds, graded, meters, bare, rows, load_before, cold, template) -> None:
    count = students * len(assignments)
    load = os.getloadavg()
    print(f"# Grading benchmark: a class ({datetime.datetime.now(datetime.timezone.utc):%Y-%m-%d %H:%M} UTC)\n")
    print(f"Machine: {platform.node()}, {platform.processor() or platform.machine()}, {os.cpu_count()} cores, "
          f"Python {platform.python_version()}, load average {load_before[0]:.1f}/{load_before[1]:.1f}/"
          f"{load_before[2]:.1f} at the start, {load[0]:.1f}/{load[1]:.1f}/{load[2]:.1f} at the end\n")
    print(f"{students} student(s) x {len(assignments)} light assignment(s) ({', '.join(assignments)}) = {count} "
          f"notebooks: {', '.join(f'{n} {kind}' for kind, n in sorted(kinds.items()))} (reference: the source "
          f"notebook; blank: the release as handed out; mistake_*: the catalogue's mistakes edited in). Ours graded "
          f"{graded['graded']} of {count} ({graded['failed']} errors, {graded['held']} held for review, "
          f"{graded['refused']} refused).\n")
    bare_all = [t for times in bare.values() for t in times]
    per_minute = {"ours": count / meters["ours"].wall * 60, "plain": count / meters["plain"].wall * 60,
                  "bare": len(bare_all) / sum(bare_all) * 60, "worker": len(rows) / sum(r["wall"] for r in rows) * 60,
                  "cold": len(cold) / sum(r["wall"] for r in cold) * 60}
    core = {name: meter.seconds / count for name, meter in meters.items()}
    ratio = per_minute["ours"] / per_minute["plain"]
    on = RATIO_ASSIGNMENT if RATIO_ASSIGNMENT in assignments else assignments[0]
    worker_on = _mean(r["wall"] for r in rows if r["assignment"] == on)
    cold_on = _mean(r["wall"] for r in cold if r["assignment"] == on)
    bare_on = _mean(bare[on])
    mib = 2 ** 20
    print("| measurement | wall s | notebooks per minute | core-s per notebook | ratio | goal |\n"
          "|---|---:|---:|---:|---|---|")
    print(f"| ours: `grade_many(..., workers=2)`, all {len(assignments)} assignments in one run (incl. the "
          f"cluster's start) | {meters['ours'].wall:.1f} | {per_minute['ours']:.1f} | {core['ours']:.2f} | "
          f"{ratio:.2f}x the notebooks per minute of sequential nbgrader | >= 3x |")
    print(f"| plain sequential `nbgrader autograde`, one call per assignment | {meters['plain'].wall:.1f} | "
          f"{per_minute['plain']:.1f} | {core['plain']:.2f} | | |")
    print(f"| bare nbclient, one notebook after another (in this process) | {sum(bare_all):.1f} | "
          f"{per_minute['bare']:.1f} | {core['bare']:.2f} | | |")
    print(f"| our worker (`grade_job`, jailed, warm template, in this process), one notebook after another | "
          f"{sum(r['wall'] for r in rows):.1f} | {per_minute['worker']:.1f} | {core['worker']:.2f} | "
          f"{core['worker'] / core['bare']:.2f}x the core-s of bare nbclient | |")
    print(f"| our worker without the template (`warm_template = False`: a new jail per kernel) | "
          f"{sum(r['wall'] for r in cold):.1f} | {per_minute['cold']:.1f} | {core['cold']:.2f} | "
          f"{core['cold'] / core['bare']:.2f}x the core-s of bare nbclient | |")
    print(f"| our worker on `{on}`, mean per notebook, warm template | {worker_on:.2f} | | | "
          f"{worker_on / bare_on:.2f}x bare nbclient's {bare_on:.2f} s | <= 0.6x |")
    print(f"| our worker on `{on}`, mean per notebook, without the template | {cold_on:.2f} | | | "
          f"{cold_on / bare_on:.2f}x bare nbclient's {bare_on:.2f} s | |")
    if template:
        print(f"| warm template: start-up (jail, imports, the start-up check) and memory | {template['start']:.2f} "
              f"| | | | RSS {template['rss'] / mib:.0f} MiB, address space {template['vm'] / mib:.0f} MiB, "
              f"{template['modules']} modules imported |")
    for label, which in (("from the warm template", rows), ("without the template", cold)):
        count_starts = sum(r.get("kernel starts", 0) for r in which) or 1
        print(f"| a kernel start {label} (cgroup, jail, ipykernel), mean | "
              f"{_mean_of(which, 'kernel start', count_starts):.2f} | | | RSS "
              f"{_mean_of(which, 'rss after start', count_starts) / mib:.0f} MiB after the start, "
              f"{_mean_of(which, 'peak rss', count_starts) / mib:.0f} MiB at its peak over the notebook | |")
    print()
    how = meters["ours"].how
    print("Core-seconds: the CPU time of each measurement's whole process tree, counted by "
          + ("a cgroup v1 `cpuacct` group made for it (every process, the kernels killed with their jail included)"
             if how == "cgroup" else "getrusage (RUSAGE_CHILDREN around the subprocesses, plus RUSAGE_SELF in this "
                                     "process; it misses a kernel killed with its jail before it was reaped)")
          + ". getrusage alone says, per notebook: "
          + ", ".join(f"{name} {meter.rusage / count:.2f}" for name, meter in meters.items())
          + ". Plain nbgrader has no judge: its `hand_in` cells fail fast, so it does a little less work.\n")
    columns = list(assignments) + ["all"]
    print("Where the time of one graded notebook goes (`grade_job` in this process, jailed, warm template; mean "
          "seconds per notebook; `share`: of the whole; the last column without the template):\n")
    print("| phase | " + " | ".join(f"`{c[:2]}`" if c != "all" else "all" for c in columns) + " | share | "
          "all, no template |\n|---|" + "---:|" * (len(columns) + 2))

    def of(column):
        if column == "cold":
            return cold
        return [r for r in rows if column == "all" or r["assignment"] == column]

    total, total_cold = _mean(r["wall"] for r in rows), _mean(r["wall"] for r in cold)
    for key, label in PHASES:
        means = [_mean(r.get(key, 0.0) for r in of(c)) for c in columns]
        print(f"| {label} | " + " | ".join(f"{m:.2f}" for m in means) + f" | {means[-1] / total:.0%} | "
              f"{_mean(r.get(key, 0.0) for r in cold):.2f} |")
    print("| **total `grade_job`** | " + " | ".join(f"{_mean(r['wall'] for r in of(c)):.2f}" for c in columns)
          + f" | 100% | {total_cold:.2f} |")
    print("| bare nbclient, same notebooks | " + " | ".join(
        f"{_mean(bare[c] if c != 'all' else bare_all):.2f}" for c in columns) + f" | | {_mean(bare_all):.2f} |")
    def line(label, value) -> str:  # the assignments' columns, the share left empty, then without the template
        return f"| {label} | " + " | ".join(value(c) for c in columns) + f" | | {value('cold')} |"

    print(line("CPU s of the kernel (its cgroups)", lambda c: f"{_mean(r['kernel_cpu'] or 0.0 for r in of(c)):.2f}"))
    print(line("CPU s of the worker process (set-up, judge, write-back)",
               lambda c: f"{_mean(r['worker_cpu'] for r in of(c)):.2f}"))
    for key, label in (("rss after start", "kernel RSS right after its start, MiB"),
                       ("peak rss", "kernel peak RSS over the notebook (VmHWM), MiB"),
                       ("cgroup peak", "submission cgroup's peak memory (RSS + page cache), MiB")):
        print(line(label, lambda c, key=key: f"{_mean_of(of(c), key, sum(r.get('kernel starts', 0) for r in of(c)) or 1) / mib:.0f}"))


def _mean_of(rows, key: str, starts: int) -> float:
    """The mean of `key` per kernel start over `rows`."""
    return sum(r.get(key, 0.0) for r in rows) / starts


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--assignment", default="03_attention")
    parser.add_argument("--synthetic", action="store_true", help="use the tiny synthetic course")
    parser.add_argument("--submissions", type=int, default=8)
    parser.add_argument("--class", dest="class_size", type=int, metavar="N",
                        help="N students x the light notebooks (01-06), graded three ways side by side")
    parser.add_argument("--assignments", default="",
                        help="with --class: only these light assignments (comma-separated names)")
    args = parser.parse_args(argv)
    if args.class_size is not None:
        chosen = [a.strip() for a in args.assignments.split(",") if a.strip()]
        return class_report(args.class_size, chosen or None)
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
