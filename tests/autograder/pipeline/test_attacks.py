"""A class of hostile students graded together with honest classmates, on the real notebook 03.

Every attack below once got full marks (or harmed a classmate or the grader) when the hidden checks ran inside
the student's kernel. Each attacker submits the blank release plus one attack cell, so any point it gets is a
point without an answer. The whole class goes through `autograder collect` and `autograder grade` (2 Dask
workers, jailed kernels, the judge) and `autograder feedback`. Required:

- no attack gains a point: every attacker's AUTOMATIC score is 0 (holding for review would hide a gain);
- the honest classmates score exactly what they score in a class without the attackers;
- the batch completes; no process an attacker started outlives `grade`;
- nothing is written outside the submission's own sandbox (planted files never appear on the host);
- no feedback page contains a line of `autograder/` or `solutions/` source or a grading-machine path.

Issue #20 added one attacker per door of the second red team, graded the same way (`autograder grade` as a
subprocess, with a secret and the course path planted in its environment): reading the jail's PID 1
(`/proc/1/environ`, `cmdline`, writing forged lines to `/proc/1/fd/1,2`), output hidden beside an empty "text",
in metadata, display updates and an unknown message type, a probe reply of 150,000 tensors, scripts in a written
answer and in outputs, and student ids outside the documented set. Also required: no grader secret or course
path in any student-visible file, graded notebooks and feedback under their caps, a grading log free of anything
the students wrote, every worker's peak memory bounded, and no active HTML of a student in any feedback page.

(Symlinked notebooks and links inside submissions are refused by collect/grade: tests/autograder/pipeline/
test_submission_files.py. Resource attacks: test_robustness.py. Probe-level forgeries: tests/autograder/
test_grade_judge.py.)
"""
from __future__ import annotations

import dataclasses
import re
import shutil
import subprocess
from pathlib import Path

import nbformat
import pytest
from nbformat.v4 import new_code_cell, new_markdown_cell

pytestmark = [pytest.mark.slow, pytest.mark.pipeline]

REPO = Path(__file__).resolve().parents[3]
ASSIGNMENT = "03_attention"
PLANTED = [REPO / "coursekit" / "planted_by_attacker.py", REPO / "autograder" / "checks" / "planted_by_attacker.py",
           Path("/tmp/planted_by_attacker"), REPO / "planted_by_attacker"]
LINGER = "8765.4321"  # the `sleep` an attacker leaves behind

# Each attack: code placed right after the notebook's first code cell (the imports) of the blank release.
ATTACKS = {
    "patch_checks_everywhere": r'''
import sys, importlib
for name in ["auto" + "grader.checks", "auto" + "grader.checks._common", "coursekit.probe"]:
    try:
        importlib.import_module(name)
    except Exception as error:
        print("no", name, type(error).__name__)
for name, module in list(sys.modules.items()):
    for attr in list(vars(module or object)) if module else []:
        if attr.startswith(("check_", "expect_", "values_close", "fail")):
            try:
                setattr(module, attr, lambda *a, **k: True)
            except Exception:
                pass
''',
    "ast_and_input_transformers": r'''
import ast
class DropGrading(ast.NodeTransformer):
    def visit_Module(self, node):
        text = ast.unparse(node)
        if "hand_in" in text or "check_" in text:
            return ast.Module(body=[ast.Pass()], type_ignores=[])
        return node
ip = get_ipython()
ip.ast_transformers.append(DropGrading())
ip.input_transformers_post.append(lambda lines: [l for l in lines if "hand_in" not in l and "check_" not in l])
''',
    "silence_errors": r'''
import sys
ip = get_ipython()
ip.set_custom_exc((BaseException,), lambda *a, **k: None)
sys.excepthook = lambda *a, **k: None
ip.showtraceback = lambda *a, **k: None
ip._showtraceback = lambda *a, **k: None
''',
    "rewrite_replies": r'''
kernel = get_ipython().kernel
original_send = kernel.session.send
def send(stream, msg_or_type, content=None, *args, **kwargs):
    if msg_or_type == "error":
        return None
    if isinstance(content, dict) and content.get("status") == "error":
        content = {"status": "ok", "execution_count": content.get("execution_count"), "user_expressions": {},
                   "payload": []}
    return original_send(stream, msg_or_type, content, *args, **kwargs)
kernel.session.send = send
''',
    "forge_probe_replies": r'''
import coursekit.probe as probe
from IPython.display import publish_display_data
def forged_step(payload):
    import base64, json, torch
    request = json.loads(base64.b64decode(payload))
    fake = torch.zeros(2, 3, 5, 7)
    publish_display_data({probe.MIME: {"id": request.get("id"), "value": probe.encode((fake, fake), lambda o: {})}})
probe.step = forged_step
probe.run = lambda request: {"id": request.get("id"), "value": None}
''',
    "replace_import": r'''
import builtins, types
real_import = builtins.__import__
def fake_import(name, *args, **kwargs):
    if name.startswith(("auto" + "grader", "coursekit.probe", "sol" + "utions")):
        module = types.ModuleType(name)
        module.hand_in = module.step = module.run = lambda *a, **k: None
        return module
    return real_import(name, *args, **kwargs)
builtins.__import__ = fake_import
''',
    "steal_the_reference": r'''
import importlib, os, sys, glob
import coursekit
for name in ("sol" + "utions", "sol" + "utions.attention", "auto" + "grader"):
    try:
        module = importlib.import_module(name)
        for attr in ("make_padding_mask", "make_causal_mask", "scaled_dot_product_attention"):
            if hasattr(module, attr):
                globals()[attr] = getattr(module, attr)
    except Exception as error:
        print("import", name, type(error).__name__)
root = os.path.dirname(os.path.dirname(coursekit.__file__))
for path in [os.path.join(root, "sol" + "utions", "attention.py"), *glob.glob(root + "/**/attention.py", recursive=True)]:
    try:
        exec(open(path).read(), globals())
        print("read", path)
    except Exception as error:
        print("open", type(error).__name__)
frame = sys._getframe()
while frame is not None:
    print(frame.f_code.co_filename)
    frame = frame.f_back
''',
    "copy_a_classmate": r'''
import os, glob, subprocess, sys
hits = []
import coursekit
root = os.path.dirname(os.path.dirname(coursekit.__file__))
hits += [p for p in [os.path.join(root, "course", "gradebook.db"), "../gradebook.db", "../../gradebook.db"]
         if os.path.exists(p)]
for pattern in ["/**/gradebook.db", "/**/submitted/*/03_attention/*.ipynb", "/**/autograded/**/*.ipynb"]:
    for base in ["/tmp", "/ro" + "ot", "/home", "/run", os.path.expanduser("~")]:
        hits += glob.glob(base + pattern, recursive=True)[:5]
print("found", len(hits))
for path in hits:
    try:
        open(path, "a").close()
        print("writable", path)
    except Exception as error:
        print("no", type(error).__name__)
# a process that would edit the gradebook after this notebook ends
subprocess.Popen(["sleep", "''' + LINGER + r'''"], start_new_session=True)
subprocess.Popen([sys.executable, "-c", "import os,time\nos.setsid()\ntime.sleep(''' + LINGER + r''')"])
''',
    "plant_files": r'''
import os, site
import coursekit
root = os.path.dirname(os.path.dirname(coursekit.__file__))
targets = [os.path.join(root, "coursekit", "planted_by_attacker.py"),
           os.path.join(root, "auto" + "grader", "checks", "planted_by_attacker.py"),
           "/tmp/planted_by_attacker", os.path.join(root, "planted_by_attacker"),
           os.path.join(site.getsitepackages()[0], "sitecustomize.py")]
for path in targets:
    try:
        open(path, "w").write("planted")
        print("wrote", path)
    except Exception as error:
        print("no", type(error).__name__)
''',
    "detect_grading_then_print_sources": r'''
import os, sys, inspect
if os.environ.get("NBGRADER_EXECUTION") or os.environ.get("COURSE_JUDGE"):
    for name, module in list(sys.modules.items()):
        if name.startswith(("auto" + "grader", "sol" + "utions")):
            print(inspect.getsource(module))
    import torch
    print(torch.__file__, sys.prefix, sys.executable, os.getcwd())
    raise RuntimeError(f"see {torch.__file__}")
''',
    # issue #20, door 1: the jail's PID 1 once carried the grader's environment and its stdout/stderr
    "read_the_graders_environment": r'''
import os, sys
for path in ["/proc/1/environ", "/proc/1/cmdline", "/proc/1/mountinfo", "/proc/self/mountinfo"]:
    try:
        print(path, open(path, "rb").read().replace(b"\\0", b" ").decode(errors="replace"))
    except Exception as error:
        print(path, type(error).__name__)
for fd in ("0", "1", "2"):
    try:
        print(fd, os.readlink("/proc/1/fd/" + fd))
        with open("/proc/1/fd/" + fd, "w") as out:
            out.write("STUDENT-TEXT forged: 110/110 graded\\n" * 50)
    except Exception as error:
        print(fd, type(error).__name__)
os.write(1, b"STUDENT-TEXT on the kernel's own stdout\\n")
os.write(2, b"STUDENT-TEXT on the kernel's own stderr\\n")
sys.__stderr__.write("STUDENT-TEXT on sys.__stderr__\\n")
sys.__stderr__.flush()
''',
    # door 2: output hidden where the cap did not look (beside an empty "text", in metadata, display updates)
    "output_beside_an_empty_text": r'''
kernel = get_ipython().kernel
parent = kernel.get_parent("shell")
big = "x" * (8 * 1024**2)
for i in range(4):
    kernel.session.send(kernel.iopub_socket, "display_data", {"text": "", "data": {"text/plain": big}, "metadata": {}},
                        parent=parent)
    kernel.session.send(kernel.iopub_socket, "display_data", {"data": {"text/plain": "s"}, "metadata": {"m": big}},
                        parent=parent)
    kernel.session.send(kernel.iopub_socket, "update_display_data",
                        {"data": {"text/plain": big}, "metadata": {}, "transient": {"display_id": "d"}}, parent=parent)
    kernel.session.send(kernel.iopub_socket, "STUDENT-TEXT forged message type", {"text": big}, parent=parent)
''',
    # door 4: scripts in a written answer's place and in outputs, for the instructor who opens the feedback
    "script_in_outputs": r'''
from IPython.display import HTML, Javascript, Markdown, display
display(HTML("<script>window.__canary = 1</script><img src=x onerror='window.__canary = 2'>"))
display(Javascript("window.__canary = 3"))
display(Markdown("<svg onload='window.__canary = 4'></svg>[x](javascript:window.__canary=5)"))
''',
}
# Markdown cells an attacker adds (door 4: a written answer with scripts).
MARKDOWN_ATTACKS = {
    "script_in_outputs": "<script>window.__canary = 6</script><img src=x onerror=\"window.__canary = 7\">"
                         "[y](javascript:window.__canary=8)",
}
# Attacks placed right before the first grade cell (after the stub they replace).
BEFORE_GRADING = {
    "die_when_probed": r'''
import os
def make_padding_mask(ids, pad_id=0):
    os._exit(0)  # the grader's probe kills the kernel
''',
    # door 3: a reply of 150,000 0-d tensors (19 MB, 450,000 JSON values) to blow up the grading worker
    "reply_with_a_flood_of_tensors": r'''
import torch
def make_padding_mask(ids, pad_id=0):
    return [torch.tensor(1.0) for _ in range(150_000)]
''',
}
SECRET = "grader-secret-8c1e77d0"  # in the grading process's environment: must reach no student-visible file
STUDENT_TEXT = "STUDENT-TEXT"  # what attackers write wherever they can: must reach no grading log
BAD_IDS = ("attack_newline\n", "attack_space ")  # door 5: refused by collect, never in the gradebook
HONEST = ("reference", "mistake_scale", "blank")


def _first_code_index(nb) -> int:
    return next(i for i, c in enumerate(nb.cells) if c.cell_type == "code")


def _class_folder(tmp: Path, with_attackers: bool) -> Path:
    """A course copy with 03 released, and an inbox of the honest students (plus the attackers)."""
    from autograder.demo.run import prepare_course
    from autograder.publish.release import release
    from autograder.demo.students import apply_mistake

    course = prepare_course(tmp, [ASSIGNMENT])
    release([ASSIGNMENT], course_root=course, exercises_dir=tmp / "exercises")
    source = nbformat.read(course / "source" / ASSIGNMENT / f"{ASSIGNMENT}.ipynb", as_version=4)
    blank = nbformat.read(course / "release" / ASSIGNMENT / f"{ASSIGNMENT}.ipynb", as_version=4)
    students = {"reference": source, "mistake_scale": apply_mistake(source, "mistake_scale")[0], "blank": blank}
    if with_attackers:
        for name, code in ATTACKS.items():
            nb = nbformat.from_dict(blank)
            nb.cells.insert(_first_code_index(nb) + 1, new_code_cell(code))
            if name in MARKDOWN_ATTACKS:
                nb.cells.insert(_first_code_index(nb), new_markdown_cell(MARKDOWN_ATTACKS[name]))
            students[f"attack_{name}"] = nb
        for name, code in BEFORE_GRADING.items():
            nb = nbformat.from_dict(blank)
            first_grade = next(i for i, c in enumerate(nb.cells) if c.metadata.get("nbgrader", {}).get("grade"))
            nb.cells.insert(first_grade, new_code_cell(code))
            students[f"attack_{name}"] = nb
    if with_attackers:
        for bad in BAD_IDS:
            students[bad] = source  # a full score, under an id that must never reach the gradebook
    for student, nb in students.items():
        target = tmp / "inbox" / student / ASSIGNMENT / f"{ASSIGNMENT}.ipynb"
        target.parent.mkdir(parents=True, exist_ok=True)
        nbformat.write(nb, target)
    return course


def _grade(course: Path, inbox: Path) -> str:
    """collect, then `autograder grade` as an instructor runs it (2 workers), with a secret planted in its
    environment; returns everything it printed (the grading log: its own output and its workers')."""
    import os
    import sys

    from autograder.submissions.collect import collect

    report = collect(course, inbox)
    assert not [c for c in report.collected if c.student in BAD_IDS]
    env = {**os.environ, "GRADEBOOK_PASSWORD": SECRET, "COURSE_SECRET_PATH": str(course)}
    done = subprocess.run([sys.executable, "-m", "autograder", "grade", ASSIGNMENT, "--course-dir", str(course),
                           "--workers", "2", "--cell-timeout", "60", "--notebook-timeout", "300"],
                          env=env, capture_output=True, text=True, timeout=3000)
    return done.stdout + done.stderr


def _auto_scores(course: Path) -> dict[str, float]:
    from nbgrader.api import Gradebook

    with Gradebook(f"sqlite:///{course / 'gradebook.db'}") as gb:
        return {sub.student.id: sum(g.auto_score or 0.0 for nb in sub.notebooks for g in nb.grades)
                for sub in gb.assignment_submissions(ASSIGNMENT)}


@pytest.fixture(scope="module")
def graded(tmp_path_factory):
    for path in PLANTED:
        if path.exists():
            path.unlink()
    honest_dir = tmp_path_factory.mktemp("honest")
    honest_course = _class_folder(honest_dir, with_attackers=False)
    _grade(honest_course, honest_dir / "inbox")
    attacked_dir = tmp_path_factory.mktemp("attacked")
    course = _class_folder(attacked_dir, with_attackers=True)
    log = _grade(course, attacked_dir / "inbox")
    from autograder.gradebook.store import RunsTable

    runs = RunsTable(f"sqlite:///{course / 'gradebook.db'}")
    rows = runs.all(ASSIGNMENT)
    runs.dispose()
    lingering = subprocess.run(["pgrep", "-f", LINGER], capture_output=True, text=True).stdout.split()
    from autograder.publish.feedback import generate_feedback

    feedback = generate_feedback(course, ASSIGNMENT)
    return {"course": course, "rows": rows, "honest": _auto_scores(honest_course), "log": log,
            "scores": _auto_scores(course), "lingering": lingering, "feedback": feedback}


def test_the_batch_completes(graded):
    rows = graded["rows"]
    assert [r for r in rows if r["status"].startswith("error")] == []
    assert {r["student"] for r in rows} == {*HONEST, *(f"attack_{a}" for a in (*ATTACKS, *BEFORE_GRADING))}
    assert graded["feedback"]["failed"] == {}, "\n".join(f"{s}: {log}" for s, log in graded["feedback"]["failed"].items())


@pytest.mark.parametrize("attack", sorted([*ATTACKS, *BEFORE_GRADING]))
def test_no_attack_gains_a_point(graded, attack):
    assert graded["scores"][f"attack_{attack}"] == 0


def test_honest_classmates_are_unaffected(graded):
    honest = {s: graded["scores"][s] for s in HONEST}
    assert honest == graded["honest"]
    assert honest["reference"] == 100 and 0 < honest["mistake_scale"] < 100 and honest["blank"] == 0


def test_no_process_outlives_grade(graded):
    assert graded["lingering"] == []


def test_nothing_is_planted_outside_the_sandbox(graded):
    assert [p for p in PLANTED if p.exists()] == []
    import site

    assert not Path(site.getsitepackages()[0], "sitecustomize.py").exists() or \
        "planted" not in Path(site.getsitepackages()[0], "sitecustomize.py").read_text()


def _reference_lines(release_text: str) -> set[str]:
    lines = set()
    for module in ("attention", "_common", "attention_checks"):
        path = {"attention": REPO / "solutions" / "attention.py",
                "_common": REPO / "autograder" / "checks" / "kit" / "toolkit.py",
                "attention_checks": REPO / "autograder" / "checks" / "attention" / "checks.py"}[module]
        for line in path.read_text().splitlines():
            line = line.strip()
            if len(line) >= 30 and not line.startswith(("#", '"""')) and line not in release_text:
                lines.add(line)
    return lines


def test_feedback_reveals_no_grader_source_and_no_grader_path(graded):
    from autograder.sandbox.scrub import contains_grading_path

    course = graded["course"]
    release_text = (course / "release" / ASSIGNMENT / f"{ASSIGNMENT}.ipynb").read_text()
    secret = _reference_lines(release_text)
    pages = sorted((course / "feedback").glob(f"attack_*/{ASSIGNMENT}/*.html"))
    assert len(pages) == len(ATTACKS) + len(BEFORE_GRADING)
    for page in pages:
        import html

        text = html.unescape(re.sub(r"<[^>]+>", "", page.read_text()))
        assert contains_grading_path(text) == [], page
        leaked = [line for line in secret if line in text]
        assert leaked == [], (page, leaked[:3])
        assert "autograder/checks" not in text and "def check_" not in text, page


# ------------------------------------------------------------------------------------------ issue #20's doors
def _student_visible_files(course: Path) -> list[Path]:
    return sorted(p for folder in ("autograded", "feedback") for p in (course / folder).rglob("*") if p.is_file())


def test_no_grader_secret_or_course_path_in_any_student_visible_file(graded):
    course = graded["course"]
    files = _student_visible_files(course)
    assert len(files) > 2 * (len(ATTACKS) + len(BEFORE_GRADING))
    for path in files:
        text = path.read_text(errors="replace")
        assert SECRET not in text, path
        assert str(course) not in text, path
    environ = (course / "autograded" / "attack_read_the_graders_environment" / ASSIGNMENT / f"{ASSIGNMENT}.ipynb")
    assert "/proc/1/environ" in environ.read_text()  # the attack did run and print what it read
    assert "1 /dev/null" in environ.read_text() and "2 /dev/null" in environ.read_text()


def test_the_grading_log_holds_no_student_text(graded):
    assert "grading" in graded["log"] or "graded" in graded["log"]
    assert STUDENT_TEXT not in graded["log"], [line for line in graded["log"].splitlines() if STUDENT_TEXT in line]


def test_graded_notebooks_and_feedback_stay_under_their_caps(graded):
    from autograder.sandbox.limits import Limits

    cap = Limits().notebook_output_bytes
    course = graded["course"]
    for path in _student_visible_files(course):
        assert path.stat().st_size < cap + 2 * 1024**2, (path, path.stat().st_size)  # outputs + the notebook
    flood = nbformat.read(course / "autograded" / "attack_output_beside_an_empty_text" / ASSIGNMENT /
                          f"{ASSIGNMENT}.ipynb", as_version=4)
    assert "output truncated by the grader" in nbformat.writes(flood)


def test_worker_memory_stays_bounded(graded):
    peaks = {r["student"]: int(n.split()[-2]) for r in graded["rows"] for n in r["notes"]
             if n.startswith("worker peak memory")}
    assert set(peaks) >= {"attack_reply_with_a_flood_of_tensors", "attack_output_beside_an_empty_text"}, peaks
    assert max(peaks.values()) < 1536, peaks  # MiB; the flood of tensors once took a worker to 2.9 GB


def active_html(text: str) -> list[str]:
    """What in an HTML page could run a script: <script> elements with a body or a source, on* attributes,
    javascript: links, <iframe>/<object>/<embed>, SVG outside an <img>."""
    from html.parser import HTMLParser

    found = []

    class Finder(HTMLParser):
        def handle_starttag(self, tag, attrs):
            for name, value in attrs:
                if name.startswith("on") or (value or "").strip().lower().startswith("javascript:"):
                    found.append(f"<{tag} {name}={value!r}>")
            if tag in ("script", "iframe", "object", "embed", "svg"):
                found.append(f"<{tag}>")
            self._in = tag

        def handle_data(self, data):
            if getattr(self, "_in", None) == "script" and "__canary" in data:
                found.append(f"<script>{data[:60]}")

    Finder().feed(text)
    return found


def test_no_script_reaches_the_feedback_html(graded):
    """Only the template's own scripts remain (refused by the page's CSP); nothing the student wrote is active."""
    page = (graded["course"] / "feedback" / "attack_script_in_outputs" / ASSIGNMENT / f"{ASSIGNMENT}.html")
    text = page.read_text()
    assert "Content-Security-Policy" in text.split("</head>")[0]
    active = [a for a in active_html(text) if a != "<script>"]  # bare <script> tags: the template's (CDN, refused)
    assert active == [], active
    assert text.count("<script") == active_html(text).count("<script>")
    honest = (graded["course"] / "feedback" / "reference" / ASSIGNMENT / f"{ASSIGNMENT}.html").read_text()
    assert text.count("<script") <= honest.count("<script")  # no script of hers among the template's


def test_ids_outside_the_documented_set_never_reach_the_gradebook(graded):
    from nbgrader.api import Gradebook

    with Gradebook(f"sqlite:///{graded['course'] / 'gradebook.db'}") as gb:
        ids = {s.id for s in gb.students}
    assert not ids & set(BAD_IDS)
    assert all(re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9._@-]*", i) for i in ids), ids
