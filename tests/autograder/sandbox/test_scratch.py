"""Temporary folders of a grading run (issue #32, door 4): owned, removed even when a submission locked them, and
swept by the next run when their worker died."""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile

from autograder.sandbox import ownership, scratch

MAKE_FOLDERS = """
import os, sys
from autograder.sandbox import ownership, scratch
for kind in ("ipc", "db", "run"):
    path = scratch.mkdtemp(kind, sys.argv[1])
    open(os.path.join(path, "left"), "w").write("x")
print(ownership.owner())
"""


LOCK_AND_REMOVE = """
import os, shutil, sys
from autograder.sandbox import scratch
if os.geteuid() == 0:  # as a grader without root: a folder at mode 0 cannot be entered
    os.setgid(65534)
    os.setuid(65534)
paths = []
for _ in range(2):
    path = scratch.mkdtemp("ipc", sys.argv[1])
    locked = os.path.join(path, "a", "b")
    os.makedirs(locked)
    open(os.path.join(locked, "f"), "w").write("x")
    os.chmod(locked, 0)
    os.chmod(os.path.join(path, "a"), 0)
    paths.append(path)
shutil.rmtree(paths[0], ignore_errors=True)  # what the worker did before
print(os.path.exists(paths[0]), scratch.remove(paths[1]), os.path.exists(paths[1]))
"""


def test_a_folder_locked_by_the_submission_is_still_removed():
    root = tempfile.mkdtemp(prefix="agtest-")  # not under pytest's folder, which only its owner may enter
    os.chmod(root, 0o777)
    try:
        done = subprocess.run([sys.executable, "-c", LOCK_AND_REMOVE, root], capture_output=True, text=True)
    finally:
        shutil.rmtree(root)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["True", "True", "False"]  # rmtree alone left it; remove() did not


def test_names_carry_a_live_owner(tmp_path):
    path = scratch.mkdtemp("run", str(tmp_path))
    name = os.path.basename(path)
    assert name.startswith(f"ag-run-{ownership.owner()}-")
    assert ownership.owner_alive(name)
    assert os.stat(path).st_mode & 0o777 == 0o700


def test_the_next_run_sweeps_what_a_dead_worker_left(tmp_path, monkeypatch):
    monkeypatch.setattr(scratch, "roots", lambda: [str(tmp_path)])
    dead = subprocess.run([sys.executable, "-c", MAKE_FOLDERS, str(tmp_path)], capture_output=True, text=True,
                          check=True).stdout.strip()
    mine = scratch.mkdtemp("db", str(tmp_path))
    other = tmp_path / "not-ours"
    other.mkdir()
    left = sorted(p for p in os.listdir(tmp_path) if dead in p)
    assert len(left) == 3 and not ownership.owner_alive(left[0])
    removed = scratch.sweep(force=True)
    assert sorted(os.path.basename(p) for p in removed if p.startswith(str(tmp_path))) == left
    assert sorted(os.listdir(tmp_path)) == sorted([os.path.basename(mine), "not-ours"])


def test_inside_a_live_warm_template_the_next_run_sweeps_what_a_dead_worker_left(tmp_path, monkeypatch):
    """A worker killed while its kernel ran (forked from a template its grading process keeps: zygote.py) left its
    kernel's folders inside the template's folders; they go, the template's and a live worker's stay."""
    monkeypatch.setattr(scratch, "roots", lambda: [str(tmp_path)])
    template = scratch.mkdtemp("tpl", str(tmp_path))  # kept by this process, which runs
    dead = subprocess.run([sys.executable, "-c", MAKE_FOLDERS, template], capture_output=True, text=True,
                          check=True).stdout.strip()
    live_kernel = scratch.mkdtemp("ipc", template)
    open(os.path.join(template, "t.sock"), "w").close()
    left = sorted(p for p in os.listdir(template) if dead in p)
    assert len(left) == 3
    removed = scratch.sweep(force=True)
    assert sorted(os.path.basename(p) for p in removed if p.startswith(template)) == left
    assert sorted(os.listdir(template)) == sorted([os.path.basename(live_kernel), "t.sock"])
    assert os.listdir(tmp_path) == [os.path.basename(template)]


def test_legacy_template_folders_go_once_old(tmp_path, monkeypatch):
    monkeypatch.setattr(scratch, "roots", lambda: [str(tmp_path)])
    old, new = tmp_path / "ag-template-old1", tmp_path / "ag-template-new1"
    old.mkdir()
    new.mkdir()
    past = os.stat(old).st_mtime - 2 * scratch.LEGACY_TEMPLATE_AGE
    os.utime(old, (past, past))
    scratch.sweep(force=True)
    assert sorted(os.listdir(tmp_path)) == ["ag-template-new1"]


def test_sockets_go_to_a_tmpfs(monkeypatch, tmp_path):
    monkeypatch.delenv(scratch.SOCKET_ROOT_ENV, raising=False)
    root = scratch.socket_root()
    if os.path.isdir("/dev/shm") and os.access("/dev/shm", os.W_OK):
        assert root == "/dev/shm"
    monkeypatch.setenv(scratch.SOCKET_ROOT_ENV, str(tmp_path))
    assert scratch.socket_root() == str(tmp_path)


def test_a_printed_socket_folder_path_is_scrubbed(monkeypatch, tmp_path):
    from autograder.sandbox.scrub import grading_paths, scrub_text

    monkeypatch.setenv(scratch.SOCKET_ROOT_ENV, str(tmp_path))
    path = scratch.mkdtemp("ipc", scratch.socket_root())
    text = scrub_text(f"bound at {path}/k-1", grading_paths())
    assert str(tmp_path) not in text and text.startswith("bound at <grader-tmp>/ag-ipc-"), text
