"""Fixtures of the end-to-end hub test: a student Python environment and a running JupyterHub.

The hub runs deploy/jupyterhub/jupyterhub_config.py unchanged, loaded from a small overlay that swaps
in what a test machine has: DummyAuthenticator, SimpleLocalProcessSpawner, random ports on 127.0.0.1,
temporary folders, and a known token for the course service and for an admin service of the test.
"""
from __future__ import annotations

import os
import secrets
import shutil
import subprocess
import sys
import sysconfig
from dataclasses import dataclass, field
from pathlib import Path

import pytest

import installkit
from hubkit import (COURSE_ID, GRADER, HUB_CONFIG, INSTRUCTOR, INSTRUCTOR_CONFIG, ROOT, STUDENT_CONFIG, VENV, HubClient,
                    find_or_install_chp, free_port, kill_tree)
AS_ROOT = os.geteuid() == 0  # jupyter servers refuse root unless told --allow-root


@dataclass
class StudentEnv:
    python: Path
    wheel: Path


@dataclass
class Hub:
    client: HubClient
    workdir: Path
    exchange: Path
    course_root: Path
    grader_home: Path
    log: Path
    service_token: str
    api_url: str
    user_tokens: dict = field(default_factory=dict)

    def home(self, user: str) -> Path:
        return self.workdir / "home" / user


@pytest.fixture(scope="module")
def student_env(tmp_path_factory) -> StudentEnv:
    """A venv with the student wheel of this repo (coursekit only) on top of the instructor's third-party
    packages: a `.pth` line adds the instructor site-packages folder, but the editable finder of the
    instructor install lives in a .pth FILE there, which a .pth DIRECTORY entry does not run."""
    base = tmp_path_factory.mktemp("student-env")
    # Build from a clean copy, like a Docker build context: a stale build/lib of an instructor build in
    # the working tree would otherwise be packed into the student wheel too.
    source = base / "source"
    shutil.copytree(ROOT, source, ignore=shutil.ignore_patterns(
        ".git", ".venv*", ".tools", "build", "dist", "*.egg-info", "__pycache__", "course", "exercises", "data",
        "tests", "bench", "deploy", "docs", "node_modules"))
    wheel_dir = base / "wheel"
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q", "-w", str(wheel_dir), str(source)],
        check=True, env=dict(os.environ, COURSE_PROFILE="student"), cwd=base,
    )
    (wheel,) = wheel_dir.glob("transformers101-*.whl")
    venv = base / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    python = venv / "bin" / "python"
    site = Path(subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                               check=True, capture_output=True, text=True).stdout.strip())
    (site / "instructor_third_party.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    subprocess.run([sys.executable, "-m", "pip", "--python", str(python), "install", "-q", "--no-deps", "--no-index",
                    str(wheel)], check=True)
    # the Jupyter data files the student stack puts under its own prefix (JupyterLab's app and extensions, nbgrader's
    # assignment list, the server extensions it enables), else a student server has no /lab; not the instructor's
    # jupyter-server-mathjax
    for folder in (VENV / "share" / "jupyter").iterdir():
        (venv / "share" / "jupyter").mkdir(parents=True, exist_ok=True)
        (venv / "share" / "jupyter" / folder.name).symlink_to(folder, target_is_directory=True)
    shutil.copytree(VENV / "etc" / "jupyter", venv / "etc" / "jupyter",
                    ignore=shutil.ignore_patterns("jupyter_server_mathjax.json"))
    return StudentEnv(python=python, wheel=wheel)


OVERLAY = '''
c = get_config()
load_subconfig({hub_config!r})

c.JupyterHub.ip = "127.0.0.1"
c.JupyterHub.port = {public_port}
c.JupyterHub.hub_ip = "127.0.0.1"
c.JupyterHub.hub_port = {hub_port}
c.ConfigurableHTTPProxy.api_url = "http://127.0.0.1:{proxy_api_port}"
c.ConfigurableHTTPProxy.command = [{chp!r}]
c.ConfigurableHTTPProxy.should_start = True
c.JupyterHub.db_url = "sqlite:///{workdir}/jupyterhub.sqlite"
c.JupyterHub.cookie_secret_file = "{workdir}/cookie_secret"
c.JupyterHub.pid_file = "{workdir}/jupyterhub.pid"
c.JupyterHub.cleanup_servers = True

c.JupyterHub.authenticator_class = "dummy"
c.Authenticator.allow_all = True
c.JupyterHub.spawner_class = "simple"
c.SimpleLocalProcessSpawner.home_dir_template = "{workdir}/home/{{username}}"
c.Spawner.args = {spawner_args!r}
c.Spawner.start_timeout = 120
c.Spawner.http_timeout = 120

# the course service: known token, the grader's home, root allowed on a root-run CI machine
course_service = c.JupyterHub.services[0]
course_service["api_token"] = {service_token!r}
course_service["environment"]["HOME"] = "{grader_home}"

# an admin service for the test's own REST calls
c.JupyterHub.services.append({{"name": "e2e-admin", "api_token": {admin_token!r}}})
c.JupyterHub.load_roles.append({{"name": "admin", "services": ["e2e-admin"]}})
'''


@pytest.fixture(scope="module")
def hub(tmp_path_factory, student_env) -> Hub:
    yield from start_hub(tmp_path_factory, student_env)


def start_hub(tmp_path_factory, student_env, extra_config: str = "", **settings: str):
    """Runs the hub of the `hub` fixture (yields its Hub, stops it afterwards); `extra_config` lines are appended to
    the overlay (e.g. c.Authenticator.allow_all = False) and `settings` to the hub's environment, replacing the
    defaults (e.g. ROSTER_SYNC_INTERVAL="1")."""
    chp = find_or_install_chp()
    workdir = tmp_path_factory.mktemp("hub")
    exchange, course_root, grader_home = workdir / "exchange", workdir / "grader" / "course", workdir / "grader"
    for folder in (exchange, course_root, workdir / "home"):
        folder.mkdir(parents=True)
    exchange.chmod(0o777)  # nbgrader wants a world-writable exchange (students write their submissions)
    public_port, hub_port, proxy_api_port, service_port = (free_port() for _ in range(4))
    service_token, admin_token = secrets.token_hex(32), secrets.token_hex(32)
    allow_root = ["--allow-root"] if AS_ROOT else []
    (workdir / "jupyterhub_config.py").write_text(OVERLAY.format(
        hub_config=str(HUB_CONFIG), public_port=public_port, hub_port=hub_port, proxy_api_port=proxy_api_port,
        chp=str(chp), workdir=workdir, spawner_args=allow_root, service_token=service_token,
        grader_home=grader_home, admin_token=admin_token,
    ) + extra_config)
    env = dict(
        os.environ,
        PATH=f"{VENV / 'bin'}:{os.environ.get('PATH', '')}",
        COURSE_ID=COURSE_ID,
        COURSE_ROOT=str(course_root),
        COURSE_GRADER_USER=GRADER,
        COURSE_SERVICE_RUN_AS="",  # no setuid: everything runs as the test's own user
        COURSE_INSTRUCTORS=INSTRUCTOR,
        COURSE_SERVICE_PORT=str(service_port),
        COURSE_SERVICE_COMMAND=" ".join([str(VENV / "bin" / "jupyterhub-singleuser")] + allow_root),
        NBGRADER_EXCHANGE=str(exchange),
        IDLE_CULL_TIMEOUT="3600",
        STUDENT_SINGLEUSER_CMD=f"{student_env.python} -m jupyterhub.singleuser",
        INSTRUCTOR_SINGLEUSER_CMD=str(VENV / "bin" / "jupyterhub-singleuser"),
        STUDENT_JUPYTER_CONFIG=str(STUDENT_CONFIG),
        INSTRUCTOR_JUPYTER_CONFIG=str(INSTRUCTOR_CONFIG),
    )
    env.update(settings)  # may replace the defaults above, PATH included
    for leak in ("JUPYTER_CONFIG_PATH", "JUPYTER_CONFIG_DIR", "JUPYTER_PATH", "JUPYTERHUB_API_TOKEN"):
        env.pop(leak, None)
    log = workdir / "jupyterhub.log"
    with open(log, "wb") as out:
        proc = subprocess.Popen(
            [str(VENV / "bin" / "jupyterhub"), "-f", str(workdir / "jupyterhub_config.py")],
            cwd=workdir, env=env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True,
        )
    client = HubClient(f"http://127.0.0.1:{public_port}", admin_token)
    try:
        client.wait_until_up(90, proc, log)
        yield Hub(client=client, workdir=workdir, exchange=exchange, course_root=course_root,
                  grader_home=grader_home, log=log, service_token=service_token,
                  api_url=f"http://127.0.0.1:{hub_port}/hub/api")
    finally:
        kill_tree(proc.pid)


@pytest.fixture(scope="module")
def roster_hub(tmp_path_factory, student_env) -> Hub:
    """The hub with the shipped login rules (allow_all off): the instructors, and students once on the roster."""
    yield from start_hub(tmp_path_factory, student_env, "\nc.Authenticator.allow_all = False\n",
                         ROSTER_SYNC_INTERVAL="1")


@pytest.fixture(scope="session")
def machine():
    """deploy/README.md's one-machine install, done for real as root (installkit.install_machine): shared by the
    journey and test_one_machine_install.py, removed at the end of the session."""
    reason = installkit.missing()
    if reason:
        pytest.skip(reason)
    yield from installkit.install_machine()
