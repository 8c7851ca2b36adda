"""Sample classes built by code: a tiny synthetic course (tests, benchmark) and the demo's students.

`synthetic_course(root)` writes a one-assignment nbgrader course (`ps1`, 3 grade cells, one with hidden tests,
7 points) and releases it. `synthetic_submission(course_root, kind)` returns the JSON text of a student's notebook
of that course: "solution", "blank", "mistake" or one of the hostile kinds of the robustness suite.
`demo_students(source_nb, release_nb)` builds the demo's class from a real assignment (see its docstring).
"""
from __future__ import annotations

import json
import re
from pathlib import Path

import nbformat
from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook

SYNTHETIC_ASSIGNMENT = "ps1"
SYNTHETIC_POINTS = {"test_squares": 1, "test_squares_hidden": 2, "test_normalize": 4}


def _meta(kind: str, grade_id: str, points: int | None = None) -> dict:
    base = {"grade_id": grade_id, "schema_version": 3, "task": False}
    if kind == "solution":
        base.update(grade=False, solution=True, locked=False)
    elif kind == "grade":
        base.update(grade=True, solution=False, locked=True, points=points)
    else:  # locked prose/code
        base.update(grade=False, solution=False, locked=True)
    return {"nbgrader": base}


def synthetic_source_notebook():
    cells = [
        new_markdown_cell("# Problem set 1\nTwo small exercises.", metadata=_meta("locked", "intro")),
        new_code_cell("def squares(n):\n    \"\"\"[0, 1, 4, ...] for the n first integers.\"\"\"\n"
                      "    ### BEGIN SOLUTION\n    return [i * i for i in range(n)]\n    ### END SOLUTION",
                      metadata=_meta("solution", "squares")),
        new_code_cell("# Visible test (1 point)\nassert squares(3) == [0, 1, 4], 'squares(3) should be [0, 1, 4]'",
                      metadata=_meta("grade", "test_squares", 1)),
        new_code_cell("# Autograder test for `squares` (2 points).\n### BEGIN HIDDEN TESTS\n"
                      "assert squares(5) == [0, 1, 4, 9, 16], 'Likely mistake: range starts at 1 instead of 0'\n"
                      "### END HIDDEN TESTS", metadata=_meta("grade", "test_squares_hidden", 2)),
        new_code_cell("import numpy as np\n\ndef normalize(x):\n    \"\"\"x divided by its sum.\"\"\"\n"
                      "    ### BEGIN SOLUTION\n    return x / x.sum()\n    ### END SOLUTION",
                      metadata=_meta("solution", "normalize")),
        new_code_cell("# Autograder test for `normalize` (4 points).\n### BEGIN HIDDEN TESTS\nimport numpy as np\n"
                      "assert np.allclose(normalize(np.array([1.0, 3.0])), np.array([0.25, 0.75])), "
                      "'Likely mistake: divided by the maximum instead of the sum'\n### END HIDDEN TESTS",
                      metadata=_meta("grade", "test_normalize", 4)),
        new_markdown_cell("Done.", metadata=_meta("locked", "outro")),
    ]
    nb = new_notebook(cells=cells)
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    return nb


def synthetic_course(root: Path, release: bool = True) -> Path:
    """Write the synthetic course under `root` (nbgrader_config.py, source/ps1/ps1.ipynb), release it."""
    root = Path(root)
    (root / "source" / SYNTHETIC_ASSIGNMENT).mkdir(parents=True, exist_ok=True)
    (root / "nbgrader_config.py").write_text(
        "c = get_config()  # noqa: F821\nc.CourseDirectory.course_id = 'synthetic'\n"
        "c.ClearSolutions.code_stub = {'python': '# YOUR CODE HERE\\nraise NotImplementedError()'}\n")
    source = root / "source" / SYNTHETIC_ASSIGNMENT
    nbformat.write(synthetic_source_notebook(), source / f"{SYNTHETIC_ASSIGNMENT}.ipynb")
    (root / "source" / SYNTHETIC_ASSIGNMENT / "provided.py").write_text("OFFSET = 0\n")
    if release:
        release_assignment(root, SYNTHETIC_ASSIGNMENT)
    return root


def release_assignment(course_root: Path, assignment: str) -> None:
    """nbgrader generate_assignment for one assignment of `course_root` (fills the gradebook and release/)."""
    from autograder.coursedir import nbgrader_api

    result = nbgrader_api(course_root).generate_assignment(assignment, force=True)
    if not result["success"]:
        raise RuntimeError(f"generate_assignment {assignment} failed:\n{result['log']}{result.get('error', '')}")


SOLUTION_OR_STUB = r"### BEGIN SOLUTION.*?### END SOLUTION|# YOUR CODE HERE\s*\n\s*raise NotImplementedError\(\)"


def _replace_solution(nb, grade_id: str, body: str):
    for cell in nb.cells:
        if cell.metadata.get("nbgrader", {}).get("grade_id") == grade_id:
            cell.source = re.sub(SOLUTION_OR_STUB, lambda _: body, cell.source, flags=re.S)
    return nb


HOSTILE_CELLS = {
    "infinite_loop": "while True:\n    pass",
    "os_exit": "import os\nos._exit(1)",
    "segfault": "import ctypes\nctypes.string_at(0)",
    "allocate_20gb": "import numpy as np\nbig = np.ones(20 * 1024**3 // 8)",
    "print_100mb": "import sys\nfor _ in range(100):\n    sys.stdout.write('x' * (1024 * 1024))",
    "monkeypatch": "import numpy, torch\nnumpy.allclose = lambda *a, **k: True\n"
                   "torch.allclose = lambda *a, **k: True\nimport builtins\nbuiltins.check_normalize = None",
    "import_solutions": "import inspect\nimport solutions\nprint(inspect.getsource(solutions))",
    # the jail's faults (issue #11): each is contained, the rest of the notebook and the batch go on
    "ignore_sigint": "import signal\nsignal.signal(signal.SIGINT, signal.SIG_IGN)\nwhile True:\n    pass",
    "sleep_children": "import subprocess\nfor _ in range(20):\n    subprocess.Popen(['sleep', '424242'], "
                      "start_new_session=True)",
    "fork_bomb": "import os, time\nwhile True:\n    try:\n        os.fork()\n    except OSError:\n"
                 "        time.sleep(60)",
    "memory_children": "import subprocess, sys, time\n"
                       "code = 'import time; a = b\"x\" * 1024**3; time.sleep(60)'\n"
                       "children = [subprocess.Popen([sys.executable, '-S', '-c', code]) for _ in range(4)]\n"
                       "end = time.time() + 6\n"
                       "while time.time() < end and all(c.poll() is None for c in children):\n"
                       "    time.sleep(0.1)\n"
                       "print('children', [c.poll() for c in children])",
    "fill_disk": "open('provided.py', 'w').write('OFFSET = 1')\nchunk = b'x' * 1024**2\n"
                 "try:\n    with open('/tmp/big', 'wb') as fh:\n        for _ in range(2048):\n"
                 "            fh.write(chunk)\nexcept OSError as exc:\n    print('disk full:', exc)",
}
# cells added after the hostile one (kind -> cells): many cells that each stay under the per-cell output cap
HOSTILE_EXTRA_CELLS = {
    "output_flood": ["print('y' * 60000)"] * 12 + ["raise ValueError('z' * 60000)"] * 12,
}


def synthetic_submission(course_root: Path, kind: str) -> str:
    """JSON text of a student notebook of the synthetic course (see the module doc for the kinds)."""
    course_root = Path(course_root)
    released = nbformat.read(course_root / "release" / SYNTHETIC_ASSIGNMENT / f"{SYNTHETIC_ASSIGNMENT}.ipynb",
                             as_version=4)
    if kind == "blank":
        return nbformat.writes(released)
    right = {"squares": "return [i * i for i in range(n)]", "normalize": "return x / x.sum()"}
    wrong = {"squares": "return [i * i for i in range(1, n + 1)] if n > 3 else [i * i for i in range(n)]",
             "normalize": "return x / x.max()"}

    def filled(**bodies):
        nb = nbformat.from_dict(released)
        for grade_id, body in {**right, **bodies}.items():
            nb = _replace_solution(nb, grade_id, body)
        return nb

    if kind == "solution":
        return nbformat.writes(filled())
    if kind == "mistake":  # both hidden tests fail, the visible one passes
        return nbformat.writes(filled(**wrong))
    if kind in HOSTILE_CELLS:
        # the hostile cell sits right after `squares`'s tests, before `normalize` is defined
        nb = filled(normalize=wrong["normalize"]) if kind == "monkeypatch" else filled()  # patching hides it
        position = next(i for i, c in enumerate(nb.cells)
                        if c.metadata.get("nbgrader", {}).get("grade_id") == "test_squares_hidden") + 1
        nb.cells.insert(position, new_code_cell(HOSTILE_CELLS[kind]))
        return nbformat.writes(nb)
    if kind in HOSTILE_EXTRA_CELLS:
        nb = filled()
        position = next(i for i, c in enumerate(nb.cells)
                        if c.metadata.get("nbgrader", {}).get("grade_id") == "test_squares_hidden") + 1
        nb.cells[position:position] = [new_code_cell(source) for source in HOSTILE_EXTRA_CELLS[kind]]
        return nbformat.writes(nb)
    if kind == "loop_in_solution":  # both tests of squares hang: each is interrupted at the cell time limit
        return nbformat.writes(filled(squares="while True:\n        pass"))
    if kind == "crash_in_solution":  # normalize kills the kernel when its test calls it
        return nbformat.writes(filled(normalize="import os\n    os._exit(1)"))
    if kind == "deleted_grade_cell":
        nb = filled(normalize=wrong["normalize"])
        nb.cells = [c for c in nb.cells if c.metadata.get("nbgrader", {}).get("grade_id") != "test_normalize"]
        return nbformat.writes(nb)
    if kind == "edited_hidden_cell":
        nb = filled(normalize=wrong["normalize"])
        for cell in nb.cells:
            if cell.metadata.get("nbgrader", {}).get("grade_id") == "test_normalize":
                cell.source = "pass  # nothing to see here"
        return nbformat.writes(nb)
    if kind == "wrong_kernelspec":
        nb = filled()
        nb.metadata["kernelspec"] = {"name": "ir", "display_name": "R", "language": "R"}
        return nbformat.writes(nb)
    if kind == "nbformat_v3":
        return nbformat.writes(nbformat.convert(filled(), 3))
    raise ValueError(f"unknown submission kind {kind!r}")


def source_notebook_json(course_root: Path, assignment: str) -> str:
    return (Path(course_root) / "source" / assignment / f"{assignment}.ipynb").read_text()


def dumps(obj) -> str:
    return json.dumps(obj, indent=1)


# ----------------------------------------------------------------------------------------- the demo's students
# Typical mistakes, made by editing the reference inside solution cells. Each is (label, pattern, replacement);
# a student gets every edit of their mistake that matches somewhere in the assignment's solution cells.
MISTAKES = {
    "mistake_scale": ("forgot the 1/sqrt(d_k) scale", [
        (r"\s*/\s*math\.sqrt\((?:[^()]|\([^()]*\))*\)", ""),
        (r"10000", "1000"),  # positional encoding: wrong frequency base
    ]),
    "mistake_mask": ("mask polarity inverted", [
        (r"~mask\.bool\(\)", "mask.bool()"),
        (r"ids != pad_id", "ids == pad_id"),
        (r"\.tril\(\)", ".triu()"),
        (r"masked_fill\(mask == 0", "masked_fill(mask != 0"),
    ]),
    "mistake_heads": ("heads not transposed", [
        (r"\.transpose\(1, 2\)", ""),
        (r"\.unsqueeze\(-1\)", ".unsqueeze(0)"),
        (r"\.argmax\(dim=-1\)", ".argmax(dim=0)"),
    ]),
}

HOSTILE_DEMO_CELL = ("# (hostile) make every comparison pass, and peek at the reference\n"
                     "import torch\ntorch.allclose = lambda *args, **kwargs: True\n"
                     "import solutions\nprint(len(dir(solutions)))")


def _solution_cells(nb):
    return [c for c in nb.cells if c.cell_type == "code" and c.metadata.get("nbgrader", {}).get("solution")]


def apply_mistake(source_nb, mistake: str):
    """A copy of the reference notebook with `mistake` made in its solution cells; (nb, what was changed).

    When none of the mistake's edits fits this assignment, the student leaves one exercise unfinished instead
    (which one depends on the mistake), so every demo student still loses some points somewhere.
    """
    nb = nbformat.from_dict(source_nb)
    label, edits = MISTAKES[mistake]
    changed = False
    for cell in _solution_cells(nb):
        for pattern, replacement in edits:
            new = re.sub(pattern, replacement, cell.source)
            changed = changed or new != cell.source
            cell.source = new
    if changed:
        return nb, label
    cells = _solution_cells(nb)
    if not cells:
        return nb, "no solution cells"
    cell = cells[sorted(MISTAKES).index(mistake) % len(cells)]
    cell.source = re.sub(r"### BEGIN SOLUTION.*?### END SOLUTION", "### BEGIN SOLUTION\n    raise NotImplementedError()"
                         "\n    ### END SOLUTION", cell.source, flags=re.S)
    return nb, f"left `{cell.metadata['nbgrader']['grade_id']}` unfinished"


def demo_students(source_nb, release_nb, size: int = 6) -> dict[str, tuple[str, str]]:
    """student id -> (notebook JSON, what the student did), for one assignment. At least 6 students:

    reference (the source notebook), blank (the release), mistake_scale, mistake_mask, mistake_heads (typical
    mistakes edited into the solution cells), hostile (reference + a cell that monkeypatches torch.allclose and
    imports the solutions); further students repeat the mistakes (student_07, ...).
    """
    size = max(6, size)
    students = {"reference": (nbformat.writes(source_nb), "the full solution (source notebook)"),
                "blank": (nbformat.writes(release_nb), "the blank release")}
    for mistake in sorted(MISTAKES):
        nb, label = apply_mistake(source_nb, mistake)
        students[mistake] = (nbformat.writes(nb), label)
    hostile = nbformat.from_dict(source_nb)
    first = hostile.cells.index(_solution_cells(hostile)[0]) if _solution_cells(hostile) else 0
    hostile.cells.insert(first + 1, new_code_cell(HOSTILE_DEMO_CELL))
    students["hostile"] = (nbformat.writes(hostile), "monkeypatches torch.allclose, imports solutions")
    for index in range(7, size + 1):
        mistake = sorted(MISTAKES)[index % len(MISTAKES)]
        nb, label = apply_mistake(source_nb, mistake)
        students[f"student_{index:02d}"] = (nbformat.writes(nb), label)
    return students
