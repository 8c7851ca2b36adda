"""nbgrader's JupyterHub auth plugin, for a hub whose roster service makes the students' hub users.

When an instructor adds a student (`nbgrader db student add NAME`, or Manage Students), nbgrader's
JupyterHubAuthPlugin puts NAME into the hub group `nbgrader-<course>` at once. A student who never logged in has no
hub user yet, so the hub answers 400 and nbgrader prints two ERROR lines ("NOT added to the Jupyterhub group",
"Make sure you set a valid admin_user 'api_token'") although nothing is wrong: the hub's roster service
(deploy/jupyterhub/roster_sync.py) creates the user and fills the group within ROSTER_SYNC_INTERVAL seconds.

`RosterAuthPlugin` says that instead, and does what nbgrader does for a student the hub already knows. Enabled in
nbgrader_config.py next to this file (`c.Authenticator.plugin_class`).
"""
from __future__ import annotations

from nbgrader.auth.jupyterhub import (JupyterhubApiError, JupyterhubEnvironmentError, JupyterHubAuthPlugin,
                                      _query_jupyterhub_api)


class RosterAuthPlugin(JupyterHubAuthPlugin):
    def add_student_to_course(self, student_id: str, course_id: str) -> None:
        if course_id:
            try:
                _query_jupyterhub_api(method="GET", api_path=f"/users/{student_id}")
            except JupyterhubApiError:  # no hub user yet (the service may read users: a 404, not a refusal)
                self.log.info("%s is on the roster of %s. The hub's roster service lets them log in and puts them "
                              "into nbgrader-%s within seconds.", student_id, course_id, course_id)
                return
            except JupyterhubEnvironmentError:  # not on a hub (no API URL or token): nbgrader's own method says so
                pass
        super().add_student_to_course(student_id, course_id)
