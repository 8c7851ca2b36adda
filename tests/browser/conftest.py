"""Browser test harness: Debian's Chromium driven by Playwright, against a real JupyterLab server.

Fixtures (reusable by any test file in tests/browser/):

* `chromium_path`: the system Chromium (`make test` installs it with apt-get when it can; the tests skip with one
  line saying why when it is missing, or when Playwright is not installed).
* `browser`: one headless Chromium for the session (Playwright's own browser download is never used).
* `screenshot_dir`: build/browser-screenshots/<session time>/ (git-ignored test artefacts).
* `start_lab(bin_dir, root_dir, env=..., args=...)`: a context manager that runs `jupyter lab` from `bin_dir`
  (an environment's bin folder) on a free 127.0.0.1 port with a random token, serving `root_dir`; it yields a
  `LabServer` (url, token, root, log, `page_url(path)`).
* `student_env`: the environment of the README's `make student` (built once, cached; see student_env.py).
* `student_lab`: a JupyterLab of the student environment over a fresh workspace folder outside the repository,
  with a fresh home (no user settings). `window.jupyterapp` is exposed so tests can wait on the app's state.
"""
from __future__ import annotations

import contextlib
import importlib.util
import os
import secrets
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

import pytest

CHROMIUM_CANDIDATES = ("/usr/bin/chromium", "/usr/bin/chromium-browser")


def load_helpers():
    name = "_course_student_env"
    if name not in sys.modules:
        spec = importlib.util.spec_from_file_location(name, Path(__file__).with_name("student_env.py"))
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        spec.loader.exec_module(module)
    return sys.modules[name]


H = load_helpers()


def pytest_collection_modifyitems(items):
    for item in items:
        if Path(str(item.fspath)).parent == Path(__file__).parent:
            item.add_marker(pytest.mark.slow)


@pytest.fixture(scope="session")
def chromium_path() -> str:
    try:
        import playwright  # noqa: F401
    except ImportError:
        pytest.skip("browser tests skipped: the playwright package is not installed (make install brings it)")
    for candidate in (os.environ.get("CHROMIUM_PATH"), *CHROMIUM_CANDIDATES, shutil.which("chromium")):
        if candidate and os.access(candidate, os.X_OK):
            return candidate
    pytest.skip("browser tests skipped: no Chromium at /usr/bin/chromium (make test installs it as root with apt-get)")


@pytest.fixture(scope="module")
def browser(chromium_path):
    """One Chromium per test module: playwright's sync API holds an event loop while it is open, so a session-wide
    one would make every later `sync_playwright()` of the run fail (tests/deploy/test_journey.py opens its own)."""
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        chromium = playwright.chromium.launch(executable_path=chromium_path, headless=True,
                                              args=["--no-sandbox", "--disable-dev-shm-usage", "--disable-gpu"])
        yield chromium
        chromium.close()


@pytest.fixture(scope="session")
def screenshot_dir() -> Path:
    folder = H.SCREENSHOTS / datetime.now().strftime("%Y%m%d-%H%M%S")
    folder.mkdir(parents=True, exist_ok=True)
    return folder


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@dataclass
class LabServer:
    url: str
    token: str
    root: Path
    log: Path

    def page_url(self, path: str = "lab") -> str:
        separator = "&" if "?" in path else "?"
        return f"{self.url}/{path.lstrip('/')}{separator}token={self.token}"


@contextlib.contextmanager
def _start_lab(bin_dir: Path, root_dir: Path, env: dict | None = None, args: tuple[str, ...] = (),
               log: Path | None = None, timeout: float = 180):
    port, token = _free_port(), secrets.token_hex(16)
    log = log or root_dir / "jupyter-lab.log"
    command = [str(Path(bin_dir) / "jupyter"), "lab", "--no-browser", "--ip=127.0.0.1", f"--port={port}",
               f"--ServerApp.token={token}", f"--ServerApp.root_dir={root_dir}", "--ServerApp.open_browser=False",
               "--LabApp.expose_app_in_browser=True", *args]
    if os.geteuid() == 0:
        command.append("--allow-root")
    with open(log, "w") as out:
        process = subprocess.Popen(command, cwd=root_dir, env=env, stdout=out, stderr=subprocess.STDOUT)
    server = LabServer(f"http://127.0.0.1:{port}", token, Path(root_dir), log)
    try:
        deadline = time.monotonic() + timeout
        while True:
            if process.poll() is not None:
                raise RuntimeError(f"jupyter lab exited with {process.returncode}:\n{log.read_text()[-3000:]}")
            try:
                with urllib.request.urlopen(server.page_url("api/status"), timeout=5) as response:
                    if response.status == 200:
                        break
            except OSError:
                pass
            if time.monotonic() > deadline:
                raise RuntimeError(f"jupyter lab did not answer within {timeout:.0f} s:\n{log.read_text()[-3000:]}")
            time.sleep(0.5)
        yield server
    finally:
        process.terminate()
        try:
            process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


@pytest.fixture(scope="session")
def start_lab():
    return _start_lab


@pytest.fixture(scope="session")
def student_env(chromium_path):
    return H.cached_student_env()


@pytest.fixture(scope="session")
def student_lab(student_env, tmp_path_factory, screenshot_dir):
    """JupyterLab of the student environment over <tmp>/work (outside the repository), with a fresh home."""
    base = tmp_path_factory.mktemp("student-lab")
    home, work = base / "home", base / "work"
    home.mkdir()
    work.mkdir()
    # The tests shorten 07's training by editing locked cells (student_env.QUICK); Validate would rightly say they
    # changed. This file, read only by this server (its working folder), tells Validate not to compare checksums.
    (work / "nbgrader_config.py").write_text("c = get_config()\nc.Validator.ignore_checksums = True\n")
    env = H.student_process_env(home)
    with _start_lab(student_env.bin, work, env=env, log=screenshot_dir / "student-jupyter-lab.log") as server:
        yield server
