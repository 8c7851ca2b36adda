"""The warm template (autograder/sandbox/zygote.py, issue #48): each kernel forked from it is jailed as a cold one
is, nothing of one submission reaches the next, and a template that dies or stops answering is replaced."""
from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time

import pytest
from nbclient.exceptions import DeadKernelError
from sandboxkit import LIMITS, errors, memory_hog_cells, run, text

from autograder.course.units import GiB, MiB
from autograder.sandbox import jail, scratch, zygote
from autograder.sandbox.kernel import kernel_manager_class, kernel_spec

WARM = dataclasses.replace(LIMITS, warm_template=True, output_bytes=100_000)
COLD = dataclasses.replace(LIMITS, warm_template=False, output_bytes=100_000)

# What a kernel can tell of its jail, as one line of JSON.
JAIL_FACTS = r"""
import ctypes, json, os, resource, socket
status = dict(line.split(":", 1) for line in open("/proc/self/status").read().splitlines())
libc = ctypes.CDLL(None, use_errno=True)
def listing(top):
    found = []
    for folder, dirs, files in os.walk(top):
        found += [os.path.relpath(os.path.join(folder, n), top) for n in dirs + files]
    return sorted(found)
facts = {
    "pid": os.getpid(), "hostname": socket.gethostname(), "cwd": os.getcwd(),
    "caps": {k: status[k].strip() for k in ("CapInh", "CapPrm", "CapEff", "CapBnd", "CapAmb")},
    "no_new_privs": status["NoNewPrivs"].strip(),
    "pids": sorted(int(p) for p in os.listdir("/proc") if p.isdigit()),
    "interfaces": [name for _, name in socket.if_nameindex()],
    "new_user_namespace": libc.unshare(0x10000000) == 0,
    "new_mount_namespace": libc.unshare(0x00020000) == 0,
    "rlimits": {n: resource.getrlimit(getattr(resource, n))[0] for n in ("RLIMIT_AS", "RLIMIT_FSIZE", "RLIMIT_CORE")},
    "shm": listing("/dev/shm"), "notebook": listing("."),
    "tmp_ag": {n: listing("/tmp/" + n) for n in os.listdir("/tmp") if n.startswith("ag-")},
    "user": [os.getuid(), os.getgid()],
}
print(json.dumps(facts))
"""


def facts(tmp_path, limits):
    nb, _ = run([JAIL_FACTS], tmp_path, limits)
    assert errors(nb.cells[0]) == [], nb.cells[0].outputs
    return json.loads(text(nb.cells[0]).splitlines()[0])


def folder(tmp_path, name):
    (tmp_path / name).mkdir()
    return tmp_path / name


def the_template():
    """The one template this test process has started."""
    assert len(zygote._templates) == 1, zygote._templates
    return next(iter(zygote._templates.values()))


def test_a_kernel_from_the_template_is_jailed_as_a_cold_one_is(tmp_path):
    warm, cold = facts(tmp_path, WARM), facts(tmp_path, COLD)
    made = the_template()
    for seen in (warm, cold):
        assert seen["pid"] == 2 and seen["pids"] == [1, 2], seen  # its own PID namespace: init and the kernel
        assert seen["hostname"] == "jail" and seen["cwd"] == jail.NOTEBOOK_DIR
        assert set(seen["caps"].values()) == {"0000000000000000"} and seen["no_new_privs"] == "1", seen
        assert seen["interfaces"] == ["lo"]  # no network
        assert not seen["new_user_namespace"] and not seen["new_mount_namespace"]
        assert seen["rlimits"] == {"RLIMIT_AS": LIMITS.memory_bytes, "RLIMIT_FSIZE": LIMITS.disk_bytes,
                                   "RLIMIT_CORE": 0}
        assert seen["notebook"] == ["provided.py"]
    apart = ("shm", "tmp_ag")
    assert {k: v for k, v in warm.items() if k not in apart} == {k: v for k, v in cold.items() if k not in apart}
    # of the template's exchange folders, the kernel sees its own socket and connection folders only: no socket
    # of the template, no program, no log, no other kernel's folder, no copy of a submission
    exchange = os.path.relpath(made.exchange, "/dev/shm")
    sockets = warm["shm"][1]
    assert warm["shm"][0] == exchange and sockets.startswith(f"{exchange}/ag-ipc-"), warm["shm"]
    assert all(p.startswith(f"{sockets}/k-") for p in warm["shm"][2:]), warm["shm"]
    files = os.path.relpath(made.files, tempfile.gettempdir())
    assert list(warm["tmp_ag"]) == [files], warm["tmp_ag"]
    connection, kernel_json = warm["tmp_ag"][files]
    assert connection.startswith("ag-conn-") and kernel_json == f"{connection}/kernel.json", warm["tmp_ag"]
    assert [name.split("-")[1] for name in cold["tmp_ag"]] == ["conn"], cold["tmp_ag"]
    assert made.modules > 1000 and made.alive()


def test_nothing_of_one_submission_reaches_the_next(tmp_path):
    """A submission that rewrites sys.modules, module globals, torch's global state and files under every
    writable mount, graded before an honest one on the same worker: the honest one's outputs are those of a run
    alone, warm or cold."""
    hostile = [
        "import builtins, sys, numpy, torch, coursekit, matplotlib\n"
        "numpy.HOSTILE = torch.HOSTILE = coursekit.HOSTILE = matplotlib.HOSTILE = 1\n"
        "torch.manual_seed(666); torch.set_default_dtype(torch.float64); torch.set_num_threads(3)\n"
        "sys.modules['json'] = None; sys.modules['numpy'].pi = 3\n"
        "builtins.HOSTILE = 1; sys.path.insert(0, '/tmp/hostile')",
        # a file in every folder of every writable mount
        "import os\nwritten = 0\n"
        "for line in open('/proc/self/mountinfo'):\n"
        "    fields = line.split()\n"
        "    if 'rw' not in fields[5].split(',') or fields[4].startswith(('/proc', '/dev/pts', '/dev/mqueue')):\n"
        "        continue\n"
        "    for folder, dirs, files in os.walk(fields[4]):\n"
        "        try:\n"
        "            open(os.path.join(folder, 'hostile.py'), 'w').write('HOSTILE = 1')\n"
        "            written += 1\n"
        "        except OSError:\n"
        "            pass\n"
        "print('written', written)",
    ]
    honest = [
        "import builtins, sys, os, numpy, torch, coursekit, matplotlib\n"
        "import json\n"
        "seen = {'hostile': [hasattr(m, 'HOSTILE') for m in (numpy, torch, coursekit, matplotlib, builtins)],\n"
        "        'pi': numpy.pi, 'dtype': str(torch.get_default_dtype()), 'threads': torch.get_num_threads(),\n"
        "        'seeded': torch.initial_seed() == 666, 'path': [p for p in sys.path if 'hostile' in p]}\n"
        "files = []\n"
        "for top in ('/tmp', '/dev/shm', '/run'):\n"
        "    for folder, dirs, names in os.walk(top):\n"
        "        files += [n for n in names if n == 'hostile.py']\n"
        "seen['files'] = files\n"
        "print(json.dumps(seen))",
    ]
    alone, _ = run(honest, folder(tmp_path, "alone"), WARM)
    template = the_template()
    attacked, _ = run(hostile, folder(tmp_path, "hostile"), WARM)
    assert int(text(attacked.cells[1]).split()[1]) > 0  # it did write (its own /tmp, /dev/shm, socket folder)
    after, _ = run(honest, folder(tmp_path, "after"), WARM)
    cold, _ = run(honest, folder(tmp_path, "cold"), COLD)
    outputs = [json.loads(text(nb.cells[0])) for nb in (alone, after, cold)]
    assert outputs[0] == outputs[1] == outputs[2], outputs
    assert outputs[0]["hostile"] == [False] * 5 and outputs[0]["files"] == [] and outputs[0]["threads"] == 1
    assert not outputs[0]["seeded"]
    assert the_template() is template and template.alive()  # the same template served all three


def test_each_kernel_seeds_its_generators_as_a_fresh_interpreter_does(tmp_path):
    """Unseeded draws differ from one kernel to the next (torch, numpy and random seed at random in a new
    process), instead of repeating the template's state."""
    cell = "import random, numpy, torch\nprint(random.random(), numpy.random.rand(), torch.rand(1).item())"
    draws = [text(run([cell], folder(tmp_path, str(i)), WARM)[0].cells[0]).split() for i in range(2)]
    assert all(a != b for a, b in zip(*draws)), draws


def test_a_warm_kernel_starts_with_the_templates_objects_frozen_and_still_collects_its_own(tmp_path):
    """The template freezes what it imported before forking (gc.freeze): a kernel's collections skip those objects
    and leave their pages shared. Its own garbage is still collected; a cold kernel has nothing frozen."""
    cell = ("import gc, weakref\nclass Node: pass\na, b = Node(), Node()\na.other, b.other = b, a\n"
            "alive = weakref.ref(a)\ndel a, b\ngc.collect()\nprint(gc.get_freeze_count(), alive() is None)")
    warm = text(run([cell], folder(tmp_path, "warm"), WARM)[0].cells[0]).split()
    cold = text(run([cell], folder(tmp_path, "cold"), COLD)[0].cells[0]).split()
    assert int(warm[0]) > 100_000 and warm[1] == "True", warm
    assert cold == ["0", "True"], cold


def test_a_kernel_that_is_killed_spins_or_fills_its_disk_leaves_the_template_serving(tmp_path):
    run(["print('warm')"], tmp_path, WARM)
    template = the_template()
    nb, _ = run([
        "n = 0\ntry:\n    with open('/tmp/fill', 'wb') as fh:\n        while True:\n"
        "            fh.write(b'x' * (1 << 20)); n += 1\nexcept OSError as exc:\n    print('full', type(exc).__name__)",
        "while True:\n    pass",
    ], folder(tmp_path, "fill"), dataclasses.replace(WARM, cell_timeout=3, disk_bytes=32 * MiB))
    assert text(nb.cells[0]).startswith("full")
    assert "CellTimeoutError" in errors(nb.cells[1])
    with pytest.raises(DeadKernelError):
        run(["import os, signal\nos.kill(os.getpid(), signal.SIGKILL)"], folder(tmp_path, "kill"), WARM)
    made = the_template()
    assert made is template and made.healthy()
    nb, _ = run(["from provided import ANSWER\nprint(ANSWER)"], tmp_path, WARM)
    assert text(nb.cells[0]).strip() == "42" and the_template() is made


def test_a_template_that_died_or_stopped_answering_is_replaced(tmp_path, monkeypatch):
    monkeypatch.setattr(zygote, "PING_TIMEOUT", 2.0)
    nb, _ = run(["print('first')"], tmp_path, WARM)
    first = the_template()
    first.process.kill()  # bwrap, its PID 1: the template and its namespace go
    first.process.wait(10)
    nb, _ = run(["print('second')"], tmp_path, WARM)
    second = the_template()
    assert text(nb.cells[0]).strip() == "second" and second is not first and not os.path.exists(first.exchange)
    group = os.getpgid(second.process.pid)
    os.killpg(group, signal.SIGSTOP)  # alive, but answers nothing
    try:
        assert not second.healthy()
        made = zygote.template(second.env)
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(group, signal.SIGCONT)
    assert made is not None and made is not second and made.healthy()


def test_the_template_is_not_used_where_it_is_turned_off_does_not_fit_or_a_gpu_is_assigned(tmp_path):
    def used(limits, gpu=None) -> bool:
        manager = kernel_manager_class(kernel_spec(limits, gpu), limits)()
        return manager._template() is not None

    assert used(WARM)
    assert not used(COLD)
    assert not used(WARM, gpu="0")  # GPU workers start cold (CUDA in a forked process is not safe)
    made = the_template()
    assert not used(dataclasses.replace(WARM, memory_bytes=made.address_space_bytes + 64 * MiB))
    assert used(dataclasses.replace(WARM, memory_bytes=made.address_space_bytes + zygote.ADDRESS_SPACE_HEADROOM))
    assert used(dataclasses.replace(WARM, memory_bytes=0))
    nb, _ = run(["print(open('/proc/1/cmdline').read().split(chr(0))[0])"], tmp_path, COLD)
    assert os.path.basename(text(nb.cells[0]).strip()) == "bwrap"  # a cold kernel's jail is bwrap's


def test_the_total_memory_of_a_warm_submission_is_capped(tmp_path):
    """The template's pages are not the submission's, but everything it allocates is: four children of 600 MiB
    under a 2 GiB total cap."""
    limits = dataclasses.replace(WARM, cell_timeout=60, memory_bytes=2 * GiB)
    nb, _ = run(memory_hog_cells(600), tmp_path, limits)
    assert the_template().alive()
    codes = text(nb.cells[0]).split()
    assert len(codes) == 4 and "-9" in codes, codes  # the OOM killer of the submission's cgroup
    assert text(nb.cells[1]).strip() == "kernel alive"


@pytest.fixture(autouse=True)
def one_template_per_test():
    """Each test starts with no template and leaves none."""
    zygote.stop_all()
    zygote._failed.clear()
    yield
    zygote.stop_all()


def test_the_template_ends_with_its_worker_even_a_killed_one(tmp_path):
    """Its lifeline is a pipe the worker holds: a worker killed with SIGKILL takes the template's jail with it, and
    the next run's sweep removes the exchange folder it left."""
    script = ("import json, sys\nfrom autograder.sandbox import jail, scratch, zygote\n"
              "made = zygote.template(jail.kernel_env({'JPY_PARENT_PID': '1'}))\n"
              "print(json.dumps([made.process.pid, made.exchange]), flush=True)\nimport time\ntime.sleep(600)")
    worker = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True)
    try:
        bwrap_pid, exchange = json.loads(worker.stdout.readline())
        assert os.path.exists(f"/proc/{bwrap_pid}") and os.path.isdir(exchange)
    finally:
        worker.kill()
        worker.wait()
    deadline = time.monotonic() + 30
    while os.path.exists(f"/proc/{bwrap_pid}") and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not os.path.exists(f"/proc/{bwrap_pid}")
    assert exchange in scratch.sweep(force=True) and not os.path.exists(exchange)


def test_what_the_view_binds_under_tmp_stays_in_a_warm_kernels_view(tmp_path, monkeypatch):
    """A clone or a virtual environment under /tmp (where CI clones): the kernel's own /tmp does not cover them,
    and they stay read-only, as in a cold jail, which mounts its /tmp first and binds on top."""
    shelf = tempfile.mkdtemp(dir="/tmp", prefix="ag-test-view-")
    try:
        os.mkdir(os.path.join(shelf, "pkg"))
        with open(os.path.join(shelf, "pkg", "shelved.py"), "w") as fh:
            fh.write("WHERE = 'on the shelf'\n")
        folder = os.path.join(shelf, "pkg")
        for name, words in (("held.txt", "the whole text"), ("masked.txt", "the masked copy")):
            with open(os.path.join(shelf, name if name == "masked.txt" else f"pkg/{name}"), "w") as fh:
                fh.write(words)
        ro, hide, pythonpath, data = jail.view()
        monkeypatch.setattr(jail, "view", lambda: ((*ro, folder), hide, pythonpath, data))
        # a file bound over one inside a folder bound just before, as the held-out texts are in the data folder
        monkeypatch.setattr(jail, "held_out_texts", lambda _data: [os.path.join(folder, "held.txt")])
        monkeypatch.setattr(jail, "masked_text_file", lambda _source: os.path.join(shelf, "masked.txt"))
        nb, _ = run([f"import sys\nsys.path.insert(0, {folder!r})\nimport shelved\nprint(shelved.WHERE)",
                     f"open({os.path.join(folder, 'new.txt')!r}, 'w')",
                     f"print(open({os.path.join(folder, 'held.txt')!r}).read())"], tmp_path, WARM)
        assert text(nb.cells[0]).strip() == "on the shelf", nb.cells[0].outputs
        assert errors(nb.cells[1]) == ["OSError"], nb.cells[1].outputs
        assert text(nb.cells[2]).strip() == "the masked copy", nb.cells[2].outputs
        assert zygote._templates and not zygote._failed  # warm (a cold kernel's launcher would not see the patch)
    finally:
        shutil.rmtree(shelf)
