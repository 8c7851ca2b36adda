"""The static tamper scan: what it flags, and what it must leave alone."""
from __future__ import annotations

import pytest
from nbformat.v4 import new_code_cell, new_notebook

from autograder.grade.tamper_scan import released_source, scan, scan_code


def codes(source: str) -> set[str]:
    return {f.code for f in scan_code(source, "cell", {})}


@pytest.mark.parametrize("source, code", [
    ("import torch\ntorch.allclose = lambda *a, **k: True", "monkeypatch"),
    ("import torch.testing\ntorch.testing.assert_close = print", "monkeypatch"),
    ("import numpy as np\nnp.allclose = lambda *a, **k: True", "monkeypatch"),
    ("from torch import testing\ntesting.assert_close = None", "monkeypatch"),
    ("import builtins\nbuiltins.print = None", "monkeypatch"),
    ("__builtins__.len = None", "monkeypatch"),
    ("import autograder.checks as c\nc.check_encode = lambda f: None", "imports-reference"),
    ("import autograder.checks as c\nc.check_encode = lambda f: None", "monkeypatch"),
    ("import torch\nsetattr(torch, 'allclose', None)", "monkeypatch"),
    ("import sys\nsys.modules['autograder'] = None", "monkeypatch"),
    ("import solutions", "imports-reference"),
    ("from solutions.attention import scaled_dot_product_attention", "imports-reference"),
    ("m = __import__('solutions')", "imports-reference"),
    ("import importlib\nimportlib.import_module('autograder.checks')", "imports-reference"),
    ("def check_encode(f):\n    pass", "redefines-check"),
    ("open('/etc/passwd').read()", "outside-files"),
    ("open('../other_student/01.ipynb')", "outside-files"),
    ("import sys\nsys.path.insert(0, '.')", "import-path"),
    ("import os\nos._exit(1)", "kills-process"),
    ("import ctypes\nctypes.string_at(0)", "ctypes"),
    ("%time x = 1\nimport solutions", "imports-reference"),  # magics do not hide code
    ("import solutions\nthis is not python", "imports-reference"),  # nor does a syntax error
    ("import sys\nsys.modules['course_stand_ins'].LENT = True", "stand-in"),  # a kept stand-in switched back on
    ("kept = masked_mean_pool.__globals__\nkept['LENT'] = True", "stand-in"),
    ("import coursekit.probe as p\np.ProbeState.lent.clear()", "stand-in"),
])
def test_flags_tampering(source, code):
    assert code in codes(source)


@pytest.mark.parametrize("source", [
    "import torch\nimport torch.nn as nn\n\nclass M(nn.Module):\n    def __init__(self):\n"
    "        super().__init__()\n        self.w = nn.Linear(2, 2)\n",
    "import torch\ntorch.backends.cudnn.deterministic = True\ntorch.manual_seed(0)",
    "import matplotlib.pyplot as plt\nplt.rcParams['figure.figsize'] = (4, 3)",
    "import pandas as pd\npd.options.display.max_rows = 5",
    "x = {}\nx['a'] = 1\nmodel = object()\n",
    "with open('notes.txt', 'w') as fh:\n    fh.write('hi')",
    "from provided import MultiHeadAttention\nmha = MultiHeadAttention(8, 2)",
    "assert torch.allclose(a, b)",
])
def test_leaves_normal_code_alone(source):
    assert codes(source) == set()


def _cells():
    return {
        "source": [{"name": "test_x", "source": "# test\n### BEGIN HIDDEN TESTS\ncheck_x(x)\n### END HIDDEN TESTS",
                    "locked": True, "cell_type": "code"}],
        "grade": [{"name": "test_x", "max_score": 5}],
    }


def _graded_cell(source, **meta):
    nbgrader = {"grade": True, "solution": False, "locked": True, "grade_id": "test_x", "points": 5,
                "schema_version": 3}
    nbgrader.update(meta)
    return new_code_cell(source, metadata={"nbgrader": nbgrader})


def test_released_locked_cell_is_clean():
    cells = _cells()
    assert released_source(cells["source"][0]["source"]) == "# test"
    for text in ("# test", cells["source"][0]["source"]):  # as released, or as in the source
        assert scan(new_notebook(cells=[_graded_cell(text)]), cells["source"], cells["grade"]) == []


def test_edited_deleted_and_metadata_changes_are_flagged():
    cells = _cells()
    edited = scan(new_notebook(cells=[_graded_cell("pass")]), cells["source"], cells["grade"])
    assert [f.code for f in edited] == ["edited-locked-cell"] and edited[0].severity == "review"
    deleted = scan(new_notebook(cells=[new_code_cell("x = 1")]), cells["source"], cells["grade"])
    assert [f.code for f in deleted] == ["deleted-grade-cell"]
    points = scan(new_notebook(cells=[_graded_cell("# test", points=50)]), cells["source"], cells["grade"])
    assert [f.code for f in points] == ["edited-metadata"]


def test_tampering_in_student_cells_is_held_severity():
    cells = _cells()
    nb = new_notebook(cells=[new_code_cell("import torch as T"), new_code_cell("T.allclose = None"),
                             _graded_cell("# test")])
    flags = scan(nb, cells["source"], cells["grade"])
    assert [(f.code, f.severity, f.cell) for f in flags] == [("monkeypatch", "tamper", "cell 1")]
