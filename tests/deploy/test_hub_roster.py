"""Students get in: the gradebook's roster admits them to the real JupyterHub of the shipped config.

Only the authenticator (DummyAuthenticator: any password) and the spawner are the test's; who may log in is the
config's: the instructors of COURSE_INSTRUCTORS, and the students of the gradebook, whom the roster service
(deploy/jupyterhub/roster_sync.py) creates as hub users and puts into nbgrader-<course>, whether the instructor adds
them before or after their first try. Everybody else is refused with a page that says why.
"""
from __future__ import annotations

import time

import pytest
import requests
from nbgrader.api import Gradebook

from hubkit import COURSE_ID, INSTRUCTOR

pytestmark = pytest.mark.hub

GROUP = f"nbgrader-{COURSE_ID}"


def log_in(hub, name: str) -> requests.Response:
    """The login form as a browser posts it (with its _xsrf cookie); no redirect followed."""
    session = requests.Session()
    session.get(f"{hub.client.base}/hub/login", timeout=30).raise_for_status()
    return session.post(f"{hub.client.base}/hub/login", allow_redirects=False, timeout=30,
                        data={"username": name, "password": "any", "_xsrf": session.cookies.get("_xsrf", "")})


def add_to_roster(hub, *names: str) -> None:
    """What `nbgrader db student add` and Manage Students write: students of the course's gradebook."""
    with Gradebook(f"sqlite:///{hub.course_root / 'gradebook.db'}", COURSE_ID) as gradebook:
        for name in names:
            gradebook.update_or_create_student(name)


def group_members(hub) -> set[str]:
    return set(hub.client.api("GET", f"/groups/{GROUP}")["users"])


def wait_for_group(hub, names: set[str], timeout_s: float = 60) -> set[str]:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        members = group_members(hub)
        if names <= members:
            return members
        time.sleep(0.5)
    raise AssertionError(f"{sorted(names - group_members(hub))} not in {GROUP} after {timeout_s}s:\n"
                         + hub.log.read_text()[-3000:])


def assert_refused_saying_why(response: requests.Response, name: str) -> None:
    assert response.status_code == 403, (response.status_code, response.text[:500])
    assert f"{name} is not on the roster of {COURSE_ID}" in response.text
    assert "Invalid username or password" not in response.text


def test_roster_lets_students_in_in_either_order(roster_hub):
    hub = roster_hub
    assert log_in(hub, INSTRUCTOR).status_code == 302  # the instructors of the config

    # a student tries before the instructor has added them: refused, with the reason
    assert_refused_saying_why(log_in(hub, "late-student"), "late-student")
    assert "late-student" not in {u["name"] for u in hub.client.api("GET", "/users")}

    # the instructor adds two students, one who never tried yet and the one who did
    add_to_roster(hub, "early-student", "late-student")
    members = wait_for_group(hub, {"early-student", "late-student"})
    assert INSTRUCTOR not in members  # the group holds students only
    for name in ("early-student", "late-student"):
        response = log_in(hub, name)
        assert response.status_code == 302, (name, response.status_code, response.text[:500])
        assert "/hub/login" not in response.headers.get("Location", "")

    # somebody not on the roster still is not let in
    assert_refused_saying_why(log_in(hub, "stranger"), "stranger")
    assert "stranger" not in group_members(hub)
