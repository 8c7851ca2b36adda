"""The judge step: which checks a grade cell asks for, and the verdict it writes (here over an in-process
kernel side; tests/autograder/pipeline/test_attacks.py runs it on real, jailed kernels)."""
from __future__ import annotations

import solutions
from autograder.checks._remote import LoopbackChannel
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
    probe._State.subjects[check] = ((obj,), {})
    return judge.verdict(LoopbackChannel(), [(check, [0], [])])


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
    probe._State.subjects.pop("make_padding_mask", None)
    message, mistake = judge.verdict(LoopbackChannel(), [("make_padding_mask", [0], [])])
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

    probe._State.subjects["make_causal_mask"] = ((solutions.make_causal_mask,), {})
    with pytest.raises(DeadKernelError):
        judge.verdict(DyingChannel(), [("make_causal_mask", [0], [])])


def test_grading_refuses_before_anything_runs_where_student_code_cannot_be_jailed(tmp_path, monkeypatch):
    import pytest

    from autograder.grade import engine, jail

    def unavailable():
        raise jail.JailUnavailable("bubblewrap (bwrap) is not installed")

    monkeypatch.setattr(jail, "bwrap_path", unavailable)
    with pytest.raises(jail.JailUnavailable, match="bubblewrap"):
        engine.grade_many(tmp_path, ["03_attention"], progress=False)
