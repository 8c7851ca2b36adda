"""coursekit.env: seeds, device choice, grading mode."""
import random

import numpy as np
import pytest
import torch

from coursekit.env import get_device, grading_mode, set_seed


def _draws():
    return random.random(), float(np.random.rand()), torch.rand(3).tolist()


def test_set_seed_makes_every_generator_repeat():
    set_seed(123)
    first = _draws()
    set_seed(123)
    assert _draws() == first
    set_seed(124)
    assert _draws() != first


def test_set_seed_returns_a_seeded_generator():
    generator = set_seed(7)
    assert isinstance(generator, torch.Generator)
    expected = torch.rand(4, generator=torch.Generator().manual_seed(7))
    assert torch.equal(torch.rand(4, generator=generator), expected)


@pytest.mark.parametrize("bad, error", [("1", TypeError), (1.5, TypeError), (True, TypeError), (-1, ValueError),
                                        (2**32, ValueError)])
def test_set_seed_rejects_bad_seeds(bad, error):
    with pytest.raises(error):
        set_seed(bad)


def test_get_device_default(monkeypatch):
    monkeypatch.delenv("COURSE_DEVICE", raising=False)
    assert get_device().type == ("cuda" if torch.cuda.is_available() else "cpu")


def test_get_device_env_override(monkeypatch):
    monkeypatch.setenv("COURSE_DEVICE", "cpu")
    assert get_device() == torch.device("cpu")


def test_get_device_rejects_unknown_name(monkeypatch):
    monkeypatch.setenv("COURSE_DEVICE", "gpu-please")
    with pytest.raises(ValueError, match="COURSE_DEVICE"):
        get_device()


@pytest.mark.skipif(torch.cuda.is_available(), reason="needs a machine without CUDA")
def test_get_device_cuda_requested_without_cuda(monkeypatch):
    monkeypatch.setenv("COURSE_DEVICE", "cuda")
    with pytest.raises(RuntimeError, match="not available"):
        get_device()


def test_grading_mode_follows_nbgrader_variable(monkeypatch):
    monkeypatch.delenv("NBGRADER_EXECUTION", raising=False)
    assert grading_mode() is False
    monkeypatch.setenv("NBGRADER_EXECUTION", "autograde")
    assert grading_mode() is True


# ------------------------------------------------------------------------------------------ CPU threads
from coursekit import env as course_env  # noqa: E402


@pytest.mark.parametrize("cpus, threads", [(1, 1), (2, 1), (3, 1), (4, 2), (6, 3), (8, 4), (64, 4)])
def test_default_threads_hold_up_on_shared_machines(cpus, threads):
    assert course_env.default_threads(cpus) == threads


def test_cpu_budget_is_within_the_affinity():
    import os

    assert 1 <= course_env.cpu_budget() <= len(os.sched_getaffinity(0))


def test_configure_threads_order_of_precedence(monkeypatch):
    before = torch.get_num_threads()
    try:
        monkeypatch.delenv(course_env.THREADS_ENV, raising=False)
        monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
        assert course_env.configure_threads() == course_env.default_threads() == torch.get_num_threads()
        monkeypatch.setenv("OMP_NUM_THREADS", "3")
        assert course_env.configure_threads() == 3 == torch.get_num_threads()
        monkeypatch.setenv(course_env.THREADS_ENV, "2")
        assert course_env.configure_threads() == 2 == torch.get_num_threads()
        assert course_env.configure_threads(1) == 1 == torch.get_num_threads()
        monkeypatch.setenv(course_env.THREADS_ENV, "many")
        with pytest.raises(ValueError, match="COURSE_NUM_THREADS"):
            course_env.configure_threads()
    finally:
        torch.set_num_threads(before)


def test_get_device_sets_the_threads_once(monkeypatch):
    before = torch.get_num_threads()
    try:
        monkeypatch.setattr(course_env, "_configured_threads", None)
        monkeypatch.setenv(course_env.THREADS_ENV, "1")
        monkeypatch.delenv(course_env.DEVICE_ENV, raising=False)
        get_device()
        assert torch.get_num_threads() == 1
        torch.set_num_threads(2)  # the student's own choice after set-up stays
        get_device()
        assert torch.get_num_threads() == 2
    finally:
        torch.set_num_threads(before)
