"""Nobody but the grader runs code on the grading cluster (issue #32, door 2).

During a real `autograder grade`, another local account (uid 65534) finds every port the grading processes
listen on and tries what once worked: connect a Dask client (plain TCP, or TLS with a certificate of its own)
and `client.run` code in the workers. Each try must be refused, and grading must still succeed. The same
attacker against a plain-TCP cluster does run code (as uid 0): the attack is real, only the door is shut.
"""
from __future__ import annotations

import os
import subprocess
import sys
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


def attack(addresses: list[str]) -> list[str]:
    """One attacker process per address and scheme (plain TCP, TLS with its own certificate), all at once."""
    targets = [scheme + address for address in addresses for scheme in ("tcp://", "tls://")]
    procs = [subprocess.Popen([sys.executable, "-c", ATTACKER, target], stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True) for target in targets]
    lines = []
    for proc in procs:
        out, err = proc.communicate(timeout=300)
        assert out.startswith(("RAN ", "REFUSED ")), (out, err[-3000:])
        lines.append(out.strip())
    return lines


def listening(pid: int) -> set[str]:
    """host:port of every socket the process `pid` and its children listen on."""
    found = set()
    try:
        root = psutil.Process(pid)
        for proc in [root, *root.children(recursive=True)]:
            for conn in proc.net_connections(kind="inet"):
                if conn.status == psutil.CONN_LISTEN:
                    found.add(f"{conn.laddr.ip}:{conn.laddr.port}")
    except psutil.NoSuchProcess:
        pass
    return found


def test_the_attacker_runs_code_on_a_plain_cluster():
    from distributed import Client, LocalCluster

    with LocalCluster(n_workers=1, processes=False, host="127.0.0.1", protocol="tcp://",
                      dashboard_address=None) as cluster, Client(cluster):
        address = cluster.scheduler_address.removeprefix("tcp://")
        assert attack([address])[0] == f"RAN tcp://{address} {{0}}"


def test_a_second_account_cannot_run_code_on_the_grading_cluster(course, tmp_path, helpers):
    inbox = tmp_path / "inbox"
    # two loops that run into the cell timeout keep the cluster up (at least 75 s) while the attack goes on (its
    # processes give up after 20 s each: `ATTACKER`)
    students = {"ann": "solution", "ben": "solution", "cyd": "infinite_loop", "dee": "infinite_loop"}
    for student, kind in students.items():
        helpers.write_submission(inbox, course, student, kind)
    collect(course, inbox)
    grading = subprocess.Popen([sys.executable, "-m", "autograder", "grade", "ps1", "--workers", "2",
                                "--course-dir", str(course), "--cell-timeout", "75"],
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 240
        while len(listening(grading.pid)) < 5 and grading.poll() is None and time.monotonic() < deadline:
            time.sleep(0.2)  # the scheduler, two workers and their nannies
        addresses = sorted(listening(grading.pid))
        assert len(addresses) >= 5, f"grading ended before its cluster was seen: {addresses}"
        lines = attack(addresses)
        assert grading.poll() is None, "grading ended during the attack: its cluster was not there to refuse it"
        out, err = grading.communicate(timeout=600)
    finally:
        if grading.poll() is None:
            grading.kill()
    assert not [line for line in lines if not line.startswith("REFUSED")], lines
    assert f"graded {len(students)} notebook(s)" in out and " 0 failed" in out, (out, err[-3000:])
    scores = {line.split()[0]: line.split()[2] for line in out.splitlines() if line.startswith("  ")}
    assert scores["ann"] == scores["ben"] == "7/7", out  # the reference's score: graded as usual
