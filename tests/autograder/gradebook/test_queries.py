"""autograder.gradebook.queries: the gradebook's reads and the two rules that live only there (final score, waits for
a grader), and that export and report take them from there instead of writing them again."""
from __future__ import annotations

import ast
from pathlib import Path
from types import SimpleNamespace

import pytest

from autograder.gradebook import queries
from autograder.gradebook.store import RunsTable

ROOT = Path(__file__).resolve().parents[3]


@pytest.mark.parametrize("score, penalty, final", [(80.0, 0.0, 80.0), (80.0, 9.0, 71.0), (5.0, 9.0, 0.0),
                                                   (None, None, 0.0), (12.5, None, 12.5)])
def test_final_score_is_score_minus_penalty_never_below_zero(score, penalty, final):
    sub = SimpleNamespace(score=score, late_submission_penalty=penalty)
    assert queries.final_score(sub) == final


def _grade(needs, student="ann", notebook="nb"):
    return {"assignment": "hw", "notebook": notebook, "student": student, "cell": "written_a",
            "needs_manual_grade": needs}


def test_waits_for_grader_outside_held_notebooks_only():
    held = {("hw", "nb", "cat")}
    assert queries.waits_for_grader(_grade(True), held)
    assert not queries.waits_for_grader(_grade(False), held)
    assert not queries.waits_for_grader(_grade(True, student="cat"), held)  # reviewed whole, not cell by cell
    assert queries.waits_for_grader(_grade(True, student="cat", notebook="other"), held)


def test_runs_table_is_a_context_manager_that_disposes(tmp_path):
    url = f"sqlite:///{tmp_path / 'gb.db'}"
    disposed = []
    with RunsTable(url) as runs:
        runs.engine.dispose = lambda: disposed.append(True)
        runs.put({"assignment": "hw", "notebook": "nb", "student": "ann", "status": "graded", "held": True})
    assert disposed == [True]
    rows = queries.run_rows(url, "hw")
    assert [(r["student"], r["held"]) for r in rows] == [("ann", True)]
    assert queries.held_notebooks(rows) == {("hw", "nb", "ann")}
    assert queries.run_rows(url, "other") == []


def _names_used(path: Path) -> set[str]:
    tree = ast.parse(path.read_text())
    return {n.attr for n in ast.walk(tree) if isinstance(n, ast.Attribute)} | \
        {n.id for n in ast.walk(tree) if isinstance(n, ast.Name)}


@pytest.mark.parametrize("module", ["publish/export.py", "publish/report.py", "cli.py", "demo/run.py"])
def test_formatters_do_not_write_the_rules_again(module):
    """Export, report, the CLI and the demo format; the late-penalty arithmetic and the runs table stay in
    gradebook/queries.py (and gradebook/store.py, the writer)."""
    names = _names_used(ROOT / "autograder" / module)
    assert "late_submission_penalty" not in names or module == "publish/report.py"  # the report shows the penalty itself
    assert "RunsTable" not in names
    assert "dispose" not in names
    if module == "publish/report.py":  # it shows the penalty, but the final score comes from queries.final_score
        source = (ROOT / "autograder" / module).read_text()
        assert "max(0.0" not in source and "max(0," not in source
