"""A local grading cluster starts no HTTP server (autograder/grade/dask_nodes.py): its scheduler, nannies and workers
listen on their TLS comms only. The same cluster with Dask's own classes does start them (the control). Attacks
from another account on every socket of a real grading run: tests/autograder/pipeline/test_cluster_access.py."""
from __future__ import annotations

import os
import warnings

import psutil
import pytest

from autograder.grade.cluster import dask_client


def _listening(before: set[int] = frozenset()) -> set[int]:
    """The TCP ports this process and its children listen on, less those of `before` (the ports open before the
    cluster started: under pytest-xdist a worker may still hold a server or kernels of an earlier test's
    session-scoped fixture)."""
    me = psutil.Process()
    ports = set()
    for proc in [me, *me.children(recursive=True)]:
        try:
            ports.update(c.laddr.port for c in proc.net_connections(kind="inet") if c.status == psutil.CONN_LISTEN)
        except psutil.NoSuchProcess:  # a child that ended meanwhile
            continue
    return ports - set(before)


def _has_http_server(dask_worker) -> bool:
    return hasattr(dask_worker, "http_server")


@pytest.mark.timeout(300)
def test_the_local_cluster_listens_on_its_tls_comms_only():
    before = _listening()
    with warnings.catch_warnings(record=True) as caught, dask_client(workers=1) as client:
        warnings.simplefilter("always")
        scheduler = client.cluster.scheduler
        workers = client.scheduler_info()["workers"]
        assert list(client.run(os.getpid).values())                       # the worker runs code
        assert not hasattr(scheduler, "http_server") and "dashboard" not in scheduler.services
        assert list(client.run(_has_http_server).values()) == [False]
        nannies = [w["nanny"] for w in workers.values()]
        comms = {int(address.rsplit(":", 1)[1]) for address in [scheduler.address, *workers, *nannies]}
        assert all(address.startswith("tls://127.0.0.1:") for address in [scheduler.address, *workers, *nannies])
        assert _listening(before) == comms and len(comms) == 3, (_listening(before), comms)
    assert not [w for w in caught if "HTTP server" in str(w.message)]


def test_dask_itself_would_start_an_http_server():
    """The control: Dask's scheduler, with the dashboard off, listens on a plain HTTP port too."""
    from distributed import Scheduler

    import asyncio

    async def ports():
        async with Scheduler(host="127.0.0.1", port=0, dashboard=False, dashboard_address=None) as scheduler:
            return scheduler.http_server.port, scheduler.port

    http, comm = asyncio.run(ports())
    assert http and http != comm
