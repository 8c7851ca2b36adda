"""coursekit.probe: the kernel side of judging (hand_in, the request runner) and the wire codec."""
from __future__ import annotations

import json

import numpy as np
import pytest
import torch

from coursekit import probe


def roundtrip(value):
    return probe.decode(json.loads(json.dumps(probe.encode(value))))


@pytest.mark.parametrize("dtype", [torch.float16, torch.float32, torch.float64, torch.bfloat16, torch.int8,
                                   torch.int16, torch.int32, torch.int64, torch.uint8, torch.bool])
def test_tensors_cross_the_wire_exactly(dtype):
    x = (torch.randn(2, 3, 4) * 10).to(dtype)
    y = roundtrip(x)
    assert y.dtype == dtype and y.shape == x.shape and torch.equal(y, x)
    assert roundtrip(x.transpose(0, 2)).shape == (4, 3, 2)      # non-contiguous
    assert torch.equal(roundtrip(torch.tensor(3.5)), torch.tensor(3.5))  # 0-d


def test_plain_data_keeps_its_python_types():
    value = {"a": (1, 2.5, None, True), "b": [np.arange(3, dtype=np.int64), np.float32(1.5)], 3: "x",
             "nan": float("nan"), "big": 2**70}
    back = roundtrip(value)
    assert back["a"] == (1, 2.5, None, True) and isinstance(back["a"], tuple)
    assert isinstance(back["b"], list) and np.array_equal(back["b"][0], np.arange(3))
    assert back["b"][1] == np.float32(1.5) and back[3] == "x" and back["big"] == 2**70
    assert np.isnan(back["nan"])
    param = roundtrip(torch.nn.Parameter(torch.ones(2)))
    assert isinstance(param, torch.nn.Parameter)


@pytest.mark.parametrize("bad", [
    [1, 2], {"tensor": {"dtype": "float32", "shape": [3], "data": "AAAA"}},       # data does not match the shape
    {"tensor": {"dtype": "object", "shape": [1], "data": ""}}, {"pickle": "gASV"}, {"a": 1, "b": 2},
    {"tensor": {"dtype": "float32", "shape": [-1], "data": ""}}, {"float": "1e999"},
])
def test_malformed_replies_are_refused(bad):
    with pytest.raises(ValueError):
        probe.decode(bad, resolve=lambda info: info)


def test_deep_nesting_and_size_limits():
    value = {"list": [1]}
    for _ in range(probe.MAX_DEPTH + 3):
        value = {"list": [value]}
    with pytest.raises(ValueError):
        probe.decode(value)
    big = probe.encode(torch.zeros(1000))
    with pytest.raises(ValueError):
        probe.decode(big, limits={"bytes": 100})


def test_hand_in_records_and_fails_only_under_plain_nbgrader(monkeypatch, capsys):
    monkeypatch.delenv(probe.JUDGE_ENV, raising=False)
    monkeypatch.setenv("NBGRADER_EXECUTION", "autograde")
    with pytest.raises(RuntimeError, match="autograder grade"):
        probe.hand_in("demo_check", len)
    monkeypatch.setenv(probe.JUDGE_ENV, "1")
    probe.hand_in("demo_check", len, key=3)
    assert probe.ProbeState.subjects["demo_check"] == ((len,), {"key": 3})
    monkeypatch.delenv(probe.JUDGE_ENV)
    monkeypatch.delenv("NBGRADER_EXECUTION")
    probe.hand_in("demo_check", len)
    assert "autograder grade" in capsys.readouterr().out


def test_requests_run_student_code_and_report_errors_as_data(monkeypatch):
    monkeypatch.setenv(probe.JUDGE_ENV, "1")

    def student(x, scale=1.0):
        if scale < 0:
            raise ValueError("negative scale")
        return x * scale

    probe.hand_in("scaling", student)
    target = {"subject": "scaling", "index": 0}
    reply = probe.run({"id": 1, "op": "call", "target": target, "args": [probe.encode(torch.ones(2))],
                       "kwargs": {"scale": 3.0}})
    assert torch.equal(probe.decode(reply["value"]), torch.full((2,), 3.0))
    reply = probe.run({"id": 2, "op": "call", "target": target, "args": [probe.encode(torch.ones(2))],
                       "kwargs": {"scale": -1.0}})
    assert reply["error"]["type"] == "ValueError" and "negative scale" in reply["error"]["message"]
    assert any("raise ValueError" in frame[2] for frame in reply["error"]["frames"])  # the student's own line
    missing = probe.run({"id": 3, "op": "describe", "target": {"subject": "nothing"}})
    assert missing["error"]["not_handed_in"]


def test_the_grader_may_construct_only_public_helpers():
    reply = probe.run({"id": 1, "op": "call", "target": {"new": "os.system"}, "args": [probe.encode("true")]})
    assert reply["error"]["type"] == "PermissionError"
    reply = probe.run({"id": 2, "op": "call", "target": {"new": "torch.nn.Linear"}, "args": [3, 4]})
    assert reply["value"]["object"]["module"] is True
