"""Import student submissions into the course's submitted/ folder, in nbgrader's layout.

Accepted input (a folder or a .zip):
- nbgrader layout     <student>/<assignment>/<notebook>.ipynb  (other files of the folder are copied too)
- LMS folders         <student>/<file>.ipynb  ("download in folders"; Moodle's <name>_<id>_assignsubmission_file_
                      gives <name>): the file's own name only tells the assignment (`03_attention.ipynb`, or a
                      flat name below, whose student part is ignored with a note)
- flat LMS naming     <student>_<assignment>_<file>.ipynb      (assignment names may contain "_"; also inside a
                      folder named after the assignment)
- Canvas downloads    <student>[_late]_<user id>_<submission id>_<file>.ipynb  (assignment from <file>)
The student is what the LMS or exchange says (the folder, or the LMS's prefix of a flat name), never a name the
student chose inside their own folder. Two files claiming the same notebook of one (student, assignment) are
both reported and neither is collected (submitted/ keeps what it had): never one silently replacing the other.
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

One submission's files together are capped (`submission_bytes`): its notebooks first, then its other files by
name; a file that would take the total over the cap is refused with a reason (in a zip, before it is extracted;
entries collect never uses are not extracted). A zip entry whose name the filesystem cannot hold is refused with
a reason, and the rest of the class is collected.

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
# Moodle's "download submissions in folders": <name>_<participant id>_assignsubmission_<plugin>_/<the student's file>
MOODLE_FOLDER = re.compile(r"(?P<student>.+?)_(?P<participant>\d+)_assignsubmission_[a-z]+_?")
COPY_SUFFIX = re.compile(r"(-\d+| \(\d+\)|_\d+)$")  # `ps1 (1)`, `ps1-2`, `ps1_3`: a browser's or LMS's copy


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
    match = CANVAS.match(stem)  # first: its file part is the student's own name, which may look flat itself
    if match:
        file = match["file"]
        for assignment in sorted(notebooks, key=len, reverse=True):
            if file == assignment or file.startswith(assignment) or file in notebooks[assignment]:
                return match["student"], assignment, file
    for assignment in sorted(notebooks, key=len, reverse=True):
        match = re.match(rf"^(?P<student>.+?)_{re.escape(assignment)}_(?P<file>.+)$", stem)
        if match:
            return match["student"], assignment, match["file"]
    return None


def _assignment_of(name: str, notebooks: dict[str, list[str]]):
    """(assignment, file, student the name mentions or None) of a notebook's own file name, or None."""
    flat = _match_flat(name, notebooks)
    if flat:
        return flat[1], flat[2], flat[0]
    stem = name[:-len(".ipynb")]
    base = COPY_SUFFIX.sub("", stem)
    owners = [a for a in notebooks if base == a or base in notebooks[a]]
    return (owners[0], stem, None) if len(owners) == 1 else None


UNKNOWN = ("unknown assignment (name the file <student>_<assignment>_<notebook>.ipynb or use "
           "<student>/<assignment>/<notebook>.ipynb)")


def _place(rel: tuple[str, ...], notebooks: dict[str, list[str]]):
    """(student, assignment, notebook file stem, note) of a notebook at relative path `rel` in the input, None
    (not a submission), or a reason string.

    The student is what the LMS or exchange says: the folder (`<student>/<assignment>/<nb>.ipynb`, or
    `<student>/<file>.ipynb` as LMS "download in folders" exports keep the student's own file name), or the LMS's
    prefix of a flat name. A name inside a student's folder only ever tells the assignment, never the student."""
    name = rel[-1]
    if len(rel) >= 3 and rel[-2] in notebooks:
        return rel[-3], rel[-2], name[:-len(".ipynb")], ""
    if len(rel) >= 3 and rel[-3] in notebooks:  # <assignment>/<student>/<nb>.ipynb is nbgrader's release/feedback
        return None
    if len(rel) == 1 or (len(rel) == 2 and rel[0] in notebooks):  # a flat export, maybe in its assignment's folder
        flat = _match_flat(name, notebooks)
        return (*flat, "") if flat else UNKNOWN
    folder = rel[-2]
    moodle = MOODLE_FOLDER.fullmatch(folder)
    student = moodle["student"] if moodle else folder
    found = _assignment_of(name, notebooks)
    if found is None:
        return UNKNOWN
    assignment, file, named = found
    note = f"its file name names {named}: collected as {student}'s (the folder's)" if named not in (None, student) \
        else ""
    return student, assignment, file, note


def _needed(rel: tuple[str, ...], notebooks: dict[str, list[str]]):
    """Which submission a zip entry belongs to (its budget of SubmissionLimits.submission_bytes), or None when
    collect never uses it (it is not extracted)."""
    if rel[-1].endswith(".ipynb"):
        where = _place(rel, notebooks)
        if where is None:
            return None
        return where[:2] if isinstance(where, tuple) else ("", "/".join(rel))
    if len(rel) >= 3 and rel[-2] in notebooks:  # another file of a nbgrader folder comes along
        return rel[-3], rel[-2]
    return None


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


def collect(course_dir, source, db_url: str | None = None, add_students: bool = True) -> CollectReport:
    """Import submissions from folder or zip `source` into `course_dir`/submitted/ (see the module doc).

    `add_students=False` (the exchange, where the course refuses unknown students: `Autograde.create_student =
    False`): a submission by somebody not on the roster is collected but its student is not added (grading then
    refuses it, as nbgrader does), and the report says so."""
    from autograder.gradebook.store import open_gradebook

    course_dir = Path(course_dir).resolve()
    source = Path(source)
    if not source.exists():
        raise FileNotFoundError(f"nothing to collect at {source}")
    notebooks = assignment_notebooks(course_dir)
    from autograder.course.coursedir import nbgrader_config

    limits = submission_limits(nbgrader_config(course_dir))
    report = CollectReport()
    unzipped = UnzippedSource(source, limits, needed=lambda rel: _needed(rel, notebooks))
    with unzipped as root:
        report.problems.extend(unzipped.problems)
        placed, folders = _submissions_in(root, notebooks, report.problems)
        alembic_on_path()  # the gradebook may be new
        with open_gradebook(course_dir, db_url=db_url) as gb:
            known = {s.id for s in gb.students}
            for (student, assignment), files in sorted(placed.items()):
                try:
                    _store(course_dir, student, assignment, files, folders.get((student, assignment)),
                           notebooks[assignment], report, root, limits)
                except OSError as exc:  # one submission that cannot be written never stops the class
                    report.problems.append(Problem(f"{student}/{assignment}", f"not collected ({exc})"))
                if student not in known and not add_students:
                    report.problems.append(Problem(f"{student}/{assignment}", (
                        f"{student} is not on the roster (Autograde.create_student = False): collected, not "
                        f"graded; if legitimate, add the student (`nbgrader db student add {student}`) and grade "
                        "again")))
                elif student not in known:
                    gb.update_or_create_student(student)
                    known.add(student)
                    report.new_students.append(student)
    return report


def _submissions_in(root: Path, notebooks: dict[str, list[str]], problems: list[Problem]):
    """(placed, folders) of the input folder `root`: (student, assignment) -> its notebooks as (path, notebook name,
    note), and -> its nbgrader folder (whose other files come along); a folder without a notebook is a submission
    too (graded as missing). What cannot be placed is reported in `problems`."""
    placed: dict[tuple[str, str], list[tuple[Path, str, str]]] = {}
    folders: dict[tuple[str, str], Path] = {}
    for path in _walk(root, problems):
        rel = path.relative_to(root).as_posix()
        parts = path.relative_to(root).parts
        if path.suffix != ".ipynb":
            if len(parts) >= 3 and parts[-2] in notebooks:  # a non-notebook file in a nbgrader folder
                folders.setdefault((parts[-3], parts[-2]), path.parent)
            continue
        where = _place(parts, notebooks)
        if where is None:
            continue
        if isinstance(where, str):
            problems.append(Problem(rel, where))
            continue
        student, assignment, file, note = where
        if not STUDENT_ID.fullmatch(student):
            problems.append(Problem(rel, f"unusable student id {student!r}"))
            continue
        placed.setdefault((student, assignment), []).append((path, file, note))
        if len(parts) >= 3 and parts[-2] == assignment:
            folders.setdefault((student, assignment), path.parent)
    for key in folders:
        placed.setdefault(key, [])
    return placed, folders


def _join(*notes: str) -> str:
    return "; ".join(n for n in notes if n)


def _store(course_dir: Path, student: str, assignment: str, files, folder, expected: list[str],
           report: CollectReport, root: Path, limits=None) -> None:
    """One student's submission of one assignment into submitted/<student>/<assignment>/, replacing what was there:
    its notebooks under the assignment's names, then the other files of its nbgrader `folder`, within the
    submission's limit. Nothing is written when two files claim one notebook, or when nothing usable is left."""
    limits = limits or submission_limits()
    target = course_dir / "submitted" / student / assignment
    for folder_of_student in (target.parent, target):
        if folder_of_student.is_symlink():
            report.problems.append(Problem(f"{student}/{assignment}", f"{folder_of_student} is a symbolic link: "
                                                                      "refused (nothing is written through it)"))
            return
    staged = _staged_notebooks(files, assignment, expected, report, root, limits)
    if _clashes_reported(staged, student, assignment, report):
        return  # never one silently replacing the other: the whole submission waits for the instructor
    if not staged and (folder is None or files):
        return  # nothing usable: the bad files are in the report, the gradebook stays as it was
    extras = _other_files(folder, report, root) if folder is not None else []
    if target.exists():
        shutil.rmtree(target)
    target.mkdir(parents=True)
    stored = _write_submission(target, student, assignment, staged, extras, report, root, limits)
    if not stored:
        report.problems.append(Problem(f"{student}/{assignment}", "no notebook submitted (graded as missing)"))
    if not (target / "timestamp.txt").exists():
        stamp = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M:%S.%f %Z")
        (target / "timestamp.txt").write_text(stamp)


def _staged_notebooks(files, assignment: str, expected: list[str], report: CollectReport, root: Path,
                      limits) -> list[tuple[str, str, str, str]]:
    """(notebook name, v4 text, note, input path) of each of `files` that is a notebook of the assignment (a copy's
    name, or the only notebook of a one-notebook assignment, renamed); the others are reported."""
    staged = []
    for path, file, placed_note in files:
        text, note = check_notebook(path, limits.notebook_bytes)
        rel = path.relative_to(root).as_posix()
        if text is None:
            report.problems.append(Problem(rel, note))
            continue
        note = _join(placed_note, note)
        name = file
        if name not in expected:
            base = COPY_SUFFIX.sub("", name)
            if base in expected:
                name, note = base, _join(note, f"renamed from {file}")
            elif len(expected) == 1 and len(files) == 1:
                name, note = expected[0], _join(note, f"renamed from {file} (only notebook)")
            else:
                report.problems.append(Problem(rel, f"not a notebook of {assignment} (expected "
                                                    f"{', '.join(e + '.ipynb' for e in expected)})"))
                continue
        staged.append((name, text, note, rel))
    return staged


def _clashes_reported(staged, student: str, assignment: str, report: CollectReport) -> bool:
    """Whether two staged files claim the same notebook; each of them is then reported."""
    claims: dict[str, list[str]] = {}
    for name, _, _, rel in staged:
        claims.setdefault(name, []).append(rel)
    clashes = {name: rels for name, rels in claims.items() if len(rels) > 1}
    for name, rels in clashes.items():
        for rel in rels:
            others = ", ".join(r for r in rels if r != rel)
            report.problems.append(Problem(rel, (
                f"two files claim {student}'s {assignment}/{name}.ipynb (this one and {others}): both kept aside "
                f"in the input, neither collected, submitted/{student}/{assignment} unchanged; remove one and "
                "collect again")))
    return bool(clashes)


def _other_files(folder: Path, report: CollectReport, root: Path) -> list[Path]:
    """The plain files of a student's nbgrader folder that come along (never the notebooks' originals)."""
    extras = []
    for extra in sorted(folder.iterdir()):
        if extra.suffix == ".ipynb" or extra.name in {"__MACOSX", ".ipynb_checkpoints"}:
            continue
        try:
            if stat.S_ISREG(os.lstat(extra).st_mode):  # folders are not copied; links and special files are
                extras.append(extra)                   # already in the report
        except OSError as exc:
            report.problems.append(Problem(extra.relative_to(root).as_posix(), str(exc)))
    return extras


def _write_submission(target: Path, student: str, assignment: str, staged, extras: list[Path],
                      report: CollectReport, root: Path, limits) -> int:
    """Write the staged notebooks, then stream the other files, into `target` within
    SubmissionLimits.submission_bytes (the notebooks first, then the others by name); returns the notebooks
    stored."""
    total, stored = 0, 0
    for name, text, note, rel in staged:
        data = text.encode("utf-8")
        if total + len(data) > limits.submission_bytes:
            report.problems.append(Problem(rel, over_submission(total, len(data), limits)))
            continue
        total += len(data)
        (target / f"{name}.ipynb").write_bytes(data)
        stored += 1
        report.collected.append(Collected(student, assignment, name, rel, note))
    for extra in extras:  # streamed: never held in memory
        try:
            size = os.lstat(extra).st_size
            if total + size > limits.submission_bytes:
                raise RefusedFile(over_submission(total, size, limits))
            total += copy_regular(extra, target / extra.name, min(limits.file_bytes, limits.submission_bytes - total))
        except (OSError, RefusedFile) as exc:
            report.problems.append(Problem(extra.relative_to(root).as_posix(), str(exc)))
    return stored


def over_submission(used: int, size: int, limits) -> str:
    return (f"refused: this submission's files would total {submission_files.size_text(used + size)}, over the "
            f"{submission_files.size_text(limits.submission_bytes)} per-submission limit "
            "(SubmissionLimits.submission_bytes)")


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


def name_refusal(name: str, root: Path) -> str | None:
    """Why a zip entry's name cannot be a file under `root` on this filesystem (too long), or None."""
    try:
        name_max = os.pathconf(root, "PC_NAME_MAX")
        path_max = os.pathconf(root, "PC_PATH_MAX")
    except (OSError, ValueError):
        name_max, path_max = 255, 4096
    longest = max((len(os.fsencode(part)) for part in name.split("/")), default=0)
    if longest > name_max:
        return (f"file name too long for the filesystem ({longest} bytes in one part of the path, the limit is "
                f"{name_max}): not extracted")
    if len(os.fsencode(str(root))) + 1 + len(os.fsencode(name)) >= path_max:
        return f"path too long for the filesystem (over {path_max} bytes): not extracted"
    return None


class UnzippedSource:
    """The input as a folder: itself, or a zip extracted into a temp folder (safe paths and plain files only;
    what is skipped is listed in `problems`). A zip over the archive limits is not extracted at all: the folder
    is empty and `problems` says why.

    `needed(parts)` (the entry's path parts) says which submission an entry belongs to, or None when it is of no
    use (not extracted). Each submission's entries (its notebooks first) are capped together by
    `SubmissionLimits.submission_bytes`, declared and actual sizes: an entry over it is refused, not extracted.
    An entry whose name the filesystem cannot hold is refused; every other entry is still extracted."""

    def __init__(self, source: Path, limits=None, needed=None):
        self.source = source
        self.limits = limits or submission_limits()
        self.needed = needed or (lambda parts: parts)
        self._tmp = None
        self.problems: list[Problem] = []

    def __enter__(self) -> Path:
        if self.source.is_dir():
            return self.source
        if not zipfile.is_zipfile(self.source):
            raise ValueError(f"{self.source} is neither a folder nor a zip file")
        self._tmp = tempfile.TemporaryDirectory(prefix="ag-collect-")
        root = Path(self._tmp.name)
        with zipfile.ZipFile(self.source) as archive:
            members = archive.infolist()
            refused = archive_refusal(members, self.limits)
            if refused:
                self.problems.append(Problem(self.source.name, refused))
                return root
            self._extract(archive, members, root)
        return root

    def _extract(self, archive: zipfile.ZipFile, members: list[zipfile.ZipInfo], root: Path) -> None:
        """Every needed entry into `root`, the notebooks first; what is refused or fails is in `problems`."""
        base = root.resolve()
        self._extracted = 0  # bytes extracted from the whole zip
        used: dict = {}  # submission -> bytes extracted for it
        for member in sorted(members, key=lambda m: not m.filename.endswith(".ipynb")):  # notebooks first
            if member.is_dir():
                continue
            reason = name_refusal(member.filename, base)
            if reason:
                self.problems.append(Problem(member.filename, reason))
                continue
            target = (root / member.filename).resolve()
            if base not in target.parents:
                self.problems.append(Problem(member.filename, "unsafe path in the zip refused (absolute or ../)"))
                continue
            owner = self.needed(target.relative_to(base).parts)
            if owner is None:
                continue
            reason = _zip_refusal(member, self.limits)
            if reason is None and used.get(owner, 0) + member.file_size > self.limits.submission_bytes:
                reason = over_submission(used.get(owner, 0), member.file_size, self.limits)
            if reason is None and os.path.lexists(target):
                reason = "duplicate entry in the zip refused (the first one is kept)"
            if reason:
                self.problems.append(Problem(member.filename, reason))
                continue
            limit = min(_zip_limit(member, self.limits), self.limits.submission_bytes - used.get(owner, 0))
            try:
                used[owner] = used.get(owner, 0) + self._copy(archive, member, target, limit)
            except (OSError, RefusedFile, zipfile.BadZipFile, RuntimeError, NotImplementedError) as exc:
                try:
                    if target.is_file() and not target.is_symlink():
                        target.unlink()
                except OSError:
                    pass
                self.problems.append(Problem(member.filename, f"not extracted ({exc})"))
                if self._extracted > self.limits.archive_bytes:
                    break

    def _copy(self, archive: zipfile.ZipFile, member: zipfile.ZipInfo, target: Path, limit: int) -> int:
        """Stream one entry into the new file `target` (never held in memory); returns its bytes. Raises
        RefusedFile past `limit` or past the zip's `archive_bytes` in all (its directory lied about the sizes)."""
        copied = 0
        target.parent.mkdir(parents=True, exist_ok=True)
        with archive.open(member) as src, open(target, "xb") as dst:
            while chunk := src.read(1024 * 1024):
                copied += len(chunk)
                self._extracted += len(chunk)
                if copied > limit:
                    raise RefusedFile(submission_files.too_large(copied, limit))
                if self._extracted > self.limits.archive_bytes:  # its directory lied about the sizes
                    raise RefusedFile(f"the zip expands to more than its limit of "
                                      f"{submission_files.size_text(self.limits.archive_bytes)}")
                dst.write(chunk)
        return copied

    def __exit__(self, *exc):
        if self._tmp is not None:
            self._tmp.cleanup()
