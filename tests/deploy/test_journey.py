"""The journey: an admin, an instructor and two students go from deploy/README.md to graded feedback in Chromium.

The admin follows README's "One machine" for real (installkit.py, as root): the machine's accounts (an instructor,
two students, a latecomer), `COURSE_INSTRUCTORS=<instructor> deploy/one-machine/install.sh` with the full stack, then
`/opt/hub/bin/transformers101-hub`. Nothing of the shipped configuration is swapped: PAM checks the accounts'
passwords, JupyterHub's LocalProcessSpawner starts each person's server as that account, in the environment the
config picks (student or grader), and the course service and its roster service run as the grader account. The only
additions are the ports of this run, in the site file README names for the site's own settings. The one thing under
a scratch PREFIX is the install's root folder. The install starts from the machine's state without bubblewrap
(installkit.WITHOUT_BUBBLEWRAP), so install.sh has to install it.

The journey, each step in the browser unless said otherwise, a screenshot of each under build/journey/<time>/:
the latecomer's login is refused with the reason (not on the roster); the instructor logs in, Services ->
transformers101 lands on the formgrader, Manage Students adds two students, who can then log in (the roster service);
`autograder release 03_attention` in the course service's terminal, shown in Manage Assignments; student 1 fetches in
JupyterLab's Assignments panel, her notebook gets every reference answer through the contents API, she submits in
the panel; student 2 fetches, answers one written question only (contents API), submits; `autograder collect
03_attention`, `autograder grade 03_attention --workers 1` (terminal; each graded notebook runs in a cgroup of its
own, which the grader account made in the subtree the install delegated to it, with the course's memory, process and
CPU caps: cgroupkit.CgroupWatch looks on from outside); the instructor types a score for student 2's
written answer on the formgrader's Manual Grading page; `autograder export` (its CSV holds that score); `autograder
feedback 03_attention` and `nbgrader release_feedback 03_attention`; student 2 fetches the feedback in the panel and
opens it: her scores, and "not graded yet" nowhere. Terminal commands run by name as the course service's account,
with the environment and working folder of its process (what its terminals inherit).

Every page fails the test on an HTTP status >= 400 from the hub's origin (ALLOWED_ERRORS lists the harmless ones,
each with its reason), an uncaught page error, or "Traceback" / "404" / "500 : Internal Server Error" in its text.
"""
from __future__ import annotations

import csv
import json
import os
import re
import shutil
import subprocess
import time
from datetime import datetime
from pathlib import Path

import nbformat
import pytest

import installkit
from autograder.course.coursedir import nbgrader_config
from autograder.sandbox.limits import course_limits
from cgroupkit import CgroupWatch, assert_each_capped
from formgrader_page import wait_until_scores_save
from hubkit import COURSE_ID, ROOT, VENV, free_port, kill_tree

pytestmark = [pytest.mark.hub, pytest.mark.browser, pytest.mark.slow, pytest.mark.timeout(3600)]

ASSIGNMENT = "03_attention"
WRITTEN = "written_causal_mask_leak"  # student2's one written answer, scored by hand
MANUAL_SCORE = "3.5"
SCREENSHOTS = ROOT / "build" / "journey"
CHROMIUM_CANDIDATES = ("/usr/bin/chromium", "/usr/bin/chromium-browser")
OUTPUTS = ".output_wrapper, .output_area, .output, .jp-OutputArea, .jp-Cell-outputWrapper"
BAD_WORDS = ("Traceback", "404", "500 : Internal Server Error")  # whole words: a time "05:11:23.514046" is no 404
# (method, URL path pattern, status, why it is harmless): none is needed today; add one only with its reason
ALLOWED_ERRORS: list[tuple[str, str, int, str]] = []
# (URL path pattern, message pattern, why): uncaught page errors that do not fail a step, each with its reason
ALLOWED_PAGE_ERRORS: list[tuple[str, str, str]] = [
    (rf"^/services/{COURSE_ID}/tree/", r"^Cannot read properties of undefined \(reading 'schema'\)$",
     "Notebook 7's own (7.6.5), not the course's: the same error shows on a bare `jupyter server` with no config of "
     "ours and every third-party lab extension disabled. It is thrown by JupyterLab's shortcuts extension as Notebook "
     "bundles it: its settings registry's pluginChanged handler reads registry.plugins[id].schema for a plugin the "
     "tree page never loaded (the console first says 'Settings failed to load for "
     "@jupyterlab/application-extension:context-menu'). The folder's listing shows and works."),
]


# --- the hub ------------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def journey_hub(machine, tmp_path_factory):
    """README's `sudo /opt/hub/bin/transformers101-hub` on the session's install (installkit.start_hub)."""
    yield from installkit.start_hub(machine, tmp_path_factory.mktemp("journey-hub"))


def instructor_runs(hub, command: str, timeout_s: float = 600) -> subprocess.CompletedProcess:
    """A command of deploy/README.md, by name as typed in the course service's terminal: as the service's account
    (its uid, groups), with its environment (PATH, HOME, JUPYTER_CONFIG_PATH, token...) and working folder."""
    service = hub.service_process()
    env, cwd, uid, gid = service.environ(), service.cwd(), service.uids().real, service.gids().real
    name = env.get("USER") or hub.machine.grader
    proc = subprocess.Popen(["bash", "-c", command], cwd=cwd, env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True, start_new_session=True, user=uid, group=gid,
                            extra_groups=os.getgrouplist(name, gid))
    try:
        out, _ = proc.communicate(timeout=timeout_s)
    finally:
        kill_tree(proc.pid)
    print(f"$ {command}\n{out}")
    assert proc.returncode == 0, f"`{command}` failed ({proc.returncode}):\n{out[-4000:]}"
    assert "Traceback" not in out, f"`{command}` printed a traceback:\n{out[-4000:]}"
    return subprocess.CompletedProcess(command, proc.returncode, out, "")


# --- the browser --------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def browser():
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        pytest.skip("the playwright package is not installed (make install brings it)")
    chromium = next((c for c in (os.environ.get("CHROMIUM_PATH"), *CHROMIUM_CANDIDATES, shutil.which("chromium"))
                     if c and os.access(c, os.X_OK)), None)
    if chromium is None:
        pytest.skip("no Chromium at /usr/bin/chromium (make test installs it as root with apt-get)")
    with sync_playwright() as playwright:
        instance = playwright.chromium.launch(executable_path=chromium, headless=True,
                                              args=["--no-sandbox", "--disable-dev-shm-usage", "--disable-gpu"])
        yield instance
        instance.close()


class Journey:
    """The screenshots, and the error hook every page of every person shares."""

    def __init__(self, hub, browser, folder: Path):
        self.hub, self.browser, self.folder, self.errors, self.step = hub, browser, folder, [], 0

    def person(self, name: str, refused: bool = False):
        """A browser context of its own (its own cookies) for one person, with the error hooks. `refused`: a person
        whose login the hub refuses (403 on /hub/login), which the step then checks."""
        context = self.browser.new_context(viewport={"width": 1400, "height": 900})
        context.set_default_timeout(60_000)
        base = self.hub.base

        def on_response(response):
            if not response.url.startswith(base) or response.status < 400:
                return
            path = response.url[len(base):].split("?")[0]
            method = response.request.method
            if any(m == method and re.search(p, path) and s == response.status for m, p, s, _ in ALLOWED_ERRORS):
                return
            if refused and (method, path, response.status) == ("POST", "/hub/login", 403):
                return
            self.errors.append(f"{name}: {method} {path} -> {response.status}")

        context.on("response", on_response)
        page = context.new_page()

        def on_page_error(exc):
            path = page.url[len(base):].split("?")[0] if page.url.startswith(base) else page.url
            if any(re.search(p, path) and re.search(m, exc.message) for p, m, _ in ALLOWED_PAGE_ERRORS):
                print(f"allowed page error ({name}, {path}): {exc.message}")
                return
            self.errors.append(f"{name}: uncaught page error: {exc}")

        page.on("pageerror", on_page_error)
        return page

    def check(self, page, label: str, notebook_outputs: bool = False) -> str:
        """A screenshot of the step; fails on any recorded error and on error words in the page's text. With
        `notebook_outputs` the page shows a student's notebook: its cell outputs are left out of the word check
        (a partial submission's failing cells print their tracebacks there, which is what the grader must see)."""
        self.step += 1
        page.screenshot(path=str(self.folder / f"{self.step:02d}-{label}.png"), full_page=False)
        text = page.locator("body").inner_text()
        if notebook_outputs:
            text = page.evaluate("""(selector) => {
                const body = document.body.cloneNode(true);
                body.querySelectorAll(selector).forEach(e => e.remove());
                document.documentElement.appendChild(body);  // innerText needs a rendered node
                const text = body.innerText;
                body.remove();
                return text;
            }""", OUTPUTS)
        bad = [word for word in BAD_WORDS if re.search(rf"\b{re.escape(word)}\b", text)]
        assert not bad, f"step {label}: {bad} in the page {page.url}:\n{text[:3000]}"
        assert not self.errors, f"step {label}: " + "\n".join(self.errors)
        return text


def log_in(journey, page, name: str, next_path: str = "") -> None:
    """The hub's login form, with the account's password (PAM)."""
    page.goto(f"{journey.hub.base}/hub/login" + (f"?next={next_path}" if next_path else ""))
    page.fill("#username_input", name)
    page.fill("#password_input", journey.hub.machine.password)
    page.click("#login_submit")
    page.wait_for_load_state()


def not_on_roster(page) -> bool:
    return "is not on the roster" in page.locator("body").inner_text()


def open_assignments(page) -> None:
    """JupyterLab's menu Nbgrader -> Assignment List, and wait for the list to load."""
    page.wait_for_selector(".jp-LabShell", timeout=120_000)
    page.get_by_role("menuitem", name="Nbgrader").click()
    page.get_by_role("menuitem", name="Assignment List").click()
    page.wait_for_selector("#released_assignments_list")
    page.wait_for_selector("#released_assignments_list_loading", state="hidden")


def lab_for(journey, name: str, roster_wait_s: float = 60):
    """A rostered student logs in (the roster service lets her in within its interval, 10 s by default): the hub
    spawns her server as her account and sends her to /user/<name>/lab."""
    page = journey.person(name, refused=True)
    deadline = time.monotonic() + roster_wait_s
    log_in(journey, page, name)
    while not_on_roster(page):
        assert time.monotonic() < deadline, f"{name} was not let in {roster_wait_s} s after joining the roster"
        time.sleep(2)
        log_in(journey, page, name)
    page.wait_for_url(re.compile(rf"/user/{name}/lab"), timeout=180_000)
    page.wait_for_selector(".jp-LabShell .jp-DirListing-content", timeout=120_000)  # JupyterLab drawn, files listed
    return page


def fetch(journey, page, name: str) -> None:
    open_assignments(page)
    row = page.locator("#released_assignments_list .list_item:not(.nested_list_item)", has_text=ASSIGNMENT)
    row.get_by_role("button", name="Fetch").click()
    page.locator("#fetched_assignments_list .list_item:not(.nested_list_item)", has_text=ASSIGNMENT).wait_for()
    journey.check(page, f"{name}-fetched")


def submit(journey, page, name: str) -> None:
    page.locator("#fetched_assignments_list .list_item:not(.nested_list_item)", has_text=ASSIGNMENT).get_by_role(
        "button", name="Submit").click()
    page.locator("#submitted_assignments_list .list_item:not(.nested_list_item)", has_text=ASSIGNMENT).wait_for()
    journey.check(page, f"{name}-submitted")


def save_notebook(page, name: str, path: str, nb: dict) -> None:
    """The contents API of the student's own server, from the student's page (her session cookie and _xsrf)."""
    status = page.evaluate("""async ([url, nb]) => {
        const xsrf = (document.cookie.match(/(?:^|; )_xsrf=([^;]*)/) || [])[1] || "";
        const r = await fetch(url, {method: "PUT", credentials: "same-origin",
            headers: {"Content-Type": "application/json", "X-XSRFToken": decodeURIComponent(xsrf)},
            body: JSON.stringify({type: "notebook", format: "json", content: nb})});
        return r.status;
    }""", [f"/user/{name}/api/contents/{path}", nb])
    assert status in (200, 201), f"saving {path} for {name}: HTTP {status}"


def load_notebook(page, name: str, path: str) -> dict:
    reply = page.evaluate("""async (url) => {
        const xsrf = (document.cookie.match(/(?:^|; )_xsrf=([^;]*)/) || [])[1] || "";
        const r = await fetch(url, {credentials: "same-origin", headers: {"X-XSRFToken": decodeURIComponent(xsrf)}});
        return [r.status, await r.json()];
    }""", f"/user/{name}/api/contents/{path}?type=notebook&content=1")
    assert reply[0] == 200, f"reading {path} for {name}: HTTP {reply[0]}"
    return reply[1]["content"]


def answers(keep=None) -> dict:
    """grade_id -> the reference source of every answer cell of the source notebook (or the ids in `keep`)."""
    source = nbformat.read(ROOT / "course" / "source" / ASSIGNMENT / f"{ASSIGNMENT}.ipynb", as_version=4)
    return {c.metadata["nbgrader"]["grade_id"]: c.source for c in source.cells
            if c.metadata.get("nbgrader", {}).get("solution")
            and (keep is None or c.metadata["nbgrader"]["grade_id"] in keep)}


def fill(nb: dict, replies: dict) -> int:
    filled = 0
    for cell in nb["cells"]:
        grade_id = cell.get("metadata", {}).get("nbgrader", {}).get("grade_id")
        if grade_id in replies:
            cell["source"] = replies[grade_id]
            filled += 1
    return filled


# --- the test -----------------------------------------------------------------------------------------

def test_journey(journey_hub, browser):
    started = time.monotonic()
    hub = journey_hub
    machine = hub.machine
    instructor, (student1, student2) = machine.instructor, machine.students
    folder = SCREENSHOTS / datetime.now().strftime("%Y%m%d-%H%M%S")
    folder.mkdir(parents=True, exist_ok=True)
    journey = Journey(hub, browser, folder)
    base = hub.base
    timings = {}

    def lap(label):
        timings[label] = round(time.monotonic() - started, 1)

    # a person of the machine who is not on the roster: refused, and told why
    latecomer = journey.person(machine.latecomer, refused=True)
    log_in(journey, latecomer, machine.latecomer)
    assert not_on_roster(latecomer), latecomer.locator("body").inner_text()[:2000]
    journey.check(latecomer, "latecomer-refused")

    # instructor: log in, Services -> the course lands on the formgrader
    teacher = journey.person(instructor)
    log_in(journey, teacher, instructor, "/hub/home")
    teacher.wait_for_url(re.compile(r"/hub/home"))
    journey.check(teacher, "instructor-home")
    teacher.get_by_role("button", name="Services").click()
    teacher.get_by_role("link", name=COURSE_ID, exact=True).click()
    teacher.wait_for_url(re.compile(rf"/services/{COURSE_ID}/formgrader"))
    teacher.get_by_role("link", name="Manage Assignments").wait_for()
    journey.check(teacher, "formgrader")

    # Manage Students: two students
    teacher.get_by_role("link", name="Manage Students").click()
    teacher.wait_for_url(re.compile(r"/formgrader/manage_students"))
    for name in (student1, student2):
        teacher.get_by_text("Add new student...").click()
        modal = teacher.locator("#add-student-modal")
        modal.locator("input.id").fill(name)
        modal.get_by_role("button", name="Save").click()
        modal.wait_for(state="hidden")
        teacher.locator("#main-table td", has_text=name).first.wait_for()
    journey.check(teacher, "students-added")
    lap("roster")

    # the students can log in (roster service); release
    instructor_runs(hub, f"autograder release {ASSIGNMENT}")
    lap("released")
    # Manage Assignments shows the release (its folder links: test_formgrader_links_answer below)
    teacher.get_by_role("link", name="Manage Assignments").click()
    teacher.locator("#main-table td", has_text=ASSIGNMENT).first.wait_for()
    journey.check(teacher, "assignments")
    pages = {}
    for name in (student1, student2):
        pages[name] = lab_for(journey, name)
        journey.check(pages[name], f"{name}-lab")
        fetch(journey, pages[name], name)
    lap("fetched")

    def fetched_notebook(name):  # where the panel's Fetch put it (nbgrader: <course>/<assignment>/ with course paths)
        (found,) = machine.home(name).rglob(f"{ASSIGNMENT}/{ASSIGNMENT}.ipynb")
        return found.relative_to(machine.home(name)).as_posix()

    # student1: every answer of the source notebook, then Submit in the panel
    notebook = fetched_notebook(student1)
    nb = load_notebook(pages[student1], student1, notebook)
    assert fill(nb, answers()) == len(answers()) > 0
    save_notebook(pages[student1], student1, notebook, nb)
    submit(journey, pages[student1], student1)
    # student2: one written answer, nothing else
    notebook = fetched_notebook(student2)
    nb = load_notebook(pages[student2], student2, notebook)
    assert fill(nb, {WRITTEN: "Without the mask each position would see the tokens after it, which the model "
                              "cannot know when it generates text."}) == 1
    save_notebook(pages[student2], student2, notebook, nb)
    submit(journey, pages[student2], student2)
    lap("submitted")

    # collect, grade
    out = instructor_runs(hub, f"autograder collect {ASSIGNMENT}").stdout
    assert student1 in out and student2 in out, out
    lap("collected")
    parent = hub.service_process().environ().get("AUTOGRADER_CGROUP_PARENT")
    assert parent, "the course service has no AUTOGRADER_CGROUP_PARENT: the hub's start script delegated no cgroups"
    with CgroupWatch(parent) as watch:  # as the grader account, not root: each notebook in its own capped group
        instructor_runs(hub, f"autograder grade {ASSIGNMENT} --workers 1")
    assert_each_capped(watch.groups, machine.grader, course_limits(nbgrader_config(machine.course_root)), at_least=2)
    lap("graded")

    # Manual Grading: student2's written answer
    teacher.goto(f"{base}/services/{COURSE_ID}/formgrader/gradebook/{ASSIGNMENT}/{ASSIGNMENT}")
    teacher.locator("#main-table td.name a").first.wait_for()
    journey.check(teacher, "manual-grading-list")
    href = teacher.evaluate("""(name) => [...document.querySelectorAll('#main-table td.name a')]
        .find(a => a.textContent.trim() === name).getAttribute('href')""", student2)
    teacher.goto(href if href.startswith("http") else base + href)
    score = teacher.locator(f"input.score#{WRITTEN}")
    score.wait_for()
    wait_until_scores_save(teacher)
    with teacher.expect_response(lambda r: "/formgrader/api/grade/" in r.url and r.request.method == "PUT") as saved:
        score.fill("")
        score.type(MANUAL_SCORE)
        score.press("Tab")
    assert saved.value.status == 200, saved.value.status
    score.scroll_into_view_if_needed()
    journey.check(teacher, "manual-score", notebook_outputs=True)
    lap("manual")

    # export: the CSV holds the manual score
    instructor_runs(hub, "autograder export")
    with open(machine.course_root / "grades.csv", newline="") as handle:
        rows = [r for r in csv.DictReader(handle) if r.get("student_id") == student2]
    assert rows, f"{student2} missing from grades.csv"
    assert _num(rows[0]["manual_score"]) == float(MANUAL_SCORE), rows[0]
    assert _num(rows[0]["score"]) == float(MANUAL_SCORE), rows[0]  # her code answers were left undone

    # feedback, released
    instructor_runs(hub, f"autograder feedback {ASSIGNMENT}")
    instructor_runs(hub, f"nbgrader release_feedback {ASSIGNMENT}")
    lap("feedback")

    # student2 fetches the feedback in the panel and opens it
    page = pages[student2]
    page.reload()
    open_assignments(page)
    row = page.locator("#submitted_assignments_list .list_item:not(.nested_list_item)", has_text=ASSIGNMENT)
    row.get_by_role("button", name="Fetch Feedback").click()
    view = page.get_by_text("(view feedback)").first
    view.wait_for()
    journey.check(page, "student2-feedback-fetched")
    view.click()
    feedback = sorted(machine.home(student2).rglob(f"{ASSIGNMENT}/feedback/*/{ASSIGNMENT}.html"))
    assert feedback, "no feedback file in student2's home"
    rel = feedback[-1].relative_to(machine.home(student2)).as_posix()
    page.goto(f"{base}/user/{student2}/files/{rel}")
    text = journey.check(page, "student2-feedback", notebook_outputs=True)
    assert "not graded yet" not in text.lower(), text[:3000]
    assert f"Written response (Score: {float(MANUAL_SCORE)} / 5.0)" in text, text[:3000]
    assert f"{ASSIGNMENT} (Score: {float(MANUAL_SCORE)} / 110.0)" in text, text[:3000]
    lap("done")
    print("journey timings (s since start):", json.dumps(timings))


def test_formgrader_links_answer(journey_hub, browser):
    """Every same-origin link of Manage Assignments (after the journey's release) answers below 400; the assignment's
    source folder link opens the folder below the course service (deploy/jupyter/instructor/formgrader_links.py,
    #33), and a student who follows it does not see the course folder."""
    machine = journey_hub.machine
    if not (machine.exchange / COURSE_ID / "outbound" / ASSIGNMENT).exists():  # run on its own
        instructor_runs(journey_hub, f"autograder release {ASSIGNMENT}")
    journey = Journey(journey_hub, browser, SCREENSHOTS / datetime.now().strftime("%Y%m%d-%H%M%S-links"))
    journey.folder.mkdir(parents=True, exist_ok=True)
    teacher = journey.person(machine.instructor)
    log_in(journey, teacher, machine.instructor, f"/services/{COURSE_ID}/formgrader/manage_assignments")
    teacher.locator("#main-table td", has_text=ASSIGNMENT).first.wait_for()
    links = teacher.evaluate("""() => [...new Set([...document.querySelectorAll('a[href]')].map(a => a.href)
        .filter(h => h.startsWith(location.origin) && !h.includes('#')))]""")
    assert any(f"/{ASSIGNMENT}" in link for link in links), links
    broken = [(link, status) for link in links if (status := teacher.request.get(link).status) >= 400]
    assert not broken, f"the formgrader links to error pages: {broken}"

    # the assignment's name links to its source folder: the folder's listing, in the course service
    source = teacher.evaluate("""(name) => [...document.querySelectorAll('#main-table a[href]')]
        .find(a => a.textContent.trim() === name).href""", ASSIGNMENT)
    base = journey_hub.base
    assert source.startswith(f"{base}/services/{COURSE_ID}/tree/") and source.endswith(f"/source/{ASSIGNMENT}"), source
    teacher.goto(source)
    teacher.get_by_text(f"{ASSIGNMENT}.ipynb", exact=True).first.wait_for()
    journey.check(teacher, "source-folder")

    # a student (outside formgrade-<course>, as every student is) is refused by the course service: the latecomer,
    # whom the instructor now adds in the course service's terminal (README's other way onto the roster)
    added = instructor_runs(journey_hub, f"nbgrader db student add {machine.latecomer}").stdout
    assert "ERROR" not in added and "is on the roster" in added, added  # the roster service makes her hub user
    student = lab_for(journey, machine.latecomer)
    journey.check(student, "latecomer-lab")
    reply = student.request.get(source)
    assert reply.status == 403, (reply.status, reply.url)
    assert f"{ASSIGNMENT}.ipynb" not in reply.text()



def test_the_allowed_page_errors_are_notebooks_own(browser, tmp_path):
    """Each entry of ALLOWED_PAGE_ERRORS is Notebook's own: a bare Jupyter server (no configuration of the course, every
    third-party lab extension disabled) throws the same error on the same kind of page. When an upgrade of Notebook
    fixes it, this fails: then remove the entry."""
    config = tmp_path / "config"
    (config / "labconfig").mkdir(parents=True)
    (config / "labconfig" / "page_config.json").write_text(json.dumps({"disabledExtensions": {
        "@jupyter/nbgrader": True, "@jupyter-widgets/jupyterlab-manager": True, "jupyterlab_pygments": True}}))
    (tmp_path / "root" / "folder").mkdir(parents=True)
    port = free_port()
    env = {key: value for key, value in os.environ.items() if not key.startswith("JUPYTER")}
    env.update(JUPYTER_CONFIG_PATH=str(config), JUPYTER_CONFIG_DIR=str(config), JUPYTER_RUNTIME_DIR=str(tmp_path / "rt"))
    server = subprocess.Popen([str(VENV / "bin" / "jupyter"), "server", "--no-browser", f"--port={port}",
                               "--ip=127.0.0.1", "--ServerApp.token=", "--ServerApp.password=",
                               f"--ServerApp.root_dir={tmp_path / 'root'}",
                               *(["--allow-root"] if os.geteuid() == 0 else [])],
                              env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    context = browser.new_context()
    try:
        page = context.new_page()
        errors = []
        page.on("pageerror", lambda exc: errors.append(exc.message))
        deadline = time.monotonic() + 60
        while True:
            try:
                page.goto(f"http://127.0.0.1:{port}/tree/folder")
                break
            except Exception:
                assert time.monotonic() < deadline and server.poll() is None, "the bare Jupyter server did not start"
                time.sleep(0.5)
        page.wait_for_selector(".jp-DirListing-content")  # the file browser is drawn
        for pattern, message, _ in ALLOWED_PAGE_ERRORS:
            assert "/tree/" in pattern, pattern  # every entry today is a page of Notebook's file browser
            seen = time.monotonic() + 20
            while not any(re.search(message, error) for error in errors) and time.monotonic() < seen:
                page.wait_for_timeout(250)
            assert any(re.search(message, error) for error in errors), \
                f"a bare Notebook no longer throws {message!r} (it threw {errors}): remove its ALLOWED_PAGE_ERRORS entry"
    finally:
        context.close()
        kill_tree(server.pid)

def _num(value):
    try:
        return float(value)
    except (TypeError, ValueError):
        return None
