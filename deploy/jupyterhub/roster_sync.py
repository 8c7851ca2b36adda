"""Hub-managed service of deploy/jupyterhub/jupyterhub_config.py: the course roster lets its students in.

Every ROSTER_SYNC_INTERVAL seconds it reads the students of the gradebook (nbgrader's `student` table: Manage
Students, `nbgrader db student add`, `autograder roster`), creates each one missing on the hub as a hub user (the
hub's Authenticator.allow_existing_users then lets that user log in) and adds it to the group nbgrader-<course>,
which nbgrader's JupyterHubAuthPlugin reads for course membership. So the instructor may add students before or
after they first try to log in: within one interval they are in. Nobody is removed.

Runs in the grader environment (SQLAlchemy) as the grader account, the only one that may read the gradebook.
Environment: JUPYTERHUB_API_URL and JUPYTERHUB_API_TOKEN (set by the hub), COURSE_ID, ROSTER_DB_URL (the
gradebook's SQLAlchemy URL), ROSTER_SYNC_INTERVAL (seconds, default 10).
"""
from __future__ import annotations

import json
import os
import sys
import time
import urllib.error
import urllib.parse
import urllib.request


def roster(db_url: str) -> list[str]:
    """The student ids of the gradebook; none while the gradebook or its student table does not exist yet."""
    import sqlalchemy

    if db_url.startswith("sqlite:///") and not os.path.exists(db_url[len("sqlite:///"):]):
        return []  # never create an empty gradebook: nbgrader makes it, with its migrations
    engine = sqlalchemy.create_engine(db_url)
    try:
        with engine.connect() as connection:
            if not sqlalchemy.inspect(connection).has_table("student"):
                return []
            return sorted(row[0] for row in connection.execute(sqlalchemy.text("SELECT id FROM student")))
    finally:
        engine.dispose()


class Hub:
    def __init__(self, api_url: str, token: str):
        self.api_url, self.token = api_url.rstrip("/"), token

    def call(self, method: str, path: str, body: dict | None = None) -> tuple[int, dict]:
        data = json.dumps(body).encode() if body is not None else None
        request = urllib.request.Request(f"{self.api_url}{path}", data=data, method=method,
                                         headers={"Authorization": f"token {self.token}",
                                                  "Content-Type": "application/json"})
        try:
            with urllib.request.urlopen(request, timeout=30) as response:
                text = response.read().decode() or "{}"
                return response.status, json.loads(text)
        except urllib.error.HTTPError as error:
            return error.code, {}


def sync(hub: Hub, group: str, students: list[str]) -> list[str]:
    """Create the missing hub users of `students` and put them all into `group`; returns the names added."""
    status, found = hub.call("GET", f"/groups/{urllib.parse.quote(group)}")
    if status != 200:
        raise RuntimeError(f"the hub answers {status} for the group {group}")
    missing = [name for name in students if name not in set(found.get("users", []))]
    if not missing:
        return []
    for name in missing:
        status, _ = hub.call("POST", f"/users/{urllib.parse.quote(name)}")
        if status not in (201, 409):  # 409: the user exists already
            print(f"roster: the hub refused to create {name} ({status})", file=sys.stderr, flush=True)
    status, _ = hub.call("POST", f"/groups/{urllib.parse.quote(group)}/users", {"users": missing})
    if status != 200:
        raise RuntimeError(f"the hub answers {status} when adding {missing} to {group}")
    return missing


def main() -> int:
    course = os.environ.get("COURSE_ID", "transformers101")
    hub = Hub(os.environ["JUPYTERHUB_API_URL"], os.environ["JUPYTERHUB_API_TOKEN"])
    db_url, interval = os.environ["ROSTER_DB_URL"], float(os.environ.get("ROSTER_SYNC_INTERVAL", "10"))
    while True:
        try:
            added = sync(hub, f"nbgrader-{course}", roster(db_url))
            if added:
                print(f"roster: let in {', '.join(added)}", flush=True)
        except Exception as error:  # a locked gradebook or a restarting hub: try again next time
            print(f"roster: {type(error).__name__}: {error}", file=sys.stderr, flush=True)
        time.sleep(interval)


if __name__ == "__main__":
    sys.exit(main())
