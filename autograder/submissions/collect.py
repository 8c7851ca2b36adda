"""Import student submissions into the course's submitted/ folder, in nbgrader's layout.

Accepted input (a folder or a .zip):
- nbgrader layout     <student>/<assignment>/<notebook>.ipynb  (other files of the folder are copied too)
- flat LMS naming     <student>_<assignment>_<file>.ipynb      (assignment names may contain "_")
- Canvas downloads    <student>[_late]_<user id>_<submission id>_<file>.ipynb  (assignment from <file>)
Each notebook is checked: empty, invalid JSON, not a notebook, unknown assignment are reported and skipped
(never fatal). An nbformat v3 notebook is converted to v4 in the copy. A single notebook under another name
(`03_attention (1).ipynb`) is accepted as the assignment's notebook when the assignment has just one. The
originals are only read: everything is written into submitted/<student>/<assignment>/ (with timestamp.txt).
Students not yet in the gradebook are added.

Nothing in the input can reach outside it (autograder.submissions.files): symbolic links (in a folder, or zip
entries whose external_attr marks S_IFLNK), hard links, FIFOs, sockets and devices are never followed or read;
each is reported ("symbolic link refused ...") and skipped, as is a notebook over MAX_NOTEBOOK_BYTES or any other
file over MAX_EXTRA_FILE_BYTES, and the rest of the batch is collected normally. A submitted/<student> folder that
is a link is refused too (nothing is written through it).

Student ids: 1 to 128 characters of `A-Z a-z 0-9 . _ @ -`, the first a letter or digit (`STUDENT_ID`, matched in
full: no trailing newline, space, slash or control character). Anything else is reported and skipped.

A zip is checked BEFORE anything is extracted (`SubmissionLimits` in nbgrader_config.py): more entries than
`archive_entries`, or a total declared uncompressed size over `archive_bytes`, refuses the whole zip (nothing is
collected, the report says which limit); each entry is then streamed to disk, its actual bytes counted against
its own limit (`notebook_bytes` or `file_bytes`) and against `archive_bytes`, never read whole into memory.
Other files of a student's folder are streamed into submitted/ the same way.
"""
from __future__ import annotations

import dataclasses
import datetime
import json
import os
import re
import shutil
import stat
import tempfile
import zipfile
from pathlib import Path

import nbformat

from autograder.course.coursedir import alembic_on_path, assignments_in_source
from autograder.submissions import files as submission_files
from autograder.submissions.files import RefusedFile, copy_regular, read_regular, refusal, submission_limits

CANVAS = re.compile(r"^(?P<student>[A-Za-z0-9.\-]+?)(?:_late)?_(?P<uid>\d+)_(?P<sid>\d+)_(?P<file>.+)$")
STUDENT_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._@\-]{0,127}")  # use with fullmatch (see the module doc)


@dataclasses.dataclass
class Problem:
    path: str
    reason: str


@dataclasses.dataclass
class Collected:
    student: str
    assignment: str
    notebook: str
    source: str
    note: str = ""


@dataclasses.dataclass
class CollectReport:
    collected: list[Collected] = dataclasses.field(default_factory=list)
    problems: list[Problem] = dataclasses.field(default_factory=list)
    new_students: list[str] = dataclasses.field(default_factory=list)

    def table(self) -> str:
        lines = []
        if self.collected:
            lines.append(f"{'student':<20} {'assignment':<28} {'notebook':<28} note")
            for c in self.collected:
                lines.append(f"{c.student:<20} {c.assignment:<28} {c.notebook:<28} {c.note}")
        if self.problems:
            lines.append("")
            lines.append(f"{'skipped file':<60} reason")
            for p in self.problems:
                lines.append(f"{p.path:<60} {p.reason}")
        return "\n".join(lines)

    def line(self) -> str:
        return (f"collected {len(self.collected)} notebook(s) from {len({c.student for c in self.collected})} "
                f"student(s), {len(self.new_students)} new, {len(self.problems)} file(s) skipped")


def assignment_notebooks(course_dir: Path) -> dict[str, list[str]]:
    """assignment -> its notebook names (from source/)."""
    return {a: sorted(p.stem for p in (Path(course_dir) / "source" / a).glob("*.ipynb"))
            for a in assignments_in_source(course_dir)}


def check_notebook(path: Path, limit: int = submission_files.MAX_NOTEBOOK_BYTES) -> tuple[str | None, str]:
    """(v4 JSON text or None, problem or note). Never follows a link; refuses a notebook over `limit` bytes."""
    try:
        data = read_regular(path, limit, "notebook")
    except RefusedFile as exc:
        return None, str(exc)
    if not data.strip():
        return None, "empty file"
    try:
        raw = json.loads(data)
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        return None, f"invalid JSON ({exc.__class__.__name__}: {str(exc)[:60]})"
    if not isinstance(raw, dict) or "nbformat" not in raw or not ("cells" in raw or "worksheets" in raw):
        return None, "not a Jupyter notebook"
    try:
        nb = nbformat.reads(data.decode("utf-8"), as_version=4)
    except Exception as exc:  # noqa: BLE001
        return None, f"not a valid notebook ({str(exc)[:60]})"
    note = f"converted from nbformat {raw['nbformat']}" if raw["nbformat"] != 4 else ""
    return (nbformat.writes(nb) if note else data.decode("utf-8")), note


def _match_flat(name: str, notebooks: dict[str, list[str]]):
    """(student, assignment, file) from a flat or Canvas file name, or None."""
    stem = name[:-len(".ipynb")]
    for assignment in sorted(notebooks, key=len, reverse=True):
        match = re.match(rf"^(?P<student>.+?)_{re.escape(assignment)}_(?P<file>.+)$", stem)
        if match:
            return match["student"], assignment, match["file"]
    match = CANVAS.match(stem)
    if match:
        file = match["file"]
        for assignment in sorted(notebooks, key=len, reverse=True):
            if file == assignment or file.startswith(assignment) or file in notebooks[assignment]:
                return match["student"], assignment, file
    return None


def _place(path: Path, root: Path, notebooks: dict[str, list[str]]):
    """(student, assignment, notebook file stem or None) of a file in the input, or a reason string."""
    rel = path.relative_to(root).parts
    if len(rel) >= 3 and rel[-2] in notebooks:
        return rel[-3], rel[-2], path.stem
    if len(rel) >= 3 and rel[-3] in notebooks:  # <assignment>/<student>/<nb>.ipynb is nbgrader's release/feedback
        return None
    flat = _match_flat(path.name, notebooks)
    if flat:
        return flat
    return "unknown assignment (name the file <student>_<assignment>_<notebook>.ipynb or use " \
           "<student>/<assignment>/<notebook>.ipynb)"


def _walk(root: Path, problems: list[Problem]):
    """Every plain file under `root`, sorted; links and special files are reported, never followed."""
    found = []
    for dirpath, dirnames, filenames in os.walk(root, followlinks=False):
        keep = []
        for name in sorted(dirnames + filenames):
            path = Path(dirpath) / name
            rel = path.relative_to(root).as_posix()
            if "__MACOSX" in path.parts or ".ipynb_checkpoints" in path.parts:
                continue
            try:
                st = os.lstat(path)
            except OSError as exc:
                problems.append(Problem(rel, f"cannot be read ({exc.strerror or exc})"))
                continue
            reason = refusal(st)
            if reason:
                problems.append(Problem(rel + ("/" if name in dirnames else ""), reason))
            elif stat.S_ISDIR(st.st_mode):
                keep.append(name)
            else:
                found.append(path)
        dirnames[:] = [d for d in dirnames if d in keep]
    return sorted(found)


def collect(course_dir, source, db_url: str | None = None) -> CollectReport:
    """Import submissions from folder or zip `source` into `course_dir`/submitted/ (see the module doc)."""
    from autograder.gradebook.store import open_gradebook

    course_dir = Path(course_dir).resolve()
    source = Path(source)
    if not source.exists():
        raise FileNotFoundError(f"nothing to collect at {source}")
    notebooks = assignment_notebooks(course_dir)
    from autograder.course.coursedir import nbgrader_config

    limits = submission_limits(nbgrader_config(course_dir))
    report = CollectReport()
    unzipped = UnzippedSource(source, limits)
    with unzipped as root:
        report.problems.extend(unzipped.problems)
        placed: dict[tuple[str, str], list[tuple[Path, str]]] = {}
        folders: dict[tuple[str, str], Path] = {}
        for path in _walk(root, report.problems):
            rel = path.relative_to(root).as_posix()
            if path.suffix != ".ipynb":
                parts = path.relative_to(root).parts
                if len(parts) >= 3 and parts[-2] in notebooks:  # a non-notebook file in a nbgrader folder
                    folders.setdefault((parts[-3], parts[-2]), path.parent)
                continue
            where = _place(path, root, notebooks)
            if where is None:
                continue
            if isinstance(where, str):
                report.problems.append(Problem(rel, where))
                continue
            student, assignment, file = where
            if not STUDENT_ID.fullmatch(student):
                report.problems.append(Problem(rel, f"unusable student id {student!r}"))
                continue
            placed.setdefault((student, assignment), []).append((path, file))
            if len(path.relative_to(root).parts) >= 3:
                folders.setdefault((student, assignment), path.parent)
        for key in folders:
            placed.setdefault(key, [])
        alembic_on_path()  # the gradebook may be new
        with open_gradebook(course_dir, db_url=db_url) as gb:
            known = {s.id for s in gb.students}
            for (student, assignment), files in sorted(placed.items()):
                _store(course_dir, student, assignment, files, folders.get((student, assignment)),
                       notebooks[assignment], report, root, limits)
                if student not in known:
                    gb.update_or_create_student(student)
                    known.add(student)
                    report.new_students.append(student)
    return report


def _store(course_dir: Path, student: str, assignment: str, files, folder, expected: list[str],
           report: CollectReport, root: Path, limits=None) -> None:
    limits = limits or submission_limits()
    target = course_dir / "submitted" / student / assignment
    for folder_of_student in (target.parent, target):
        if folder_of_student.is_symlink():
            report.problems.append(Problem(f"{student}/{assignment}", f"{folder_of_student} is a symbolic link: "
                                                                      "refused (nothing is written through it)"))
            return
    staged = []
    for path, file in files:
        text, note = check_notebook(path, limits.notebook_bytes)
        rel = path.relative_to(root).as_posix()
        if text is None:
            report.problems.append(Problem(rel, note))
            continue
        name = file
        if name not in expected:
            base = re.sub(r"(-\d+| \(\d+\)|_\d+)$", "", name)
            if base in expected:
                name, note = base, (note + "; " if note else "") + f"renamed from {file}"
            elif len(expected) == 1 and len(files) == 1:
                name, note = expected[0], (note + "; " if note else "") + f"renamed from {file} (only notebook)"
            else:
                report.problems.append(Problem(rel, f"not a notebook of {assignment} (expected "
                                                    f"{', '.join(e + '.ipynb' for e in expected)})"))
                continue
        staged.append((name, text, note, rel))
    if not staged and (folder is None or files):
        return  # nothing usable: the bad files are in the report, the gradebook stays as it was
    extras = []
    if folder is not None:  # nbgrader layout: the student's other files come along (never the notebooks' originals)
        for extra in sorted(folder.iterdir()):
            if extra.suffix == ".ipynb" or extra.name in {"__MACOSX", ".ipynb_checkpoints"}:
                continue
            try:
                if stat.S_ISREG(os.lstat(extra).st_mode):  # folders are not copied; links and special files are
                    extras.append(extra)                   # already in the report
            except OSError as exc:
                report.problems.append(Problem(extra.relative_to(root).as_posix(), str(exc)))
    if target.exists():
        shutil.rmtree(target)
    target.mkdir(parents=True)
    for extra in extras:  # streamed: never held in memory
        try:
            copy_regular(extra, target / extra.name, limits.file_bytes)
        except (OSError, RefusedFile) as exc:
            report.problems.append(Problem(extra.relative_to(root).as_posix(), str(exc)))
    for name, text, note, rel in staged:
        (target / f"{name}.ipynb").write_text(text)
        report.collected.append(Collected(student, assignment, name, rel, note))
    if not staged:
        report.problems.append(Problem(f"{student}/{assignment}", "no notebook submitted (graded as missing)"))
    if not (target / "timestamp.txt").exists():
        stamp = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M:%S.%f %Z")
        (target / "timestamp.txt").write_text(stamp)


def _zip_refusal(member: zipfile.ZipInfo, limits) -> str | None:
    """Why a zip entry is not extracted: a link or special file (Unix mode in external_attr), too large."""
    kind_bits = stat.S_IFMT(member.external_attr >> 16)  # 0: no Unix type recorded (Windows tools, writestr)
    if kind_bits not in (0, stat.S_IFREG, stat.S_IFDIR):
        kind = "symbolic link" if kind_bits == stat.S_IFLNK else "special file"
        return f"{kind} in the zip refused (only plain files are extracted)"
    limit = _zip_limit(member, limits)
    if member.file_size > limit:
        return submission_files.too_large(member.file_size, limit,
                                          "notebook" if member.filename.endswith(".ipynb") else "file")
    return None


def _zip_limit(member: zipfile.ZipInfo, limits) -> int:
    return limits.notebook_bytes if member.filename.endswith(".ipynb") else limits.file_bytes


def archive_refusal(members: list[zipfile.ZipInfo], limits) -> str | None:
    """Why a whole zip is refused before anything is extracted (its directory against SubmissionLimits)."""
    if len(members) > limits.archive_entries:
        return (f"zip refused: {len(members)} entries, over the limit of {limits.archive_entries} "
                f"(SubmissionLimits.archive_entries); nothing was extracted")
    declared = sum(m.file_size for m in members)
    if declared > limits.archive_bytes:
        return (f"zip refused: it expands to {submission_files.size_text(declared)}, over the limit of "
                f"{submission_files.size_text(limits.archive_bytes)} (SubmissionLimits.archive_bytes); "
                "nothing was extracted")
    return None


class UnzippedSource:
    """The input as a folder: itself, or a zip extracted into a temp folder (safe paths and plain files only;
    what is skipped is listed in `problems`). A zip over the archive limits is not extracted at all: the folder
    is empty and `problems` says why."""

    def __init__(self, source: Path, limits=None):
        self.source = source
        self.limits = limits or submission_limits()
        self._tmp = None
        self.problems: list[Problem] = []

    def __enter__(self) -> Path:
        if self.source.is_dir():
            return self.source
        if not zipfile.is_zipfile(self.source):
            raise ValueError(f"{self.source} is neither a folder nor a zip file")
        self._tmp = tempfile.TemporaryDirectory(prefix="ag-collect-")
        root = Path(self._tmp.name)
        base = root.resolve()
        with zipfile.ZipFile(self.source) as archive:
            members = archive.infolist()
            refused = archive_refusal(members, self.limits)
            if refused:
                self.problems.append(Problem(self.source.name, refused))
                return root
            extracted = 0
            for member in members:
                if member.is_dir():
                    continue
                target = (root / member.filename).resolve()
                if base not in target.parents:
                    self.problems.append(Problem(member.filename, "unsafe path in the zip refused (absolute or ../)"))
                    continue
                reason = _zip_refusal(member, self.limits)
                if reason is None and target.exists():
                    reason = "duplicate entry in the zip refused (the first one is kept)"
                if reason:
                    self.problems.append(Problem(member.filename, reason))
                    continue
                limit = _zip_limit(member, self.limits)
                try:
                    target.parent.mkdir(parents=True, exist_ok=True)
                    with archive.open(member) as src, open(target, "xb") as dst:
                        copied = 0
                        while chunk := src.read(1024 * 1024):
                            copied += len(chunk)
                            extracted += len(chunk)
                            if copied > limit:
                                raise RefusedFile(submission_files.too_large(copied, limit))
                            if extracted > self.limits.archive_bytes:  # its directory lied about the sizes
                                raise RefusedFile(f"the zip expands to more than its limit of "
                                                  f"{submission_files.size_text(self.limits.archive_bytes)}")
                            dst.write(chunk)
                except (OSError, RefusedFile, zipfile.BadZipFile, RuntimeError, NotImplementedError) as exc:
                    if target.is_file() and not target.is_symlink():
                        target.unlink()
                    self.problems.append(Problem(member.filename, f"not extracted ({exc})"))
                    if extracted > self.limits.archive_bytes:
                        break
        return root

    def __exit__(self, *exc):
        if self._tmp is not None:
            self._tmp.cleanup()
