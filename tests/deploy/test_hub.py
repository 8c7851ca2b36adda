"""End to end on a real JupyterHub: deploy/ configs, a student and an instructor environment, and one
assignment going round the course loop through nbgrader's exchange.

Who runs what (the choice the brief allows, documented in deploy/README.md):
  * students act through their own single-user servers, exactly as the Assignment List tab does:
    nbgrader's REST handlers under /user/<name>/assignments (list, fetch, submit, fetch_feedback) and the
    contents API to save the solved notebook;
  * the grader side runs as subprocesses with the course service's environment (its HOME, the course
    folder as working directory, its hub token), which is what a grader in the course service's terminal
    gets: `nbgrader collect`, the grading command (`python -m autograder grade` or `nbgrader autograde`,
    see grade_command) and, to save process start-ups, one Python process driving nbgrader's NbGraderAPI
    (the object behind the formgrader's buttons) for generate + due date + roster + release and for
    generate + release feedback;
  * an enrolled-nowhere user is tried with `nbgrader fetch_assignment` in the student environment.

Bad input covered: a late submission (the course's DailyLatePenalty plugin), a double submission (the
latest wins), a submission planted in the exchange by somebody not on the roster, and a user who is not
enrolled trying to fetch.

The gated provided module (fixture `gated`, its own student3): with 03 open (due in a week) `autograder release`
withholds 04's provided.py, so a student holds no line of the reference (no `solutions` package, no reference
code anywhere in their home or in the exchange's 03/04 releases); once 01-03 are past due in the gradebook, a
re-release of 04 hands provided.py out.
"""
from __future__ import annotations

import datetime as dt
import importlib
import json
import os
import re
import shutil
import subprocess
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import nbformat
import pytest

from hubkit import COURSE_ID, GRADER, INSTRUCTOR, INSTRUCTOR_CONFIG, ROOT, STUDENT_CONFIG, STUDENTS, VENV, HubError, kill_tree

pytestmark = [pytest.mark.hub, pytest.mark.timeout(600)]

OUTSIDER = "outsider"  # a hub user who is in no course
INTRUDER = "intruder"  # not a hub user, not on the roster; plants a submission in the exchange
DAYS_LATE = 1.5        # the due date lies this far in the past, so every submission is 2 started days late
PROBE = ("import importlib.util as u, json;"
         "print(json.dumps({n: u.find_spec(n) is not None for n in ('coursekit', 'solutions', 'autograder')}))")


# --- the assignment ---------------------------------------------------------------------------------

def hidden_check_names(notebook: Path) -> list[str]:
    nb = nbformat.read(notebook, as_version=4)
    names = []
    for cell in nb.cells:
        for match in re.finditer(r"from autograder\.checks import ([\w, ]+)", cell.source):
            names += [n.strip() for n in match.group(1).split(",") if n.strip()]
    return names


def real_assignment() -> str | None:
    """The smallest real assignment whose hidden checks exist already (other parts are built in parallel)."""
    for name in ("02_positional_encoding", "03_attention"):
        notebook = ROOT / "course" / "source" / name / f"{name}.ipynb"
        if not notebook.exists():
            continue
        try:
            checks = importlib.import_module("autograder.checks")
        except ImportError:
            return None
        names = hidden_check_names(notebook)
        if names and all(hasattr(checks, n) for n in names):
            return name
    return None


def tiny_assignment(source: Path) -> str:
    """A two-question assignment written here when no real one is ready (same cell kinds as the course)."""
    name = "00_hub_smoke"

    def meta(grade_id, solution=False, grade=False, points=None, locked=False):
        md = {"grade_id": grade_id, "solution": solution, "grade": grade, "locked": locked,
              "schema_version": 3, "task": False}
        if points is not None:
            md["points"] = points
        return {"nbgrader": md}

    cells = [
        nbformat.v4.new_markdown_cell("Write `scale` and `shift`.", metadata=meta("intro", locked=True)),
        nbformat.v4.new_code_cell(
            "def scale(x, k):\n    ### BEGIN SOLUTION\n    return [k * v for v in x]\n    ### END SOLUTION",
            metadata=meta("scale", solution=True)),
        nbformat.v4.new_code_cell(
            "assert scale([1, 2], 3) == [3, 6]\n### BEGIN HIDDEN TESTS\nassert scale([], 5) == []\n"
            "### END HIDDEN TESTS", metadata=meta("test_scale", grade=True, points=6, locked=True)),
        nbformat.v4.new_code_cell(
            "def shift(x, b):\n    ### BEGIN SOLUTION\n    return [v + b for v in x]\n    ### END SOLUTION",
            metadata=meta("shift", solution=True)),
        nbformat.v4.new_code_cell(
            "assert shift([1], 1) == [2]", metadata=meta("test_shift", grade=True, points=4, locked=True)),
    ]
    nb = nbformat.v4.new_notebook(cells=cells)
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    (source / name).mkdir(parents=True)
    nbformat.write(nb, source / name / f"{name}.ipynb")
    return name


def solve(fetched: dict, source_nb: Path) -> dict:
    """The student's notebook with every answer cell replaced by the reference cell of the same grade_id."""
    reference = {c.metadata["nbgrader"]["grade_id"]: c.source for c in nbformat.read(source_nb, as_version=4).cells
                 if c.metadata.get("nbgrader", {}).get("solution")}
    solved = 0
    for cell in fetched["cells"]:
        grade_id = cell.get("metadata", {}).get("nbgrader", {}).get("grade_id")
        if grade_id in reference:
            cell["source"] = reference[grade_id]
            solved += 1
    assert solved == len(reference) > 0, "the released notebook lost answer cells"
    return fetched


# --- the two sides ----------------------------------------------------------------------------------

def grader_env(hub) -> dict:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("JUPYTER", "NBGRADER"))}
    env.update(
        PATH=f"{VENV / 'bin'}:{os.environ.get('PATH', '')}",
        HOME=str(hub.grader_home),
        JUPYTER_CONFIG_PATH=str(INSTRUCTOR_CONFIG),
        NBGRADER_EXCHANGE=str(hub.exchange),
        COURSE_ID=COURSE_ID,
        JUPYTERHUB_API_URL=hub.api_url,
        JUPYTERHUB_API_TOKEN=hub.service_token,
        JUPYTERHUB_USER=GRADER,
    )
    return env


def grader(hub, *args, check=True) -> subprocess.CompletedProcess:
    """Run a command in the course folder as the course service's terminal would."""
    proc = subprocess.Popen(list(args), cwd=hub.course_root, env=grader_env(hub), stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, start_new_session=True)
    try:
        out, err = proc.communicate(timeout=300)
    finally:
        kill_tree(proc.pid)  # grading kernels included, also when the test is interrupted
    res = subprocess.CompletedProcess(proc.args, proc.returncode, out, err)
    if check and res.returncode != 0:
        shown = " ".join(a if len(a) < 100 else a[:40] + "..." for a in map(str, args))
        raise HubError(f"grader command `{shown}` failed ({res.returncode}):\n{res.stdout[-3000:]}\n{res.stderr[-3000:]}")
    return res


def nbgrader(hub, *args, check=True):
    return grader(hub, str(VENV / "bin" / "nbgrader"), *args, check=check)


FORMGRADER_API = """
import json, os, sys
from jupyter_core.paths import jupyter_config_path
from nbgrader.api import Gradebook
from nbgrader.apps import NbGrader
from nbgrader.apps.api import NbGraderAPI
from nbgrader.auth import Authenticator
from nbgrader.coursedir import CourseDirectory

app = NbGrader()  # config as the formgrader loads it: global folders, then the course folder
app.config_file_paths.append([os.getcwd()] + jupyter_config_path())
app.load_config_file()
coursedir = CourseDirectory(config=app.config)
authenticator = Authenticator(config=app.config)
api = NbGraderAPI(coursedir, authenticator, config=app.config)
steps = json.loads(sys.argv[1])
for step, args in steps:
    if step == "roster":  # like `nbgrader db student add`: the auth plugin adds each to the hub group
        with Gradebook(coursedir.db_url, coursedir.course_id, authenticator) as gb:
            for student in args:
                gb.update_or_create_student(student)
        continue
    if step == "duedate":
        with Gradebook(coursedir.db_url, coursedir.course_id) as gb:
            gb.update_or_create_assignment(args[0], duedate=args[1])
        continue
    result = getattr(api, step)(*args)
    if not result["success"]:
        sys.exit(f"{step}{tuple(args)} failed: {result.get('error') or result.get('log')}")
"""


def formgrader_api(hub, *steps) -> None:
    """Grader steps through nbgrader's NbGraderAPI, the object behind the formgrader's buttons, in one
    process (each `nbgrader` command would pay the start-up again)."""
    grader(hub, str(VENV / "bin" / "python"), "-c", FORMGRADER_API, json.dumps(steps))


def grade_command(assignment: str) -> tuple[list[str], str]:
    """The grading step: `autograder grade` (the course's pipeline) or nbgrader's own `autograde`.

    HUB_E2E_GRADER=autograder|nbgrader chooses; by default the course's CLI once autograder/cli.py exists.
    """
    choice = os.environ.get("HUB_E2E_GRADER") or ("autograder" if (ROOT / "autograder" / "cli.py").exists() else "nbgrader")
    if choice == "autograder":
        return [str(VENV / "bin" / "python"), "-m", "autograder", "grade", assignment, "--course-dir", "."], "autograder grade"
    if choice == "nbgrader":
        return [str(VENV / "bin" / "nbgrader"), "autograde", assignment], "nbgrader autograde"
    raise ValueError(f"HUB_E2E_GRADER must be 'autograder' or 'nbgrader', not {choice!r}")


def student_action(hub, user: str, action: str, assignment: str) -> list:
    resp = hub.client.server("POST", user, f"assignments/{action}", hub.user_tokens[user],
                             data={"course_id": COURSE_ID, "assignment_id": assignment})
    body = resp.json()
    if not body.get("success", False):
        raise HubError(f"{user}: {action} failed: {body.get('value')}")
    return body["value"]


def listing(hub, user: str) -> list:
    body = hub.client.server("GET", user, "assignments", hub.user_tokens[user], params={"course_id": COURSE_ID}).json()
    if not body.get("success"):
        raise HubError(f"{user}: listing failed: {body.get('value')}")
    return body["value"]


def save_notebook(hub, user: str, rel_path: str, nb: dict) -> None:
    hub.client.server("PUT", user, f"api/contents/{rel_path}", hub.user_tokens[user],
                      json={"type": "notebook", "format": "json", "content": nb})


def load_notebook(hub, user: str, rel_path: str) -> dict:
    return hub.client.server("GET", user, f"api/contents/{rel_path}", hub.user_tokens[user],
                             params={"type": "notebook", "content": 1}).json()["content"]


# --- the loop, once per module; the tests below read what it recorded --------------------------------

@pytest.fixture(scope="module")
def loop(hub, student_env):
    t0 = time.monotonic()
    rec: dict = {"timings": {}}
    client = hub.client

    # course folder: the course's nbgrader config + one assignment
    shutil.copy(ROOT / "course" / "nbgrader_config.py", hub.course_root / "nbgrader_config.py")
    source = hub.course_root / "source"
    wanted = os.environ.get("HUB_E2E_ASSIGNMENT", "")  # "tiny" forces the generated one, a name a real one
    assignment = None if wanted == "tiny" else (wanted or real_assignment())
    if assignment:
        shutil.copytree(ROOT / "course" / "source" / assignment, source / assignment, dirs_exist_ok=True,
                        ignore=shutil.ignore_patterns("provided.py", ".ipynb_checkpoints", "__pycache__"))
    else:
        assignment = tiny_assignment(source)
    rec["assignment"] = assignment
    source_nb = source / assignment / f"{assignment}.ipynb"

    # hub accounts (the instructor exists already: the config puts it into formgrade-<course>)
    client.api("POST", "/users", json={"usernames": list(STUDENTS) + [OUTSIDER]})
    for user in (INSTRUCTOR, *STUDENTS, OUTSIDER):
        hub.user_tokens[user] = client.api("POST", f"/users/{user}/tokens", json={"note": "e2e"})["token"]
    with ThreadPoolExecutor(3) as pool:  # spawn the three servers together, wait for each
        for user in (INSTRUCTOR, *STUDENTS):
            client.start_server(user)
        list(pool.map(lambda u: client.wait_for_server(u, 180, hub.log), (INSTRUCTOR, *STUDENTS)))
    rec["timings"]["servers_up"] = time.monotonic() - t0

    # grader: generate, due date in the past, roster (puts students in the hub group), release
    due = dt.datetime.now(dt.timezone.utc).replace(tzinfo=None) - dt.timedelta(days=DAYS_LATE)
    formgrader_api(hub, ["generate_assignment", [assignment]], ["duedate", [assignment, f"{due:%Y-%m-%d %H:%M:%S}"]],
                   ["roster", list(STUDENTS)], ["release_assignment", [assignment]])
    rec["group_members"] = sorted(client.api("GET", f"/groups/nbgrader-{COURSE_ID}")["users"])
    rec["timings"]["released"] = time.monotonic() - t0

    # students: list, fetch; student1 submits twice (blank first, then solved), student2 once (blank)
    rec["listed"] = {s: listing(hub, s) for s in STUDENTS}
    for student in STUDENTS:
        fetched = student_action(hub, student, "fetch", assignment)
        rec.setdefault("fetched", {})[student] = fetched
    nb_path = next(a for a in rec["fetched"]["student1"] if a["status"] == "fetched")["notebooks"][0]["path"]
    rec["notebook_path"] = nb_path
    student_action(hub, "student1", "submit", assignment)
    time.sleep(1.1)  # submission timestamps must differ
    save_notebook(hub, "student1", nb_path, solve(load_notebook(hub, "student1", nb_path), source_nb))
    student_action(hub, "student1", "submit", assignment)
    student_action(hub, "student2", "submit", assignment)
    inbound = hub.exchange / COURSE_ID / "inbound"
    rec["inbound"] = sorted(p.name for p in inbound.iterdir())

    # someone outside every course tries to fetch from a terminal of the student image
    outsider_home = hub.home(OUTSIDER)
    outsider_home.mkdir(parents=True)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("JUPYTER", "NBGRADER"))}
    env.update(HOME=str(outsider_home), JUPYTER_CONFIG_PATH=str(STUDENT_CONFIG),
               NBGRADER_EXCHANGE=str(hub.exchange), JUPYTERHUB_API_URL=hub.api_url,
               JUPYTERHUB_USER=OUTSIDER, JUPYTERHUB_API_TOKEN=hub.user_tokens[OUTSIDER])
    rec["outsider"] = subprocess.run([str(student_env.python), "-m", "nbgrader", "fetch_assignment", assignment],
                                     cwd=outsider_home, env=env, capture_output=True, text=True, timeout=120)
    rec["outsider_files"] = sorted(str(p.relative_to(outsider_home)) for p in outsider_home.rglob("*.ipynb"))

    # somebody not on the roster plants a submission straight into the exchange
    planted = next(p for p in inbound.iterdir() if p.name.startswith("student2+"))
    shutil.copytree(planted, inbound / planted.name.replace("student2+", f"{INTRUDER}+", 1))

    # grader: collect, grade, feedback. A failing step is recorded, not raised, so that the tests of the
    # earlier steps still report; the tests of this step and of the later ones fail with its message.
    rec["failed"] = {}
    # autograder collect takes the submissions from the exchange itself (nbgrader's choice of submission)
    rec["collect"] = grader(hub, str(VENV / "bin" / "python"), "-m", "autograder", "collect", assignment,
                            "--course-dir", ".", check=False)
    rec["collected"] = sorted(p.name for p in (hub.course_root / "submitted").iterdir())
    command, rec["grade_tool"] = grade_command(assignment)
    rec["grade"] = grader(hub, *command, check=False)
    rec["timings"]["graded"] = time.monotonic() - t0
    t_feedback = time.monotonic()
    try:
        formgrader_api(hub, ["generate_feedback", [assignment]], ["release_feedback", [assignment]])
        for student in STUDENTS:
            student_action(hub, student, "fetch_feedback", assignment)
    except HubError as err:
        rec["failed"]["feedback"] = str(err)
    rec["timings"]["feedback"] = time.monotonic() - t_feedback
    rec["feedback"] = {
        s: {str(p.relative_to(hub.home(s))): p.read_text() for p in hub.home(s).rglob("feedback/*/*.html")}
        for s in STUDENTS
    }

    # the gradebook after the loop
    from nbgrader.api import Gradebook, MissingEntry

    rec["gradebook"] = {}
    with Gradebook(f"sqlite:///{hub.course_root / 'gradebook.db'}", COURSE_ID) as gb:
        rec["max_code_score"] = gb.find_assignment(assignment).max_code_score
        rec["roster"] = sorted(s.id for s in gb.students)
        for student in (*STUDENTS, INTRUDER):
            try:
                sub = gb.find_submission(assignment, student)
            except MissingEntry:
                continue
            rec["gradebook"][student] = {
                "score": sub.score, "code_score": sub.code_score, "max_score": sub.max_score,
                "penalty": sub.late_submission_penalty, "seconds_late": sub.total_seconds_late,
                "notebooks": len(sub.notebooks),
            }
    rec["timings"]["total"] = time.monotonic() - t0
    print("hub e2e:", json.dumps({k: rec[k] for k in ("assignment", "grade_tool", "timings", "gradebook")}))
    return rec


def grading_story(loop) -> str:
    grade = loop["grade"]
    return f"{loop['grade_tool']} on {loop['assignment']} exited {grade.returncode}:\n{(grade.stdout + grade.stderr)[-2500:]}"


# --- servers and environments -------------------------------------------------------------------------

def test_student_environment_lacks_instructor_packages(student_env, tmp_path):
    out = subprocess.run([str(student_env.python), "-c", PROBE], cwd=tmp_path, capture_output=True, text=True,
                         check=True).stdout
    assert json.loads(out) == {"coursekit": True, "solutions": False, "autograder": False}


def test_nbgrader_server_extension_answers_on_every_server(hub, loop):
    import nbgrader

    for user in (INSTRUCTOR, *STUDENTS):
        resp = hub.client.server("GET", user, "nbgrader_version", hub.user_tokens[user],
                                 params={"version": nbgrader.__version__})
        assert resp.json() == {"success": True}, user


def test_student_servers_have_no_formgrader_but_the_course_service_has(hub, loop):
    student = hub.client.server("GET", "student1", "formgrader/api/status", hub.user_tokens["student1"], ok=None)
    assert student.status_code == 404
    url = f"{hub.client.base}/services/{COURSE_ID}/formgrader/api/status"
    import requests

    as_instructor = requests.get(url, headers={"Authorization": f"token {hub.user_tokens[INSTRUCTOR]}"}, timeout=30)
    assert as_instructor.status_code == 200 and as_instructor.json()["status"] is True
    as_student = requests.get(url, headers={"Authorization": f"token {hub.user_tokens['student1']}"},
                              timeout=30, allow_redirects=False)
    assert as_student.status_code in (302, 403, 404)


def test_formgrader_page_refuses_iframes_by_default(hub, loop):
    """The JupyterHub >= 4.1 behaviour documented in deploy/README.md (nbgrader issue #1870)."""
    import requests

    resp = requests.get(f"{hub.client.base}/services/{COURSE_ID}/formgrader",
                        headers={"Authorization": f"token {hub.user_tokens[INSTRUCTOR]}"}, timeout=30)
    assert resp.status_code == 200
    assert "frame-ancestors 'none'" in resp.headers.get("Content-Security-Policy", "")


def test_manual_grading_page_loads_mathjax_from_the_course_service_itself(hub, loop):
    """The formgrade template's MathJax loader (deploy/jupyter/instructor/share/...) under the service's prefix: the
    path it computes answers through the hub, as do the config and font data MathJax asks for next; the typesetting
    itself is tested in a browser (tests/browser/test_formgrader_mathjax.py)."""
    import requests
    from nbgrader.api import Gradebook

    assignment = loop["assignment"]
    with Gradebook(f"sqlite:///{hub.course_root / 'gradebook.db'}", COURSE_ID) as gb:
        notebook = gb.find_assignment(assignment).notebooks[0].name
        submission = gb.find_submission_notebook(notebook, assignment, "student1").id
    auth = {"Authorization": f"token {hub.user_tokens[INSTRUCTOR]}"}
    service = f"{hub.client.base}/services/{COURSE_ID}"
    page = requests.get(f"{service}/formgrader/submissions/{submission}/", headers=auth, timeout=60)
    assert page.status_code == 200
    assert '"/static/jupyter_server_mathjax/MathJax.js?config=TeX-AMS-MML_HTMLorMML-full,Safe"' in page.text
    assert "cdnjs" not in page.headers.get("Content-Security-Policy", "")
    prefix = f"{service}/static/jupyter_server_mathjax"  # what precedes /formgrader/ in the page's path
    for path in ("MathJax.js", "config/TeX-AMS-MML_HTMLorMML-full.js",
                 "jax/output/HTML-CSS/fonts/STIX-Web/fontdata.js"):
        assert requests.get(f"{prefix}/{path}", headers=auth, timeout=30).status_code == 200, path


def test_student_kernel_cannot_import_instructor_packages(hub, loop):
    out = hub.client.run_code("student1", hub.user_tokens["student1"], PROBE)
    assert json.loads(out) == {"coursekit": True, "solutions": False, "autograder": False}


def test_instructor_kernel_has_every_package(hub, loop):
    out = hub.client.run_code(INSTRUCTOR, hub.user_tokens[INSTRUCTOR], PROBE)
    assert json.loads(out) == {"coursekit": True, "solutions": True, "autograder": True}


# --- the course loop ----------------------------------------------------------------------------------

def test_roster_fills_the_hub_group(loop):
    assert loop["group_members"] == sorted(STUDENTS)


def test_students_see_and_fetch_the_release(loop):
    for student in STUDENTS:
        released = [a for a in loop["listed"][student] if a["assignment_id"] == loop["assignment"]]
        assert [a["status"] for a in released] == ["released"], student
        assert any(a["status"] == "fetched" for a in loop["fetched"][student]), student


def test_both_submissions_of_student1_reach_the_exchange(loop):
    mine = [name for name in loop["inbound"] if name.startswith(f"student1+{loop['assignment']}+")]
    assert len(mine) == 2


def test_double_submission_latest_wins(loop):
    s1 = loop["gradebook"]["student1"]
    assert loop["max_code_score"] > 0
    assert s1["code_score"] == pytest.approx(loop["max_code_score"]), grading_story(loop)


def test_blank_submission_scores_zero(loop):
    assert loop["gradebook"]["student2"]["code_score"] == pytest.approx(0.0)


def test_late_penalty_applied(loop):
    s1 = loop["gradebook"]["student1"]
    assert s1["seconds_late"] >= DAYS_LATE * 24 * 3600 - 60
    # DailyLatePenalty: 10 % per started day, 2 started days
    assert s1["penalty"] == pytest.approx(0.2 * s1["score"])
    assert loop["gradebook"]["student2"]["penalty"] == pytest.approx(0.0)  # capped at a zero score


def test_unknown_student_is_collected_but_not_graded(loop):
    assert INTRUDER in loop["collected"]
    collect = loop["collect"]
    assert collect.returncode == 1 and f"{INTRUDER} is not on the roster" in collect.stdout, collect  # reported
    assert "collected 3 notebook(s) from 3 student(s), 0 new" in collect.stdout, collect.stdout
    assert INTRUDER not in loop["roster"]
    assert INTRUDER not in loop["gradebook"]
    grade = loop["grade"]
    assert INTRUDER in grade.stdout + grade.stderr, "the grader's output must name the unknown submission"
    assert set(STUDENTS) <= set(loop["gradebook"])


def test_user_outside_the_course_cannot_fetch(loop):
    assert loop["outsider"].returncode != 0
    assert loop["outsider_files"] == []


def test_feedback_reaches_each_student(loop):
    """Each student fetched exactly one feedback page, showing the score after the late penalty."""
    assert "feedback" not in loop["failed"], loop["failed"].get("feedback")
    for student in STUDENTS:
        pages = loop["feedback"][student]
        assert len(pages) == 1, (student, list(pages))
        (html,) = pages.values()
        book = loop["gradebook"][student]
        final = round(float(book["score"] - book["penalty"]), 2)
        assert f"{loop['assignment']} (Score: {final} / {round(float(book['max_score']), 2)})" in html, student
    s1 = loop["gradebook"]["student1"]
    s1_html = next(iter(loop["feedback"]["student1"].values()))
    assert f"Late submission penalty (Score: -{round(float(s1['penalty']), 2)})" in s1_html


# --- provided.py gated by due dates: no reference in a student's hands while 03 is open ------------------------

GATED_STUDENT = "student3"
OPEN, NEXT = "03_attention", "04_multi_head_attention"


def _readable(path: Path) -> str:
    """A file's text as a student would read it (a notebook: its cells' sources)."""
    if path.suffix == ".ipynb":
        try:
            return "\n".join(cell.source for cell in nbformat.read(path, as_version=4).cells)
        except Exception:  # noqa: BLE001 - not a notebook after all: scan the raw text
            pass
    return path.read_text(encoding="utf-8", errors="replace")


def reference_in(folders) -> dict:
    """file -> reference functions whose bodies it holds, for every file under `folders` (or a file itself)."""
    from autograder.course.provided import reference_fingerprints, reference_found_in

    prints = reference_fingerprints()
    found = {}
    for folder in map(Path, folders):
        for path in [folder] if folder.is_file() else sorted(folder.rglob("*")):
            if path.is_file() and path.stat().st_size < 5_000_000:
                hits = reference_found_in(_readable(path), prints)
                if hits:
                    found[str(path)] = hits
    return found


def fetched_folder(hub, user: str, assignment: str) -> Path | None:
    return next((p for p in hub.home(user).rglob(assignment) if p.is_dir()), None)


@pytest.fixture(scope="module")
def gated(hub):
    rec: dict = {}
    client = hub.client
    source = hub.course_root / "source"
    if not (hub.course_root / "nbgrader_config.py").exists():  # the loop fixture did not run first
        shutil.copy(ROOT / "course" / "nbgrader_config.py", hub.course_root / "nbgrader_config.py")
    for name in (OPEN, NEXT):
        shutil.copytree(ROOT / "course" / "source" / name, source / name, dirs_exist_ok=True,
                        ignore=shutil.ignore_patterns("provided.py", ".ipynb_checkpoints", "__pycache__"))
    client.api("POST", "/users", json={"usernames": [GATED_STUDENT]}, ok=(201, 409))
    hub.user_tokens[GATED_STUDENT] = client.api("POST", f"/users/{GATED_STUDENT}/tokens", json={"note": "e2e"})["token"]
    client.start_server(GATED_STUDENT)
    client.wait_for_server(GATED_STUDENT, 180, hub.log)

    now = dt.datetime.now(dt.timezone.utc).replace(tzinfo=None)
    past, future = f"{now - dt.timedelta(days=3):%Y-%m-%d %H:%M:%S}", f"{now + dt.timedelta(days=7):%Y-%m-%d %H:%M:%S}"
    formgrader_api(hub, ["duedate", ["01_tokens_and_embeddings", past]], ["duedate", ["02_positional_encoding", past]],
                   ["duedate", [OPEN, future]], ["roster", [GATED_STUDENT]])
    python = str(VENV / "bin" / "python")
    # autograder release hands the release to the exchange itself (the instructor config names it)
    rec["release_open"] = grader(hub, python, "-m", "autograder", "release", OPEN, NEXT, "--course-dir", ".").stdout
    outbound = hub.exchange / COURSE_ID / "outbound"
    rec["outbound_open"] = {name: sorted(p.name for p in (outbound / name).iterdir()) for name in (OPEN, NEXT)}
    for name in (OPEN, NEXT):
        student_action(hub, GATED_STUDENT, "fetch", name)
    rec["fetched_next_open"] = sorted(p.name for p in fetched_folder(hub, GATED_STUDENT, NEXT).iterdir())
    rec["probe"] = hub.client.run_code(GATED_STUDENT, hub.user_tokens[GATED_STUDENT], (
        "try:\n    import solutions\n    print('IMPORTED', solutions.__file__)\n"
        "except ImportError as exc:\n    print('MISSING', type(exc).__name__)\n"
        "try:\n    import autograder\n    print('IMPORTED', autograder.__file__)\n"
        "except ImportError as exc:\n    print('MISSING', type(exc).__name__)\n"))
    rec["leaks_open"] = reference_in([hub.home(GATED_STUDENT), outbound / OPEN, outbound / NEXT])
    rec["instructor_side"] = reference_in([hub.course_root / "source" / NEXT])  # the scan has teeth

    # 03 is past due now: a re-release of 04 hands provided.py out
    formgrader_api(hub, ["duedate", [OPEN, past]])
    rec["release_due"] = grader(hub, python, "-m", "autograder", "release", NEXT, "--course-dir", ".").stdout
    rec["outbound_due"] = sorted(p.name for p in (outbound / NEXT).iterdir())
    shutil.rmtree(fetched_folder(hub, GATED_STUDENT, NEXT))  # the student fetches the new release afresh
    student_action(hub, GATED_STUDENT, "fetch", NEXT)
    folder = fetched_folder(hub, GATED_STUDENT, NEXT)
    rec["fetched_next_due"] = sorted(p.name for p in folder.iterdir())
    rec["provided_due"] = reference_in([folder / "provided.py"]) if (folder / "provided.py").exists() else {}
    return rec


def test_gated_release_says_when_provided_comes(gated):
    out = gated["release_open"]
    for name in (OPEN, NEXT):
        assert f"released {name} to the exchange: " in out, out
    assert f"released {NEXT} to the exchange: " in gated["release_due"]
    assert f"{NEXT}: provided.py withheld: it holds the reference of {OPEN} (due " in out, out
    assert "01_tokens_and_embeddings" not in out.split("withheld")[1].split(";")[0], "past due: not pending"
    assert f"release {NEXT} again after" in out


def test_student_with_03_open_gets_no_provided_module(gated):
    assert "provided.py" not in gated["outbound_open"][NEXT]
    assert f"{NEXT}.ipynb" in gated["fetched_next_open"] and "provided.py" not in gated["fetched_next_open"]


def test_student_environment_cannot_import_the_reference(gated):
    assert gated["probe"].split() == ["MISSING", "ModuleNotFoundError", "MISSING", "ModuleNotFoundError"], gated["probe"]


def test_no_line_of_the_reference_in_the_students_home_or_the_exchange(gated):
    assert gated["leaks_open"] == {}, gated["leaks_open"]
    instructor = next(iter(gated["instructor_side"].values()), [])
    assert "solutions/attention.py:scaled_dot_product_attention" in instructor, "the scan must find a real copy"


def test_after_the_due_date_a_rerelease_hands_out_provided(gated):
    assert f"{NEXT}: provided.py released" in gated["release_due"], gated["release_due"]
    assert "provided.py" in gated["outbound_due"] and "provided.py" in gated["fetched_next_due"]
    (found,) = gated["provided_due"].values()
    assert "solutions/attention.py:scaled_dot_product_attention" in found

