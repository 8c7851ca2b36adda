"""Nobody but the grader runs code on the grading cluster (issue #32, door 2), and the grading run listens on
nothing that answers an unauthenticated peer (issue #47).

During a real `autograder grade`, another local account (uid 65534) finds every socket the grading processes
listen on (TCP, and Unix sockets: the jailed kernels' included) and tries what once worked: connect a Dask
client (plain TCP, or TLS with a certificate of its own) and `client.run` code in the workers; send an HTTP
request, in plain text and over TLS without a certificate (Dask's HTTP servers once answered on loopback); connect
to each Unix socket. Each try must be refused, grading must still succeed, and no Dask HTTP server may start
("Hosting the HTTP server" on stderr). The same attacker against a plain-TCP cluster with Dask's defaults does run
code (as uid 0) and gets answers from its HTTP server, and connects to a Unix socket anyone may reach: the
attacks are real, only the doors are shut.
"""
from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time

import psutil
import pytest

from autograder.submissions.collect import collect

pytestmark = [pytest.mark.slow, pytest.mark.pipeline,
              pytest.mark.skipif(os.geteuid() != 0, reason="needs root to act as a second account (uid 65534)")]

NOBODY = 65534

# Imports first (the interpreter may live where uid 65534 cannot read), then the switch of account, then the
# attack on one address: one line, RAN (with the workers' uids) or REFUSED (with the reason's type).
ATTACKER = r"""
import os, signal, sys
from distributed import Client
from distributed.security import Security
import distributed.comm.tcp, ssl, asyncio
own = Security.temporary()  # a certificate of its own: not signed by the run's authority
os.setgroups([]); os.setgid(NOBODY); os.setuid(NOBODY)
assert os.getuid() == NOBODY
address = sys.argv[1]
def give_up(*_):
    raise TimeoutError("no answer in 20 s")
signal.signal(signal.SIGALRM, give_up)
signal.alarm(20)  # a client that neither runs code nor gives up within 20 s (it keeps retrying) is refused
try:
    with Client(address, timeout="5s", security=own if address.startswith("tls://") else None) as client:
        print("RAN", address, set(client.run(os.getuid).values()), flush=True)
except BaseException as exc:
    print("REFUSED", address, type(exc).__name__, flush=True)
""".replace("NOBODY", str(NOBODY))


# The same account, without Dask, on each target of its command line in turn: an HTTP request in plain text
# ("http=host:port") or over TLS with no certificate ("https=host:port"), or a connection to a Unix socket
# ("unix=path", "unix=@name" for an abstract one). One line each: ANSWERED (an HTTP answer, or any data over TLS),
# ACCEPTED (a Unix socket let it in) or REFUSED (with what happened).
RAW_ATTACKER = r"""
import os, signal, socket, ssl, sys
import encodings.idna  # what a host name's lookup loads, loaded before the switch of account
context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
context.check_hostname, context.verify_mode = False, ssl.CERT_NONE
os.setgroups([]); os.setgid(NOBODY); os.setuid(NOBODY)
signal.alarm(240)
def probe(kind, target):
    if kind == "unix":
        peer = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        peer.settimeout(5)
        peer.connect("\0" + target[1:] if target.startswith("@") else target)
        return "ACCEPTED"
    host, port = target.rsplit(":", 1)
    peer = socket.create_connection((host, int(port)), timeout=5)
    if kind == "https":
        peer = context.wrap_socket(peer)
    peer.sendall(b"GET / HTTP/1.0\r\nHost: grader\r\n\r\n")
    answer = peer.recv(64)
    answered = answer.startswith(b"HTTP/") or (kind == "https" and bool(answer))
    return ("ANSWERED " if answered else "REFUSED ") + repr(answer[:16])
for argument in sys.argv[1:]:
    kind, _, target = argument.partition("=")
    try:
        result = probe(kind, target)
    except Exception as exc:
        result = "REFUSED " + type(exc).__name__
    word, _, detail = result.partition(" ")
    print(word, kind, target, detail, flush=True)
""".replace("NOBODY", str(NOBODY))
WORDS = ("RAN ", "REFUSED ", "ANSWERED ", "ACCEPTED ")


def attack(addresses: list[str]) -> list[str]:
    """One attacker process per address and scheme (plain TCP, TLS with its own certificate), all at once."""
    procs = [subprocess.Popen([sys.executable, "-c", ATTACKER, scheme + address], stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True)
             for address in addresses for scheme in ("tcp://", "tls://")]
    lines = []
    for proc in procs:
        out, err = proc.communicate(timeout=300)
        assert out.startswith(WORDS), (out, err[-3000:])
        lines.append(out.strip())
    return lines


def attack_raw(addresses: list[str], unix_paths=()) -> list[str]:
    """HTTP (plain and over TLS without a certificate) to each host:port, a connection to each Unix socket: one
    attacker process, one line per try."""
    targets = [f"{kind}={address}" for address in addresses for kind in ("http", "https")]
    targets += [f"unix={path}" for path in unix_paths]
    result = subprocess.run([sys.executable, "-c", RAW_ATTACKER, *targets], capture_output=True, text=True,
                            timeout=300)
    lines = result.stdout.splitlines()
    assert len(lines) == len(targets) and all(line.startswith(WORDS) for line in lines), (lines, result.stderr)
    return [line.strip() for line in lines]


def _tree(pid: int) -> list[psutil.Process]:
    try:
        root = psutil.Process(pid)
        return [root, *root.children(recursive=True)]
    except psutil.NoSuchProcess:
        return []


def listening(pid: int) -> set[str]:
    """host:port of every TCP socket the process `pid` and its children listen on."""
    found = set()
    for proc in _tree(pid):
        try:
            connections = proc.net_connections(kind="inet")
        except psutil.NoSuchProcess:
            continue
        found.update(f"{c.laddr.ip}:{c.laddr.port}" for c in connections if c.status == psutil.CONN_LISTEN)
    return found


SO_ACCEPTCON = 0x10000  # /proc/net/unix "Flags": a listening socket


def unix_listening(pid: int) -> set[str]:
    """Path (or "@name") of every listening Unix socket of the process `pid` and its children.

    psutil lists the Unix sockets of the calling process's network namespace only, and a jailed kernel has a
    namespace of its own: each process's own table (/proc/PID/net/unix) is read, matched with the inodes of the
    sockets it holds open."""
    found = set()
    for proc in _tree(pid):
        try:
            inodes = {link[len("socket:["):-1] for link in
                      (os.readlink(f"/proc/{proc.pid}/fd/{fd}") for fd in os.listdir(f"/proc/{proc.pid}/fd"))
                      if link.startswith("socket:[")}
            with open(f"/proc/{proc.pid}/net/unix") as table:
                rows = [line.split() for line in table.read().splitlines()[1:]]
        except OSError:  # the process ended meanwhile
            continue
        found.update(row[7] for row in rows
                     if len(row) >= 8 and int(row[3], 16) & SO_ACCEPTCON and row[6] in inodes)
    return found


def test_the_attacker_runs_code_on_a_plain_cluster_and_reads_its_http_server():
    from distributed import Client, LocalCluster

    with LocalCluster(n_workers=1, processes=False, host="127.0.0.1", protocol="tcp://",
                      dashboard_address=None) as cluster, Client(cluster):
        address = cluster.scheduler_address.removeprefix("tcp://")
        assert attack([address])[0] == f"RAN tcp://{address} {{0}}"
        http = f"127.0.0.1:{cluster.scheduler.http_server.port}"  # started although the dashboard is off
        assert attack_raw([http])[0].startswith(f"ANSWERED http {http} b'HTTP/")


def test_the_attacker_connects_to_a_unix_socket_it_may_reach():
    folder = tempfile.mkdtemp(prefix="ag-attack-", dir="/tmp")
    try:
        os.chmod(folder, 0o755)
        path = os.path.join(folder, "socket")
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as server:
            server.bind(path)
            os.chmod(path, 0o777)
            server.listen()
            assert attack_raw([], [path]) == [f"ACCEPTED unix {path}"]
    finally:
        shutil.rmtree(folder)


def test_a_second_account_cannot_run_code_on_the_grading_cluster(course, tmp_path, helpers):
    inbox = tmp_path / "inbox"
    # two loops that run into the cell time limit keep the cluster up (at least 25 s, then 25 s more for each, graded
    # once more alone) while the attack goes on (its Dask processes give up after 20 s each: `ATTACKER`)
    students = {"ann": "solution", "ben": "solution", "cyd": "infinite_loop", "dee": "infinite_loop"}
    for student, kind in students.items():
        helpers.write_submission(inbox, course, student, kind)
    collect(course, inbox)
    grading = subprocess.Popen([sys.executable, "-m", "autograder", "grade", "ps1", "--workers", "2",
                                "--course-dir", str(course), "--cell-timeout", "25"],
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 240
        while (len(listening(grading.pid)) < 5 or len(unix_listening(grading.pid)) < 2) \
                and grading.poll() is None and time.monotonic() < deadline:
            time.sleep(0.2)  # the scheduler, two workers and their nannies; a kernel on each worker
        addresses, unix_paths = sorted(listening(grading.pid)), sorted(unix_listening(grading.pid))
        assert len(addresses) >= 5 and unix_paths, f"grading ended before its cluster was seen: {addresses}"
        lines = attack(addresses) + attack_raw(addresses, unix_paths)
        assert grading.poll() is None, "grading ended during the attack: its cluster was not there to refuse it"
        out, err = grading.communicate(timeout=600)
    finally:
        if grading.poll() is None:
            grading.kill()
    assert not [line for line in lines if not line.startswith("REFUSED")], lines
    assert len(addresses) == 5, addresses  # the scheduler's, the workers' and the nannies' TLS comms: nothing else
    assert "Hosting the HTTP server" not in err, err[-3000:]
    assert f"graded {len(students)} notebook(s)" in out and " 0 failed" in out, (out, err[-3000:])
    scores = {line.split()[0]: line.split()[2] for line in out.splitlines() if line.startswith("  ")}
    assert scores["ann"] == scores["ben"] == "7/7", out  # the reference's score: graded as usual
