"""The grader's side of the probe: proxies for the objects a student handed in.

A hidden check never touches a student's object directly. It holds `RemoteObject`s and every use of one is a
request over a `Channel` to `coursekit.probe` in the student's kernel:

    fn(q, k, v)              -> call the handed-in function; returns DATA (tensors, numbers, lists...)
    module = cls(12, 3)      -> construct in the kernel; returns a RemoteObject (a handle) for the new module
    module.attr("encode")    -> a RemoteObject for an attribute (no request until it is used)
    module.describe()        -> class, parameter names and shapes (as data)
    module.load_state(sd)    -> load grader-given weights; returns (missing, unexpected)
    new(channel, "torch.optim.SGD", ...) -> construct a public helper object in the kernel
    define(channel, code)    -> run the grader's compiled code in a new module in the kernel (stand-ins); its handle
    module.lend(name=obj)    -> bind `obj` to `name` in the globals that module's code reads; unlend(channel) undoes

Errors raised by the student's code come back as `StudentError` (type name, message and the student's own
frames); a channel that fails (timeout, dead kernel, a malformed reply) raises `ProbeBroken`. Replies are decoded
with limits: they are hostile input.

`@hidden_check` lets a check be called with ordinary Python objects too (tests, the reference itself): they are handed
in to an in-process kernel side (`LoopbackChannel`), so the same JSON round trip is exercised.
"""
from __future__ import annotations

import base64
import functools
import itertools
import json
from typing import Any

import torch

from coursekit import probe
from autograder.checks.kit.draws import seed_for
from autograder.checks.kit.criteria import judged_by_criteria
from autograder.errors import AutograderError

MAX_REPLY_BYTES = 256 * 1024**2  # one reply; far above any check's needs (the largest is ~2 MB)


class ProbeBroken(AutograderError):
    """The request could not be answered: the student's code did not return in time, the kernel died, or the
    reply was not a reply."""


class StudentError(AutograderError):
    """The student's code raised an exception (reported as data by the kernel side)."""

    def __init__(self, info: dict):
        self.type_name = str(info.get("type", "Exception"))[:100]
        self.mro = [str(n)[:100] for n in info.get("mro", [])][:12] or [self.type_name]
        self.message = str(info.get("message", ""))[:2000]
        self.frames = [f for f in info.get("frames", []) if isinstance(f, list) and len(f) == 4][:4]
        self.not_handed_in = bool(info.get("not_handed_in"))
        super().__init__(f"{self.type_name}: {self.message}")

    def is_a(self, name: str) -> bool:
        return name in self.mro

    def where(self) -> list[str]:
        """The student's own lines where the error happened, innermost last (for the message)."""
        return [f"{str(where)[:60]}, line {int(line)}: {str(text).strip()[:120]}"
                for where, line, text, _name in self.frames if text]


def _device_map(name: str) -> torch.device:
    from autograder.checks.kit.tolerance import grading_device

    return grading_device() if str(name).startswith("cuda") else torch.device("cpu")


class Channel:
    """Sends one request to the kernel side and returns its reply (a dict with "value" or "error")."""

    _ids = itertools.count(1)

    def request(self, request: dict) -> dict:  # pragma: no cover - interface
        raise NotImplementedError

    def send(self, op: str, target: dict, args=(), kwargs=None, **extra) -> Any:
        request = {"id": next(self._ids), "op": op, "target": target,
                   "args": [probe.encode(a, _as_ref) for a in args],
                   "kwargs": {k: probe.encode(v, _as_ref) for k, v in (kwargs or {}).items()}, **extra}
        reply = self.request(request)
        if not isinstance(reply, dict) or reply.get("id") != request["id"]:
            raise ProbeBroken("the kernel sent no reply to the grader's request")
        if "error" in reply:
            raise StudentError(reply["error"] if isinstance(reply["error"], dict) else {})
        try:
            return probe.decode(reply.get("value"), lambda info: self._proxy(info), _device_map,
                                {"bytes": MAX_REPLY_BYTES})
        except (ValueError, TypeError, KeyError) as exc:
            raise ProbeBroken(f"the kernel's reply could not be read ({exc})") from None

    def _proxy(self, info) -> "RemoteObject":
        if not isinstance(info, dict) or not isinstance(info.get("handle"), int):
            raise ValueError("malformed object")
        return RemoteObject(self, {"handle": info["handle"]}, kind=info)


def _as_ref(obj):
    if isinstance(obj, RemoteObject):
        return obj.target
    raise TypeError(f"a {type(obj).__name__} cannot be sent to the kernel")


class LoopbackChannel(Channel):
    """The kernel side in this process (tests, and checking the reference): requests and replies still go
    through JSON, exactly as they do to a real kernel."""

    def request(self, request: dict) -> dict:
        reply = probe.run(json.loads(json.dumps(request)))
        return json.loads(json.dumps(reply))


class RemoteObject:
    """A student's object (or one made in the kernel on the grader's behalf), known by where to find it."""

    def __init__(self, channel: Channel, target: dict, kind: dict | None = None):
        self.channel = channel
        self.target = target
        self._kind = kind

    def __repr__(self):
        return f"RemoteObject({self.target})"

    # -- what it is
    @property
    def kind(self) -> dict:
        """{"type", "class", "callable", "module_class", "module"} (one request, then cached)."""
        if self._kind is None:
            self._kind = self.channel.send("describe", self.target)
        return self._kind

    def describe(self, attrs=(), callables=()) -> dict:
        """kind + for modules: parameters [[name, shape, dtype]], buffers, modules [[name, type]], module_bases
        {name: [class names of its MRO]}, training;
        `has[a]`: attribute `a` is an nn.Parameter; `callables[a]`: attribute `a` is callable."""
        return self.channel.send("describe", self.target, attrs=list(attrs), callables=list(callables))

    # -- using it
    def attr(self, *names: str) -> "RemoteObject":
        return RemoteObject(self.channel, {**self.target, "attrs": [*self.target.get("attrs", []), *names]})

    def __call__(self, *args, _seed: int | None = None, _no_grad: bool = False, _echo_args: bool = False, **kwargs):
        """Call it in the kernel. `_seed`: torch's RNG seeded for the call (restored after); `_no_grad`: under
        torch.no_grad(); `_echo_args`: return (result, args, kwargs) with the arguments as they are after the call."""
        extra = {}
        if _echo_args:
            extra["echo_args"] = True
        if _seed is not None:
            extra["seed"] = seed_for(int(_seed))  # this submission's seed (kit/draws.py)
        if _no_grad:
            extra["no_grad"] = True
        return self.channel.send("call", self.target, args, kwargs, **extra)

    def fetch(self):
        """The object itself, as data (fails with TypeError-like StudentError text if it is not data)."""
        return self.channel.send("get", self.target)

    def load_state(self, state: dict) -> tuple[list[str], list[str]]:
        missing, unexpected = self.channel.send("load", self.target, [state])
        return list(missing), list(unexpected)

    def state(self) -> dict:
        return self.channel.send("state", self.target)

    def lend(self, **names: "RemoteObject") -> list[str]:
        """Bind kernel objects to global names of this object's code (see `coursekit.probe`); the names bound."""
        return list(self.channel.send("lend", self.target, kwargs=names))


def new(channel: Channel, path: str, *args, **kwargs) -> RemoteObject:
    """Construct `path` (a public class: torch/numpy/gensim/coursekit) in the kernel; returns its handle."""
    return RemoteObject(channel, {"new": path})(*args, **kwargs)


def define(channel: Channel, code: bytes) -> RemoteObject:
    """Run `code` (the grader's own, compiled and marshalled: `stand_ins.compiled_for`) in a new module in the
    kernel; returns the module's handle."""
    return channel.send("define", {}, code=base64.b64encode(code).decode("ascii"))


def unlend(channel: Channel) -> None:
    """Undo every `lend` in the kernel and switch off what `define` made there."""
    channel.send("unlend", {})


_loopback_names = itertools.count(1)


def hand_in_locally(objects: tuple, named: dict, check: str = "check") -> tuple[tuple, dict]:
    """Hand ordinary objects in to the in-process kernel side; returns RemoteObjects for them."""
    name = f"{check}#{next(_loopback_names)}"
    probe.ProbeState.subjects[name] = (tuple(objects), dict(named))
    channel = LoopbackChannel()
    remote = tuple(RemoteObject(channel, {"subject": name, "index": i}) for i in range(len(objects)))
    remote_named = {k: RemoteObject(channel, {"subject": name, "key": k}) for k in named}
    return remote, remote_named


def hidden_check(check):
    """The decorator every hidden check wears: the check's criteria give partial credit (`criteria.py`), and a check
    called with ordinary objects (tests, the reference itself) hands them in locally; RemoteObjects pass straight
    through."""
    check = judged_by_criteria(check)

    @functools.wraps(check)
    def wrapper(*objects, **named):
        if all(isinstance(o, RemoteObject) for o in (*objects, *named.values())):
            return check(*objects, **named)
        objects, named = hand_in_locally(objects, named, check.__name__)
        try:
            return check(*objects, **named)
        finally:  # forget what this local check handed in and made
            for remote in (*objects, *named.values()):
                probe.ProbeState.subjects.pop(remote.target["subject"], None)
            probe.ProbeState.handles.clear()

    return wrapper
