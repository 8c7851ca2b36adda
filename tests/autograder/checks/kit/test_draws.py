"""Per-submission draws (autograder/checks/kit/draws.py) and the course secret behind them."""
from __future__ import annotations

import os
import stat

import pytest
import torch

from autograder.checks.kit import draws as P
from autograder.course.draw_secret import course_secret, submission_salt


def test_without_a_salt_every_draw_is_the_value_the_check_wrote():
    with P.salted(0):
        assert P.seed_for(17) == 17
        assert P.pick("x", [3, 5, 7]) == 3
        assert P.sample("y", "abcdef", 3) == ["a", "b", "c"]
        assert torch.equal(torch.randn(4, generator=P.generator(5)), torch.randn(4, generator=torch.Generator().manual_seed(5)))


@pytest.mark.fixed_inputs
def test_a_salt_gives_other_inputs_and_the_same_salt_the_same_ones():
    draws = {}
    for salt in (1, 2, 0xABCDEF, 1):
        with P.salted(salt):
            draws.setdefault(salt, []).append((P.seed_for(17), P.pick("x", range(1000)), P.sample("y", range(100), 5),
                                               torch.randn(3, generator=P.generator(17)).tolist()))
    assert draws[1][0] == draws[1][1]  # the same salt: the same inputs (reproducible regrading)
    firsts = [d[0] for d in draws.values()]
    assert len({repr(d) for d in firsts}) == 3
    assert all(0 <= d[0] < 2**56 for d in firsts)
    with P.salted("00ff"):
        assert P.current_salt() == 255
    assert P.current_salt() == 0  # restored


def test_the_course_secret_is_private_made_once_and_salts_depend_on_every_part_of_the_identity(tmp_path):
    secret = course_secret(tmp_path)
    path = tmp_path / ".autograder" / "probe_secret"
    assert len(secret) == 32 and path.read_bytes() == secret and course_secret(tmp_path) == secret
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o600
    assert stat.S_IMODE(os.stat(path.parent).st_mode) == 0o700
    base = ("c", "03_attention", "ann", "03_attention", b"{}")
    salt = submission_salt(secret, *base)
    assert salt == submission_salt(secret, *base) and len(salt) == 32
    for i, changed in enumerate(("d", "04_x", "bob", "other", b"{ }")):
        other = list(base)
        other[i] = changed
        assert submission_salt(secret, *other) != salt
    assert submission_salt(b"another secret of the course!", *base) != salt
