"""Small helpers of the end-to-end hub test: processes, ports, the hub REST API, kernels over websockets.

Nothing here knows about the course; test_hub.py and conftest.py put the pieces together.
"""
from __future__ import annotations

import json
import socket
import subprocess
import time
import uuid
from pathlib import Path

import psutil
import requests

ROOT = Path(__file__).resolve().parents[2]
VENV = ROOT / ".venv"
TOOLS = ROOT / ".tools"
CHP_VERSION = "5.3.0"
DEPLOY = ROOT / "deploy"
HUB_CONFIG = DEPLOY / "jupyterhub" / "jupyterhub_config.py"
STUDENT_CONFIG = DEPLOY / "jupyter" / "student"
INSTRUCTOR_CONFIG = DEPLOY / "jupyter" / "instructor"
COURSE_ID = "transformers101"
INSTRUCTOR = "instructor"
GRADER = f"grader-{COURSE_ID}"  # hub account of the course service
STUDENTS = ("student1", "student2")


class HubError(RuntimeError):
    """The hub, a server or a command did not do what the test needs; the message says what and why."""


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def find_or_install_chp() -> Path:
    """configurable-http-proxy: the project-local copy in .tools/, installed with npm when missing."""
    local = TOOLS / "node_modules" / ".bin" / "configurable-http-proxy"
    if local.exists():
        return local
    npm = subprocess.run(["which", "npm"], capture_output=True, text=True).stdout.strip()
    if not npm:
        raise HubError("configurable-http-proxy is missing and npm is not installed (install Node.js >= 18)")
    TOOLS.mkdir(exist_ok=True)
    res = subprocess.run(
        [npm, "install", "--prefix", str(TOOLS), "--no-audit", "--no-fund", f"configurable-http-proxy@{CHP_VERSION}"],
        capture_output=True, text=True, timeout=300,
    )
    if res.returncode != 0 or not local.exists():
        raise HubError(f"npm could not install configurable-http-proxy into {TOOLS}:\n{res.stdout}\n{res.stderr}")
    return local


def kill_tree(root_pid: int, grace_s: float = 15.0) -> None:
    """Stop a process and every descendant: SIGTERM to the root first (the hub stops its servers and the
    proxy itself), then SIGKILL to whatever of the family is still alive, process group included."""
    try:
        root = psutil.Process(root_pid)
        family = [root] + root.children(recursive=True)
    except psutil.NoSuchProcess:
        return
    try:
        root.terminate()
        psutil.wait_procs([root], timeout=grace_s)
    except psutil.NoSuchProcess:
        pass
    for proc in family:
        try:
            if proc.is_running():
                for child in proc.children(recursive=True):
                    child.kill()
                proc.kill()
        except psutil.NoSuchProcess:
            pass
    psutil.wait_procs(family, timeout=5)


class HubClient:
    """The hub's REST API (and the users' servers behind the proxy) through one base URL."""

    def __init__(self, base_url: str, token: str):
        self.base = base_url.rstrip("/")
        self.token = token

    def _headers(self, token=None):
        return {"Authorization": f"token {token or self.token}"}

    def api(self, method: str, path: str, ok=(200, 201, 202, 204), token=None, **kw):
        resp = requests.request(method, f"{self.base}/hub/api{path}", headers=self._headers(token), timeout=30, **kw)
        if resp.status_code not in ok:
            raise HubError(f"{method} /hub/api{path} -> {resp.status_code}: {resp.text[:500]}")
        return resp.json() if resp.content else None

    def server(self, method: str, user: str, path: str, token: str, ok=(200, 201, 204), **kw):
        """A request to /user/<user>/<path> with the given token (the user's own, like a browser session)."""
        resp = requests.request(method, f"{self.base}/user/{user}/{path.lstrip('/')}",
                                headers=self._headers(token), timeout=120, **kw)
        if ok and resp.status_code not in ok:
            raise HubError(f"{method} /user/{user}/{path} -> {resp.status_code}: {resp.text[:800]}")
        return resp

    def wait_until_up(self, timeout_s: float, proc: subprocess.Popen, log: Path) -> None:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if proc.poll() is not None:
                raise HubError(f"the hub exited with {proc.returncode}:\n{log.read_text()[-4000:]}")
            try:
                if requests.get(f"{self.base}/hub/api/", timeout=5).status_code == 200:
                    return
            except requests.ConnectionError:
                pass
            time.sleep(0.5)
        raise HubError(f"the hub did not answer within {timeout_s}s:\n{log.read_text()[-4000:]}")

    def start_server(self, user: str) -> None:
        self.api("POST", f"/users/{user}/server", ok=(201, 202, 400))  # 400: already running

    def wait_for_server(self, user: str, timeout_s: float, log: Path) -> None:
        """Poll the user's model until the default server is ready (a first spawn can take a while)."""
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            try:
                model = self.api("GET", f"/users/{user}", ok=(200,))
            except (HubError, requests.ConnectionError):
                model = None  # the hub can answer 500 while it is busy spawning
            if model is not None:
                server = model.get("servers", {}).get("")
                if server and server.get("ready"):
                    return
                if server is None and not model.get("pending"):
                    raise HubError(f"{user}'s server stopped while starting:\n{log.read_text()[-4000:]}")
            time.sleep(1.0)
        raise HubError(f"{user}'s server was not ready within {timeout_s}s:\n{log.read_text()[-4000:]}")

    def run_code(self, user: str, token: str, code: str, timeout_s: float = 120) -> str:
        """Start a kernel on the user's server, run `code`, return its stdout (raises on an error reply)."""
        import websocket

        kernel = self.server("POST", user, "api/kernels", token, json={"name": "python3"}).json()
        ws_url = self.base.replace("http://", "ws://") + f"/user/{user}/api/kernels/{kernel['id']}/channels"
        ws = websocket.create_connection(ws_url, header=[f"Authorization: token {token}"], timeout=timeout_s,
                                         suppress_origin=True)
        try:
            msg_id = uuid.uuid4().hex
            ws.send(json.dumps({
                "header": {"msg_id": msg_id, "username": user, "session": uuid.uuid4().hex,
                           "msg_type": "execute_request", "version": "5.3"},
                "parent_header": {}, "metadata": {}, "channel": "shell", "buffers": [],
                "content": {"code": code, "silent": False, "store_history": False,
                            "user_expressions": {}, "allow_stdin": False, "stop_on_error": True},
            }))
            stdout, error, idle = [], None, False
            deadline = time.monotonic() + timeout_s
            while not idle and time.monotonic() < deadline:
                msg = json.loads(ws.recv())
                if msg.get("parent_header", {}).get("msg_id") != msg_id:
                    continue
                kind = msg["msg_type"]
                if kind == "stream" and msg["content"]["name"] == "stdout":
                    stdout.append(msg["content"]["text"])
                elif kind == "error":
                    error = f"{msg['content']['ename']}: {msg['content']['evalue']}"
                elif kind == "status" and msg["content"]["execution_state"] == "idle":
                    idle = True
            if error:
                raise HubError(f"code on {user}'s kernel failed: {error}")
            if not idle:
                raise HubError(f"code on {user}'s kernel did not finish within {timeout_s}s")
            return "".join(stdout)
        finally:
            ws.close()
            self.server("DELETE", user, f"api/kernels/{kernel['id']}", token, ok=None)
