"""Dask's scheduler and worker without their HTTP server: what a local grading cluster runs (cluster.py).

Dask starts an HTTP server in every scheduler and worker, dashboard or not (`distributed.node.ServerNode.
start_http_server`, called unconditionally by `Scheduler.start_unsafe` and `Worker.start_unsafe`; the scheduler's
asks for port 8787 and takes another when that one is busy: "Hosting the HTTP server on port ... instead"). It
speaks plain HTTP on the loopback address, where every account of the machine can reach it, and no setting
turns it off. Here it is never started: the node keeps the routing application that Dask's shutdown code walks
(`ServerNode._stop_services`), without a server, so it listens on nothing. The grading cluster's only sockets are
then its TLS comms, which refuse a peer without the run's certificate (issue #47).
"""
from __future__ import annotations

from distributed import Nanny, Scheduler, Worker
from distributed.http.routing import RoutingApplication


def _no_http_server(node, routes, dashboard_address=None, default_port=0, ssl_options=None) -> None:
    """`ServerNode.start_http_server` without the server: the routes' application only (nothing listens)."""
    node.http_application = RoutingApplication(routes)


class QuietScheduler(Scheduler):
    """A Dask scheduler without an HTTP server."""

    def start_http_server(self, routes, dashboard_address, default_port=0, ssl_options=None):
        _no_http_server(self, routes, dashboard_address, default_port, ssl_options)


class QuietWorker(Worker):
    """A Dask worker without an HTTP server."""

    def start_http_server(self, routes, dashboard_address, default_port=0, ssl_options=None):
        _no_http_server(self, routes, dashboard_address, default_port, ssl_options)


class QuietNanny(Nanny):
    """A nanny (no HTTP server of its own) whose worker process runs a `QuietWorker`."""

    def __init__(self, *args, **kwargs):
        kwargs["worker_class"] = QuietWorker
        super().__init__(*args, **kwargs)
