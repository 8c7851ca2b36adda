"""Per-submission draws: every hidden check draws what it probes with from this submission's salt.

A check never uses a fixed seed, size or constant directly. It asks here:

    seed_for(10)                      # an int seed for torch / numpy / random, this submission's
    generator(10)                     # a torch.Generator seeded with seed_for(10)
    rng("attention.sizes")            # a random.Random for drawing sizes, lengths, flags... (this submission's)
    pick("positional.max_len", [10, 12, 16])  # one value of a documented space, this submission's
    draw_sizes("mha.sizes", {"H": [3, 2], "T": [5, 6]})  # one value of each space, drawn until they all differ

The salt is set by the judge for the whole notebook (`salted(...)`); the coordinator derives it from the course's
secret (`autograder/course/draw_secret.py`, never in the repository, the release or the jail) and the submission's
identity: course, assignment, student, notebook and the hash of the submitted notebook's bytes. So

- regrading the same notebook probes it with the same inputs (reproducible scores);
- any other submission -- a classmate's, last year's, or this student's own resubmission after reading feedback --
  is probed with other inputs: a table of inputs and outputs recorded from one run answers nothing in another;
- the seed a kernel receives is an HMAC output: it tells nothing about the secret or about other submissions.

With no salt (0: the hidden-check unit tests' default, and the public self-checks, which never come here) every
call returns the value it was given (`seed_for(s) == s`, `pick` the first option), i.e. the fixed inputs that the
tests were written against. The tests also run the checks under other salts (tests/autograder/checks/conftest.py).
"""
from __future__ import annotations

import contextlib
import contextvars
import hashlib
import random
from typing import Sequence, TypeVar

import torch

T = TypeVar("T")

_SALT: contextvars.ContextVar[int] = contextvars.ContextVar("draw_salt", default=0)


@contextlib.contextmanager
def salted(salt: int | str | None):
    """Probe with this submission's inputs inside the block (`salt`: an int, a hex string, or None/0 for none)."""
    value = int(salt, 16) if isinstance(salt, str) else int(salt or 0)
    token = _SALT.set(value)
    try:
        yield
    finally:
        _SALT.reset(token)


def current_salt() -> int:
    return _SALT.get()


def seed_for(seed: int) -> int:
    """This submission's seed standing for the check's `seed` (the same `seed` with no salt)."""
    salt = _SALT.get()
    if not salt:
        return int(seed)
    digest = hashlib.blake2b(str(int(seed)).encode(), key=salt.to_bytes(32, "big", signed=False)[-32:],
                             digest_size=7, person=b"probe-seed").digest()
    return int.from_bytes(digest, "big")  # < 2**56: a valid seed for torch, numpy and random


def generator(seed: int, device="cpu") -> torch.Generator:
    """A torch.Generator seeded with `seed_for(seed)`."""
    return torch.Generator(device=device).manual_seed(seed_for(seed))


def rng(label: str) -> random.Random:
    """A random.Random of this submission for the draw named `label` (sizes, lengths, switches)."""
    return random.Random(seed_for(int.from_bytes(hashlib.sha256(label.encode()).digest()[:6], "big")))


def pick(label: str, options: Sequence[T]) -> T:
    """One of `options` for this submission (the first with no salt): a size, a setting, a text from a pool."""
    options = list(options)
    if not options:
        raise ValueError(f"pick({label!r}): no options")
    if not _SALT.get():
        return options[0]
    return rng(label).choice(options)


def sample(label: str, pool: Sequence[T], k: int) -> list[T]:
    """`k` distinct items of `pool` for this submission (the first k with no salt), in pool order."""
    pool = list(pool)
    if k > len(pool):
        raise ValueError(f"sample({label!r}): {k} items from a pool of {len(pool)}")
    if not _SALT.get():
        return pool[:k]
    chosen = set(rng(label).sample(range(len(pool)), k))
    return [item for i, item in enumerate(pool) if i in chosen]


def draw_sizes(label: str, spaces: dict, valid=lambda sizes: len(set(sizes.values())) == len(sizes)) -> dict:
    """One size from each space for this submission ({name: options}, the first options with no salt), drawn
    again (a bounded number of times) until `valid` (by default: all distinct) holds."""
    sizes = {name: options[0] for name, options in spaces.items()}
    if not current_salt():
        return sizes
    draw = rng(label)
    for _ in range(500):
        drawn = {name: draw.choice(list(options)) for name, options in spaces.items()}
        if valid(drawn):
            return drawn
    return sizes
