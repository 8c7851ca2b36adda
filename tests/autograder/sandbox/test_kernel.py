"""The grading kernel's jail and limits (one kernel at a time, no Dask): what a submission can see, and that its
processes, memory, disk, output and time are capped for the whole submission (issue #11)."""
from __future__ import annotations

import dataclasses
import json
import os
import resource
import socket
import subprocess
import sys
import time

import pytest
from sandboxkit import LIMITS, errors, memory_hog_cells, run, text

import autograder
from autograder.sandbox import cgroup
from autograder.sandbox import jail
from autograder.course.units import GiB, MiB
from autograder.sandbox.kernel import kernel_manager_class, kernel_spec
from autograder.sandbox.limits import Limits

SHADOW = ("for name in ('autograder.py', 'solutions.py', 'coursekit.py', 'numpy.py'):\n"
          "    open(name, 'w').write('raise SystemExit(\"shadowed\")')")


def processes_with(marker: bytes) -> list[int]:
    found = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as fh:
                if marker in fh.read():
                    found.append(int(pid))
        except OSError:
            pass
    return found


def has_cgroups() -> bool:
    group = cgroup.create(64 * MiB, 16)
    if group is None:
        return False
    group.remove()
    return True


def test_sandbox_limits_and_imports(tmp_path):
    limits = Limits(cell_timeout=15, notebook_timeout=120, memory_bytes=2 * GiB, output_bytes=1000)
    nb, executor = run([
        SHADOW,
        "import coursekit, numpy\nprint(coursekit.__file__)\nprint(numpy.__file__)",
        "from provided import ANSWER\nprint(ANSWER)",
        "import numpy as np\nx = np.ones(4 * 1024**3 // 8)",
        "print('y' * 5000)",
        "import os\nprint(os.environ['NBGRADER_EXECUTION'], repr(os.environ['CUDA_VISIBLE_DEVICES']),"
        " os.environ['COURSE_JUDGE'])",
        "while True:\n    pass",
        "print('still alive')",
    ], tmp_path, limits)
    shown = text(nb.cells[1]).splitlines()
    assert errors(nb.cells[1]) == [] and "shadowed" not in text(nb.cells[1]), shown
    assert not any(line.startswith("/tmp/notebook") for line in shown), shown  # the installed packages won
    assert text(nb.cells[2]).strip() == "42"  # the working directory stays importable, last
    assert errors(nb.cells[3]) == ["MemoryError"]  # 4 GiB > the 2 GiB cap of one process
    assert len(text(nb.cells[4])) < 1000 and "output truncated by the grader" in text(nb.cells[4])
    assert text(nb.cells[5]).split() == ["autograde", "''", "1"]
    assert "CellTimeoutError" in errors(nb.cells[6])  # interrupted at the cell limit, then the kernel goes on
    assert text(nb.cells[7]).strip() == "still alive"
    assert any("output truncated" in note for note in executor.notes)


def test_the_jail_hides_the_grader_the_course_and_the_network(tmp_path, monkeypatch):
    """solutions/autograder cannot be imported or read, the course and gradebook cannot be seen, no network, and
    the worker's environment (secrets) does not reach the kernel."""
    solutions_file = os.path.realpath(__import__("importlib").util.find_spec("solutions").origin)
    autograder_file = os.path.realpath(autograder.__file__)
    course = tmp_path / "course"
    course.mkdir()
    (course / "gradebook.db").write_bytes(b"SQLite format 3\0")
    repo = os.path.dirname(os.path.dirname(autograder_file))
    monkeypatch.setenv("AUTOGRADER_DB", "postgresql://grader:secret@db/gradebook")
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen()
    port = server.getsockname()[1]
    probe = ("import os\ndef can(f, *a):\n    try:\n        f(*a)\n        return 'yes'\n"
             "    except Exception as exc:\n        return type(exc).__name__\n")
    try:
        nb, _ = run([
            "import solutions",
            "import autograder",
            probe + f"print(can(lambda: open({solutions_file!r}).read()),"
                    f" can(lambda: open({autograder_file!r}).read()))",
            probe + f"print(can(os.listdir, {str(course)!r}),"
                    f" can(lambda: open({str(course / 'gradebook.db')!r}).read()))",
            probe + f"print(can(os.listdir, {os.path.join(repo, '.git')!r}), sorted(os.listdir({repo!r})))",
            f"import socket\ns = socket.socket()\ns.settimeout(3)\ntry:\n    s.connect(('127.0.0.1', {port}))\n"
            "    print('connected')\nexcept OSError as exc:\n    print('no network:', exc)",
            "import os\nprint('AUTOGRADER_DB' in os.environ, os.getpid())",
        ], tmp_path)
    finally:
        server.close()
    assert errors(nb.cells[0]) == ["ModuleNotFoundError"] and errors(nb.cells[1]) == ["ModuleNotFoundError"]
    assert text(nb.cells[2]).split() == ["FileNotFoundError", "FileNotFoundError"]
    assert text(nb.cells[3]).split() == ["FileNotFoundError", "FileNotFoundError"]
    git, listing = text(nb.cells[4]).split(" ", 1)
    assert git == "FileNotFoundError"
    assert not {"solutions", "autograder", "course", ".git", "tests"} & set(eval(listing)), listing
    assert text(nb.cells[5]).startswith("no network")
    assert text(nb.cells[6]).split() == ["False", "2"]  # PID 2: the jail's own PID namespace (bwrap's init is 1)


# Reads every readable file of the jail's /proc (and every link's target) without blocking; prints the files
# holding any of the markers, then where /proc/1/fd/* lead, then writes a forged line to PID 1's stdout and stderr.
READ_ALL_OF_PROC = r"""
import json, os
markers = json.loads(MARKERS)
hits, read, seen = [], 0, set()
def look(path, data):
    for marker in markers:
        if marker.encode() in data:
            hits.append([path, marker])
for root, dirs, files in os.walk("/proc", followlinks=False):
    depth = root.count("/")
    dirs[:] = [d for d in dirs if depth < 5 and d not in ("self", "thread-self")]
    for name in files + [d for d in os.listdir(root) if os.path.islink(os.path.join(root, d))]:
        path = os.path.join(root, name)
        if path in seen or name in ("pagemap", "mem", "kcore", "kmsg", "clear_refs"):
            continue
        seen.add(path)
        try:
            look(path + " -> ", os.readlink(path).encode())
        except OSError:
            pass
        try:
            fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
        except OSError:
            continue
        try:
            look(path, os.read(fd, 1 << 20))
            read += 1
        except OSError:
            pass
        finally:
            os.close(fd)
print(json.dumps({"read": read, "hits": hits,
                  "pid1_fds": {fd: os.readlink(f"/proc/1/fd/{fd}") for fd in os.listdir("/proc/1/fd")}}))
for fd in ("1", "2"):
    try:
        with open(f"/proc/1/fd/{fd}", "w") as out:
            out.write("FORGED-LOG-LINE 110/110 graded\n")
    except OSError:
        pass
"""


def test_the_jails_proc_holds_nothing_of_the_grader(tmp_path, monkeypatch, capfd):
    """Issue #20, door 1: PID 1 of the jail (bwrap) carries no grader variable, path or terminal. Every readable
    file of the jail's /proc (environ, cmdline, fd links, mountinfo...) is read: no grader secret, no course path,
    and PID 1's stdin/stdout/stderr are /dev/null (a line written there reaches no grading log)."""
    secret = "grader-secret-5f0c2b9e"
    course = tmp_path / "my-course-folder"
    course.mkdir()
    monkeypatch.setenv("GRADEBOOK_URL", f"postgresql://grader:{secret}@db/gradebook")
    monkeypatch.setenv("COURSE_HOME", str(course))
    monkeypatch.setenv("OLDPWD", str(course))
    monkeypatch.chdir(course)
    markers = [secret, str(course)]
    nb, _ = run([f"MARKERS = {json.dumps(json.dumps(markers))}", READ_ALL_OF_PROC], tmp_path)
    assert errors(nb.cells[1]) == [], nb.cells[1].outputs
    found = json.loads(text(nb.cells[1]).splitlines()[0])
    assert found["read"] > 200, found  # it did read /proc (environ, cmdline, status... of PID 1 and 2, sys, ...)
    assert found["hits"] == [], found["hits"]
    assert set(found["pid1_fds"].values()) <= {"/dev/null"} | {v for v in found["pid1_fds"].values()
                                                                 if v.startswith(("socket:", "pipe:", "anon_inode:"))}
    assert all(found["pid1_fds"].get(fd) == "/dev/null" for fd in ("0", "1", "2")), found["pid1_fds"]
    captured = capfd.readouterr()
    assert "FORGED-LOG-LINE" not in captured.out + captured.err


def test_a_normal_install_hides_the_packages_inside_site_packages(tmp_path, monkeypatch):
    """In a non-editable install (the Docker images) solutions/ sits inside site-packages, which is bound: an
    empty tmpfs is mounted over it. Checked with a fake site-packages through bwrap itself."""
    site = tmp_path / "site-packages"
    (site / "solutions").mkdir(parents=True)
    (site / "solutions" / "__init__.py").write_text("SECRET = 1\n")
    (site / "coursekit_like.py").write_text("OK = 1\n")
    ro, hide, pythonpath, data = jail.view()
    fake = ((*ro, str(site)), (*hide, str(site / "solutions")), pythonpath, data)
    monkeypatch.setattr(jail, "view", lambda: fake)
    bwrap = jail.bwrap_path()
    ipc = tmp_path / "ipc"
    ipc.mkdir()
    code = (f"import os, sys; sys.path.insert(0, {str(site)!r}); import coursekit_like; "
            f"print(os.listdir({str(site / 'solutions')!r}))\n"
            "import solutions; print(getattr(solutions, 'SECRET', 'hidden'))")  # at most an empty namespace
    argv = jail.bwrap_command(bwrap, kernel_cmd=[sys.executable, "-s", "-c", code], ipc_dir=str(ipc),
                              notebook_src=str(tmp_path), disk_bytes=16 * MiB, env={})
    out = subprocess.run(argv, capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["[]", "hidden"], out.stdout


def test_view_is_computed_from_where_the_packages_resolve(monkeypatch):
    """Editable install (this clone): coursekit and data/ are bound alone, solutions/autograder are simply not bound.
    Normal install: all three resolve inside the environment (or /usr/local), and the hidden two are covered."""
    jail.view.cache_clear()
    ro, hide, pythonpath, data = jail.view()
    repo = os.path.dirname(os.path.dirname(os.path.realpath(autograder.__file__)))
    assert os.path.join(repo, "coursekit") in ro and pythonpath == (repo,)
    assert not any(p in (repo, os.path.join(repo, "solutions"), os.path.join(repo, "autograder")) for p in ro)
    assert hide == () and data == os.path.join(repo, "data")
    site = os.path.join(os.path.realpath(sys.prefix), "lib", "site-packages")
    for prefix in (site, "/usr/local/lib/python3.11/site-packages"):
        monkeypatch.setattr(jail, "_package_dirs", lambda name, prefix=prefix: [os.path.join(prefix, name)])
        jail.view.cache_clear()
        ro, hide, pythonpath, _ = jail.view()
        assert hide == (os.path.join(prefix, "solutions"), os.path.join(prefix, "autograder")), hide
        assert pythonpath == () and not any(p.startswith(prefix + "/") for p in ro)
    jail.view.cache_clear()


def test_notebook_folder_is_a_private_copy_and_the_disk_is_capped(tmp_path):
    nb, _ = run([
        "import os\nprint(os.getcwd(), sorted(os.listdir('.')))",
        "open('provided.py', 'w').write('ANSWER = 0')\nopen('new.txt', 'w').write('x')",
        "chunk = b'x' * 1024**2\ntry:\n    with open('big.bin', 'wb') as fh:\n        for _ in range(200):\n"
        "            fh.write(chunk)\nexcept OSError as exc:\n    print(type(exc).__name__, exc.errno)",
        "try:\n    open('/tmp/other.bin', 'wb').write(b'x' * 100 * 1024**2)\nexcept OSError as exc:\n"
        "    print(type(exc).__name__, exc.errno)",
        "import os\nprint(os.statvfs('/tmp').f_blocks * os.statvfs('/tmp').f_frsize)",
    ], tmp_path)
    assert text(nb.cells[0]).split() == ["/tmp/notebook", "['provided.py']"]
    assert text(nb.cells[2]).split() == ["OSError", "28"]  # ENOSPC at the 64 MiB cap
    assert text(nb.cells[3]).split()[0] == "OSError"
    assert int(text(nb.cells[4])) == LIMITS.disk_bytes
    assert sorted(os.listdir(tmp_path / "nb")) == ["provided.py"]  # nothing came back to the worker's copy
    assert (tmp_path / "nb" / "provided.py").read_text() == "ANSWER = 42\n"


def test_every_process_dies_with_the_notebook(tmp_path):
    marker = b"31337"
    nb, _ = run([
        "import os, subprocess\n"
        "for _ in range(5):\n"  # detached, ignoring hang-ups and SIGTERM: the classic way to outlive a kernel
        "    subprocess.Popen(['sh', '-c', 'trap \"\" HUP TERM; exec sleep 31337'], start_new_session=True)\n"
        "pid = os.fork()\nif pid == 0:\n    os.setsid()\n    os.execvp('sleep', ['sleep', '31337'])\nprint('spawned')",
    ], tmp_path)
    assert text(nb.cells[0]).strip() == "spawned"
    deadline = time.monotonic() + 10
    while processes_with(marker) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert processes_with(marker) == []


def test_a_loop_that_ignores_sigint_is_killed(tmp_path):
    started = time.monotonic()
    nb, executor = run([
        "import subprocess\nsubprocess.Popen(['sleep', '31338'])",
        "import signal\nsignal.signal(signal.SIGINT, signal.SIG_IGN)\nwhile True:\n    pass",
        "print('never')",
    ], tmp_path)
    elapsed = time.monotonic() - started
    assert errors(nb.cells[1]) == ["CellTimeoutError"] and "SIGKILL" in nb.cells[1].outputs[-1]["evalue"]
    assert errors(nb.cells[2]) == ["SubmissionKilled"] and "never" not in text(nb.cells[2])
    assert executor.killed
    assert elapsed < LIMITS.cell_timeout + LIMITS.interrupt_grace + 20, elapsed  # + kernel start, on a busy box
    assert processes_with(b"31338") == []


@pytest.mark.skipif(not has_cgroups(), reason="no writable cgroup here: the per-process fallback applies")
def test_a_kernel_that_stops_slowly_without_using_cpu_is_not_killed(tmp_path):
    """The interrupt's grace counts the submission's CPU seconds: a kernel that gets no CPU for longer than the grace
    in wall seconds (here it sleeps, as a starved kernel on a busy machine waits) stops in time; CI once killed an
    interrupted `while True: pass` whose traceback took more than the grace's wall seconds to format."""
    limits = dataclasses.replace(LIMITS, cell_timeout=2)
    nb, executor = run([
        "import time\ntry:\n    while True:\n        pass\nexcept KeyboardInterrupt:\n"
        f"    time.sleep({limits.interrupt_grace + 2})\n    raise",
        "print('after')",
    ], tmp_path, limits)
    said = [o["evalue"] for o in nb.cells[0].outputs if o.get("ename") == "CellTimeoutError"]
    assert len(said) == 1 and said[0].endswith("and was interrupted.") and not executor.killed, said
    assert text(nb.cells[1]).strip() == "after"


@pytest.mark.skipif(not has_cgroups(), reason="no writable cgroup here: the per-process fallback applies")
def test_total_memory_of_the_submission_is_capped(tmp_path):
    """Four children of 300 MiB each (each well under the 2 GiB per-process cap) under an 800 MiB total cap."""
    limits = Limits(cell_timeout=60, notebook_timeout=120, memory_bytes=800 * MiB, processes=64)
    nb, _ = run(memory_hog_cells(300), tmp_path, limits)
    codes = text(nb.cells[0]).split()
    assert len(codes) == 4 and "-9" in codes, codes  # the OOM killer of the submission's cgroup
    assert text(nb.cells[1]).strip() == "kernel alive"


@pytest.mark.skipif(not has_cgroups(), reason="no writable cgroup here: the per-process fallback applies")
def test_process_count_of_the_submission_is_capped(tmp_path):
    nb, _ = run([
        "import subprocess\nchildren = []\ntry:\n    for _ in range(500):\n"
        "        children.append(subprocess.Popen(['sleep', '31339']))\nexcept OSError as exc:\n"
        "    print('refused after', len(children))\nfor c in children:\n    c.kill()\n    c.wait()",
        "print('kernel alive')",
    ], tmp_path)
    refused = text(nb.cells[0]).split()
    assert refused[:2] == ["refused", "after"] and int(refused[2]) < LIMITS.processes, refused
    assert text(nb.cells[1]).strip() == "kernel alive"


def test_fallback_without_cgroups_caps_processes_per_user(tmp_path, monkeypatch, caplog):
    """Where no cgroup can be made (AUTOGRADER_CGROUPS=0 stands in for an unprivileged pod), the launcher sets
    RLIMIT_NPROC instead, and a log line says the total memory is not capped."""
    monkeypatch.setenv("AUTOGRADER_CGROUPS", "0")
    cgroup._warned.clear()
    with caplog.at_level("WARNING", logger="autograder.grade"):
        nb, _ = run(["import resource\nprint(resource.getrlimit(resource.RLIMIT_NPROC)[0])"], tmp_path)
    assert int(text(nb.cells[0])) == LIMITS.processes
    assert any("falling back to per-process limits" in r.getMessage() for r in caplog.records)
    assert cgroup.create(MiB, 4, root=str(tmp_path)) is None  # and no cgroup where none is writable


def test_total_output_of_the_notebook_is_capped(tmp_path):
    limits = Limits(cell_timeout=10, notebook_timeout=90, memory_bytes=2 * GiB, output_bytes=10_000,
                    notebook_output_bytes=50_000)
    nb, executor = run(["print('p' * 9000)"] * 10 + ["raise ValueError('e' * 9000)"] * 10
                       + ["from IPython.display import display, update_display\n"
                          "display('start', display_id='d')\nfor _ in range(50):\n"
                          "    update_display('u' * 9000, display_id='d')"],
                       tmp_path, limits)
    size = sum(len(json.dumps(o)) for c in nb.cells for o in c.outputs)
    assert size < 50_000 + 20 * 1000, size  # the cap, plus a short note or error per cell
    kept = [c for c in nb.cells[:10] if "p" * 9000 in text(c)]
    assert 3 <= len(kept) <= 6, len(kept)
    assert all(errors(c) == ["ValueError"] for c in nb.cells[10:20])  # errors always kept (they decide scores)
    assert len(nb.cells[19].outputs[0]["evalue"]) <= 500
    assert any("whole notebook" in text(c) for c in nb.cells[5:])


def test_a_print_flushed_in_pieces_is_one_output_whatever_the_timing(tmp_path):
    """A busy kernel flushes a `print` in pieces (one stream message each): the graded notebook keeps one output per
    run of one stream, so that what reads it (the leak scan, feedback) sees the printed line whole."""
    nb, _ = run(["import sys, time\n"
                 "for piece in ('MARK one', ' two', ' three\\n'):\n"
                 "    sys.stdout.write(piece); sys.stdout.flush(); time.sleep(0.3)\n"
                 "sys.stderr.write('warned\\n'); sys.stderr.flush(); time.sleep(0.3)\n"
                 "print('after')"], tmp_path, dataclasses.replace(LIMITS, output_bytes=100_000))
    outputs = [(o["name"], o["text"]) for o in nb.cells[0].outputs]
    assert outputs == [("stdout", "MARK one two three\n"), ("stderr", "warned\n"), ("stdout", "after\n")], outputs


def rss_bytes() -> int:
    with open("/proc/self/statm") as fh:
        return int(fh.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def peak_rss_growth(fn):
    """(fn(), how far this process's resident memory rose above where it started while fn ran), sampled."""
    import threading

    start, peak, done = rss_bytes(), [0], threading.Event()

    def sample():
        while not done.is_set():
            peak[0] = max(peak[0], rss_bytes())
            time.sleep(0.02)

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    try:
        result = fn()
    finally:
        done.set()
        sampler.join()
    return result, max(0, peak[0] - start)


# Messages the kernel sends itself (its session), shaped to slip past a cap that looked at one field only.
FORGED_MESSAGES = r"""
kernel = get_ipython().kernel
parent = kernel.get_parent("shell")
def send(msg_type, content, metadata=None):
    kernel.session.send(kernel.iopub_socket, msg_type, content, parent=parent, metadata=metadata or {})
big = "x" * (4 * 1024**2)
for i in range(6):
    send("display_data", {"text": "", "data": {"text/plain": big}, "metadata": {}})  # an empty "text" beside 4 MB
    send("display_data", {"data": {"text/plain": "small"}, "metadata": {"m": big}})  # 4 MB of metadata
    send("update_display_data", {"data": {"text/plain": big}, "metadata": {}, "transient": {"display_id": "d"}})
    send("comm_open", {"comm_id": f"c{i}", "target_name": "jupyter.widget", "data": {"state": {"v": big}}})
    send("stream", {"name": "stdout", "text": "", "data": big})
print("sent")
"""


def test_every_byte_of_every_message_counts_and_big_ones_are_never_decoded(tmp_path):
    """Issue #20, door 2: 120 MB of output hidden beside an empty "text", in metadata, display updates, widget
    state and unknown fields: the notebook stays under its cap, the truncation is noted, and the grader's memory
    does not grow with what the kernel sent (messages over the cap are measured, never parsed)."""
    limits = Limits(cell_timeout=60, notebook_timeout=120, memory_bytes=2 * GiB, output_bytes=64 * 1024,
                    notebook_output_bytes=256 * 1024)
    (nb, executor), growth = peak_rss_growth(lambda: run(
        ["from IPython.display import display\ndisplay('start', display_id='d')", FORGED_MESSAGES, "print('after')"],
        tmp_path, limits))
    size = len(json.dumps(nb)) + len(json.dumps(executor.widget_state))
    assert size < limits.notebook_output_bytes + 10_000, size
    assert "sent" in text(nb.cells[1]) and "after" in text(nb.cells[2])
    assert "output truncated by the grader" in text(nb.cells[1])
    dropped = int(text(nb.cells[1]).split("truncated by the grader: ")[1].split()[0])
    assert dropped >= 24 * 4 * 1024**2, dropped  # every byte of every output message (24 of 4 MiB) was counted
    assert nb.metadata.get("widgets") is None and executor.widget_state == {}
    assert growth < 60 * 1024**2, f"the grader grew by {growth / 1024**2:.0f} MiB"


def test_notebook_deadline_stops_later_cells(tmp_path):
    limits = Limits(cell_timeout=30, notebook_timeout=4, memory_bytes=2 * GiB)
    nb, _ = run(["import time\nend = time.process_time() + 10\nwhile time.process_time() < end:\n    pass",
                 "print('never')"], tmp_path, limits)
    assert errors(nb.cells[1]) == ["NotebookTimeout"]
    assert "never" not in text(nb.cells[1])


def test_gpu_kernel_is_pinned_and_capped_on_its_data_segment(tmp_path):
    """A kernel given GPU "1" sees only that GPU, and its memory cap moves from RLIMIT_AS to RLIMIT_DATA (CUDA maps
    far more address space than it uses). No GPU is needed to check what the kernel is started with (the
    /dev/nvidia* binds of the jail are not exercised here: no GPU on these machines)."""
    limits = Limits(cell_timeout=20, notebook_timeout=60, memory_bytes=2 * GiB)
    nb, _ = run(["import os, resource\n"
                 "print(os.environ['CUDA_VISIBLE_DEVICES'], resource.getrlimit(resource.RLIMIT_DATA)[0],"
                 " resource.getrlimit(resource.RLIMIT_AS)[0])"], tmp_path, limits, gpu="1")
    assert text(nb.cells[0]).split() == ["1", str(2 * GiB), str(resource.RLIM_INFINITY)]


def test_grading_refuses_without_bubblewrap(tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", str(tmp_path))  # no bwrap on PATH
    with pytest.raises(jail.JailUnavailable, match="apt-get install bubblewrap"):
        kernel_manager_class(kernel_spec(LIMITS), LIMITS)
    monkeypatch.setenv(jail.UNSAFE_ENV, "1")  # the explicit opt-out: no jail, no error
    assert kernel_manager_class(kernel_spec(LIMITS), LIMITS) is not None


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


def test_a_socket_folder_too_deep_for_a_unix_socket_is_refused_and_leaves_nothing(tmp_path, monkeypatch):
    """A Unix socket's path has at most 107 bytes: a too long $AUTOGRADER_IPC_ROOT gets an error that names the
    variable, instead of a kernel that never answers, and no folder is left behind."""
    import asyncio

    from autograder.sandbox import scratch
    from autograder.sandbox.kernel import MAX_SOCKET_PATH

    deep = tmp_path / ("d" * 60) / ("e" * 60)
    deep.mkdir(parents=True)
    monkeypatch.setenv(scratch.SOCKET_ROOT_ENV, str(deep))
    monkeypatch.setenv("TMPDIR", str(tmp_path))
    monkeypatch.setattr(scratch.tempfile, "tempdir", None)
    manager = kernel_manager_class(kernel_spec(LIMITS), LIMITS)()
    with pytest.raises(ValueError, match=rf"longer than the {MAX_SOCKET_PATH} bytes .*{scratch.SOCKET_ROOT_ENV}"):
        asyncio.run(manager._async_pre_start_kernel())
    assert os.listdir(deep) == [] and not [n for n in os.listdir(tmp_path) if n.startswith("ag-")]
    assert manager.ipc_dir is None and manager.submission_cgroup is None
