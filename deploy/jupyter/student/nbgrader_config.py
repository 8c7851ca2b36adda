"""Global nbgrader settings for STUDENT servers of the course transformers101.

Installed in the student image as /etc/jupyter/transformers101/nbgrader_config.py, a folder that the
image puts first on JUPYTER_CONFIG_PATH, so it is read by the student's Assignment List (fetch, submit,
fetch feedback) and by `nbgrader fetch_assignment/submit/fetch_feedback` in a terminal.

Two environment variables let an admin move things without editing this file:
    NBGRADER_EXCHANGE   the shared exchange folder (default /srv/nbgrader/exchange; RWX volume on k8s)
    COURSE_ID           the nbgrader course id, equal to the hub service name (default transformers101)
"""
import os

from nbgrader.auth import JupyterHubAuthPlugin

c = get_config()  # noqa: F821  (provided by traitlets when nbgrader reads this file)

c.CourseDirectory.course_id = os.environ.get("COURSE_ID", "transformers101")

# One exchange for every course on the hub; each course gets its own sub-folder.
c.Exchange.root = os.environ.get("NBGRADER_EXCHANGE", "/srv/nbgrader/exchange")
c.Exchange.path_includes_course = True

# A student sees (and may fetch/submit) only the courses whose hub group `nbgrader-<course>` holds them.
c.Authenticator.plugin_class = JupyterHubAuthPlugin

# Submissions and feedback are filed under the HUB user name. nbgrader would otherwise use the operating
# system account, which is `jovyan` for everybody in the images and the hub's account for local spawners.
if os.environ.get("JUPYTERHUB_USER"):
    c.CourseDirectory.student_id = os.environ["JUPYTERHUB_USER"]
