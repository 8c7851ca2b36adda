"""deploy/README.md's "One machine", done for real: accounts, `install.sh` as root, the hub started by its script.

`install_machine()` is what an admin does: make the machine's accounts (an instructor, two students and a latecomer
who is not on the roster yet; each with a password, since the hub keeps the config's PAM authenticator), run
`COURSE_INSTRUCTORS=<instructor> deploy/one-machine/install.sh` as root with the full stack, into a scratch PREFIX
(the only setting a real install does not need) and with a grader account and a cgroup subtree (CGROUP_NAME) of its
own names. The first run sees a machine without bubblewrap (`WITHOUT_BUBBLEWRAP`): in a mount namespace of its own,
/usr and /var are overlays (on a tmpfs that goes with the namespace) from which `bwrap` and bubblewrap's entry in
dpkg's status are removed, so install.sh must install the package (apt-get, from the package cache or the network)
and check its jail, while the machine's own bwrap, which the rest of the tests use, is never touched (the hub, started
later outside that namespace, grades with it: the same package). `start_hub()` writes the ports of this run into the
site file install.sh made (`/etc/jupyterhub/site_config.py`, where README tells admins to put their own settings) and
starts `/opt/hub/bin/transformers101-hub` as root, which switches to each account.

Needs root, useradd/userdel/chpasswd/runuser/unshare, dpkg and /usr/bin/python3.11 (skipped otherwise: `missing()`).
"""
from __future__ import annotations

import os
import pwd
import secrets
import shutil
import subprocess
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import psutil

from hubkit import COURSE_ID, ROOT, HubClient, HubError, find_or_install_chp, free_port, kill_tree

SCRIPT = ROOT / "deploy" / "one-machine" / "install.sh"
SYSTEM_PYTHON = "/usr/bin/python3.11"  # an interpreter every account can run (not one in root's home)
SITE = "lib/python3.11/site-packages"
TOOLS = ("useradd", "userdel", "chpasswd", "runuser", "unshare", "dpkg")
CGROUP_ROOT = Path("/sys/fs/cgroup")
SYSTEM_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"


def missing() -> str:
    """Why this machine cannot do the install ("" when it can)."""
    if os.geteuid() != 0:
        return "the one-machine install runs as root (install.sh creates accounts and sets owners)"
    lacking = [tool for tool in TOOLS if not shutil.which(tool)]
    if lacking:
        return f"the one-machine install needs {', '.join(lacking)}"
    if not Path(SYSTEM_PYTHON).is_file():
        return f"the one-machine install needs {SYSTEM_PYTHON}"
    return ""


@dataclass
class Machine:
    prefix: Path
    grader: str  # the course service's system account (install.sh makes it)
    cgroup_name: str  # the grader account's cgroup v1 subtree (install.sh's CGROUP_NAME)
    instructor: str
    students: tuple[str, str]
    latecomer: str  # an account of the machine not on the roster (yet)
    password: str  # every person's password (PAM)
    env: dict  # install.sh's environment (a second run uses it again)
    log: str  # install.sh's output

    def path(self, absolute: str) -> Path:
        """Where README's absolute path (/opt/..., /srv/..., /etc/...) lies in this install."""
        return self.prefix / absolute.lstrip("/")

    @property
    def course_root(self) -> Path:
        return self.path(f"/srv/{COURSE_ID}/course")

    @property
    def exchange(self) -> Path:
        return self.path("/srv/nbgrader/exchange")

    def home(self, user: str) -> Path:
        return Path(pwd.getpwnam(user).pw_dir)


def as_user(user: str, *command: str, cwd: str = "/", timeout: float = 120, **env: str) -> subprocess.CompletedProcess:
    """`command` as `user` (a clean environment: PATH=/usr/bin:/bin, no home; plus `env`)."""
    return subprocess.run([shutil.which("runuser"), "-u", user, "--", *command], cwd=cwd, capture_output=True,
                          text=True, errors="replace", timeout=timeout,
                          env={"PATH": "/usr/bin:/bin", "HOME": "/nonexistent", "LANG": "C.UTF-8", **env})


# bash: the machine's state without bubblewrap, in this mount namespace only; then install.sh ($0)
WITHOUT_BUBBLEWRAP = r'''
set -euo pipefail
layer="$PREFIX/.without-bubblewrap"
mkdir -p "$layer"
mount -t tmpfs without-bubblewrap "$layer"
for top in usr var; do
  mkdir -p "$layer/$top/upper" "$layer/$top/work"
  mount -t overlay overlay -o "lowerdir=/$top,upperdir=$layer/$top/upper,workdir=$layer/$top/work" "/$top"
done
if command -v bwrap >/dev/null; then rm "$(command -v bwrap)"; fi
awk 'BEGIN { RS = ""; ORS = "\n\n" } !($1 == "Package:" && $2 == "bubblewrap")' /var/lib/dpkg/status > "$layer/status"
cat "$layer/status" > /var/lib/dpkg/status
if command -v bwrap || dpkg-query -W bubblewrap 2>/dev/null; then echo "bubblewrap is still there" >&2; exit 1; fi
exec bash "$0"
'''


def run_install(env: dict, timeout_s: float = 3000, without_bubblewrap: bool = False) -> subprocess.CompletedProcess:
    """install.sh with `env`; `without_bubblewrap`: on the machine's state without it (WITHOUT_BUBBLEWRAP)."""
    command = ["bash", str(SCRIPT)]
    if without_bubblewrap:
        command = ["unshare", "--mount", "--propagation", "private", "bash", "-c", WITHOUT_BUBBLEWRAP, str(SCRIPT)]
    done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=timeout_s)
    if done.returncode != 0:
        raise HubError(f"install.sh failed ({done.returncode}):\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}\n"
                       f"{free_space(env['PREFIX'])}")
    return done


def free_space(prefix: str) -> str:
    """What the install's file systems had left (for an install that failed: a full disk is named by it)."""
    rows = []
    for folder in (prefix, tempfile.gettempdir(), str(ROOT), os.path.expanduser("~"), "/dev/shm"):
        try:
            usage = shutil.disk_usage(folder)
        except OSError:
            continue
        rows.append(f"  {folder}: {usage.free / 2**30:.1f} GiB free of {usage.total / 2**30:.1f} GiB")
    return "free space:\n" + "\n".join(rows)


def install_machine():
    """Yields the Machine of a full install (accounts and files are removed afterwards)."""
    tag = secrets.token_hex(3)
    grader, instructor, latecomer, cgroup_name = f"t101g{tag}", f"t101i{tag}", f"t101l{tag}", f"t101c{tag}"
    students = (f"t101a{tag}", f"t101b{tag}")
    password = secrets.token_urlsafe(12)
    prefix = Path(tempfile.mkdtemp(prefix="t101-install-", dir="/tmp"))
    prefix.chmod(0o755)  # like / : every account may walk into it
    people = (instructor, *students, latecomer)
    try:
        (prefix / "home").mkdir(mode=0o755)
        for name in people:
            subprocess.run(["useradd", "--create-home", "--home-dir", str(prefix / "home" / name), "--shell",
                            "/bin/bash", name], check=True, capture_output=True)
        subprocess.run(["chpasswd"], input="".join(f"{name}:{password}\n" for name in people), text=True, check=True)
        env = {key: value for key, value in os.environ.items()
               if key not in ("VIRTUAL_ENV", "PYTHONPATH", "COURSE_PROFILE", "PYTHONHOME")}
        # the project's own proxy on PATH: install.sh then leaves the machine's npm alone
        env.update(PREFIX=str(prefix), GRADER_USER=grader, COURSE_INSTRUCTORS=instructor, PYTHON=SYSTEM_PYTHON,
                   CGROUP_NAME=cgroup_name, PATH=f"{find_or_install_chp().parent}:{SYSTEM_PATH}")
        first = run_install(env, without_bubblewrap=True)
        yield Machine(prefix=prefix, grader=grader, cgroup_name=cgroup_name, instructor=instructor,
                      students=students, latecomer=latecomer, password=password, env=env, log=first.stdout)
    finally:
        for name in (*people, grader):
            subprocess.run(["pkill", "-KILL", "-u", name], capture_output=True)
        time.sleep(0.5)
        remove_cgroup_subtree(cgroup_name)
        for name in (*people, grader):
            subprocess.run(["userdel", "--remove", name], capture_output=True)
            subprocess.run(["groupdel", name], capture_output=True)
        shutil.rmtree(prefix, ignore_errors=True)


def remove_cgroup_subtree(name: str) -> None:
    """The cgroup v1 subtree `name` install.sh made, with any group left in it (best effort: its processes were
    killed, but a group still held by one that has not died yet stays behind)."""
    for controller in ("memory", "pids", "cpu", "cpuacct"):
        top = CGROUP_ROOT / controller / name
        if top.is_dir():
            for group in sorted((p for p in top.rglob("*") if p.is_dir()), key=lambda p: -len(p.parts)) + [top]:
                try:
                    group.rmdir()
                except OSError:
                    pass


@dataclass
class InstalledHub:
    machine: Machine
    base: str  # the hub's public URL
    pid: int
    log: Path

    def service_process(self) -> psutil.Process:
        """The course service's Jupyter server, a child of the hub."""
        for proc in psutil.Process(self.pid).children(recursive=True):
            try:
                if f"--ServerApp.root_dir={self.machine.course_root}" in proc.cmdline():
                    return proc
            except psutil.NoSuchProcess:
                continue
        raise HubError(f"the course service is not running:\n{self.log.read_text()[-3000:]}")


SITE_PORTS = '''
# the ports of this test run (tests/deploy/installkit.py): 127.0.0.1 only, free ones
c.JupyterHub.ip = "127.0.0.1"
c.JupyterHub.port = {public_port}
c.JupyterHub.hub_ip = "127.0.0.1"
c.JupyterHub.hub_port = {hub_port}
c.ConfigurableHTTPProxy.api_url = "http://127.0.0.1:{proxy_api_port}"
'''


def start_hub(machine: Machine, workdir: Path):
    """README's `sudo /opt/hub/bin/transformers101-hub`, with free ports; yields the InstalledHub, stops it after."""
    public_port, hub_port, proxy_api_port, service_port = (free_port() for _ in range(4))
    site = machine.path("/etc/jupyterhub/site_config.py")
    site.write_text(site.read_text() + SITE_PORTS.format(public_port=public_port, hub_port=hub_port,
                                                         proxy_api_port=proxy_api_port))
    # the hub's own environment is root's login environment; the course service's port is one of the config's
    # settings (COURSE_SERVICE_PORT), given here because 9999 may be taken on a test machine
    env = {"PATH": machine.env["PATH"], "LANG": "C.UTF-8", "HOME": "/root", "COURSE_SERVICE_PORT": str(service_port)}
    log = workdir / "jupyterhub.log"
    with open(log, "wb") as out:
        proc = subprocess.Popen([str(machine.path(f"/opt/hub/bin/{COURSE_ID}-hub"))], env=env, stdout=out,
                                stderr=subprocess.STDOUT, start_new_session=True, cwd="/")
    base = f"http://127.0.0.1:{public_port}"
    try:
        HubClient(base, token="").wait_until_up(120, proc, log)  # the hub's API root answers without a token
        yield InstalledHub(machine=machine, base=base, pid=proc.pid, log=log)
    finally:
        kill_tree(proc.pid)
