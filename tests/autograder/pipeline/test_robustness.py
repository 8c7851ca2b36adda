"""One batch of hostile and broken submissions graded together with normal ones.

For every case: the batch finishes, the normal submissions keep their correct grades, the case loses only the
affected cells (with a message saying why), hostile cases are flagged, and the original files are untouched.
Grades of the synthetic course (7 points): test_squares 1, test_squares_hidden 2, test_normalize 4.
"""
from __future__ import annotations

import json

import pytest
from nbgrader.api import Gradebook

from autograder.submissions.collect import collect
from autograder.grade.engine import grade
from autograder.gradebook.store import RunsTable


# kind -> (expected score, flag codes that must be present)
RUNNING_CASES = {
    "solution": (7, set()),
    "mistake": (1, set()),
    "blank": (0, set()),
    "infinite_loop": (7, {"timeout"}),
    "os_exit": (7, {"kills-process", "runtime-kernel-died"}),
    "segfault": (7, {"ctypes", "runtime-kernel-died"}),
    "allocate_20gb": (7, {"runtime-memory"}),
    "print_100mb": (7, {"runtime-output"}),
    "loop_in_solution": (4, {"timeout"}),  # the squares tests time out -> 0 of 3
    "crash_in_solution": (3, {"runtime-kernel-died"}),  # test_normalize kills the kernel -> 0 of 4
    "deleted_grade_cell": (3, {"deleted-grade-cell"}),  # restored and run: normalize is wrong -> 0 of 4
    "edited_hidden_cell": (3, {"edited-locked-cell"}),  # restored and run: normalize is wrong -> 0 of 4
    "monkeypatch": (0, {"monkeypatch"}),  # held for review: manual score 0
    "import_solutions": (0, {"imports-reference"}),  # held for review
    "wrong_kernelspec": (7, set()),
    "nbformat_v3": (7, set()),
    # the jail (issue #11)
    "ignore_sigint": (3, {"timeout"}),  # killed at the cell limit: normalize is never defined -> 0 of 4
    "sleep_children": (7, set()),
    "fork_bomb": (7, {"timeout"}),  # the process cap stops it; the interrupt stops the kernel's loop
    "memory_children": (7, set()),  # the total memory cap kills children; the kernel goes on
    "fill_disk": (7, set()),
    "output_flood": (7, {"runtime-output"}),
}
HELD = {"monkeypatch", "import_solutions"}  # with every grade at 0 until reviewed
# a time limit reached, and again when graded alone: held with its scores as graded (issue #47)
TIMED_OUT = {kind for kind, (_, flags) in RUNNING_CASES.items() if "timeout" in flags}


@pytest.fixture(scope="module")
def batch(released_course, tmp_path_factory, helpers):
    import shutil

    root = tmp_path_factory.mktemp("robust")
    course = root / "course"
    shutil.copytree(released_course, course)
    inbox = root / "inbox"
    for kind in RUNNING_CASES:
        helpers.write_submission(inbox, course, f"s_{kind}", kind)
    # broken files, collected in the same batch
    (inbox / "s_invalid_json" / "ps1").mkdir(parents=True)
    (inbox / "s_invalid_json" / "ps1" / "ps1.ipynb").write_text('{"cells": [')
    (inbox / "s_empty" / "ps1").mkdir(parents=True)
    (inbox / "s_empty" / "ps1" / "ps1.ipynb").write_bytes(b"")
    (inbox / "s_missing" / "ps1").mkdir(parents=True)
    (inbox / "s_missing" / "ps1" / "notes.txt").write_text("I forgot the notebook")
    renamed = helpers.write_submission(inbox, course, "s_renamed", "solution")
    renamed.rename(renamed.with_name("ps1 (1).ipynb"))
    (inbox / "s_not_notebook" / "ps1").mkdir(parents=True)
    (inbox / "s_not_notebook" / "ps1" / "ps1.ipynb").write_text(json.dumps({"hello": "world"}))
    before = helpers.tree_hashes(inbox)
    report = collect(course, inbox)
    summary = grade(course, "ps1", workers=2, limits=helpers.TEST_LIMITS, progress=False)
    return {"course": course, "inbox": inbox, "before": before, "report": report, "summary": summary,
            "helpers": helpers}


def _row(batch, student):
    rows = [r for r in batch["summary"].graded if r["student"] == student]
    assert rows, f"{student} was not graded"
    return rows[0]


def test_originals_untouched(batch):
    assert batch["helpers"].tree_hashes(batch["inbox"]) == batch["before"]


def test_broken_files_reported_not_fatal(batch):
    problems = {p.path.split("/")[0]: p.reason for p in batch["report"].problems}
    assert "invalid JSON" in problems["s_invalid_json"]
    assert problems["s_empty"] == "empty file"
    assert "not a Jupyter notebook" in problems["s_not_notebook"]
    assert "no notebook" in problems["s_missing"]
    renamed = [c for c in batch["report"].collected if c.student == "s_renamed"]
    assert renamed and renamed[0].notebook == "ps1" and "renamed" in renamed[0].note


@pytest.mark.parametrize("kind", sorted(RUNNING_CASES))
def test_case_score_and_flags(batch, kind):
    expected_score, expected_flags = RUNNING_CASES[kind]
    row = _row(batch, f"s_{kind}")
    assert row["score"] == expected_score, (row["messages"], row["notes"], row["flags"])
    assert row["max_score"] == 7
    codes = {f["code"] for f in row["flags"]}
    assert expected_flags <= codes, codes
    assert row["held"] == (kind in HELD | TIMED_OUT)
    if kind in TIMED_OUT:  # graded twice: the second run, alone, is the one recorded
        assert any("graded a second time, alone" in note for note in row["notes"]), row["notes"]
        assert all("time limit reached" in f["message"] for f in row["flags"] if f["code"] == "timeout")
    if kind in ("solution", "wrong_kernelspec", "nbformat_v3"):
        assert not codes


def test_lost_cells_say_why(batch):
    mistake = _row(batch, "s_mistake")
    assert mistake["messages"]["test_squares_hidden"].endswith("Likely mistake: range starts at 1 instead of 0")
    assert "divided by the maximum instead of the sum" in mistake["messages"]["test_normalize"]
    assert mistake["mistakes"] == {}  # plain nbgrader asserts: only a hidden check's diagnosis is a mistake id
    blank = _row(batch, "s_blank")
    assert set(blank["messages"]) == {"test_squares", "test_squares_hidden", "test_normalize"}
    assert all("NotImplementedError" in m for m in blank["messages"].values())
    loop = _row(batch, "s_loop_in_solution")
    assert set(loop["messages"]) == {"test_squares", "test_squares_hidden"}
    assert all("CellTimeoutError" in m for m in loop["messages"].values())
    crash = _row(batch, "s_crash_in_solution")
    assert set(crash["messages"]) == {"test_normalize"} and "KernelDied" in crash["messages"]["test_normalize"]
    missing = _row(batch, "s_missing")
    assert missing["status"] == "missing" and missing["score"] == 0
    assert "No notebook was submitted" in " ".join(missing["notes"])


def test_broken_notebooks_score_zero_without_submission(batch):
    graded = {r["student"] for r in batch["summary"].graded}
    assert not graded & {"s_invalid_json", "s_empty", "s_not_notebook"}
    assert "s_renamed" in graded and _row(batch, "s_renamed")["score"] == 7


def test_gradebook_matches_results(batch):
    course = batch["course"]
    with Gradebook(f"sqlite:///{course / 'gradebook.db'}", "synthetic") as gb:
        for row in batch["summary"].graded:
            assert gb.find_submission("ps1", row["student"]).score == row["score"]
        held = gb.find_submission_notebook("ps1", "ps1", "s_monkeypatch")
        assert all(g.needs_manual_grade and g.manual_score == 0 for g in held.grades)
        # the automatic score is kept for the reviewer: the wrong normalize hid behind patched allclose
        assert sum(g.auto_score for g in held.grades) == 7


def test_resume_skips_unchanged(batch):
    summary = grade(batch["course"], "ps1", workers=1, limits=batch["helpers"].TEST_LIMITS, progress=False)
    assert summary.graded == []
    assert len(summary.skipped) == len(batch["summary"].graded)


def test_regrade_is_deterministic(batch):
    students = ["s_solution", "s_mistake", "s_deleted_grade_cell"]
    first = {r["student"]: r["score"] for r in batch["summary"].graded if r["student"] in students}
    runs = RunsTable(f"sqlite:///{batch['course'] / 'gradebook.db'}")
    before = {s: runs.get("ps1", "ps1", s)["messages"] for s in students}
    summary = grade(batch["course"], "ps1", students=students, workers=2, force=True,
                    limits=batch["helpers"].TEST_LIMITS, progress=False)
    assert {r["student"]: r["score"] for r in summary.graded} == first
    assert {s: runs.get("ps1", "ps1", s)["messages"] for s in students} == before
    runs.dispose()


def _graded_nb(batch, student):
    import nbformat

    return nbformat.read(batch["course"] / "autograded" / student / "ps1" / "ps1.ipynb", as_version=4)


def _texts(nb) -> str:
    return "".join(o.get("text", "") for c in nb.cells if c.cell_type == "code" for o in c.get("outputs", []))


def test_jail_faults_are_contained(batch):
    """Issue #11: what the hostile students did, each contained by the jail, the batch going on."""
    import os

    # every process a submission started died with it (20 detached `sleep 424242`, the fork bomb's copies)
    left = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as fh:
                if b"424242" in fh.read():
                    left.append(pid)
        except OSError:
            pass
    assert left == []
    # a loop that ignores SIGINT: killed at the cell limit, the rest of its notebook lost with a reason
    sigint = _row(batch, "s_ignore_sigint")
    assert any("did not stop when interrupted" in note for note in sigint["notes"]), sigint["notes"]
    assert "SubmissionKilled" in sigint["messages"]["test_normalize"]
    # children asking for 4 GiB together under a 3 GiB cap of the whole submission: the kernel survives (which
    # child dies when is up to the OOM killer and the machine's load; test_grade_sandbox checks it precisely)
    assert "children" in _texts(_graded_nb(batch, "s_memory_children"))
    # 2 GiB written: the private disk is full long before, and the submission's folder writes stay inside
    assert "disk full" in _texts(_graded_nb(batch, "s_fill_disk"))
    assert (batch["course"] / "source" / "ps1" / "provided.py").read_text() == "OFFSET = 0\n"
    # 12 print cells and 12 error cells, each under the per-cell cap: the notebook's total cap holds
    flood = _graded_nb(batch, "s_output_flood")
    import json

    size = sum(len(json.dumps(o)) for c in flood.cells if c.cell_type == "code" for o in c.get("outputs", []))
    limits = batch["helpers"].TEST_LIMITS
    assert size < limits.notebook_output_bytes + 64 * 1024, size
    errors = [o for c in flood.cells if c.cell_type == "code" for o in c.get("outputs", [])
              if o.get("output_type") == "error"]
    assert len(errors) == 12 and all(o["ename"] == "ValueError" for o in errors)  # kept, shortened past the cap
