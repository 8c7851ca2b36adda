"""The kit's toolkit (messages, RNG hygiene) and compare (weight copying, comparisons)."""
from __future__ import annotations

import pytest
import torch
from torch import nn

import solutions
from autograder.checks.kit import compare, toolkit
from autograder.checks.multi_head import checks as multi_head_checks
from autograder.checks.kit.remote import hand_in_locally


def remote(obj):
    """`obj` as a hidden check sees it: handed in to a (here in-process) kernel side."""
    (handle,), _ = hand_in_locally((obj,), {})
    return handle


def test_copy_parameters_names_the_missing_submodule():
    class Student(nn.Module):
        def __init__(self):
            super().__init__()
            self.query = nn.Linear(12, 12)

    with pytest.raises(AssertionError, match="expected submodule `w_q`"):
        compare.copy_parameters(remote(Student()), solutions.MultiHeadAttention(12, 3), "MultiHeadAttention")


def test_copy_parameters_reports_wrong_shapes_and_copies_values():
    reference = solutions.MultiHeadAttention(12, 3)
    wrong = solutions.MultiHeadAttention(12, 3)
    wrong.w_o = nn.Linear(12, 6)
    with pytest.raises(AssertionError, match=r"`w_o.weight` has the wrong shape"):
        compare.copy_parameters(remote(wrong), reference, "MultiHeadAttention")
    student = solutions.MultiHeadAttention(12, 3)
    compare.copy_parameters(remote(student), reference, "MultiHeadAttention")
    for (name, a), (_, b) in zip(student.named_parameters(), reference.named_parameters()):
        assert torch.equal(a, b), name


def test_call_turns_errors_into_messages_with_hints():
    with pytest.raises(AssertionError, match="not implemented yet"):
        toolkit.call("f", remote(lambda: (_ for _ in ()).throw(NotImplementedError())))
    with pytest.raises(AssertionError, match=r"f raised an error\.(.|\n)*ZeroDivisionError"):
        toolkit.call("f", remote(lambda: 1 / 0))


def test_checks_leave_the_callers_random_state_alone():
    torch.manual_seed(123)
    before = torch.rand(3)
    torch.manual_seed(123)
    multi_head_checks.check_multi_head_attention(solutions.MultiHeadAttention)
    assert torch.equal(torch.rand(3), before)


def test_same_submission_same_message():
    class NoScale(solutions.MultiHeadAttention):
        def forward(self, query, key, value, mask=None):
            out, weights = super().forward(query * 2, key, value, mask)
            return out, weights

    messages = []
    for _ in range(2):
        with pytest.raises(AssertionError) as info:
            multi_head_checks.check_multi_head_attention(NoScale)
        messages.append(str(info.value))
    assert messages[0] == messages[1]


def test_values_close_respects_where_and_tolerance():
    device = torch.device("cpu")
    expected = torch.zeros(2, 3, 4)
    got = expected.clone()
    got[1, 2] = 5.0                                   # a padded position
    where = torch.tensor([[True, True, True], [True, True, False]])
    assert not compare.values_close(got, expected, device)
    assert compare.values_close(got, expected, device, where=where)
    assert compare.values_close(expected + 1e-7, expected, device)
