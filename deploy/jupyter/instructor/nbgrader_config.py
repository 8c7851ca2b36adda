"""Global nbgrader settings for INSTRUCTOR and GRADER servers (and the course service) of transformers101.

Installed in the instructor image as /etc/jupyter/transformers101/nbgrader_config.py (first on
JUPYTER_CONFIG_PATH). Course-specific settings (course root, stubs, execution timeout) stay in the
course's own `course/nbgrader_config.py`, which nbgrader reads when it runs inside the course folder.

Environment variables:
    NBGRADER_EXCHANGE   the shared exchange folder (default /srv/nbgrader/exchange)
    COURSE_ID           nbgrader course id = hub service name (default transformers101)
    NBGRADER_LOGFILE    where nbgrader logs (default: unset, log to the terminal only)
"""
import os
import sys


c = get_config()  # noqa: F821  (provided by traitlets when nbgrader reads this file)

HERE = os.path.dirname(os.path.abspath(__file__))
if HERE not in sys.path:  # makes late_penalty.py and roster_auth.py (next to this file) importable by name
    sys.path.insert(0, HERE)

c.CourseDirectory.course_id = os.environ.get("COURSE_ID", "transformers101")

c.Exchange.root = os.environ.get("NBGRADER_EXCHANGE", "/srv/nbgrader/exchange")
c.Exchange.path_includes_course = True

# Course membership comes from the hub groups formgrade-<course> / nbgrader-<course>;
# `nbgrader db student add` also puts the student into nbgrader-<course>.
# nbgrader's JupyterHubAuthPlugin, quiet about students the roster service has not made hub users yet (roster_auth.py)
c.Authenticator.plugin_class = "roster_auth.RosterAuthPlugin"

# A submission from somebody who is not on the roster is reported, never silently enrolled.
c.Autograde.create_student = False

# Late work: 10 % of the notebook's score per started day, zero from 7 days on.
c.AssignLatePenalties.plugin_class = "late_penalty.DailyLatePenalty"
c.DailyLatePenalty.fraction_per_day = 0.1
c.DailyLatePenalty.zero_after_days = 7

if os.environ.get("NBGRADER_LOGFILE"):
    c.NbGrader.logfile = os.environ["NBGRADER_LOGFILE"]
