"""The course's draw secret, and the salt of one submission's draws (door 2 of #31).

Every hidden check draws its inputs from a salt (autograder/checks/kit/draws.py). The salt of a submission is
HMAC-SHA256(secret, course / assignment / student / notebook / sha256 of the submitted notebook's bytes): the same
notebook regraded gets the same salt (reproducible scores); any other notebook -- another student's, or this
student's own resubmission with a table recorded from the last feedback -- gets an unrelated one.

The secret is 32 random bytes kept in the course root, `.autograder/probe_secret` (folder 0700, file 0600, made
on first use by the account that grades). It is not in the repository, not in any release, and the jail never
binds the course root. Losing it only changes future draws; replacing it (delete the file) makes the next
regrading draw new inputs for everyone. Set AUTOGRADER_PROBE_SECRET_FILE to keep it elsewhere (e.g. a Kubernetes
secret mounted read-only). The file and the variable keep their first names (`probe_secret`), so that a course's
draws and a deployment's settings stay as they were.
"""
from __future__ import annotations

import hashlib
import hmac
import os
import secrets
from pathlib import Path

SECRET_ENV = "AUTOGRADER_PROBE_SECRET_FILE"
SECRET_FILE = Path(".autograder") / "probe_secret"
SECRET_BYTES = 32


def secret_path(course_dir) -> Path:
    configured = os.environ.get(SECRET_ENV, "")
    return Path(configured) if configured else Path(course_dir) / SECRET_FILE


def course_secret(course_dir) -> bytes:
    """The course's secret, made (atomically, private to this account) when it does not exist yet."""
    path = secret_path(course_dir)
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        try:
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        except FileExistsError:  # another grading run made it first
            data = path.read_bytes()
        else:
            with os.fdopen(fd, "wb") as fh:
                fh.write(secrets.token_bytes(SECRET_BYTES))
            data = path.read_bytes()
    if len(data) < 16:
        raise ValueError(f"the probe secret {path} is shorter than 16 bytes: delete it to make a new one")
    return data


def submission_salt(secret: bytes, course: str, assignment: str, student: str, notebook: str,
                    nb_bytes: bytes | None) -> str:
    """128-bit hex salt of one submitted notebook's draws."""
    digest = hashlib.sha256(nb_bytes if nb_bytes is not None else b"<missing>").hexdigest()
    identity = "\n".join((course, assignment, student, notebook, digest)).encode()
    return hmac.new(secret, identity, hashlib.sha256).hexdigest()[:32]
