"""What a student sees when a self-check fails: rendered by a real IPython kernel, as JupyterLab shows it.

A failing check must show its message (problem + HINT) first, then the student's own line, and nothing of
coursekit's or any library's frames, nor a "During handling of the above exception" chain.
"""
from __future__ import annotations

import re

import pytest

from coursekit.mistakes import MISTAKES

pytestmark = pytest.mark.timeout(240)

ANSI = re.compile(r"\x1b\[[0-9;]*m")
MAX_LINES = 8


@pytest.fixture(scope="module")
def kernel():
    """One IPython kernel of this interpreter for the module; `run(code)` returns its outputs."""
    from jupyter_client.manager import start_new_kernel

    manager, client = start_new_kernel(kernel_name="python3", extra_arguments=[])

    def run(code: str) -> list[dict]:
        outputs = []
        msg_id = client.execute(code)
        while True:
            msg = client.get_iopub_msg(timeout=120)
            if msg["parent_header"].get("msg_id") != msg_id:
                continue
            kind = msg["msg_type"]
            if kind == "status" and msg["content"]["execution_state"] == "idle":
                return outputs
            if kind in ("stream", "error", "display_data", "execute_result"):
                outputs.append({"type": kind, **msg["content"]})

    yield run
    client.stop_channels()
    manager.shutdown_kernel(now=True)


def _error(outputs) -> tuple[dict, list[str]]:
    errors = [o for o in outputs if o["type"] == "error"]
    assert len(errors) == 1, outputs
    return errors[0], ANSI.sub("", "\n".join(errors[0]["traceback"])).splitlines()


def _assert_short_and_clean(lines: list[str]) -> None:
    text = "\n".join(lines)
    assert len(lines) <= MAX_LINES, text
    for forbidden in ("site-packages", "coursekit/", "toolkit.py", "During handling", "Traceback",
                      "direct cause", "File \""):
        assert forbidden not in text, f"{forbidden!r} in what the student reads:\n{text}"


def test_stub_failure_is_the_hint_and_the_students_line(kernel):
    outputs = kernel(
        "from coursekit.checks.classifier.checks import check_masked_mean_pool\n"
        "def masked_mean_pool(x, mask):\n"
        "    raise NotImplementedError()\n"
        "\n"
        "check_masked_mean_pool(masked_mean_pool)\n")
    error, lines = _error(outputs)
    _assert_short_and_clean(lines)
    assert error["ename"] == "CheckFailed"
    assert lines[0].startswith("Self-check failed: masked_mean_pool is not implemented yet"), lines
    assert lines[1].startswith("HINT: replace `raise NotImplementedError()`"), lines
    assert "checked at line 5 of this cell: check_masked_mean_pool(masked_mean_pool)" in lines[-1], lines


def test_wrong_answer_shows_its_hint_first(kernel):
    outputs = kernel(
        "from coursekit.checks.classifier.checks import check_masked_mean_pool\n"
        "check_masked_mean_pool(lambda x, m: x.mean(1))\n")
    _, lines = _error(outputs)
    _assert_short_and_clean(lines)
    assert lines[0].startswith("Self-check failed:"), lines
    text = MISTAKES["pool.includes_padding"].text  # the catalogue's words, as in the grader's "likely mistake"
    assert any(line.startswith("HINT:") and text in line for line in lines), lines
    assert "checked at line 2 of this cell" in lines[-1]


def test_crash_in_student_code_points_at_the_students_line(kernel):
    outputs = kernel(
        "from coursekit.checks.classifier.checks import check_masked_mean_pool\n"
        "def masked_mean_pool(x, mask):\n"
        "    total = x.sum(dim=1)\n"
        "    return total / mask.sum(dim=7)\n"
        "check_masked_mean_pool(masked_mean_pool)\n")
    _, lines = _error(outputs)
    _assert_short_and_clean(lines)
    assert lines[0].startswith("Self-check failed: masked_mean_pool("), lines
    text = "\n".join(lines)
    problem = text.split("HINT:")[0].split("checked at")[0]
    assert "raised IndexError" in problem, lines  # the problem may wrap onto a second line, between words
    assert all(len(line) <= 100 for line in problem.splitlines()), lines
    assert "your code raised IndexError here:" in text
    assert "masked_mean_pool, line 4 of its cell: return total / mask.sum(dim=7)" in text, text


def test_plain_python_keeps_a_normal_traceback():
    """Outside IPython nothing changes: the message is the exception's text (pytest and scripts read it)."""
    from coursekit.checks.toolkit import CheckFailed, fail

    with pytest.raises(CheckFailed) as info:
        try:
            raise KeyError("x")
        except KeyError:
            fail("problem", "a hint")
    assert str(info.value) == "problem\nHINT: a hint"
    assert info.value.__suppress_context__ and info.value.__cause__ is None


def test_a_long_line_of_code_goes_below_where_it_is_never_wider_than_the_output():
    from coursekit.checks.toolkit import _WIDTH, _located

    short = _located("  ", "checked at line 3 of this cell", "check_encode(encode)")
    assert short == ["  checked at line 3 of this cell: check_encode(encode)"]
    code = "check_sinusoidal_positional_encoding(sinusoidal_positional_encoding)"
    assert _located("  ", "checked at line 12 of this cell", code) == [
        "  checked at line 12 of this cell:", f"    {code}"]
    very_long = "x = " + " + ".join(["sinusoidal_positional_encoding(12, 8)"] * 4)
    lines = _located("    ", "line 7 of its cell", very_long)
    assert all(len(line) <= _WIDTH for line in lines) and lines[1].endswith("…")
