"""Fixtures of notebook 07's hidden-check tests: a kernel side that records every request the grader sends."""
from __future__ import annotations

import json

import pytest

from autograder.checks.kit import remote as _remote
from coursekit import probe


class RecordingChannel(_remote.LoopbackChannel):
    """The in-process kernel side, keeping a copy of every request the grader sends."""

    def __init__(self):
        self.requests = []

    def request(self, request):
        self.requests.append(json.loads(json.dumps(request)))
        return super().request(request)


@pytest.fixture
def recorded():
    """hand_in(objects) -> (channel, RemoteObjects on a RecordingChannel); forgets what was handed in afterwards."""
    names = []

    def hand_in(*objects, **named):
        remote, remote_named = _remote.hand_in_locally(objects, named, "recorded")
        names.append(remote[0].target["subject"])
        channel = RecordingChannel()
        rebind = lambda r: _remote.RemoteObject(channel, r.target)  # noqa: E731
        return channel, tuple(rebind(r) for r in remote), {k: rebind(v) for k, v in remote_named.items()}

    yield hand_in
    for name in names:
        probe.ProbeState.subjects.pop(name, None)
    probe.ProbeState.handles.clear()
