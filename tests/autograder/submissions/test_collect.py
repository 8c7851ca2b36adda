"""collect: nbgrader layout, flat LMS names, Canvas names, zips; bad files reported and skipped; links, special
files and oversized notebooks refused without reaching outside the input."""
from __future__ import annotations

import hashlib
import json
import os
import shutil
import stat
import zipfile
from pathlib import Path

import nbformat
import pytest
from nbgrader.api import Gradebook

from autograder.submissions import files as submission_files
from autograder.submissions.collect import collect
from synthetic_course import synthetic_submission


@pytest.fixture
def course(released_synthetic_course, tmp_path) -> Path:
    shutil.copytree(released_synthetic_course, tmp_path / "course")
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


# --- nothing in the input reaches outside it ---------------------------------------------------------------

SECRET = "TOP SECRET: the exam answers"


def _all_text(folder: Path) -> str:
    return "\n".join(p.read_text(errors="replace") for p in folder.rglob("*") if p.is_file() and not p.is_symlink())


def _reasons(report) -> dict:
    return {p.path: p.reason for p in report.problems}


def test_links_and_special_files_in_a_folder_are_refused(course, tmp_path):
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.txt").write_text(SECRET)
    secret_nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_markdown_cell(SECRET)])
    nbformat.write(secret_nb, outside / "secret.ipynb")
    (outside / "ps1").mkdir()
    nbformat.write(secret_nb, outside / "ps1" / "ps1.ipynb")
    inbox = tmp_path / "inbox"
    (inbox / "alice" / "ps1").mkdir(parents=True)
    (inbox / "alice" / "ps1" / "ps1.ipynb").write_text(synthetic_submission(course, "solution"))
    (inbox / "mallory" / "ps1").mkdir(parents=True)
    (inbox / "mallory" / "ps1" / "ps1.ipynb").symlink_to(inbox / "alice" / "ps1" / "ps1.ipynb")  # a classmate's
    (inbox / "mallory" / "ps1" / "data.csv").symlink_to("/etc/passwd")
    (inbox / "mallory" / "ps1" / "notes.txt").write_text("my own notes")
    (inbox / "trudy_ps1_ps1.ipynb").symlink_to(outside / "secret.ipynb")
    (inbox / "oscar").symlink_to(outside, target_is_directory=True)  # oscar/ps1/ps1.ipynb through a folder link
    (inbox / "peggy" / "ps1").mkdir(parents=True)
    os.mkfifo(inbox / "peggy" / "ps1" / "ps1.ipynb")  # reading it would block the batch forever
    os.link(outside / "secret.ipynb", inbox / "hank_ps1_ps1.ipynb")
    (inbox / "bob_ps1_ps1.ipynb").write_text(synthetic_submission(course, "mistake"))

    report = collect(course, inbox)

    reasons = _reasons(report)
    assert reasons["mallory/ps1/ps1.ipynb"].startswith("symbolic link refused")
    assert reasons["mallory/ps1/data.csv"].startswith("symbolic link refused")
    assert reasons["trudy_ps1_ps1.ipynb"].startswith("symbolic link refused")
    assert reasons["oscar/"].startswith("symbolic link refused")
    assert reasons["peggy/ps1/ps1.ipynb"].startswith("a FIFO (named pipe) refused")
    assert reasons["hank_ps1_ps1.ipynb"].startswith("hard link refused")
    assert sorted(c.student for c in report.collected) == ["alice", "bob"]  # the honest ones, unchanged
    submitted = course / "submitted"
    assert (submitted / "alice" / "ps1" / "ps1.ipynb").read_text() == \
        (inbox / "alice" / "ps1" / "ps1.ipynb").read_text()
    assert not any(p.is_symlink() for p in submitted.rglob("*"))
    text = _all_text(submitted)
    assert SECRET not in text and "root:" not in text
    assert not (submitted / "trudy").exists() and not (submitted / "oscar").exists()
    assert not (submitted / "hank").exists() and not (submitted / "peggy").exists()
    # mallory's own plain file comes along; the notebook is missing (graded as such), and she is told why
    assert (submitted / "mallory" / "ps1" / "notes.txt").read_text() == "my own notes"
    assert not (submitted / "mallory" / "ps1" / "ps1.ipynb").exists()


def test_zip_link_entries_are_refused(course, tmp_path):
    archive = tmp_path / "submissions.zip"

    def entry(name: str, mode: int) -> zipfile.ZipInfo:
        info = zipfile.ZipInfo(name)
        info.external_attr = mode << 16
        return info

    with zipfile.ZipFile(archive, "w") as zf:
        zf.writestr("alice/ps1/ps1.ipynb", synthetic_submission(course, "solution"))
        zf.writestr(entry("mallory/ps1/ps1.ipynb", stat.S_IFLNK | 0o777), "/etc/passwd")
        zf.writestr(entry("mallory/ps1/data.csv", stat.S_IFLNK | 0o777), "../../alice/ps1/ps1.ipynb")
        zf.writestr(entry("trudy_ps1_ps1.ipynb", stat.S_IFLNK | 0o777), "/etc/passwd")
        zf.writestr(entry("peggy_ps1_ps1.ipynb", stat.S_IFIFO | 0o644), "")
        zf.writestr(entry("bob_ps1_ps1.ipynb", stat.S_IFREG | 0o644), synthetic_submission(course, "mistake"))
        zf.writestr("/abs_ps1_ps1.ipynb", synthetic_submission(course, "solution"))
    report = collect(course, archive)
    reasons = _reasons(report)
    for name in ("mallory/ps1/ps1.ipynb", "mallory/ps1/data.csv", "trudy_ps1_ps1.ipynb"):
        assert reasons[name] == "symbolic link in the zip refused (only plain files are extracted)", name
    assert reasons["peggy_ps1_ps1.ipynb"].startswith("special file in the zip refused")
    assert sorted(c.student for c in report.collected) == ["alice", "bob"]
    submitted = course / "submitted"
    assert sorted(p.name for p in submitted.iterdir()) == ["alice", "bob"]
    assert "root:" not in _all_text(submitted)


def _configure(course, **settings):
    """Set SubmissionLimits in the course's nbgrader_config.py, as an instructor would."""
    config = course / "nbgrader_config.py"
    lines = [f"c.SubmissionLimits.{name} = {value!r}" for name, value in settings.items()]
    config.write_text((config.read_text() if config.exists() else "c = get_config()\n") + "\n".join(lines) + "\n")


def test_oversized_notebook_is_refused(course, tmp_path):
    _configure(course, notebook_bytes=50_000)
    big = nbformat.reads(synthetic_submission(course, "solution"), as_version=4)
    big.cells.append(nbformat.v4.new_markdown_cell("x" * 60_000))
    inbox = tmp_path / "inbox"
    inbox.mkdir()
    (inbox / "gus_ps1_ps1.ipynb").write_text(nbformat.writes(big))
    (inbox / "hal_ps1_ps1.ipynb").write_text(synthetic_submission(course, "solution"))
    archive = tmp_path / "more.zip"
    with zipfile.ZipFile(archive, "w") as zf:
        zf.writestr("ida_ps1_ps1.ipynb", nbformat.writes(big))
    report = collect(course, inbox)
    assert _reasons(report)["gus_ps1_ps1.ipynb"].startswith("notebook too large:")
    assert "over the 50000 bytes limit" in _reasons(report)["gus_ps1_ps1.ipynb"]
    assert [c.student for c in report.collected] == ["hal"]
    zipped = collect(course, archive)
    assert _reasons(zipped)["ida_ps1_ps1.ipynb"].startswith("notebook too large:")
    assert not (course / "submitted" / "gus").exists() and not (course / "submitted" / "ida").exists()


def test_submitted_folder_that_is_a_link_is_not_written_through(course, tmp_path):
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (course / "submitted").mkdir()
    (course / "submitted" / "zed").symlink_to(elsewhere, target_is_directory=True)
    inbox = tmp_path / "inbox"
    inbox.mkdir()
    (inbox / "zed_ps1_ps1.ipynb").write_text(synthetic_submission(course, "solution"))
    (inbox / "amy_ps1_ps1.ipynb").write_text(synthetic_submission(course, "solution"))
    report = collect(course, inbox)
    assert "is a symbolic link: refused" in _reasons(report)["zed/ps1"]
    assert list(elsewhere.iterdir()) == []
    assert [c.student for c in report.collected] == ["amy"]


@pytest.mark.parametrize("student", ["bob\n", "bob ", "bob\t", "b\u00f6b", "bob;x", "bob\r", "-bob", "x" * 129])
def test_student_ids_must_match_the_documented_set_in_full(course, tmp_path, student):
    """Issue #20, door 5: `bob\\n` was accepted ($ matches before a trailing newline) and became a second bob."""
    inbox = tmp_path / "inbox"
    (inbox / "bob" / "ps1").mkdir(parents=True)
    (inbox / "bob" / "ps1" / "ps1.ipynb").write_text(synthetic_submission(course, "solution"))
    try:
        (inbox / student / "ps1").mkdir(parents=True)
    except OSError:
        pytest.skip("this file system cannot hold the name")
    (inbox / student / "ps1" / "ps1.ipynb").write_text(synthetic_submission(course, "solution"))
    report = collect(course, inbox)
    assert [c.student for c in report.collected] == ["bob"]
    assert any("unusable student id" in p.reason for p in report.problems)
    with Gradebook(f"sqlite:///{course / 'gradebook.db'}") as gb:
        assert [s.id for s in gb.students] == ["bob"]
    assert sorted(p.name for p in (course / "submitted").iterdir()) == ["bob"]


def _rss_growth_of(setup: str, code: str) -> tuple[str, int]:
    """(stdout, how far the peak resident memory rose above the memory after `setup`) of `code`, run in a fresh
    interpreter."""
    import subprocess
    import sys

    # the peak is reset after `setup` (Linux: clear_refs 5 resets VmHWM), so a peak of the imports (first-time
    # bytecode compilation in a fresh clone) is not counted as collect's
    wrapped = (setup + "\nimport re\n"
               "def status(key):\n"
               "    with open('/proc/self/status') as fh:\n"
               "        return int(re.search(key + r':\\s+(\\d+) kB', fh.read()).group(1)) * 1024\n"
               "with open('/proc/self/clear_refs', 'w') as fh:\n"
               "    fh.write('5')\n"
               "before = status('VmRSS')\n" + code +
               "\nprint('GROWTH', status('VmHWM') - before)\n")
    out = subprocess.run([sys.executable, "-c", wrapped], capture_output=True, text=True, timeout=600, check=True)
    return out.stdout, int(out.stdout.rsplit("GROWTH", 1)[1])


@pytest.mark.slow
def test_a_zip_bomb_is_refused_before_extraction_and_never_read_into_memory(course, tmp_path):
    """Issue #20, door 5: a 1 MB zip of an honest classmate plus 20 files of 50 MiB (1 GB) in a student's folder.
    Over SubmissionLimits.archive_bytes (configured): refused before anything is extracted, the report names the
    limit. Under it (the default 2 GiB): collected by streaming, collect's memory stays far below the 1 GB, and
    eve's files beyond SubmissionLimits.submission_bytes are refused."""
    bomb = tmp_path / "class.zip"
    zero = b"\0" * (50 * 1024**2 - 1)
    with zipfile.ZipFile(bomb, "w", compression=zipfile.ZIP_DEFLATED, compresslevel=9) as zf:
        zf.writestr("ann/ps1/ps1.ipynb", synthetic_submission(course, "solution"))
        zf.writestr("eve/ps1/ps1.ipynb", synthetic_submission(course, "blank"))
        for index in range(20):
            zf.writestr(f"eve/ps1/data{index}.bin", zero)
    assert bomb.stat().st_size < 3 * 1024**2
    del zero
    _configure(course, archive_bytes=256 * 1024**2)
    report = collect(course, bomb)
    assert report.collected == [] and not (course / "submitted").exists()
    assert [p.reason for p in report.problems if "zip refused" in p.reason] != []
    assert "SubmissionLimits.archive_bytes" in report.problems[0].reason
    _configure(course, archive_bytes=2 * 1024**3, archive_entries=10)
    report = collect(course, bomb)
    assert report.collected == [] and "SubmissionLimits.archive_entries" in report.problems[0].reason
    _configure(course, archive_bytes=2 * 1024**3, archive_entries=20_000)
    stdout, growth = _rss_growth_of("from autograder.submissions.collect import collect\nimport nbgrader.api, torch",
                                    f"r = collect({str(course)!r}, {str(bomb)!r})\n"
                                    "print(sorted(c.student for c in r.collected))")
    assert "['ann', 'eve']" in stdout
    # issue #32, door 5: the 20 files fit the zip's limits, not eve's per-submission total (only those that fit
    # are extracted and collected, the notebook first)
    eve = course / "submitted" / "eve" / "ps1"
    fit = (submission_files.MAX_SUBMISSION_BYTES - (eve / "ps1.ipynb").stat().st_size) // len(b"\0" * (50 * 1024**2 - 1))
    assert 0 < fit < 20 and len(list(eve.glob("data*.bin"))) == fit
    assert growth < 150 * 1024**2, f"collect grew by {growth / 1024**2:.0f} MiB"


# --- issue #32, door 5: who submitted, names the filesystem cannot hold, one submission's total -------------

def test_the_student_is_the_folder_not_a_name_in_the_file(course, tmp_path):
    """LMS "download in folders" (Moodle: <name>_<id>_assignsubmission_file_/<the student's own file name>): eve's
    file named alice_ps1_ps1.ipynb is eve's, and alice's notebook is alice's."""
    inbox = tmp_path / "inbox"
    folders = {"alice": "alice_1001_assignsubmission_file_", "eve": "eve_1002_assignsubmission_file_"}
    for folder in folders.values():
        (inbox / folder).mkdir(parents=True)
    (inbox / folders["alice"] / "ps1.ipynb").write_text(synthetic_submission(course, "solution"))
    (inbox / folders["eve"] / "alice_ps1_ps1.ipynb").write_text(synthetic_submission(course, "mistake"))
    (inbox / "bob").mkdir()
    (inbox / "bob" / "ps1 (1).ipynb").write_text(synthetic_submission(course, "blank"))
    report = collect(course, inbox)
    assert report.problems == []
    assert sorted((c.student, c.notebook) for c in report.collected) == [("alice", "ps1"), ("bob", "ps1"),
                                                                         ("eve", "ps1")]
    submitted = course / "submitted"
    assert (submitted / "alice" / "ps1" / "ps1.ipynb").read_text() == synthetic_submission(course, "solution")
    assert (submitted / "eve" / "ps1" / "ps1.ipynb").read_text() == synthetic_submission(course, "mistake")
    assert (submitted / "bob" / "ps1" / "ps1.ipynb").read_text() == synthetic_submission(course, "blank")
    eve = next(c for c in report.collected if c.student == "eve")
    assert "names alice" in eve.note and "collected as eve's" in eve.note


def test_a_flat_export_in_its_assignment_folder_keeps_the_lms_names(course, tmp_path):
    """<assignment>/<student>_<assignment>_<file>.ipynb: the folder is the assignment, not a student."""
    inbox = tmp_path / "inbox"
    (inbox / "ps1").mkdir(parents=True)
    (inbox / "ps1" / "amy_ps1_ps1.ipynb").write_text(synthetic_submission(course, "solution"))
    (inbox / "ps1" / "ben_ps1_ps1.ipynb").write_text(synthetic_submission(course, "mistake"))
    report = collect(course, inbox)
    assert report.problems == []
    assert sorted(c.student for c in report.collected) == ["amy", "ben"]


@pytest.mark.parametrize("layout", ["folder", "zip"])
def test_two_files_claiming_one_submission_are_kept_aside(course, tmp_path, layout):
    """Never one silently replacing the other: both are reported, neither collected, the earlier collected
    submission stays as it was; the honest classmates are collected."""
    earlier = tmp_path / "earlier"
    (earlier / "dan" / "ps1").mkdir(parents=True)
    (earlier / "dan" / "ps1" / "ps1.ipynb").write_text(synthetic_submission(course, "blank"))
    assert [c.student for c in collect(course, earlier).collected] == ["dan"]
    kept = _hashes(course / "submitted" / "dan")
    files = {"dan/ps1/ps1.ipynb": synthetic_submission(course, "solution"),
             "dan_ps1_ps1.ipynb": synthetic_submission(course, "mistake"),
             "hal/ps1/ps1.ipynb": synthetic_submission(course, "solution"),
             "ivy_ps1_ps1.ipynb": synthetic_submission(course, "mistake"),
             "ivy_ps1_ps1 (1).ipynb": synthetic_submission(course, "solution")}
    if layout == "folder":
        source = tmp_path / "inbox"
        for name, text in files.items():
            (source / name).parent.mkdir(parents=True, exist_ok=True)
            (source / name).write_text(text)
    else:
        source = tmp_path / "class.zip"
        with zipfile.ZipFile(source, "w") as zf:
            for name, text in files.items():
                zf.writestr(name, text)
    report = collect(course, source)
    reasons = _reasons(report)
    for name in ("dan/ps1/ps1.ipynb", "dan_ps1_ps1.ipynb", "ivy_ps1_ps1.ipynb", "ivy_ps1_ps1 (1).ipynb"):
        assert "two files claim" in reasons[name] and "kept aside" in reasons[name], name
    assert "dan_ps1_ps1.ipynb" in reasons["dan/ps1/ps1.ipynb"]
    assert [c.student for c in report.collected] == ["hal"]
    assert _hashes(course / "submitted" / "dan") == kept
    assert not (course / "submitted" / "ivy").exists()


def test_a_name_the_filesystem_cannot_hold_is_refused_and_the_class_collected(course, tmp_path):
    """One zip entry whose name is over the filesystem's limit (NAME_MAX, 255 bytes on Linux) once stopped collect
    for the whole class (`OSError: File name too long`, raised inside the handler meant to report it)."""
    long_notebook = "x" * 300 + "_ps1_ps1.ipynb"
    long_file = "ann/ps1/" + "y" * 300 + ".csv"
    long_folder = "z" * 300 + "/ps1/ps1.ipynb"
    archive = tmp_path / "class.zip"
    with zipfile.ZipFile(archive, "w") as zf:
        zf.writestr("ann/ps1/ps1.ipynb", synthetic_submission(course, "solution"))
        zf.writestr("ann/ps1/data.csv", "a,b\n")
        zf.writestr(long_notebook, synthetic_submission(course, "solution"))
        zf.writestr(long_file, "a,b\n")
        zf.writestr(long_folder, synthetic_submission(course, "solution"))
        zf.writestr("bob_ps1_ps1.ipynb", synthetic_submission(course, "mistake"))
    report = collect(course, archive)
    reasons = _reasons(report)
    for name in (long_notebook, long_file, long_folder):
        assert reasons[name].startswith("file name too long for the filesystem"), name
    assert sorted(c.student for c in report.collected) == ["ann", "bob"]
    assert (course / "submitted" / "ann" / "ps1" / "data.csv").read_text() == "a,b\n"


def _capped_class(course, zero: bytes):
    """ann: a notebook and a small file; eve: a notebook and 20 files of zeros, each under file_bytes."""
    entries = {"ann/ps1/ps1.ipynb": synthetic_submission(course, "solution").encode(), "ann/ps1/data.csv": b"a,b\n",
               "eve/ps1/ps1.ipynb": synthetic_submission(course, "blank").encode()}
    entries.update({f"eve/ps1/data{index:02d}.bin": zero for index in range(20)})
    return entries


def _check_capped(report, course, cap: int, zero: bytes):
    eve = course / "submitted" / "eve" / "ps1"
    kept = sorted(p.name for p in eve.glob("data*.bin"))
    notebook = (eve / "ps1.ipynb").stat().st_size
    expected = (cap - notebook) // len(zero)  # the notebook first, then the files in name order while they fit
    assert kept == [f"data{index:02d}.bin" for index in range(expected)]
    assert sum(p.stat().st_size for p in eve.iterdir() if p.name != "timestamp.txt") <= cap
    refused = {p.path: p.reason for p in report.problems}
    for index in range(expected, 20):
        assert "SubmissionLimits.submission_bytes" in refused[f"eve/ps1/data{index:02d}.bin"]
    assert sorted(c.student for c in report.collected) == ["ann", "eve"]
    assert (course / "submitted" / "ann" / "ps1" / "data.csv").read_bytes() == b"a,b\n"


def test_one_submission_is_capped_in_a_zip_before_extraction(course, tmp_path):
    """Issue #32, door 5: each file under file_bytes, the zip under archive_bytes, but together far over the
    per-submission total: the files beyond it are refused and never extracted."""
    from autograder.course.coursedir import nbgrader_config
    from autograder.submissions.collect import UnzippedSource, _needed, assignment_notebooks

    zero = b"\0" * 1_000_000
    _configure(course, file_bytes=1_000_000, submission_bytes=3_500_000)
    archive = tmp_path / "class.zip"
    with zipfile.ZipFile(archive, "w", compression=zipfile.ZIP_DEFLATED) as zf:
        for name, data in _capped_class(course, zero).items():
            zf.writestr(name, data)
    assert archive.stat().st_size < 1_000_000
    limits = submission_files.submission_limits(nbgrader_config(course))
    notebooks = assignment_notebooks(course)
    with UnzippedSource(archive, limits, needed=lambda rel: _needed(rel, notebooks)) as root:
        extracted = sum(p.stat().st_size for p in (root / "eve").rglob("*") if p.is_file())
    assert extracted <= limits.submission_bytes
    _check_capped(collect(course, archive), course, limits.submission_bytes, zero)


def test_one_submission_is_capped_in_a_folder(course, tmp_path):
    zero = b"\0" * 1_000_000
    _configure(course, file_bytes=1_000_000, submission_bytes=3_500_000)
    inbox = tmp_path / "inbox"
    for name, data in _capped_class(course, zero).items():
        (inbox / name).parent.mkdir(parents=True, exist_ok=True)
        (inbox / name).write_bytes(data)
    _check_capped(collect(course, inbox), course, 3_500_000, zero)
