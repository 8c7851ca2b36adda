"""The checks inside a real Jupyter kernel, as in a graded notebook: a correct answer passes, monkeypatching in an
earlier cell makes the grade cell fail with the integrity message, and an exception-swallowing IPython handler
cannot hide a failing check."""
from __future__ import annotations

import nbformat
import pytest
from nbclient import NotebookClient

SETUP = "import torch\nfrom solutions import make_causal_mask\n"
GRADE = "from autograder.checks import check_make_causal_mask\ncheck_make_causal_mask(make_causal_mask)\n"


def run_cells(*sources):
    notebook = nbformat.v4.new_notebook()
    notebook.cells = [nbformat.v4.new_code_cell(source) for source in sources]
    NotebookClient(notebook, timeout=120, kernel_name="python3", allow_errors=True).execute()
    return notebook.cells


def errors(cell):
    return [output for output in cell.outputs if output.output_type == "error"]


@pytest.fixture(scope="module")
def cells():
    return run_cells(
        SETUP, GRADE,                                                     # 0, 1: correct -> passes
        "wrong = lambda size, device=None: ~make_causal_mask(size, device)",
        "check_make_causal_mask(wrong)",                                  # 3: wrong -> fails with the diagnosis
        "get_ipython().set_custom_exc((AssertionError,), lambda *a, **k: None)",
        "check_make_causal_mask(wrong)",                                  # 5: the handler must not hide it
        "saved = torch.allclose, torch.equal\ntorch.allclose = torch.equal = lambda *a, **k: True",
        GRADE,                                                            # 7: integrity failure
        "torch.allclose, torch.equal = saved\nget_ipython()._showtraceback = lambda *a, **k: None",
        "check_make_causal_mask(wrong)",                                  # 9: still shown
    )


def test_correct_answer_passes_in_a_kernel(cells):
    assert not errors(cells[1]), cells[1].outputs


def test_wrong_answer_fails_with_the_diagnosis_in_a_kernel(cells):
    (error,) = errors(cells[3])
    assert error.ename == "AssertionError" and "polarity is inverted" in error.evalue


def test_custom_exception_handler_cannot_hide_a_failure(cells):
    (error,) = errors(cells[5])
    assert "integrity check failed" in error.evalue


def test_monkeypatched_torch_fails_the_grade_cell(cells):
    (error,) = errors(cells[7])
    assert "integrity check failed" in error.evalue


def test_replaced_traceback_display_cannot_hide_a_failure(cells):
    (error,) = errors(cells[9])
    assert "integrity check failed" in error.evalue
