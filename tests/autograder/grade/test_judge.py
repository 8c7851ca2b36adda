"""The judge step: which checks a grade cell asks for, and the verdict it writes (here over an in-process
kernel side; tests/autograder/pipeline/test_attacks.py runs it on real, jailed kernels)."""
from __future__ import annotations

from pathlib import Path

import solutions
from autograder.checks.kit.remote import LoopbackChannel
from autograder.grade import judge
from coursekit import probe
from coursekit.mistakes import MISTAKES


def test_hand_in_calls_are_read_from_the_cell_source():
    source = ('# Autograder test (20 points).\n### BEGIN HIDDEN TESTS\nfrom coursekit.probe import hand_in\n'
              'hand_in("trained_classifier", model, vocab, max_len=MAX_LEN)\n### END HIDDEN TESTS')
    assert judge.handed_in(source) == [("trained_classifier", [0, 1], ["max_len"])]
    assert judge.handed_in("probe.hand_in('x', f)") == [("x", [0], [])]
    assert judge.handed_in("assert f(2) == 4") == []
    assert judge.handed_in("hand_in(name, f)") == []          # only literal check names
    assert judge.handed_in("def broken(:") == []


def _verdict(check: str, obj):
    """The message of the verdict (None: passed)."""
    return _verdict_and_mistake(check, obj)[0]


def _verdict_and_mistake(check: str, obj):
    probe.ProbeState.subjects[check] = ((obj,), {})
    return judge.verdict(LoopbackChannel(), [(check, [0], [])])[:2]


def test_a_correct_answer_passes_and_a_wrong_one_gets_the_checks_message():
    assert _verdict_and_mistake("make_causal_mask", solutions.make_causal_mask) == (None, None)
    message, mistake = _verdict_and_mistake("make_causal_mask",
                                            lambda size, device=None: ~solutions.make_causal_mask(size, device))
    assert message.startswith("the causal mask: values differ") and "likely mistake" in message
    assert mistake == "attention.mask_inverted" and MISTAKES[mistake].text in message  # the id, as data
    upper = _verdict_and_mistake("make_causal_mask", lambda size, device=None: solutions.make_causal_mask(size).T)
    assert upper[1] == "causal_mask.upper_triangle"
    outputs = judge.verdict_outputs(message)
    assert len(outputs) == 1 and outputs[0].output_type == "error" and outputs[0].ename == "AssertionError"
    assert outputs[0].traceback[0].startswith("AssertionError: the causal mask")
    assert judge.verdict_outputs(None) == []


def test_nothing_handed_in_unknown_checks_and_our_own_bugs_are_told_apart(monkeypatch):
    probe.ProbeState.subjects.pop("make_padding_mask", None)
    message, mistake, fraction = judge.verdict(LoopbackChannel(), [("make_padding_mask", [0], [])])
    assert fraction == 0.0
    assert "was not defined when the grade cell ran" in message and mistake is None
    assert "no check named 'no_such_exercise'" in _verdict("no_such_exercise", len)

    def broken_check(obj):
        raise KeyError("a bug in the grader")

    monkeypatch.setattr(judge, "check_function", lambda name: broken_check)
    assert "internal error (not a problem in your answer)" in _verdict("anything", len)


def test_a_kernel_death_while_probing_reaches_the_worker(monkeypatch):
    """The worker's restart policy (skip the cell, run the notebook again) must see it, not a verdict."""
    import pytest
    from nbclient.exceptions import DeadKernelError

    class DyingChannel(LoopbackChannel):
        def request(self, request):
            raise DeadKernelError("Kernel died")

    probe.ProbeState.subjects["make_causal_mask"] = ((solutions.make_causal_mask,), {})
    with pytest.raises(DeadKernelError):
        judge.verdict(DyingChannel(), [("make_causal_mask", [0], [])])


def test_grading_refuses_before_anything_runs_where_student_code_cannot_be_jailed(tmp_path, monkeypatch):
    import pytest

    from autograder.grade import engine
    from autograder.sandbox import jail

    def unavailable():
        raise jail.JailUnavailable("bubblewrap (bwrap) is not installed")

    monkeypatch.setattr(jail, "bwrap_path", unavailable)
    with pytest.raises(jail.JailUnavailable, match="bubblewrap"):
        engine.grade_many(tmp_path, ["03_attention"], progress=False)


def _judge_notebook(cells, tmp_path):
    """Run `cells` (source, grade_id or None) through the judge in a real jailed kernel."""
    import time

    from nbformat.v4 import new_code_cell, new_notebook

    from autograder.course.units import GiB
    from autograder.sandbox.kernel import kernel_manager_class, kernel_spec
    from autograder.sandbox.limits import Limits

    limits = Limits(cell_timeout=90, notebook_timeout=240, memory_bytes=3 * GiB, output_bytes=64 * 1024)
    nb = new_notebook(cells=[new_code_cell(source, metadata={"nbgrader": {
        "grade": True, "grade_id": grade_id, "points": 1, "solution": False, "locked": True}} if grade_id else {})
        for source, grade_id in cells])
    manager = kernel_manager_class(kernel_spec(limits), limits)
    executor = judge.JudgedExecute(limits=limits, skip_cells=set(), kernel_manager_class=manager)
    nb, _ = executor.preprocess(nb, {"metadata": {"path": str(tmp_path)}})
    return nb


def test_a_probe_reply_is_bounded_before_it_is_decoded(tmp_path):
    """Issue #20, door 3: a reply of 150,000 0-d tensors (19 MB) (too many JSON values) and one of 40 MB (too many
    bytes) are refused before they are parsed, with a message naming the limit; the grader's memory stays flat;
    an honest answer in the same notebook still passes."""
    import importlib.util

    spec = importlib.util.spec_from_file_location(
        "sandbox_tests", Path(__file__).resolve().parents[1] / "sandbox" / "test_kernel.py")
    sandbox_tests = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(sandbox_tests)
    hand_in = "from coursekit.probe import hand_in\nhand_in({!r}, {})"
    cells = [
        ("import torch", None),
        ("def many(size, device=None):\n    return [torch.tensor(1.0) for _ in range(150_000)]\n"
         "def huge(ids, pad_id=0):\n    return 'x' * (40 * 1024**2)\n"
         "def honest(size, device=None):\n    return torch.tril(torch.ones(size, size, dtype=torch.bool, "
         "device=device))", None),
        (hand_in.format("make_causal_mask", "many"), "many"),
        (hand_in.format("make_padding_mask", "huge"), "huge"),
        (hand_in.format("make_causal_mask", "honest"), "honest"),
    ]
    nb, growth = sandbox_tests.peak_rss_growth(lambda: _judge_notebook(cells, tmp_path))
    many, huge, honest = (nb.cells[i].outputs for i in (2, 3, 4))
    assert honest == [], honest
    assert "too large to be read" in many[0]["evalue"] and "JSON values" in many[0]["evalue"], many
    assert str(judge.MAX_PROBE_REPLY_ITEMS) in many[0]["evalue"]
    assert "too large to be read" in huge[0]["evalue"] and str(judge.MAX_PROBE_REPLY_BYTES) in huge[0]["evalue"]
    assert growth < 200 * 1024**2, f"the grader grew by {growth / 1024**2:.0f} MiB"


def test_partial_credit_is_a_numeric_result_nbgrader_scores_and_the_feedback_lists_the_criteria():
    """A correct MultiHeadAttention that forgets its ValueError keeps 80% of its points, through nbgrader's own
    scoring of the grade cell's outputs; a stub still gets 0 with an error output."""
    import nbformat
    import pytest
    import torch
    from nbgrader.utils import determine_grade

    from autograder.checks.kit.criteria import EDGE_SHARE
    from autograder.grade.worker import cell_messages

    class Forgetful(solutions.MultiHeadAttention):
        def __init__(self, d_model, num_heads, dropout=0.1, bias=True):
            torch.nn.Module.__init__(self)
            self.__dict__.update(solutions.MultiHeadAttention(
                d_model if d_model % num_heads == 0 else num_heads, num_heads, dropout, bias).__dict__)

    message, mistake, fraction = _verdict_with_fraction("multi_head_attention", Forgetful)
    assert fraction == pytest.approx(1 - EDGE_SHARE) and "✗" in message and "✓ the main behaviour" in message
    cell = nbformat.v4.new_code_cell("hand_in(...)")
    cell.metadata["nbgrader"] = {"grade": True, "solution": False, "locked": True, "points": 25,
                                 "grade_id": "test_multi_head_attention"}
    cell.outputs = judge.verdict_outputs(message, fraction, 25)
    assert determine_grade(cell) == (25 * (1 - EDGE_SHARE), 25.0)
    notebook = nbformat.v4.new_notebook(cells=[cell])
    assert "d_model not divisible by num_heads" in cell_messages(notebook)["test_multi_head_attention"]

    class Stub(torch.nn.Module):
        def __init__(self, d_model, num_heads, dropout=0.1, bias=True):
            raise NotImplementedError()

    message, _, fraction = _verdict_with_fraction("multi_head_attention", Stub)
    assert fraction == 0.0
    cell.outputs = judge.verdict_outputs(message, fraction, 25)
    assert determine_grade(cell) == (0, 25.0)


def _verdict_with_fraction(check: str, obj):
    probe.ProbeState.subjects[check] = ((obj,), {})
    return judge.verdict(LoopbackChannel(), [(check, [0], [])])


def test_an_answer_whose_argument_failed_keeps_its_share_but_is_no_working_part(monkeypatch):
    """Partial credit either way; later exercises build on the answer only when no argument of it failed (an
    ignored temperature would fail generate's own temperature tries: generate gets the stand-in instead)."""
    from autograder.checks.kit.criteria import PartialCredit, fraction_kept
    from coursekit.criteria import CRITERIA

    argument = next(c for c, entry in CRITERIA.items() if entry.kind == "argument")
    edge = next(c for c, entry in CRITERIA.items() if entry.kind == "edge")
    for failed, works in (((edge,), True), ((argument,), False), ((edge, argument), False)):
        record = {edge: None, argument: None, **{c: AssertionError("wrong") for c in failed}}
        fraction = fraction_kept(record)

        def check(obj, failed=failed, fraction=fraction):
            raise PartialCredit("The main behaviour works, but ...", fraction, None, failed)

        monkeypatch.setattr(judge, "check_function", lambda name, check=check: check)
        channel = LoopbackChannel()
        channel.verdicts = {}
        probe.ProbeState.subjects["part"] = ((len,), {})
        message, _mistake, kept = judge.verdict(channel, [("part", [0], [])])
        assert kept == fraction and 0.5 < kept < 1 and message.startswith("The main behaviour works")
        assert channel.verdicts == {"part": works}, failed
    assert fraction_kept({edge: AssertionError(), argument: None}) == 0.8
    assert fraction_kept({argument: AssertionError(), edge: None}) == 0.75


def test_a_probe_keeps_only_its_reply_and_errors_as_outputs():
    """A probe's outputs skip nbformat's validation (the probe cell is the grader's own): the reply display and an
    error are kept as they came, what the probe does not read (streams, results) is not."""
    reply = {"id": 7, "value": {"list": [1, 2]}}
    shown = judge.probe_output({"msg_type": "display_data", "content": {"data": {probe.MIME: reply}, "metadata": {}}})
    assert shown["output_type"] == "display_data" and shown["data"][probe.MIME] == reply
    error = judge.probe_output({"msg_type": "error",
                                "content": {"ename": "ValueError", "evalue": "no", "traceback": ["a"]}})
    assert (error["output_type"], error["ename"], error["evalue"], error["traceback"]) == ("error", "ValueError",
                                                                                           "no", ["a"])
    assert judge.probe_output({"msg_type": "stream", "content": {"name": "stdout", "text": "hi"}}) is None
    malformed = [{"msg_type": "display_data", "content": ["not", "a", "dict"]},
                 {"msg_type": "display_data", "content": {"data": [probe.MIME, reply]}},
                 {"msg_type": "error", "content": {"ename": 3, "evalue": "no", "traceback": []}},
                 {"msg_type": "error", "content": {"ename": "E", "evalue": "no", "traceback": [{"line": 1}]}}]
    assert [judge.probe_output(msg) for msg in malformed] == [None] * 4  # dropped, as nbclient drops what is invalid
    assert judge.probe_output({"msg_type": "execute_result", "content": {"data": {}, "metadata": {}}}) is None
    cell = judge.probe_cell("pass")
    assert (cell.cell_type, cell.source, cell.outputs) == ("code", "pass", [])
