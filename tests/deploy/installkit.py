"""deploy/README.md's "One machine", done for real: accounts, `install.sh` as root, the hub started by its script.

`install_machine()` is what an admin does: make the machine's accounts (an instructor, two students and a latecomer
who is not on the roster yet; each with a password, since the hub keeps the config's PAM authenticator), run
`COURSE_INSTRUCTORS=<instructor> deploy/one-machine/install.sh` as root with the full stack, into a scratch PREFIX
(the only setting a real install does not need) and with a grader account of its own name. `start_hub()` writes the
ports of this run into the site file install.sh made (`/etc/jupyterhub/site_config.py`, where README tells admins to
put their own settings) and starts `/opt/hub/bin/transformers101-hub` as root, which switches to each account.

Needs root, useradd/userdel/chpasswd/runuser and /usr/bin/python3.11 (skipped otherwise: `missing()`).
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
TOOLS = ("useradd", "userdel", "chpasswd", "runuser")
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


def as_user(user: str, *command: str, cwd: str = "/", timeout: float = 120) -> subprocess.CompletedProcess:
    """`command` as `user` (a clean environment: PATH=/usr/bin:/bin, no home)."""
    return subprocess.run([shutil.which("runuser"), "-u", user, "--", *command], cwd=cwd, capture_output=True,
                          text=True, errors="replace", timeout=timeout,
                          env={"PATH": "/usr/bin:/bin", "HOME": "/nonexistent", "LANG": "C.UTF-8"})


def run_install(env: dict, timeout_s: float = 3000) -> subprocess.CompletedProcess:
    done = subprocess.run(["bash", str(SCRIPT)], env=env, capture_output=True, text=True, timeout=timeout_s)
    if done.returncode != 0:
        raise HubError(f"install.sh failed ({done.returncode}):\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}")
    return done


def install_machine():
    """Yields the Machine of a full install (accounts and files are removed afterwards)."""
    tag = secrets.token_hex(3)
    grader, instructor, latecomer = f"t101g{tag}", f"t101i{tag}", f"t101l{tag}"
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
                   PATH=f"{find_or_install_chp().parent}:{SYSTEM_PATH}")
        first = run_install(env)
        yield Machine(prefix=prefix, grader=grader, instructor=instructor, students=students, latecomer=latecomer,
                      password=password, env=env, log=first.stdout)
    finally:
        for name in (*people, grader):
            subprocess.run(["pkill", "-KILL", "-u", name], capture_output=True)
        time.sleep(0.5)
        for name in (*people, grader):
            subprocess.run(["userdel", "--remove", name], capture_output=True)
            subprocess.run(["groupdel", name], capture_output=True)
        shutil.rmtree(prefix, ignore_errors=True)


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
