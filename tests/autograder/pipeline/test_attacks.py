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
from nbformat.v4 import new_code_cell

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
}
# Attacks placed right before the first grade cell (after the stub they replace).
BEFORE_GRADING = {
    "die_when_probed": r'''
import os
def make_padding_mask(ids, pad_id=0):
    os._exit(0)  # the grader's probe kills the kernel
''',
}
HONEST = ("reference", "mistake_scale", "blank")


def _first_code_index(nb) -> int:
    return next(i for i, c in enumerate(nb.cells) if c.cell_type == "code")


def _class_folder(tmp: Path, with_attackers: bool) -> Path:
    """A course copy with 03 released, and an inbox of the honest students (plus the attackers)."""
    from autograder.demo import prepare_course
    from autograder.release import release
    from autograder.demo_class import apply_mistake

    course = prepare_course(tmp, [ASSIGNMENT])
    release([ASSIGNMENT], course_root=course, exercises_dir=tmp / "exercises")
    source = nbformat.read(course / "source" / ASSIGNMENT / f"{ASSIGNMENT}.ipynb", as_version=4)
    blank = nbformat.read(course / "release" / ASSIGNMENT / f"{ASSIGNMENT}.ipynb", as_version=4)
    students = {"reference": source, "mistake_scale": apply_mistake(source, "mistake_scale")[0], "blank": blank}
    if with_attackers:
        for name, code in ATTACKS.items():
            nb = nbformat.from_dict(blank)
            nb.cells.insert(_first_code_index(nb) + 1, new_code_cell(code))
            students[f"attack_{name}"] = nb
        for name, code in BEFORE_GRADING.items():
            nb = nbformat.from_dict(blank)
            first_grade = next(i for i, c in enumerate(nb.cells) if c.metadata.get("nbgrader", {}).get("grade"))
            nb.cells.insert(first_grade, new_code_cell(code))
            students[f"attack_{name}"] = nb
    for student, nb in students.items():
        target = tmp / "inbox" / student / ASSIGNMENT / f"{ASSIGNMENT}.ipynb"
        target.parent.mkdir(parents=True, exist_ok=True)
        nbformat.write(nb, target)
    return course


def _grade(course: Path, inbox: Path):
    from autograder.collect import collect
    from autograder.grade.engine import grade
    from autograder.grade.sandbox import Limits

    collect(course, inbox)
    limits = dataclasses.replace(Limits(), cell_timeout=60, notebook_timeout=300)
    summary = grade(course, ASSIGNMENT, workers=2, limits=limits, progress=False)
    return summary


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
    summary = _grade(course, attacked_dir / "inbox")
    lingering = subprocess.run(["pgrep", "-f", LINGER], capture_output=True, text=True).stdout.split()
    from autograder.feedback import generate_feedback

    feedback = generate_feedback(course, ASSIGNMENT)
    return {"course": course, "summary": summary, "honest": _auto_scores(honest_course),
            "scores": _auto_scores(course), "lingering": lingering, "feedback": feedback}


def test_the_batch_completes(graded):
    summary = graded["summary"]
    assert not summary.failed, summary.failed
    assert {r["student"] for r in summary.graded} == {*HONEST, *(f"attack_{a}" for a in (*ATTACKS, *BEFORE_GRADING))}


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
                "_common": REPO / "autograder" / "checks" / "_common.py",
                "attention_checks": REPO / "autograder" / "checks" / "attention.py"}[module]
        for line in path.read_text().splitlines():
            line = line.strip()
            if len(line) >= 30 and not line.startswith(("#", '"""')) and line not in release_text:
                lines.add(line)
    return lines


def test_feedback_reveals_no_grader_source_and_no_grader_path(graded):
    from autograder.grade.scrub import contains_grading_path

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
