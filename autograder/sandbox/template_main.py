"""The warm template of a grading worker: the program that runs INSIDE the template's jail (zygote.py starts it).

It is passed to `python -s -P -c` as text (nothing of `autograder` is importable in a jail) and never runs any
submission's code. It imports what every grading kernel imports (ipykernel, numpy, torch, matplotlib, coursekit),
then, for each connection on its socket, forks a child that becomes one submission's kernel:

    child        reads the request, says "ready"; the launcher (outside, in the worker) moves it into the
                 submission's cgroup and says "go"; it enters new mount, PID, IPC, network, UTS and cgroup
                 namespaces and forks
    PID 1        (the new PID namespace's init): mounts its own /proc (no nested user namespace from here
                 on), a size-capped tmpfs at /tmp (with a copy of the submission's folder at /tmp/notebook)
                 and at /dev/shm, covers the template's two exchange folders but for this kernel's socket
                 folder (read-write) and connection folder (read-only), forks the kernel, drops every
                 capability and waits; when the kernel ends, it reports the exit code and exits, and the
                 namespace takes every process of the submission with it
    PID 2        drops every capability (bounding set included), sets no_new_privs and the rlimits, takes the
                 kernel's environment, reseeds what a fresh interpreter seeds, and becomes ipykernel

The template's jail is bwrap's (jail.py) with the capabilities of its own user namespace kept (to make these
namespaces); each child closes nested user namespaces before any kernel runs. The template writes nothing a kernel can
see: each kernel's writable state is its own tmpfs and its own copy-on-write memory.
"""
import ctypes
import json
import os
import re
import select
import shutil
import signal
import socket
import sys

CLONE_NEWNS, CLONE_NEWCGROUP, CLONE_NEWUTS = 0x00020000, 0x02000000, 0x04000000
CLONE_NEWIPC, CLONE_NEWPID, CLONE_NEWNET = 0x08000000, 0x20000000, 0x40000000
MS_RDONLY, MS_NOSUID, MS_NODEV, MS_NOEXEC, MS_REMOUNT = 1, 2, 4, 8, 32
MS_BIND, MS_REC, MS_PRIVATE = 4096, 16384, 1 << 18
PR_CAPBSET_DROP, PR_SET_NO_NEW_PRIVS, PR_CAP_AMBIENT = 24, 38, 47
PR_CAP_AMBIENT_CLEAR_ALL = 4
RLIMITS = {"as": "RLIMIT_AS", "data": "RLIMIT_DATA", "fsize": "RLIMIT_FSIZE", "core": "RLIMIT_CORE",
           "nproc": "RLIMIT_NPROC"}
libc = ctypes.CDLL(None, use_errno=True)


def _check(result, what):
    if result != 0:
        errno = ctypes.get_errno()
        raise OSError(errno, f"{what}: {os.strerror(errno)}")


def mount(source, target, fstype, flags, data=None):
    enc = (lambda s: None if s is None else os.fsencode(s))
    _check(libc.mount(enc(source), enc(target), enc(fstype), flags, enc(data)), f"mount {target}")


def drop_capabilities():
    """No capability left, none to regain: bounding and ambient sets emptied, capset to zero, no_new_privs."""
    with open("/proc/sys/kernel/cap_last_cap") as fh:
        last = int(fh.read())
    for cap in range(last + 1):
        _check(libc.prctl(PR_CAPBSET_DROP, cap, 0, 0, 0), "drop the bounding set")
    _check(libc.prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0), "clear the ambient set")
    header = (ctypes.c_uint32 * 2)(0x20080522, 0)  # _LINUX_CAPABILITY_VERSION_3, this process
    data = (ctypes.c_uint32 * 6)()  # effective, permitted, inheritable: 0 (two 32-bit words each)
    _check(libc.syscall(126 if os.uname().machine in ("x86_64",) else 91, header, data), "capset")
    _check(libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0), "no_new_privs")


def preload(modules):
    """Import what every kernel imports; a module that is missing is simply not warm."""
    import importlib

    for name in modules:
        try:
            importlib.import_module(name)
        except Exception:  # noqa: BLE001 - a kernel that needs it will report the error itself
            pass


def read_line(conn):
    data = b""
    while not data.endswith(b"\n"):
        chunk = conn.recv(65536)
        if not chunk:
            raise EOFError("the launcher went away")
        data += chunk
    return data.decode()


def inside(path, top):
    return path == top or path.startswith(top.rstrip("/") + "/")


def held_below(root, exchange):
    """[(mount point, O_PATH fd, is a folder)] of every mount strictly below `root` but the exchange folders',
    parents first: what the template's view binds there (the cold jail mounts its /tmp first and binds on top)."""
    points = []
    with open("/proc/self/mountinfo") as fh:
        for line in fh:
            point = re.sub(r"\\([0-7]{3})", lambda m: chr(int(m.group(1), 8)), line.split()[4])
            if (inside(point, root) and point != root and not any(inside(point, top) for top in exchange)
                    and point not in points):
                points.append(point)
    return [(point, os.open(point, os.O_PATH | os.O_NOFOLLOW), os.path.isdir(point)) for point in points]


def build_root(request, exchange):
    """(PID 1 of the new namespaces) The kernel's filesystem: see the module doc. `exchange`: the template's
    exchange folders."""
    mount("proc", "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC)
    with open("/proc/sys/user/max_user_namespaces", "w") as fh:  # as bwrap's --disable-userns: no nested one
        fh.write("0")
    keep = {name: os.open(request[name], os.O_PATH | os.O_DIRECTORY)
            for name in ("submission", "ipc_dir", "connection_dir")}
    size = int(request["disk_bytes"])
    options = f"mode=1777,size={size}" if size > 0 else "mode=1777"
    for target in ("/tmp", "/dev/shm"):
        below = held_below(target, exchange)  # the view's binds under it (a clone or a venv in /tmp)
        mount("tmpfs", target, "tmpfs", MS_NOSUID | MS_NODEV, options)
        for point, fd, is_dir in below:  # bound again, read-only, on the new tmpfs
            if is_dir:
                os.makedirs(point, exist_ok=True)
            elif not os.path.lexists(point):  # a file (a held-out copy) over one of a folder bound just before
                os.makedirs(os.path.dirname(point), exist_ok=True)
                open(point, "a").close()
            mount(f"/proc/self/fd/{fd}", point, None, MS_BIND)
            mount(None, point, None, MS_BIND | MS_REMOUNT | MS_RDONLY | MS_NOSUID | MS_NODEV)
            os.close(fd)
    notebook = request["notebook_dir"]
    shutil.copytree(f"/proc/self/fd/{keep['submission']}", notebook, symlinks=True)
    for folder in exchange:
        if os.path.isdir(folder):  # not under /tmp or /dev/shm: covered by an empty tmpfs of its own
            mount("tmpfs", folder, "tmpfs", MS_NOSUID | MS_NODEV, "mode=0755,size=65536")
    for name, read_only in (("ipc_dir", False), ("connection_dir", True)):
        os.makedirs(request[name], mode=0o700, exist_ok=True)
        mount(f"/proc/self/fd/{keep[name]}", request[name], None, MS_BIND)
        if read_only:
            mount(None, request[name], None, MS_BIND | MS_REMOUNT | MS_RDONLY | MS_NOSUID | MS_NODEV)
    for fd in keep.values():
        os.close(fd)
    _check(libc.sethostname(b"jail", 4), "sethostname")


def become_kernel(request):
    """(PID 2) Drop everything, then run ipykernel with the request's arguments; never returns."""
    import resource

    drop_capabilities()
    for name, value in request["rlimits"].items():
        resource.setrlimit(getattr(resource, RLIMITS[name]), (int(value), int(value)))
    if request.get("probe"):  # zygote.py's start-up check: the namespaces can be made here
        os._exit(0)
    os.environ.clear()
    os.environ.update(request["env"])
    os.chdir(request["notebook_dir"])
    os.environ.update(PWD=request["notebook_dir"], OLDPWD="/tmp")  # as the cold jail's shell leaves them
    import random
    random.seed()  # as a fresh interpreter: seeds of its own, not the template's (torch, too, seeds at random)
    if "numpy" in sys.modules:
        sys.modules["numpy"].random.seed()
    if "torch" in sys.modules:
        sys.modules["torch"].seed()
    import importlib.util

    sys.argv = [importlib.util.find_spec("ipykernel_launcher").origin, *request["kernel_args"]]
    from ipykernel import kernelapp

    kernelapp.launch_new_instance(argv=request["kernel_args"])
    os._exit(0)


def init(request, conn, exchange):
    """(PID 1) Build the root, fork the kernel, report its exit code to the launcher and exit with it."""
    build_root(request, exchange)
    kernel = os.fork()
    if kernel == 0:
        try:
            conn.close()
            become_kernel(request)
        finally:
            os._exit(70)
    drop_capabilities()
    conn.sendall(b"started\n")
    while True:
        try:
            done, status = os.waitpid(-1, os.WNOHANG)  # every orphan of the namespace is reaped here
        except ChildProcessError:
            done, status = kernel, 0
        if done == kernel:
            code = os.waitstatus_to_exitcode(status)
            try:
                conn.sendall(f"exit {code}\n".encode())
            finally:
                os._exit(code & 0xFF)
        readable, _, _ = select.select([conn], [], [], 0.2)
        if readable and not conn.recv(1):  # the launcher is gone: so is the submission
            os._exit(1)


def child(conn, exchange):
    """A forked child of the template: wait to be placed in the submission's cgroup, then make its namespaces."""
    signal.signal(signal.SIGCHLD, signal.SIG_DFL)
    request = json.loads(read_line(conn))
    if request.get("ping"):  # zygote.py's health check before each kernel
        conn.sendall(b"pong\n")
        os._exit(0)
    conn.sendall(b"ready\n")  # the launcher reads this process's pid from the message's credentials
    if read_line(conn).strip() != "go":
        os._exit(1)
    _check(libc.unshare(CLONE_NEWNS | CLONE_NEWCGROUP | CLONE_NEWUTS | CLONE_NEWIPC | CLONE_NEWPID
                        | CLONE_NEWNET), "unshare")
    mount(None, "/", None, MS_REC | MS_PRIVATE)
    if os.fork() == 0:
        try:
            init(request, conn, exchange)
        except BaseException as exc:  # noqa: BLE001 - reported to the launcher, whose log names it
            try:
                conn.sendall(f"failed {type(exc).__name__}: {exc}\n".encode())
            finally:
                os._exit(71)
    os._exit(0)


def serve(path, modules, lifeline, exchange):
    preload(modules)
    # the imports' garbage goes before any fork, and what is left moves to the permanent generation: a kernel's
    # collections skip the template's objects (a full collection over them takes 0.1 CPU-s) and leave their pages
    # shared instead of writing to each (Python's recipe for a process that forks without exec)
    import gc

    gc.collect()
    gc.freeze()
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    server.bind(path)
    server.listen(64)
    signal.signal(signal.SIGCHLD, signal.SIG_IGN)  # children are reaped by the system
    null = os.open(os.devnull, os.O_RDWR)
    for target in (0, 1, 2):  # from here on, nothing a kernel inherits reaches the worker's files
        os.dup2(null, target)
    os.close(null)
    with open("/proc/self/status") as fh:  # VmSize: every kernel starts with it mapped (its address-space cap)
        status = {line.split(":")[0]: int(line.split()[1]) * 1024 for line in fh if line.startswith("Vm")}
    with open(path + ".tmp", "w") as fh:
        json.dump({"modules": len(sys.modules), "address_space_bytes": status["VmSize"],
                   "rss_bytes": status["VmRSS"]}, fh)
    os.rename(path + ".tmp", path + ".ready")
    while True:
        readable, _, _ = select.select([server, lifeline], [], [])
        if lifeline in readable:  # the worker's end closed: the worker is gone
            os._exit(0)
        conn, _ = server.accept()
        if os.fork() == 0:
            try:
                server.close()
                os.close(lifeline)
                child(conn, exchange)
            finally:
                os._exit(72)
        conn.close()


if __name__ == "__main__":
    serve(sys.argv[1], [name for name in sys.argv[2].split(",") if name], int(sys.argv[3]), sys.argv[4:])
