"""Issue #32, doors 3 and 4: a submission that spins on every core, or fills the disk, is graded beside honest
classmates (`grade`, 2 local Dask workers, jailed kernels) and harms none of them.

- CPU: the spinner starts 50 children that each call `setsid()` and spin. Each submission's cgroup has a CPU
  quota (`Limits.cpus`; 0.25 here, so that the two kernels stay within their quotas on a 2-core machine even
  while up to six other busy processes share it), which none of its processes leaves. A classmate graded at
  the same time keeps her score; the spinner's 50 children together got no more CPU than the quota allows over
  their lifetime (read from /proc inside the jail), however busy the machine. Her CPU-bound cell's pace beside
  the spinner against alone is printed, not asserted: a wall-clock ratio depends on the machine's load (CI once
  read 1.53x); the quota is what keeps it (without the quota, this test measured 7x on this machine).
- Disk: the attacker writes 64 MiB files into the only worker folder bound writable into its jail, its kernel's
  socket folder, while classmates are graded. That folder is on a tmpfs (here a 200 MiB one mounted for the
  test, $AUTOGRADER_IPC_ROOT), never on the worker's disk; the writes stop there with ENOSPC, the classmates keep
  their scores, and after the batch nothing of the run is left: not in the tmpfs (a `chmod 0` folder included),
  not in the temporary folder.
"""
from __future__ import annotations

import dataclasses
import os
import shutil
import subprocess
import tempfile
from pathlib import Path

import nbformat
import pytest
from nbformat.v4 import new_code_cell

from autograder.grade.engine import grade
from autograder.sandbox.ownership import owner
from autograder.submissions.collect import collect

pytestmark = [pytest.mark.slow, pytest.mark.pipeline]

SPINNER = r'''
import os, time
print("SPIN_FROM", time.time())
children, wall = [], time.perf_counter()
for _ in range(50):
    pid = os.fork()
    if pid == 0:
        os.setsid()
        while True:
            pass
    children.append(pid)
time.sleep(45)
ticks = 0
for pid in children:  # utime + stime of each child, fields 14 and 15 of /proc/PID/stat
    fields = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
    ticks += int(fields[11]) + int(fields[12])
print("SPIN_CPU", ticks / os.sysconf("SC_CLK_TCK"), time.perf_counter() - wall)
print("SPIN_UNTIL", time.time())
'''
WORK = r'''
import time
time.sleep(12)  # the spinner's children are spinning by now (its kernel may start some seconds after hers)
started, wall = time.time(), time.perf_counter()
total = 0
for i in range(6_000_000):
    total += i * i
print("WORK", started, time.perf_counter() - wall)
'''
QUOTA = 0.25  # CPUs per submission in the CPU test
FILL_MIB = 400  # more than the 200 MiB tmpfs: an uncapped folder would take it all
FILLER = r'''
import os, time
from ipykernel.kernelapp import IPKernelApp
app = IPKernelApp.instance()
folder = os.path.dirname(app.ip)
os.makedirs(folder + "/locked/in")
open(folder + "/locked/in/f", "w").write("x")
os.chmod(folder + "/locked/in", 0)
os.chmod(folder + "/locked", 0)
chunk, written, errno = b"x" * 2**20, 0, None
try:
    for i in range(%d // 64):
        with open(f"{folder}/fill{i}", "wb") as fh:
            for _ in range(64):
                fh.write(chunk)
                written += 1
except OSError as exc:
    errno = exc.errno
try:
    open(os.path.dirname(app.connection_file) + "/x", "w")
    print("CONNECTION_FOLDER writable")
except OSError as exc:
    print("CONNECTION_FOLDER", exc.errno)
print("FILLED", written, errno, time.time())
time.sleep(20)  # full, while the classmates are graded
print("FULL_UNTIL", time.time())
''' % FILL_MIB
CLASSMATE_CLOCK = "import time\nprint('AT', time.time())"


def _printed(nb, key: str) -> list[str]:
    # A starved kernel may flush one print in pieces (CI once split "SPIN_CPU" from its numbers), and nbclient
    # keeps each flush as its own output: join a cell's stdout before reading lines.
    for cell in nb.cells:
        stdout = "".join(output.get("text", "") for output in cell.get("outputs", [])
                         if output.get("output_type") == "stream" and output.get("name") == "stdout")
        for line in stdout.splitlines():
            if line.startswith(key + " "):
                return line.split()[1:]
    raise AssertionError(f"no {key} line in the graded notebook")


def _class(root: Path, released_course, helpers, students: dict[str, tuple[str, list[str]]]) -> Path:
    """A course copy whose inbox holds `students`: name -> (synthetic kind, cells appended to it)."""
    course = root / "course"
    shutil.copytree(released_course, course)
    inbox = root / "inbox"
    for student, (kind, cells) in students.items():
        path = helpers.write_submission(inbox, course, student, kind)
        nb = nbformat.read(path, as_version=4)
        nb.cells.extend(new_code_cell(code) for code in cells)
        nbformat.write(nb, path)
    collect(course, inbox)
    return course


def _graded(course: Path, student: str):
    return nbformat.read(course / "autograded" / student / "ps1" / "ps1.ipynb", as_version=4)


def _scores(summary) -> dict[str, float]:
    return {row["student"]: row["score"] for row in summary.graded}


@pytest.fixture(scope="module")
def cpu_runs(released_course, helpers, tmp_path_factory):
    limits = dataclasses.replace(helpers.TEST_LIMITS, cpus=QUOTA, cell_timeout=90, notebook_timeout=200)
    alone = _class(tmp_path_factory.mktemp("alone"), released_course, helpers, {"her": ("solution", [WORK])})
    alone_summary = grade(alone, "ps1", workers=2, limits=limits, progress=False)
    beside = _class(tmp_path_factory.mktemp("beside"), released_course, helpers,
                    {"her": ("solution", [WORK]), "a_spinner": ("blank", [SPINNER])})
    beside_summary = grade(beside, "ps1", workers=2, limits=limits, progress=False)
    return {"alone": (alone, _scores(alone_summary)), "beside": (beside, _scores(beside_summary))}


def test_a_classmate_beside_the_spinner_keeps_her_score_and_the_spinner_keeps_its_quota(cpu_runs):
    alone, alone_scores = cpu_runs["alone"]
    beside, beside_scores = cpu_runs["beside"]
    assert alone_scores["her"] > 0
    assert beside_scores["her"] == alone_scores["her"]
    assert beside_scores["a_spinner"] == 0
    alone_seconds = float(_printed(_graded(alone, "her"), "WORK")[1])
    started, beside_seconds = map(float, _printed(_graded(beside, "her"), "WORK"))
    spin_from = float(_printed(_graded(beside, "a_spinner"), "SPIN_FROM")[0])
    spin_until = float(_printed(_graded(beside, "a_spinner"), "SPIN_UNTIL")[0])
    # her whole measured cell ran while the 50 children were spinning (else this test would prove nothing)
    assert spin_from < started and started + beside_seconds < spin_until, (spin_from, started, spin_until)
    print(f"her CPU-bound cell: {alone_seconds:.2f} s alone, {beside_seconds:.2f} s beside the spinner")
    spin_cpu, spin_wall = map(float, _printed(_graded(beside, "a_spinner"), "SPIN_CPU"))
    print(f"the spinner's 50 children: {spin_cpu:.2f} CPU-s in {spin_wall:.2f} s (quota {QUOTA} CPU)")
    assert spin_wall > 40 and spin_cpu <= QUOTA * spin_wall * 1.2 + 1.0, (spin_cpu, spin_wall)


def _can_mount_tmpfs() -> bool:
    return os.geteuid() == 0 and shutil.which("mount") is not None


@pytest.fixture
def small_tmpfs():
    point = tempfile.mkdtemp(prefix="agshm-", dir="/tmp")
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=200m,mode=0700", "tmpfs", point],
                          capture_output=True, text=True)
    if done.returncode != 0:
        os.rmdir(point)
        pytest.skip(f"cannot mount a tmpfs here: {done.stderr.strip()}")
    yield point
    subprocess.run(["umount", "-l", point], check=False)
    os.rmdir(point)


@pytest.mark.skipif(not _can_mount_tmpfs(), reason="mounting the test's small tmpfs needs root")
def test_filling_the_socket_folder_harms_no_classmate_and_leaves_nothing(released_course, helpers, tmp_path,
                                                                          small_tmpfs, monkeypatch):
    private_tmp = tmp_path / "tmp"
    private_tmp.mkdir()
    monkeypatch.setenv("AUTOGRADER_IPC_ROOT", small_tmpfs)
    monkeypatch.setenv("TMPDIR", str(private_tmp))
    monkeypatch.setattr(tempfile, "tempdir", None)
    classmates = {f"c{i}": ("solution", [CLASSMATE_CLOCK]) for i in range(3)}
    course = _class(tmp_path / "class", released_course, helpers, {"a_filler": ("blank", [FILLER]), **classmates})
    # warm: the workers' kernels are forked from this process's template and share its folders
    limits = dataclasses.replace(helpers.TEST_LIMITS, cell_timeout=60, notebook_timeout=150, warm_template=True)
    summary = grade(course, "ps1", workers=2, limits=limits, progress=False)
    scores = _scores(summary)
    solution = _class(tmp_path / "alone", released_course, helpers, {"c0": ("solution", [])})
    expected = _scores(grade(solution, "ps1", workers=1, limits=limits, progress=False))["c0"]
    assert expected > 0 and all(scores[c] == expected for c in classmates), scores
    filler = _graded(course, "a_filler")
    written, errno, filled_at = _printed(filler, "FILLED")
    assert int(written) <= 200 and errno == "28", (written, errno)  # ENOSPC at the tmpfs's size, not the disk's
    assert _printed(filler, "CONNECTION_FOLDER") == ["30"]  # EROFS: the connection file's folder is read-only
    full_until = float(_printed(filler, "FULL_UNTIL")[0])
    meanwhile = [c for c in classmates if float(filled_at) < float(_printed(_graded(course, c), "AT")[0]) < full_until]
    assert meanwhile, "no classmate was graded while the socket tmpfs was full"
    # what stays is this process's warm template, kept for its next run (zygote.py), with no kernel's folder in it,
    # and the masked held-out text its jail shows (jail.masked_text_file: one per process, removed at its exit)
    assert {name.split("-")[1] for name in _ours(small_tmpfs)} == {"tpl"}
    assert _kinds(small_tmpfs, private_tmp) <= {"tpl", "tplf", "heldout"}, _kinds(small_tmpfs, private_tmp)
    left = _left_once_the_templates_stop(private_tmp)
    assert os.listdir(small_tmpfs) == []  # the filler's socket folder went, its `chmod 0` folder too
    assert left == []


def _left_once_the_templates_stop(folder) -> list[str]:
    """Our folders in `folder` once this process has stopped the warm templates it keeps there (zygote.py), but
    for the masked held-out text its jails show (jail.masked_text_file: one per process, removed at its exit)."""
    from autograder.sandbox import zygote

    for key, made in list(zygote._templates.items()):
        if made.files.startswith(str(folder)):
            made.stop()
            del zygote._templates[key]
    return [name for name in _ours(folder) if not name.startswith(f"ag-heldout-{owner()}-")]


def _ours(folder) -> list[str]:
    return sorted(name for name in os.listdir(folder) if name.startswith("ag-"))


def _kinds(*folders) -> set[str]:
    """The kinds of our folders in `folders` ("ipc" of ag-ipc-...), and inside a warm template's two folders (a
    kernel's socket and connection folders are there where it ran)."""
    names = [name for top in folders for name in _ours(top)]
    names += [inner for top in folders for name in _ours(top) if name.startswith("ag-tpl")
              for inner in _ours(Path(top) / name)]
    return {name.split("-")[1] for name in names}


def test_what_a_killed_grading_run_left_is_removed_by_the_next_run(released_course, helpers, tmp_path, monkeypatch,
                                                                    request):
    """`autograder grade` SIGKILLed (coordinator and worker) while a kernel runs leaves its folders and cgroup;
    the next grading run on the machine removes them."""
    import signal
    import sys
    import time

    from autograder.sandbox import cgroup

    private_tmp = tmp_path / "tmp"
    private_tmp.mkdir()
    # a short path: a Unix socket's path has at most 107 bytes, and an xdist worker's tmp_path is a folder deeper
    sockets = Path(tempfile.mkdtemp(prefix="t101-killed-", dir="/tmp"))
    request.addfinalizer(lambda: shutil.rmtree(sockets, ignore_errors=True))
    env = {**os.environ, "TMPDIR": str(private_tmp), "AUTOGRADER_IPC_ROOT": str(sockets)}
    course = _class(tmp_path / "killed", released_course, helpers,
                    {"sleeper": ("solution", ["import time\ntime.sleep(300)"])})
    run = subprocess.Popen([sys.executable, "-m", "autograder", "grade", "ps1", "--course-dir", str(course),
                            "--workers", "1", "--cell-timeout", "400", "--notebook-timeout", "500"],
                           env=env, start_new_session=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 240
        started = (lambda: "ipc" in _kinds(sockets) and os.path.exists(course / "autograded"))
        while not started() and time.monotonic() < deadline:
            time.sleep(0.5)
        time.sleep(3)
        assert "ipc" in _kinds(sockets), "the kernel never started"
    finally:
        os.killpg(run.pid, signal.SIGKILL)
        run.wait()
    time.sleep(1)
    left = _ours(private_tmp) + _ours(sockets)
    assert _kinds(private_tmp, sockets) >= {"ipc", "conn", "db", "run"}, left
    owners = {name.split("-")[2] for name in left}
    dead_groups = [os.path.join(parent, name) for parent in cgroup._parents(cgroup.ROOT, "/proc/self/cgroup")
                   if os.path.isdir(parent) for name in os.listdir(parent)
                   if name.startswith("autograder-") and name.split("-")[1] in owners]
    probe = cgroup.create(0, 0)
    if probe is not None:  # cgroups are made here: the killed run's kernel left its group
        probe.remove()
        assert dead_groups, owners

    monkeypatch.setenv("TMPDIR", str(private_tmp))
    monkeypatch.setenv("AUTOGRADER_IPC_ROOT", str(sockets))
    monkeypatch.setattr(tempfile, "tempdir", None)
    following = _class(tmp_path / "next", released_course, helpers, {"ann": ("solution", [])})
    summary = grade(following, "ps1", workers=1, limits=helpers.TEST_LIMITS, progress=False)
    assert [row["status"] for row in summary.graded] == ["graded"]
    # what stays is this process's warm template, kept for its next run, with no kernel's folder in it
    assert _kinds(private_tmp, sockets) <= {"tpl", "tplf", "heldout"}, _kinds(private_tmp, sockets)
    assert _left_once_the_templates_stop(private_tmp) == [] and _ours(sockets) == []
    assert not [group for group in dead_groups if os.path.exists(group)], dead_groups

