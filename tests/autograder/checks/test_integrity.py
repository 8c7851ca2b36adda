"""`_integrity.verify()` passes in a clean process and catches monkeypatching of what the checks rely on."""
from __future__ import annotations

import builtins

import pytest
import torch
import torch.nn.functional as F

import autograder.checks
import solutions
import solutions.attention
import solutions.multi_head
from autograder.checks import _integrity
from autograder.checks import attention as attention_checks
from autograder.checks import embeddings as embedding_checks


def integrity_fails(fragment=""):
    with pytest.raises(AssertionError) as info:
        _integrity.verify()
    message = str(info.value)
    assert message.startswith("integrity check failed"), message
    assert fragment in message, message
    return message


def test_clean_kernel_passes():
    _integrity.verify()


def test_patched_allclose_fails_the_check_itself(monkeypatch):
    monkeypatch.setattr(torch, "allclose", lambda *args, **kwargs: True)
    integrity_fails("torch.allclose")
    with pytest.raises(AssertionError, match="integrity check failed"):
        attention_checks.check_make_causal_mask(solutions.make_causal_mask)


@pytest.mark.parametrize("name", ["equal", "isclose", "isnan"])
def test_patched_torch_functions(monkeypatch, name):
    monkeypatch.setattr(torch, name, lambda *args, **kwargs: True)
    integrity_fails(f"torch.{name}")


def test_patched_assert_close(monkeypatch):
    monkeypatch.setattr(torch.testing._comparison, "assert_close", lambda *args, **kwargs: None)
    integrity_fails("assert_close")


def test_patched_tensor_method(monkeypatch):
    monkeypatch.setattr(torch.Tensor, "__eq__", lambda self, other: True, raising=False)
    integrity_fails("Tensor.__eq__")


@pytest.mark.parametrize("name", ["isinstance", "abs", "print"])
def test_patched_builtins(monkeypatch, name):
    original = getattr(builtins, name)
    monkeypatch.setattr(builtins, name, lambda *args, **kwargs: original(*args, **kwargs))
    integrity_fails(f"builtin `{name}`")


def test_patched_softmax(monkeypatch):
    monkeypatch.setattr(F, "softmax", F.log_softmax)
    integrity_fails("softmax")


def test_patched_reference_function(monkeypatch):
    monkeypatch.setattr(solutions.attention, "scaled_dot_product_attention", lambda q, k, v, mask=None: (q, q))
    integrity_fails("scaled_dot_product_attention")


def test_patched_reference_method(monkeypatch):
    monkeypatch.setattr(solutions.multi_head.MultiHeadAttention, "forward", lambda self, q, k, v, mask=None: (q, q))
    integrity_fails("MultiHeadAttention.forward")


def test_patched_reference_reexport(monkeypatch):
    monkeypatch.setattr(solutions, "make_causal_mask", lambda size, device=None: None)
    integrity_fails("make_causal_mask")


def test_patched_check_function(monkeypatch):
    monkeypatch.setattr(embedding_checks, "check_encode", lambda encode: None)
    integrity_fails("check_encode")


def test_check_exported_from_package_patched(monkeypatch):
    monkeypatch.setattr(autograder.checks, "check_encode", lambda encode: None, raising=False)
    integrity_fails("check_encode")


def test_patched_tolerance(monkeypatch):
    from autograder.checks import _tolerance

    monkeypatch.setattr(_tolerance, "tolerance", lambda *args, **kwargs: {"atol": 1e9, "rtol": 1e9})
    integrity_fails("tolerance")


def test_torch_function_mode_is_detected():
    from torch.overrides import TorchFunctionMode

    with TorchFunctionMode():
        integrity_fails("torch function mode")
    _integrity.verify()


def test_global_module_hook_is_detected():
    handle = torch.nn.modules.module.register_module_forward_hook(lambda module, args, output: output)
    try:
        integrity_fails("global nn.Module hook")
    finally:
        handle.remove()
    _integrity.verify()


def test_ipython_exception_swallowing_is_detected_and_undone():
    from IPython.core.interactiveshell import InteractiveShell

    shell = InteractiveShell.instance()
    try:
        shell.set_custom_exc((AssertionError,), lambda *args, **kwargs: None)
        integrity_fails("custom IPython exception handler")
        assert shell.custom_exceptions == ()
        _integrity.verify()
    finally:
        InteractiveShell.clear_instance()


def test_changed_tolerance_constant(monkeypatch):
    from autograder.checks import _tolerance

    monkeypatch.setitem(_tolerance.CPU_FLOAT32, "atol", 1e9)
    integrity_fails("CPU_FLOAT32")


def test_replaced_captured_torch_functions(monkeypatch):
    from autograder.checks import _common

    monkeypatch.setattr(_common, "_VF", object())
    integrity_fails("captured by the checks")


def test_patched_builtin_type(monkeypatch):
    monkeypatch.setattr(builtins, "ValueError", type("ValueError", (Exception,), {}))
    integrity_fails("builtin type `ValueError`")


def test_check_swapped_for_another_check(monkeypatch):
    monkeypatch.setattr(autograder.checks, "check_encode", embedding_checks.check_pad_batch, raising=False)
    integrity_fails("check_encode")
