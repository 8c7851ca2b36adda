"""JupyterHub (>= 5, tested with 6.1.1) configuration for the course transformers101 on one machine.

What it sets up (see deploy/README.md for the why):
  * a course service named after the course id, running a Jupyter server with nbgrader's formgrader
    in the course folder, reachable by the group `formgrade-<course>` only;
  * groups `formgrade-<course>` (instructors, graders) and `nbgrader-<course>` (students; nbgrader's
    JupyterHubAuthPlugin adds students there when an instructor runs `nbgrader db student add`);
  * roles and scopes: what the course service, instructors and each user's server token may do;
  * the idle culler (jupyterhub-idle-culler) as a hub-managed service, when it is installed;
  * the exchange folder, shared by every server, exported to them as NBGRADER_EXCHANGE.

Authentication and spawning are left to the site (PAM, OAuth, DockerSpawner, SystemdSpawner...).
On Kubernetes use deploy/k8s/values.yaml instead: it carries the same groups, roles and service.

Every site-specific value comes from an environment variable of the hub process:
    COURSE_ID                 nbgrader course id = service name         (transformers101)
    COURSE_ROOT               course folder served by the formgrader    (/srv/transformers101/course)
    COURSE_GRADER_USER        hub account of the course service         (grader-<course>)
    COURSE_SERVICE_RUN_AS     system account running the service        (COURSE_GRADER_USER; "" = hub's own)
    COURSE_INSTRUCTORS        comma-separated hub users who grade        ("")
    COURSE_SERVICE_PORT       local port of the course service          (9999)
    COURSE_SERVICE_COMMAND    command of the course service             (jupyterhub-singleuser)
    NBGRADER_EXCHANGE         the shared exchange folder                (/srv/nbgrader/exchange)
    HUB_SUBDOMAIN_HOST        e.g. https://hub.example.edu: per-user subdomains (lets the formgrader iframe work)
    IDLE_CULL_TIMEOUT         seconds of inactivity before a server is stopped (3600; 0 = no culling)
    ROSTER_DB_URL             the gradebook the roster service reads    (sqlite:///$COURSE_ROOT/gradebook.db)
    ROSTER_SYNC_INTERVAL      seconds between two reads of the roster   (10)
    HUB_SITE_CONFIG           a config file read last: the site's authenticator, ports, TLS ("" = none;
                              install.sh makes /etc/jupyterhub/site_config.py and never overwrites it)
  The grader account's cgroups (set by the hub's start script, deploy/one-machine/cgroups.sh):
    AUTOGRADER_CGROUP_PARENT  the cgroup subtree delegated to the grader account, handed to the course service:
                              `autograder grade` makes each submission's capped group there ("" = its own group)
    COURSE_SERVICE_CGROUP     cgroup v2: the delegated group the course service must start in ("" = none) ...
    COURSE_SERVICE_CGROUP_EXEC  ... through this command run as root (`cgroups.sh exec`), which joins it and then
                              becomes COURSE_SERVICE_RUN_AS (v2 moves a process only within its delegated subtree)
  Local-process spawners only (one machine, two Python environments; containers choose an image instead):
    STUDENT_SINGLEUSER_CMD    single-user command for students          ("" = the spawner's default)
    INSTRUCTOR_SINGLEUSER_CMD single-user command for graders           ("" = the spawner's default)
    STUDENT_JUPYTER_CONFIG    JUPYTER_CONFIG_PATH of student servers     ("" = leave as is)
    INSTRUCTOR_JUPYTER_CONFIG JUPYTER_CONFIG_PATH of graders and the course service ("" = leave as is)
"""
import importlib.util
import os
import shlex
import sys

c = get_config()  # noqa: F821  (provided by traitlets when JupyterHub reads this file)

COURSE_ID = os.environ.get("COURSE_ID", "transformers101")
COURSE_ROOT = os.environ.get("COURSE_ROOT", "/srv/transformers101/course")
GRADER_USER = os.environ.get("COURSE_GRADER_USER", f"grader-{COURSE_ID}")
SERVICE_RUN_AS = os.environ.get("COURSE_SERVICE_RUN_AS", GRADER_USER)
INSTRUCTORS = [name.strip() for name in os.environ.get("COURSE_INSTRUCTORS", "").split(",") if name.strip()]
SERVICE_PORT = int(os.environ.get("COURSE_SERVICE_PORT", "9999"))
SERVICE_COMMAND = shlex.split(os.environ.get("COURSE_SERVICE_COMMAND", "jupyterhub-singleuser"))
EXCHANGE = os.environ.get("NBGRADER_EXCHANGE", "/srv/nbgrader/exchange")
SUBDOMAIN_HOST = os.environ.get("HUB_SUBDOMAIN_HOST", "")
IDLE_CULL_TIMEOUT = int(os.environ.get("IDLE_CULL_TIMEOUT", "3600"))

GRADERS_GROUP = f"formgrade-{COURSE_ID}"
STUDENTS_GROUP = f"nbgrader-{COURSE_ID}"

# --- groups ---------------------------------------------------------------------------------------
# Students are not listed here: the roster lives in the gradebook and nbgrader keeps the group in step.
c.JupyterHub.load_groups = {
    GRADERS_GROUP: {"users": INSTRUCTORS + [GRADER_USER]},
    STUDENTS_GROUP: {"users": []},
}
if INSTRUCTORS:
    c.Authenticator.allowed_users = set(INSTRUCTORS)  # the site's authenticator may allow more

# --- the course service: formgrader + terminal in the course folder --------------------------------
service_env = {
    "NBGRADER_EXCHANGE": EXCHANGE,
    "COURSE_ID": COURSE_ID,
    # nbgrader's JupyterHubAuthPlugin (formgrader, course list) asks the hub about this account, which
    # must be a hub user in formgrade-<course>
    "JUPYTERHUB_USER": GRADER_USER,
}
if SUBDOMAIN_HOST:
    c.JupyterHub.subdomain_host = SUBDOMAIN_HOST
    service_env["FORMGRADER_FRAME_SELF"] = "1"  # read by deploy/jupyter/instructor/jupyter_server_config.py

course_service = {
    "name": COURSE_ID,
    "url": f"http://127.0.0.1:{SERVICE_PORT}",
    # Services -> <course> lands on the formgrader (a page of its own: the JupyterLab tab cannot frame it, see README)
    "command": SERVICE_COMMAND + [f"--ServerApp.root_dir={COURSE_ROOT}", "--ServerApp.default_url=/formgrader"],
    "cwd": COURSE_ROOT,
    "environment": service_env,
    "oauth_no_confirm": True,
}
# the grader account's cgroup subtree, where `autograder grade` makes each submission's group without root
CGROUP_PARENT = os.environ.get("AUTOGRADER_CGROUP_PARENT", "")
SERVICE_CGROUP = os.environ.get("COURSE_SERVICE_CGROUP", "")
SERVICE_CGROUP_EXEC = os.environ.get("COURSE_SERVICE_CGROUP_EXEC", "")
if CGROUP_PARENT:
    service_env["AUTOGRADER_CGROUP_PARENT"] = CGROUP_PARENT
if SERVICE_RUN_AS and SERVICE_CGROUP and SERVICE_CGROUP_EXEC:
    # cgroup v2: the service must start inside the subtree delegated to its account; the hub starts the helper as
    # root, which joins that group and then becomes the account
    course_service["command"] = [SERVICE_CGROUP_EXEC, "exec", SERVICE_CGROUP, SERVICE_RUN_AS, "--",
                                 *course_service["command"]]
elif SERVICE_RUN_AS:
    course_service["user"] = SERVICE_RUN_AS  # the hub runs as root and switches to this system account
services = [course_service]
# the grader environment's tools (autograder, nbgrader, alembic for nbgrader's gradebook migrations) on the PATH of
# the course service and its terminals, when the service command names that environment (login shells get it back
# from /etc/profile.d/transformers101-grader.sh of deploy/one-machine/install.sh)
_service_bin = os.path.dirname(SERVICE_COMMAND[0]) if os.path.isabs(SERVICE_COMMAND[0]) else ""
if _service_bin:
    service_env["PATH"] = os.pathsep.join([_service_bin, os.environ.get("PATH") or "/usr/local/bin:/usr/bin:/bin"])

# --- the roster lets students in -------------------------------------------------------------------
# roster_sync.py (next to this file) creates a hub user for each student of the gradebook and puts it into the
# students group, whenever the instructor adds them; allow_existing_users then lets those users log in. It runs in
# the grader environment (the Python beside the course service's command) as the grader account.
ROSTER_SERVICE = f"{COURSE_ID}-roster"
ROSTER_PYTHON = os.path.join(_service_bin, "python") if _service_bin else sys.executable
roster_service = {
    "name": ROSTER_SERVICE,
    "command": [ROSTER_PYTHON, os.path.join(os.path.dirname(os.path.abspath(__file__)), "roster_sync.py")],
    "cwd": COURSE_ROOT,
    "environment": {
        "COURSE_ID": COURSE_ID,
        "ROSTER_DB_URL": os.environ.get("ROSTER_DB_URL", f"sqlite:///{COURSE_ROOT}/gradebook.db"),
        "ROSTER_SYNC_INTERVAL": os.environ.get("ROSTER_SYNC_INTERVAL", "10"),
    },
}
if SERVICE_RUN_AS:
    roster_service["user"] = SERVICE_RUN_AS
services.append(roster_service)
c.Authenticator.allow_existing_users = True  # hub users made by the roster service (and by an admin) may log in

# --- idle culler -----------------------------------------------------------------------------------
CULLER_INSTALLED = importlib.util.find_spec("jupyterhub_idle_culler") is not None
if IDLE_CULL_TIMEOUT > 0 and CULLER_INSTALLED:
    services.append({
        "name": "idle-culler",
        "command": [sys.executable, "-m", "jupyterhub_idle_culler", f"--timeout={IDLE_CULL_TIMEOUT}"],
    })
elif IDLE_CULL_TIMEOUT > 0:
    print(
        "jupyterhub_config: jupyterhub-idle-culler is not installed, idle servers will NOT be stopped "
        "(pip install jupyterhub-idle-culler==2.0.0, or set IDLE_CULL_TIMEOUT=0 to silence this)",
        file=sys.stderr,
    )
c.JupyterHub.services = services

# --- roles and scopes (JupyterHub >= 5) ------------------------------------------------------------
roles = [
    {
        # the course service manages the student group and reads who is in which course
        "name": f"{COURSE_ID}-service",
        "description": "nbgrader formgrader service: manage the course groups",
        "scopes": ["admin:groups", "groups", "list:groups", "read:groups", "list:users", "read:users",
                   "list:services", "read:services"],
        "services": [COURSE_ID],
    },
    {
        # instructors and graders may open the course service and see it in nbgrader's course list
        "name": f"{COURSE_ID}-graders",
        "description": "use the formgrader of the course",
        "scopes": [f"access:services!service={COURSE_ID}", "list:services", "read:services"],
        "groups": [GRADERS_GROUP],
    },
]
roles.append({
    "name": ROSTER_SERVICE,
    "description": "create the hub users of the course roster and put them into the students group",
    "scopes": ["admin:users", "list:users", "read:users", "groups", "read:groups", "list:groups"],
    "services": [ROSTER_SERVICE],
})
if IDLE_CULL_TIMEOUT > 0 and CULLER_INSTALLED:
    roles.append({
        "name": "idle-culler",
        "description": "stop idle servers",
        "scopes": ["list:users", "read:users:activity", "read:servers", "delete:servers"],
        "services": ["idle-culler"],
    })
c.JupyterHub.load_roles = roles

# The token a user's server gets ($JUPYTERHUB_API_TOKEN, used by nbgrader inside the server): report
# activity, and let nbgrader read the user's own groups (course membership) and the list of services
# (course list). A user receives only the scopes the user holds, so students get no service listing.
c.Spawner.server_token_scopes = [
    "users:activity!user",
    "access:servers!server",
    "read:users:name!user",
    "read:users:groups!user",
    "list:services",
    "read:services",
]

# --- what every single-user server sees -------------------------------------------------------------
# OMP_NUM_THREADS=1: servers share the machine's cores; torch's default threads oversubscribe them (docs/benchmarks.md)
c.Spawner.environment = {"NBGRADER_EXCHANGE": EXCHANGE, "COURSE_ID": COURSE_ID, "OMP_NUM_THREADS": "1"}
c.Spawner.default_url = "/lab"

# --- students and graders run in different Python environments --------------------------------------
# Anybody outside the graders group is a student: the student environment has coursekit only, never the
# reference solutions or the hidden checks. (Deny by default: a new account is a student.)
STUDENT_CMD = shlex.split(os.environ.get("STUDENT_SINGLEUSER_CMD", ""))
INSTRUCTOR_CMD = shlex.split(os.environ.get("INSTRUCTOR_SINGLEUSER_CMD", ""))
STUDENT_CONFIG = os.environ.get("STUDENT_JUPYTER_CONFIG", "")
INSTRUCTOR_CONFIG = os.environ.get("INSTRUCTOR_JUPYTER_CONFIG", "")


def is_grader(user) -> bool:
    return any(group.name == GRADERS_GROUP for group in user.groups)


def choose_environment(spawner):
    """pre_spawn_hook: pick the single-user command and Jupyter config folder by the user's role."""
    grader = is_grader(spawner.user)
    env = dict(spawner.environment)
    cmd, config_path = (INSTRUCTOR_CMD, INSTRUCTOR_CONFIG) if grader else (STUDENT_CMD, STUDENT_CONFIG)
    if cmd:
        spawner.cmd = cmd
    if config_path:
        env["JUPYTER_CONFIG_PATH"] = config_path
    spawner.environment = env
    spawner.log.info("%s starts as a %s", spawner.user.name, "grader" if grader else "student")


c.Spawner.pre_spawn_hook = choose_environment
if INSTRUCTOR_CONFIG:
    # also what keeps the formgrader's pages safe: their Content-Security-Policy and the step that makes each
    # notebook inert as it is rendered (deploy/jupyter/instructor/jupyter_server_config.py; the instructor image
    # sets the same path itself)
    service_env["JUPYTER_CONFIG_PATH"] = INSTRUCTOR_CONFIG


# --- a refused login says why ----------------------------------------------------------------------
# JupyterHub shows "Invalid username or password" for a user who authenticated but is not allowed; a student not
# (yet) on the roster would take that for a typo. Authenticator.check_allowed may raise an HTTPError with the text
# to show instead; wrapping the base class's method keeps whichever authenticator the site configures below.
from jupyterhub.auth import Authenticator  # noqa: E402
from tornado import web  # noqa: E402

_check_allowed = getattr(Authenticator.check_allowed, "__wrapped__", Authenticator.check_allowed)


def _check_allowed_saying_why(self, username, authentication=None):
    if _check_allowed(self, username, authentication):
        return True
    raise web.HTTPError(403, f"{username} is not on the roster of {COURSE_ID} yet. Ask your instructor to add you "
                             f"(students who were just added get in within {os.environ.get('ROSTER_SYNC_INTERVAL', '10')} "
                             "seconds).")


_check_allowed_saying_why.__wrapped__ = _check_allowed
Authenticator.check_allowed = _check_allowed_saying_why


# --- the site's own settings ------------------------------------------------------------------------
# The authenticator, ports and TLS of this machine, in a file of their own that deploy/one-machine/install.sh makes
# once and never overwrites (it rewrites this one). Read last, so it may change anything above.
SITE_CONFIG = os.environ.get("HUB_SITE_CONFIG", "")
if SITE_CONFIG:
    if not os.path.isfile(SITE_CONFIG):
        raise SystemExit(f"jupyterhub_config: HUB_SITE_CONFIG names {SITE_CONFIG}, which is not a file")
    load_subconfig(SITE_CONFIG)  # noqa: F821  (provided by traitlets, like get_config)
