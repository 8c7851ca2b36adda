"""collect: nbgrader layout, flat LMS names, Canvas names, zips; bad files reported and skipped."""
from __future__ import annotations

import hashlib
import json
import shutil
import zipfile
from pathlib import Path

import nbformat
import pytest
from nbgrader.api import Gradebook

from autograder.collect import collect
from autograder.sample_class import synthetic_course, synthetic_submission


@pytest.fixture(scope="module")
def released(tmp_path_factory) -> Path:
    return synthetic_course(tmp_path_factory.mktemp("collect") / "course")


@pytest.fixture
def course(released, tmp_path) -> Path:
    shutil.copytree(released, tmp_path / "course")
    return tmp_path / "course"


def _hashes(folder: Path) -> dict:
    return {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in folder.rglob("*") if p.is_file()}


def test_layouts_and_new_students(course, tmp_path):
    inbox = tmp_path / "inbox"
    (inbox / "alice" / "ps1").mkdir(parents=True)
    (inbox / "alice" / "ps1" / "ps1.ipynb").write_text(synthetic_submission(course, "solution"))
    (inbox / "alice" / "ps1" / "data.csv").write_text("a,b\n")
    (inbox / "bob_ps1_ps1.ipynb").write_text(synthetic_submission(course, "mistake"))
    (inbox / "carolsmith_late_12345_67890_ps1.ipynb").write_text(synthetic_submission(course, "blank"))
    before = _hashes(inbox)
    report = collect(course, inbox)
    assert report.problems == []
    assert sorted((c.student, c.assignment, c.notebook) for c in report.collected) == [
        ("alice", "ps1", "ps1"), ("bob", "ps1", "ps1"), ("carolsmith", "ps1", "ps1")]
    assert sorted(report.new_students) == ["alice", "bob", "carolsmith"]
    submitted = course / "submitted"
    assert (submitted / "alice" / "ps1" / "data.csv").read_text() == "a,b\n"
    assert (submitted / "bob" / "ps1" / "ps1.ipynb").read_text() == (inbox / "bob_ps1_ps1.ipynb").read_text()
    assert (submitted / "carolsmith" / "ps1" / "timestamp.txt").exists()
    assert _hashes(inbox) == before
    with Gradebook(f"sqlite:///{course / 'gradebook.db'}", "synthetic") as gb:
        assert {s.id for s in gb.students} == {"alice", "bob", "carolsmith"}
    again = collect(course, inbox)  # collecting twice is harmless
    assert again.new_students == [] and len(again.collected) == 3


def test_bad_files_are_reported_and_skipped(course, tmp_path):
    inbox = tmp_path / "inbox"
    inbox.mkdir()
    (inbox / "dan_ps1_ps1.ipynb").write_text("{not json")
    (inbox / "eve_ps1_ps1.ipynb").write_bytes(b"")
    (inbox / "fay_ps1_ps1.ipynb").write_text(json.dumps([1, 2, 3]))
    (inbox / "gus_ps9_ps9.ipynb").write_text(synthetic_submission(course, "solution"))
    (inbox / "hal_ps1_ps1.ipynb").write_text(synthetic_submission(course, "solution"))
    report = collect(course, inbox)
    reasons = {p.path: p.reason for p in report.problems}
    assert "invalid JSON" in reasons["dan_ps1_ps1.ipynb"]
    assert reasons["eve_ps1_ps1.ipynb"] == "empty file"
    assert reasons["fay_ps1_ps1.ipynb"] == "not a Jupyter notebook"
    assert "unknown assignment" in reasons["gus_ps9_ps9.ipynb"]
    assert [c.student for c in report.collected] == ["hal"]
    assert sorted(p.name for p in (course / "submitted").iterdir()) == ["hal"]
    assert "skipped" in report.line() and "dan_ps1_ps1.ipynb" in report.table()


def test_zip_v3_and_renamed(course, tmp_path):
    archive = tmp_path / "submissions.zip"
    with zipfile.ZipFile(archive, "w") as zf:
        zf.writestr("ivy/ps1/ps1 (1).ipynb", synthetic_submission(course, "solution"))
        zf.writestr("jon_ps1_ps1.ipynb", synthetic_submission(course, "nbformat_v3"))
        zf.writestr("../escape_ps1_ps1.ipynb", synthetic_submission(course, "solution"))
    report = collect(course, archive)
    notes = {c.student: c.note for c in report.collected}
    assert "renamed from ps1 (1)" in notes["ivy"]
    assert "converted from nbformat 3" in notes["jon"]
    converted = nbformat.read(course / "submitted" / "jon" / "ps1" / "ps1.ipynb", as_version=4)
    assert converted.nbformat == 4
    assert "escape" not in notes and not (tmp_path / "escape_ps1_ps1.ipynb").exists()


def test_missing_source_is_an_error(course, tmp_path):
    with pytest.raises(FileNotFoundError):
        collect(course, tmp_path / "nothing-here")
