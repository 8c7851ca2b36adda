"""The coordinator: one job per submitted notebook, graded in parallel on Dask, results written here only.

One code path for both set-ups: `Client(LocalCluster(...))` (worker processes on this machine, one thread each,
default one per core) or `Client("tcp://host:port")` (an existing cluster, --scheduler). Workers get each
submission's content in the job (notebook JSON, cell records, the assignment's extra files such as provided.py),
so they need no shared filesystem; they return the graded notebook and its scores, and this process alone
writes the gradebook and autograded/.

Resumable: a notebook whose content hash (submission + released cells + files + limits + grading config) matches
its last successful run is skipped unless `force`.

Grading is configured like nbgrader: the course's nbgrader_config.py (and the nbgrader_config.py files on Jupyter's
config path, see `coursedir.nbgrader_config`) sets the sandbox's limits (`sandbox.course_limits`: Execute.timeout,
Execute.startup_timeout, SandboxLimits.*) and configures nbgrader's preprocessors on the workers (the job carries
their sections of the config). Jobs and results are dataclasses (`jobs.GradingJob`, `jobs.GradingResult`).

nbgrader parity (autograder.submissions.admission, nbgrader's own code): before grading, each submission goes
through nbgrader's Autograde.init_assignment (roster check honouring `Autograde.create_student`, timestamp,
timestamp.txt and the assignment's files into autograded/); after grading, nbgrader's AssignLatePenalties
prices late work with the configured plugin. A refused student is reported in `GradeSummary.refused`.

A submission never reaches outside its folder (autograder.submissions.files): before nbgrader sees it, the folder
course/submitted/<student>/<assignment>/ is scanned without following anything; a link (the folder itself, the
student's folder, a notebook or any other file), a hard link, a FIFO, socket or device, or a notebook over
MAX_NOTEBOOK_BYTES makes that submission fail with a message naming the file (every notebook scores 0, status
"error", the reason in its notes and on stderr), and the batch goes on. An unreadable timestamp.txt counts as no
timestamp (no late penalty) and the notebooks are flagged for review ("timestamp-unreadable"). Any other failure
while preparing one submission costs that submission only, in the same way.

provided.py of a course assignment (04-07) is always generated here from solutions/ (the grader is trusted),
whatever the release or course/source hold, so grading never depends on whether it was released to students.
"""
from __future__ import annotations

import contextlib
import dataclasses
import fnmatch
import hashlib
import json
import os
import sys
from pathlib import Path

import sqlalchemy as sa
from nbgrader.api import MissingEntry

from autograder.submissions import files as submission_files
from autograder.course.coursedir import NOTEBOOK_IGNORE, course_id, default_db_url
from autograder.gradebook.store import RunsTable, notebook_cells, open_gradebook, record_result
from autograder.grade.jobs import GradingJob, GradingResult, preprocessor_config
from autograder.submissions.admission import StudentRefused, SubmissionRules
from autograder.sandbox.limits import course_limits, Limits, worker_memory_bytes
from autograder.course.provided import PROVIDED_FILENAME, build_provided_source, provided_topics
from autograder.submissions.files import RefusedFile, read_regular

MAX_EXTRA_FILE_BYTES = 50 * 1024 * 1024
WORKER_DEATHS_ALLOWED = 1  # a submission whose worker died is graded once more; a second death fails it


class GradingError(RuntimeError):
    """The instructor must act (nothing released, unknown assignment...)."""


@dataclasses.dataclass
class GradeSummary:
    assignment: str
    graded: list[dict]  # the runs rows written (gradebook.record_result)
    skipped: list[tuple[str, str]]  # (student, notebook) already graded with the same content
    refused: list[tuple[str, str]] = dataclasses.field(default_factory=list)  # (student, why) not graded at all

    @property
    def held(self) -> list[dict]:
        return [r for r in self.graded if r["held"]]

    @property
    def failed(self) -> list[dict]:
        return [r for r in self.graded if r["status"].startswith("error")]

    def line(self) -> str:
        return (f"{self.assignment}: graded {len(self.graded)} notebook(s), skipped {len(self.skipped)} unchanged, "
                f"{len(self.held)} held for review, {len(self.failed)} failed, {len(self.refused)} student(s) refused")


def assignment_files(course_dir: Path, assignment: str) -> dict[str, bytes]:
    """The assignment's files other than notebooks (provided.py, data), as nbgrader's autograde copies them.

    A course assignment with a provided module (04-07) always gets provided.py freshly generated from solutions/
    (never released to students while gated, so never taken from the release or trusted from course/source)."""
    source = Path(course_dir) / "source" / assignment
    files: dict[str, bytes] = {}
    total = 0
    for path in sorted(source.rglob("*")):
        rel = path.relative_to(source)
        if not path.is_file() or path.suffix == ".ipynb" or any(
                fnmatch.fnmatch(part, pattern) for part in rel.parts for pattern in NOTEBOOK_IGNORE):
            continue
        total += path.stat().st_size
        if total > MAX_EXTRA_FILE_BYTES:
            raise GradingError(f"files of {assignment} exceed {MAX_EXTRA_FILE_BYTES} bytes; keep data out of source/")
        files[rel.as_posix()] = path.read_bytes()
    try:
        needs_provided = bool(provided_topics(assignment))
    except ValueError:  # not named like a course assignment (NN_name): its own files only
        needs_provided = False
    if needs_provided:
        files[PROVIDED_FILENAME] = build_provided_source(assignment).encode("utf-8")
    return files


def submission_problems(folder: Path, notebooks,
                        notebook_bytes: int = submission_files.MAX_NOTEBOOK_BYTES) -> list[str]:
    """Why the submission in `folder` must not be graded (links, special files, oversized notebooks), or []."""
    problems = []
    student_dir = folder.parent
    if student_dir.is_symlink():
        return [f"{student_dir.name}/ is a symbolic link: refused (grade never follows links)"]
    for rel, reason in submission_files.scan_tree(folder):
        where = folder.name if rel == "." else f"{folder.name}/{rel}"
        problems.append(f"{where}: {reason}")
    if problems:
        return problems
    for notebook in notebooks:
        path = folder / f"{notebook}.ipynb"
        if path.is_file() and path.stat().st_size > notebook_bytes:
            problems.append(f"{notebook}.ipynb: " + submission_files.too_large(
                path.stat().st_size, notebook_bytes, "notebook"))
    return problems


def content_hash(nb_bytes: bytes | None, cells: dict, files: dict[str, bytes], limits: Limits,
                 config: dict | None = None) -> str:
    """What decides a grade: the submission, the released cells, the files, the limits and the grading config."""
    digest = hashlib.sha256()
    digest.update(nb_bytes if nb_bytes is not None else b"<missing>")
    digest.update(json.dumps(cells, sort_keys=True, default=str).encode())
    for name in sorted(files):
        digest.update(name.encode() + hashlib.sha256(files[name]).digest())
    digest.update(json.dumps(limits.to_dict(), sort_keys=True).encode())
    if config:
        digest.update(json.dumps(config, sort_keys=True, default=repr).encode())
    return digest.hexdigest()


@dataclasses.dataclass
class Plan:
    """What `build_jobs` decided for one assignment."""
    jobs: list[GradingJob]
    skipped: list[tuple[str, str]]  # (student, notebook) unchanged since its last successful run
    timestamps: dict  # student -> submission time (None without timestamp.txt)
    admitted: list[str]  # students that passed nbgrader's init_assignment (graded or skipped)
    refused: list[tuple[str, str]]  # (student, nbgrader's reason)
    failed: list[GradingResult] = dataclasses.field(default_factory=list)  # decided here: submissions refused
    problems: list[tuple[str, str]] = dataclasses.field(default_factory=list)  # (student, message) to report


def build_jobs(course_dir: Path, db_url: str, assignment: str, students=None, force=False, *,
               limits: Limits, rules: SubmissionRules | None = None) -> Plan:
    """Jobs for every submitted notebook of `assignment` (or of `students`), after nbgrader's init_assignment.

    `limits`: this grading run's, resolved once by the caller (`sandbox.course_limits`)."""
    course_dir = Path(course_dir)
    rules = rules or SubmissionRules(course_dir, db_url)
    config = preprocessor_config(rules.config)
    cid = course_id(course_dir)
    with open_gradebook(db_url=db_url, course=cid) as gb:
        try:
            gb_assignment = gb.find_assignment(assignment)
        except MissingEntry:
            raise GradingError(f"assignment {assignment!r} is not in the gradebook: release it first "
                               f"(autograder release {assignment})") from None
        cells = {nb.name: notebook_cells(gb, assignment, nb.name) for nb in gb_assignment.notebooks}
        alembic_version = gb.db.execute(sa.text("SELECT version_num FROM alembic_version")).scalar()
    if not cells:
        raise GradingError(f"assignment {assignment!r} has no notebooks in the gradebook: release it again")
    files = assignment_files(course_dir, assignment)
    notebook_bytes = submission_files.submission_limits(rules.config).notebook_bytes
    submitted = course_dir / "submitted"
    wanted = set(students) if students else None
    student_dirs = sorted(p / assignment for p in submitted.iterdir()
                          if os.path.lexists(p / assignment)) if submitted.is_dir() else []
    plan = Plan([], [], {}, [], [])
    with RunsTable(db_url) as runs:
        for folder in student_dirs:
            student = folder.parent.name
            if (wanted is not None and student not in wanted) or rules.excluded(student):
                continue
            base = {"assignment": assignment, "student": student, "course_id": cid}
            admitted = admit_submission(plan, rules, folder, base, cells, notebook_bytes)
            if admitted is None:
                continue
            notebooks, flags = admitted
            for notebook, nb_cells in cells.items():
                job = GradingJob(notebook=notebook, cells=nb_cells, **base,
                                 nb_json=None if notebooks[notebook] is None else
                                 notebooks[notebook].decode("utf-8", errors="replace"),
                                 content_hash=content_hash(notebooks[notebook], nb_cells, files, limits, config),
                                 files=files, limits=limits, config=config, alembic_version=alembic_version,
                                 coordinator_flags=tuple(flags))
                if force or needs_grading(runs.get(assignment, notebook, student), job.content_hash):
                    plan.jobs.append(job)
                else:
                    plan.skipped.append((student, notebook))
    if wanted:
        unknown = wanted - {p.parent.name for p in student_dirs}
        if unknown:
            raise GradingError(f"no submission of {assignment} for: {', '.join(sorted(unknown))}")
    return plan


def admit_submission(plan: Plan, rules: SubmissionRules, folder: Path, base: dict, cells: dict,
                     notebook_bytes: int) -> tuple[dict, list] | None:
    """Admit one student's submission: its files pass the checks of `submission_files`, nbgrader's
    init_assignment accepts the student, its notebooks are read. Returns ({notebook: bytes or None}, coordinator
    flags), or None when it was refused or failed (recorded in `plan`; the batch goes on)."""
    assignment, student = base["assignment"], base["student"]
    problems = submission_problems(folder, list(cells), notebook_bytes)
    if problems:
        _fail_submission(plan, base, cells, "refused: " + "; ".join(problems[:5]))
        return None
    try:
        stamp_problem = rules.timestamp_problem(assignment, student)
        rules.admit(assignment, student, list(cells))
        stamp = rules.timestamp(assignment, student)
    except StudentRefused as exc:
        plan.refused.append((student, str(exc)))
        return None
    except Exception as exc:  # noqa: BLE001 - one broken submission never stops the batch
        _fail_submission(plan, base, cells, f"could not be prepared for grading: {type(exc).__name__}: {exc}")
        return None
    flags = []
    if stamp_problem:
        message = (f"{stamp_problem}: graded with the submission time unknown (no late penalty); "
                   "check when it was submitted")
        flags.append({"code": "timestamp-unreadable", "severity": "review", "cell": "timestamp.txt",
                      "message": message})
        plan.problems.append((student, message))
    notebooks = {}
    try:
        for notebook in cells:
            path = folder / f"{notebook}.ipynb"
            notebooks[notebook] = read_regular(path, notebook_bytes, "notebook") if os.path.lexists(path) else None
    except RefusedFile as exc:  # changed since the scan
        _fail_submission(plan, base, cells, f"refused: {notebook}.ipynb: {exc}")
        return None
    plan.admitted.append(student)
    plan.timestamps[student] = stamp
    return notebooks, flags


def needs_grading(previous: dict | None, digest: str) -> bool:
    """Job or skip: a notebook is graded again unless its last run graded the very same content and settings
    (`content_hash`) without an error."""
    return not (previous and previous["content_hash"] == digest and not previous["status"].startswith("error"))


def _fail_submission(plan: Plan, base: dict, cells: dict, message: str) -> None:
    """Every notebook of one submission fails with `message` (recorded without a worker; the batch goes on)."""
    plan.problems.append((base["student"], message))
    for notebook, nb_cells in cells.items():
        job = GradingJob(notebook=notebook, cells=nb_cells, **base)
        plan.failed.append(GradingResult.zero(job, "error", message))


def assign_late_penalties(rules: SubmissionRules, course_dir: Path, plan: Plan, assignment: str) -> None:
    """nbgrader's AssignLatePenalties on every submitted notebook of the admitted students (graded or unchanged:
    a new timestamp on the same content still changes the penalty)."""
    notebooks = sorted({job.notebook for job in plan.jobs} | {nb for _, nb in plan.skipped})
    for student in plan.admitted:
        for notebook in notebooks:
            if (Path(course_dir) / "submitted" / student / assignment / f"{notebook}.ipynb").is_file():
                try:
                    rules.late_penalties(assignment, student, notebook)
                except Exception as exc:  # noqa: BLE001 - one student's penalty never stops the others'
                    print(f"autograder grade: {assignment}/{student}: late penalty not applied: "
                          f"{type(exc).__name__}: {exc}", file=sys.stderr)


@contextlib.contextmanager
def dask_client(workers: int | None = None, scheduler: str | None = None, memory_bytes: int = 0):
    """A Dask client on an existing scheduler (`scheduler` address) or on a LocalCluster of worker processes,
    each with at most `memory_bytes` of memory (0: no limit; see sandbox.GradingWorkers)."""
    from distributed import Client, LocalCluster

    if scheduler:
        with Client(scheduler, timeout="30s") as client:
            yield client
        return
    import dask

    import autograder.grade.worker  # noqa: F401  (imported once here, inherited by forked workers)

    n = workers or os.cpu_count() or 1
    # fork: workers start in ~1 s instead of re-importing everything (spawn takes 10-20 s on a busy machine);
    # safe here because this process never initialises CUDA. Other platforms keep Dask's default.
    key = "distributed.worker.multiprocessing-method"
    method = "fork" if sys.platform.startswith("linux") else dask.config.get(key)
    # a worker over its memory limit is restarted by its nanny; the submission it held is tried once more on
    # another worker, then fails with KilledWorker (WORKER_DIED): a dead worker costs only what it held
    with dask.config.set({key: method, "distributed.scheduler.allowed-failures": WORKER_DEATHS_ALLOWED}), \
            LocalCluster(n_workers=n, threads_per_worker=1, processes=True, dashboard_address=":0",
                         memory_limit=worker_memory_limit(memory_bytes, method), silence_logs=40) as cluster, \
            Client(cluster) as client:
        yield client


def worker_memory_limit(memory_bytes: int, method: str) -> int:
    """Dask's memory limit for a local worker that may use `memory_bytes` of its own (0: none).

    A forked worker starts with this process's resident pages: shared copy-on-write, yet counted in the worker's
    RSS, which is what the nanny compares with the limit. Without adding them, a grading command that has grown
    (a notebook server, a test run with torch loaded) starts workers that are over the limit before their first
    submission: paused (over 80%) or restarted forever (over 95%), and grading never ends."""
    if not memory_bytes:
        return 0
    if method != "fork":
        return int(memory_bytes)
    import psutil

    return int(memory_bytes) + psutil.Process().memory_info().rss


def write_graded_notebook(course_dir: Path, result: GradingResult) -> None:
    folder = Path(course_dir) / "autograded" / result.student / result.assignment
    folder.mkdir(parents=True, exist_ok=True)
    target = folder / f"{result.notebook}.ipynb"
    if result.graded_nb:
        target.write_text(result.graded_nb)
    elif target.exists():
        target.unlink()  # a stale graded copy must not outlive a submission that can no longer be graded


def grade(course_dir, assignment: str, *, db_url: str | None = None, students=None, workers: int | None = None,
          scheduler: str | None = None, force: bool = False, limits: Limits | None = None,
          limit_overrides: dict | None = None, progress: bool = True) -> GradeSummary:
    """Autograde every submitted notebook of `assignment` in parallel; the caller's process writes the results.
    `limits`, `limit_overrides`: see `grade_many`."""
    return grade_many(course_dir, [assignment], db_url=db_url, students=students, workers=workers,
                      scheduler=scheduler, force=force, limits=limits, limit_overrides=limit_overrides,
                      progress=progress)[0]


def grade_many(course_dir, assignments: list[str], *, db_url: str | None = None, students=None,
               workers: int | None = None, scheduler: str | None = None, force: bool = False,
               limits: Limits | None = None, limit_overrides: dict | None = None,
               progress: bool = True) -> list[GradeSummary]:
    """Autograde several assignments on one cluster (all their notebooks share the workers).

    The run's limits are resolved here, once: the course config's (`sandbox.course_limits`) with
    `limit_overrides` (the CLI's --cell-timeout ...), unless a whole `limits` value is given (tests, benchmarks).

    With local workers, a machine that cannot jail student code refuses before anything runs (JailUnavailable,
    naming the package to install); on a cluster (`scheduler`), each worker refuses its own jobs."""
    if scheduler is None:
        from autograder.sandbox import jail

        jail.bwrap_path()
    course_dir = Path(course_dir).resolve()
    db_url = db_url or default_db_url(course_dir)
    rules = SubmissionRules(course_dir, db_url)
    limits = limits or course_limits(rules.config, **(limit_overrides or {}))
    summaries, plans, jobs, timestamps = {}, {}, [], {}
    for assignment in assignments:
        plan = plans[assignment] = build_jobs(course_dir, db_url, assignment, students, force, limits=limits,
                                              rules=rules)
        summaries[assignment] = GradeSummary(assignment, [], plan.skipped, plan.refused)
        jobs.extend(plan.jobs)
        timestamps.update({(assignment, s): t for s, t in plan.timestamps.items()})
        for student, message in plan.problems:
            print(f"autograder grade: {assignment}/{student}: {message}", file=sys.stderr)
    decided = [result for plan in plans.values() for result in plan.failed]
    if decided:
        record_decided(course_dir, db_url, decided, summaries)
    if jobs:
        run_jobs(course_dir, db_url, jobs, timestamps, summaries, workers, scheduler, progress, assignments,
                 worker_memory_bytes(rules.config))
    for assignment, plan in plans.items():  # after the coordinator's session is closed
        assign_late_penalties(rules, course_dir, plan, assignment)
    for summary in summaries.values():
        summary.graded.sort(key=lambda r: (r["student"], r["notebook"]))
    return list(summaries.values())


def record_decided(course_dir: Path, db_url: str, results: list[GradingResult], summaries: dict) -> None:
    """Record results decided by the coordinator (refused submissions) as the workers' results are recorded."""
    with RunsTable(db_url) as runs, open_gradebook(course_dir, db_url=db_url) as gb:
        for result in results:
            write_graded_notebook(course_dir, result)
            summaries[result.assignment].graded.append(record_result(gb, runs, result))


def worker_failure(exc: BaseException, memory_bytes: int) -> str:
    """Why a submission could not be graded when its worker failed (told to the instructor, never student text)."""
    if type(exc).__name__ == "KilledWorker":
        limit = f" (each may use {memory_bytes} bytes of memory: GradingWorkers.memory_bytes)" if memory_bytes else ""
        return (f"the grading worker died {WORKER_DEATHS_ALLOWED + 1} times while grading this submission{limit}; "
                "it was not graded (the other submissions were)")
    return f"the grading worker failed: {type(exc).__name__}"


def run_jobs(course_dir: Path, db_url: str, jobs: list[GradingJob], timestamps: dict, summaries: dict,
             workers: int | None, scheduler: str | None, progress: bool, assignments: list[str],
             memory_bytes: int = 0) -> None:
    """Grade `jobs` on Dask; this process records each result as it arrives (the only gradebook writer)."""
    from distributed import as_completed
    from tqdm.auto import tqdm

    from autograder.grade.worker import grade_job

    with RunsTable(db_url) as runs, dask_client(workers, scheduler, memory_bytes) as client, \
            open_gradebook(course_dir, db_url=db_url) as gb:
        # longest first (by notebook size, a rough proxy) keeps the workers busy to the end
        ordered = sorted(jobs, key=lambda job: -len(job.nb_json or ""))
        futures = {client.submit(grade_job, job, key=f"grade-{job.content_hash[:16]}-{job.key}",
                                 pure=False, retries=1): job for job in ordered}
        label = assignments[0] if len(assignments) == 1 else f"{len(assignments)} assignments"
        bar = tqdm(total=len(futures), desc=f"grading {label}", unit="nb", disable=not progress)
        for future in as_completed(futures):
            job = futures[future]
            try:
                result = future.result()
            except Exception as exc:  # noqa: BLE001 - a lost worker costs only this submission
                result = GradingResult.zero(job, "error", worker_failure(exc, memory_bytes))
            result.flags = list(result.flags) + list(job.coordinator_flags)
            write_graded_notebook(course_dir, result)
            row = record_result(gb, runs, result, timestamps.get((result.assignment, result.student)))
            summaries[result.assignment].graded.append(row)
            bar.update(1)
        bar.close()
