"""The jail of a grading kernel: bubblewrap (`bwrap`) around ipykernel, one jail per submission.

What the kernel sees (built at run time from `sys.prefix`, `sys.base_prefix` and where the packages resolve, so
it works from any clone and for non-editable installs such as the Docker images):

- read-only: /usr (and the /bin, /lib... links), a few files of /etc (loader cache, passwd, timezone), the
  Python installation and the virtual environment, `coursekit` and the shipped data set (`data/`, or
  $COURSE_DATA_DIR) when they live outside the environment, its tinyshakespeare text without the slice 08's
  trained-GPT check scores on (`heldout.py`) and its Multi30k test files without the caption pairs 10's
  trained-translator check scores on (`heldout_translation.py`);
- hidden: `solutions` and `autograder`. In an editable install they are simply not bound (their folders sit
  next to `coursekit` in the clone, whose root is not bound); in a normal install, an empty tmpfs is mounted
  over their folders inside site-packages. The course folder, the gradebook, other submissions and the
  repository's .git are never bound;
- writable: one private tmpfs of `Limits.disk_bytes` at /tmp, which also holds the notebook folder
  (/tmp/notebook, filled with a copy of the submission's folder when the jail starts: writes never reach
  the original) and /dev/shm (a link to /tmp); plus the kernel's socket folder (see below);
- new namespaces for everything (user, mount, PID, network, IPC, UTS, cgroup): no network at all, not even
  loopback to the host; PID 1 of the jail is bwrap's init, and when the kernel exits (or bwrap is killed:
  --die-with-parent) the PID namespace is torn down and every process the submission started dies with it;
- no capabilities, no nested user namespaces (--disable-userns), a cleared environment (only the kernel
  spec's variables and a few locale ones are passed: the worker's secrets such as $AUTOGRADER_DB never reach it);
- PID 1 (bwrap) started with an empty environment, its options through `--args FD` and stdin/stdout/stderr on
  /dev/null (launcher.exec_quietly): the jail's /proc shows nothing of the grader (docs/threat-model.md).

The kernel talks to the grader over Unix sockets (jupyter_client's `ipc` transport) in a per-kernel folder
bound read-write at the same path: the only writable folder of the worker's in the jail. It sits on a tmpfs
(/dev/shm, scratch.socket_root), never on the worker's disk: what the submission writes there is memory charged
to its cgroup; each file is also capped by RLIMIT_FSIZE. The connection file is in another folder, bound
read-only. Both are deleted after the kernel (scratch.remove), or by the next run when the worker died.

With a GPU assigned, /dev/nvidia* are bound into the jail (untested here: the CI machines have no GPU).

Where bwrap is missing or cannot create namespaces, grading refuses to start (`JailUnavailable`, naming the
package to install) unless AUTOGRADER_UNSAFE_NO_JAIL=1 is set: then kernels run as plain processes under rlimits
and a cgroup only, with the worker's full view of the filesystem (never for real students' work).
"""
from __future__ import annotations

import atexit
import functools
import glob
import importlib.util
import logging
import os
import shutil
import subprocess
import sys

from autograder.errors import AutograderError
from autograder.sandbox import scratch

log = logging.getLogger("autograder.grade")

UNSAFE_ENV = "AUTOGRADER_UNSAFE_NO_JAIL"
HIDDEN_PACKAGES = ("solutions", "autograder")
NOTEBOOK_DIR = "/tmp/notebook"  # the notebook's working folder inside the jail
SUBMISSION_DIR = "/run/submission"  # the worker's copy of the submission folder, read-only, copied from
SYSTEM_DIRS = ("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32")
ETC_FILES = ("ld.so.cache", "ld.so.conf", "ld.so.conf.d", "localtime", "timezone", "passwd", "group",
             "nsswitch.conf", "alternatives", "mime.types", "fonts")
PASSED_ENV = ("LANG", "LC_ALL", "LC_CTYPE", "TZ")  # besides the kernel spec's variables and JPY_*
INSTALL_HINT = ("install bubblewrap (Debian/Ubuntu: `apt-get install bubblewrap`; Fedora: `dnf install bubblewrap`)")


class JailUnavailable(AutograderError, RuntimeError):
    """Student code cannot be jailed here; grading must not start."""


def unsafe() -> bool:
    return os.environ.get(UNSAFE_ENV, "") not in ("", "0")


@functools.lru_cache(maxsize=None)
def _probe(bwrap: str) -> str | None:
    """None when bwrap can make a jail here, else why not."""
    try:
        # the options the jail uses, --size (0.7) and --disable-userns (0.8) included
        done = subprocess.run([bwrap, "--unshare-all", "--unshare-user", "--disable-userns", "--die-with-parent",
                               "--ro-bind", "/", "/", "--proc", "/proc", "--dev", "/dev",
                               "--size", "1048576", "--tmpfs", "/tmp", "--", "true"],
                              capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.SubprocessError) as exc:
        return str(exc)
    return None if done.returncode == 0 else (done.stderr.strip() or f"exit code {done.returncode}")


def bwrap_path() -> str | None:
    """The bwrap executable when it works here; raises JailUnavailable otherwise; None in the unsafe mode."""
    if unsafe():
        return None
    found = shutil.which("bwrap")
    if found is None:
        raise JailUnavailable(
            "bubblewrap (bwrap) is not installed: the grader runs student notebooks only inside its jail. "
            f"To grade, {INSTALL_HINT}, or set {UNSAFE_ENV}=1 to run them without a jail (unsafe: only for your "
            "own notebooks).")
    problem = _probe(found)
    if problem is not None:
        raise JailUnavailable(
            f"bubblewrap ({found}) cannot create a jail here: {problem}. It needs bubblewrap >= 0.8 and user "
            "namespaces (kernel.unprivileged_userns_clone=1, user.max_user_namespaces > 0; in Kubernetes a pod "
            f"that may create them), or {UNSAFE_ENV}=1 to grade without a jail (unsafe).")
    return found


def _inside(path: str, roots) -> bool:
    return any(path == r or path.startswith(r.rstrip("/") + "/") for r in roots)


def _package_dirs(name: str) -> list[str]:
    try:
        spec = importlib.util.find_spec(name)
    except (ImportError, ValueError):
        return []
    if spec is None:
        return []
    if spec.submodule_search_locations:
        return [os.path.realpath(p) for p in spec.submodule_search_locations]
    return [os.path.realpath(spec.origin)] if spec.origin else []


@functools.lru_cache(maxsize=None)
def view() -> tuple[tuple[str, ...], tuple[str, ...], tuple[str, ...], str | None]:
    """(read-only folders, folders to hide, PYTHONPATH entries, data folder) of the kernel's filesystem."""
    ro: list[str] = []
    for prefix in (sys.base_prefix, sys.base_exec_prefix, sys.prefix, sys.exec_prefix,
                   os.path.dirname(os.path.dirname(os.path.realpath(sys.executable)))):
        for path in {prefix, os.path.realpath(prefix)}:
            if os.path.isdir(path) and not _inside(path, ro) and not _inside(path, SYSTEM_DIRS):
                ro.append(path)
    pythonpath: list[str] = []
    data_dir = None
    for folder in _package_dirs("coursekit"):
        if not _inside(folder, (*ro, *SYSTEM_DIRS)):
            # an editable install (the clone): bind the package alone, and put its parent first on sys.path so
            # that a `coursekit.py` in the notebook folder cannot shadow it
            ro.append(folder)
            pythonpath.append(os.path.dirname(folder))
        candidate = os.path.join(os.path.dirname(folder), "data")  # where coursekit.data looks for the data set
        if os.path.isdir(candidate):
            data_dir = candidate
    if os.environ.get("COURSE_DATA_DIR") and os.path.isdir(os.environ["COURSE_DATA_DIR"]):
        data_dir = os.path.realpath(os.environ["COURSE_DATA_DIR"])
    if data_dir and not _inside(data_dir, (*ro, *SYSTEM_DIRS)):
        ro.append(data_dir)
    # a normal install (e.g. /usr/local/lib/python3.11/site-packages in the Docker images): covered over
    hide = [folder for name in HIDDEN_PACKAGES for folder in _package_dirs(name)
            if _inside(folder, (*ro, *SYSTEM_DIRS))]
    return tuple(ro), tuple(hide), tuple(pythonpath), data_dir


def held_out_texts(data_dir: str | None) -> list[str]:
    """Every copy of Shakespeare's text the kernel could read: the data folder's, and the one a student wheel
    carries inside coursekit (coursekit/bundled_data.py)."""
    candidates = [os.path.join(data_dir, "tinyshakespeare", "input.txt")] if data_dir else []
    candidates += [os.path.join(folder, "_bundled_data", "tinyshakespeare", "input.txt")
                   for folder in _package_dirs("coursekit")]
    return [path for path in dict.fromkeys(candidates) if os.path.isfile(path)]


_masked: dict[str, str] = {}  # {source: its masked copy} of this process


def _masked_copy(source: str, name: str, masked) -> str:
    """A private, read-only file `name` holding `masked(source)` (bytes or text): made once per process in a scratch
    folder of its own (removed at exit, or swept once this process is gone: scratch.py), and made again if it is
    gone (a long-lived grading process whose temporary folder was cleaned: its warm templates need it)."""
    found = _masked.get(source)
    if found is not None and os.path.isfile(found):
        return found
    folder = scratch.mkdtemp("heldout")
    atexit.register(scratch.remove, folder)
    target = os.path.join(folder, name)
    content = masked(source)
    with open(target, "wb") as fh:
        fh.write(content.encode("utf-8") if isinstance(content, str) else content)
    os.chmod(target, 0o444)
    _masked[source] = target
    return target


def masked_text_file(source: str) -> str:
    """`heldout.masked()` of the text file `source`, as a private read-only file (_masked_copy)."""
    from autograder.course import heldout  # here: a launcher of a warm template's kernel never needs it

    def masked(path: str) -> str:
        with open(path, encoding="utf-8") as fh:
            return heldout.masked(fh.read())

    return _masked_copy(source, "input.txt", masked)


def held_out_multi30k(data_dir: str | None) -> list[str]:
    """Every copy of Multi30k's held-out test files the kernel could read: the data folder's, and the ones a student
    wheel carries inside coursekit."""
    folders = [os.path.join(data_dir, "multi30k")] if data_dir else []
    folders += [os.path.join(folder, "_bundled_data", "multi30k") for folder in _package_dirs("coursekit")]
    from autograder.course import heldout_translation  # imports coursekit (torch): only where a jail is built

    candidates = [os.path.join(folder, name) for folder in folders for name in heldout_translation.MASKED_FILES]
    return [path for path in dict.fromkeys(candidates) if os.path.isfile(path)]


def masked_multi30k_file(source: str) -> str:
    """`heldout_translation.masked()` of the Multi30k test file `source`, under the same name, as a private
    read-only file (_masked_copy)."""
    from autograder.course import heldout_translation

    return _masked_copy(source, os.path.basename(source), heldout_translation.masked)


def gpu_devices() -> list[str]:
    """The NVIDIA device files to bind for a GPU kernel (all of them: CUDA_VISIBLE_DEVICES picks the GPU)."""
    return sorted(glob.glob("/dev/nvidia*"))


def _view_options(bwrap: str, disk_bytes: int, gpu: bool, capabilities: list[str]) -> list[str]:
    """The options every jail shares: new namespaces, the read-only view of the environment, a private /tmp.
    `capabilities`: bwrap's options for them and its lifetime (`--die-with-parent --cap-drop ALL`, or the
    template's own)."""
    ro, hide, _pythonpath, data_dir = view()
    argv = [bwrap, "--unshare-all", "--unshare-user", *capabilities,
            "--hostname", "jail", "--clearenv"]
    # /tmp first: folders bound below may live under the host's /tmp (a clone or a venv there)
    size = ["--size", str(int(disk_bytes))] if disk_bytes > 0 else []
    argv += [*size, "--tmpfs", "/tmp", "--proc", "/proc", "--dev", "/dev"]
    for path in SYSTEM_DIRS:
        if os.path.islink(path):
            argv += ["--symlink", os.readlink(path), path]
        elif os.path.isdir(path):
            argv += ["--ro-bind", path, path]
    for name in ETC_FILES:
        argv += ["--ro-bind-try", f"/etc/{name}", f"/etc/{name}"]
    for path in ro:
        argv += ["--ro-bind", path, path]
    for text in held_out_texts(data_dir):  # 08's held-out slice stays out of the jail (autograder/course/heldout.py)
        argv += ["--ro-bind", masked_text_file(os.path.realpath(text)), text]
    for test_file in held_out_multi30k(data_dir):  # and 10's held-out captions (autograder/course/heldout_translation.py)
        argv += ["--ro-bind", masked_multi30k_file(os.path.realpath(test_file)), test_file]
    for path in hide:  # an empty, read-only folder over each hidden package
        argv += ["--tmpfs", path, "--remount-ro", path]
    if gpu:
        for device in gpu_devices():
            argv += ["--dev-bind-try", device, device]
    return argv


def kernel_env(env: dict[str, str]) -> dict[str, str]:
    """The whole environment of a kernel in the jail: `env` (the kernel spec's variables...) and the jail's own."""
    _ro, _hide, pythonpath, data_dir = view()
    full_env = {"HOME": "/tmp", "TMPDIR": "/tmp", "MPLCONFIGDIR": "/tmp/.matplotlib",
                "PATH": f"{os.path.dirname(sys.executable)}:/usr/local/bin:/usr/bin:/bin", **env}
    if pythonpath:
        full_env["PYTHONPATH"] = os.pathsep.join(pythonpath)
    if data_dir and os.environ.get("COURSE_DATA_DIR"):
        full_env["COURSE_DATA_DIR"] = data_dir
    return full_env


def _env_options(env: dict[str, str]) -> list[str]:
    return [arg for key, value in sorted(kernel_env(env).items()) for arg in ("--setenv", key, value)]


def bwrap_command(bwrap: str, *, kernel_cmd: list[str], ipc_dir: str, notebook_src: str, disk_bytes: int,
                  env: dict[str, str], gpu: bool = False, connection_dir: str | None = None) -> list[str]:
    """The argv that runs `kernel_cmd` (python -m ipykernel_launcher ...) in a new jail (see the module doc)."""
    argv = _view_options(bwrap, disk_bytes, gpu, ["--die-with-parent", "--disable-userns", "--cap-drop", "ALL"])
    size = ["--size", str(int(disk_bytes))] if disk_bytes > 0 else []
    argv += [*size, "--tmpfs", "/dev/shm",
             "--ro-bind", notebook_src, SUBMISSION_DIR,
             "--bind", ipc_dir, ipc_dir,
             *(["--ro-bind", connection_dir, connection_dir] if connection_dir else []),
             "--chdir", "/tmp"]
    argv += _env_options(env)
    # copy the submission's folder into the private tmpfs, then become the kernel (PID 2 of the jail)
    script = f'mkdir -p {NOTEBOOK_DIR} && cp -R {SUBMISSION_DIR}/. {NOTEBOOK_DIR}/ && cd {NOTEBOOK_DIR} && exec "$@"'
    return [*argv, "--", "/bin/sh", "-c", script, "sh", *kernel_cmd]


def template_command(bwrap: str, *, exchange: tuple[str, ...], env: dict[str, str], command: list[str]) -> list[str]:
    """The argv of a warm template's jail (zygote.py): the kernel's view of the environment, the capabilities of
    its own user namespace kept (its children make their own namespaces with them, then drop them all; with
    bwrap's --disable-userns a child could not mount its PID namespace's /proc where the grader runs as root, so
    each child closes nested user namespaces itself: user.max_user_namespaces = 0), and the worker's exchange
    folders bound read-write (the template's socket, each kernel's folders: zygote.Template). Not --die-with-parent, which follows
    the worker's THREAD that started it: the template ends when the worker's end of a pipe closes (zygote.py)."""
    argv = _view_options(bwrap, 64 * 1024 * 1024, False, ["--cap-add", "ALL"])
    argv += [arg for folder in exchange for arg in ("--bind", folder, folder)]
    argv += ["--chdir", "/tmp", *_env_options(env)]
    return [*argv, "--", *command]
