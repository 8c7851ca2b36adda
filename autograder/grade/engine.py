"""The coordinator: one job per submitted notebook, graded in parallel on Dask, results written here only.

A grading run (`GradingRun`: the course, the gradebook, the students, the workers or scheduler, the limits) goes
through three steps: plan (plan.py: admit each submission, build its jobs, skip unchanged notebooks), run
(cluster.py: a Dask client on local workers or an existing scheduler; `run_jobs` submits the jobs and records each
result as it arrives) and price (nbgrader's late penalties, plan.assign_late_penalties). Workers get each
submission's content in the job (notebook JSON, cell records, the assignment's extra files such as provided.py),
so they need no shared filesystem; they return the graded notebook and its scores, and this process alone
writes the gradebook and autograded/.

Resumable: a notebook whose content hash (submission + released cells + files + limits + grading config) matches
its last successful run is skipped unless `force`.

Grading is configured like nbgrader: the course's nbgrader_config.py (and the nbgrader_config.py files on Jupyter's
config path, see `coursedir.nbgrader_config`) sets the sandbox's limits (`sandbox.course_limits`: Execute.timeout,
Execute.startup_timeout, SandboxLimits.*) and configures nbgrader's preprocessors on the workers (the job carries
their sections of the config). Jobs and results are dataclasses (`jobs.GradingJob`, `jobs.GradingResult`).
"""
from __future__ import annotations

import dataclasses
import sys
import threading
from pathlib import Path


from autograder.course.coursedir import default_db_url
from autograder.errors import GradingError  # noqa: F401  (raised by plan.py; callers import it from here)
from autograder.gradebook.store import RunsTable, open_gradebook, record_result
from autograder.grade.cluster import dask_client, scheduler_tls, worker_failure, worker_memory_bytes
from autograder.grade.jobs import GradingJob, GradingResult
from autograder.grade.plan import Plan, assign_late_penalties, build_jobs
from autograder.sandbox import enforcement, scratch
from autograder.sandbox.limits import allows_unenforced, course_limits, Limits
from autograder.submissions.admission import SubmissionRules


@dataclasses.dataclass(frozen=True)
class GradingRun:
    """The settings of one grading run, as `grade` and `grade_many` take them (keyword by keyword) and
    `run_jobs` uses them. `grade_many` resolves the defaults once (`resolved`)."""

    course_dir: Path
    db_url: str | None = None  # default: the course's gradebook (coursedir.default_db_url)
    students: list[str] | tuple[str, ...] | None = None  # None: every student who submitted
    workers: int | None = None  # local worker processes (default: one per core)
    scheduler: str | None = None  # address of a running Dask scheduler instead of local workers
    force: bool = False  # regrade notebooks whose content did not change
    limits: Limits | None = None  # the whole sandbox limits (tests, benchmarks); default: the course config's
    limit_overrides: dict | None = None  # the course config's limits with these changed (the CLI's --cell-timeout)
    progress: bool = True  # a progress bar on stderr
    memory_bytes: int = 0  # each local worker's memory (cluster.worker_memory_bytes of the course config)
    tls: tuple[str, str, str] = ("", "", "")  # the scheduler's CA, the grader's certificate and key (GradingCluster)
    allow_unenforced_limits: bool | None = None  # grade where limits are not enforced; None: the course config's

    def resolved(self, rules: SubmissionRules) -> GradingRun:
        """This run with its limits, worker memory and scheduler credentials read from the course config of
        `rules`; a scheduler without TLS is refused here, before anything runs (cluster.scheduler_tls)."""
        limits = self.limits or course_limits(rules.config, **(self.limit_overrides or {}))
        allow = allows_unenforced(rules.config) if self.allow_unenforced_limits is None else self.allow_unenforced_limits
        return dataclasses.replace(self, limits=limits, memory_bytes=worker_memory_bytes(rules.config),
                                   tls=scheduler_tls(rules.config, self.scheduler), allow_unenforced_limits=allow)


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


def write_graded_notebook(course_dir: Path, result: GradingResult) -> None:
    folder = Path(course_dir) / "autograded" / result.student / result.assignment
    folder.mkdir(parents=True, exist_ok=True)
    target = folder / f"{result.notebook}.ipynb"
    if result.graded_nb:
        target.write_text(result.graded_nb)
    elif target.exists():
        target.unlink()  # a stale graded copy must not outlive a submission that can no longer be graded


def grade(course_dir, assignment: str, **settings) -> GradeSummary:
    """Autograde every submitted notebook of `assignment` in parallel; the caller's process writes the results.
    `settings`: the fields of `GradingRun` (db_url, students, workers, scheduler, force, limits, ...)."""
    return grade_many(course_dir, [assignment], **settings)[0]


def grade_many(course_dir, assignments: list[str], **settings) -> list[GradeSummary]:
    """Autograde several assignments on one cluster (all their notebooks share the workers).
    `settings`: the fields of `GradingRun`.

    The run's limits are resolved here, once: the course config's (`sandbox.course_limits`) with
    `limit_overrides` (the CLI's --cell-timeout ...), unless a whole `limits` value is given (tests, benchmarks).

    With local workers, a machine that cannot jail student code refuses before anything runs (JailUnavailable,
    naming the package to install); on a cluster (`scheduler`), each worker refuses its own jobs."""
    run = GradingRun(course_dir, **settings)
    if run.scheduler is None:
        from autograder.sandbox import jail

        jail.bwrap_path()
    course_dir = Path(course_dir).resolve()
    run = dataclasses.replace(run, course_dir=course_dir, db_url=run.db_url or default_db_url(course_dir))
    rules = SubmissionRules(run.course_dir, run.db_url)
    run = run.resolved(rules)
    if run.scheduler is None:
        check_enforced(run)
    warming = warm_early(run)
    try:
        plans, summaries = plan_all(run, assignments, rules)
    finally:
        if warming is not None:
            warming.join()
    decided = [result for plan in plans.values() for result in plan.failed]
    if decided:
        record_decided(run, decided, summaries)
    jobs = [job for plan in plans.values() for job in plan.jobs]
    if jobs:
        timestamps = {(assignment, student): stamp for assignment, plan in plans.items()
                      for student, stamp in plan.timestamps.items()}
        run_jobs(run, jobs, timestamps, summaries, assignments)
        if not run.scheduler:  # the local workers are gone: what they left on this machine goes with them
            scratch.sweep(force=True)
    for assignment, plan in plans.items():  # after the coordinator's session is closed
        assign_late_penalties(rules, run.course_dir, plan, assignment)
    for summary in summaries.values():
        summary.graded.sort(key=lambda r: (r["student"], r["notebook"]))
    return list(summaries.values())


def check_enforced(run: GradingRun) -> None:
    """Refuse a run whose limits this machine cannot enforce, unless the instructor accepts it; one line on stderr
    either way (enforcement.py). A Dask cluster's workers check their own machines (worker.grade_job)."""
    problems = enforcement.unenforced_here(run.limits)
    if not problems:
        return
    if not run.allow_unenforced_limits:
        raise GradingError(f"{enforcement.line(problems)}. Nothing was graded: set up cgroups as deploy/README.md "
                           f"says, or accept it with --allow-unenforced-limits (c.SandboxLimits.allow_unenforced)")
    print(f"autograder grade: {enforcement.line(problems)} (graded anyway: --allow-unenforced-limits)",
          file=sys.stderr)


def plan_all(run: GradingRun, assignments: list[str], rules: SubmissionRules) -> tuple[dict, dict]:
    """The plan of every assignment ({assignment: plan.Plan}) and its summary so far ({assignment: GradeSummary});
    each plan's problems are told on stderr."""
    plans: dict[str, Plan] = {}
    summaries: dict[str, GradeSummary] = {}
    for assignment in assignments:
        plan = plans[assignment] = build_jobs(run.course_dir, run.db_url, assignment, run.students, run.force,
                                              limits=run.limits, rules=rules)
        summaries[assignment] = GradeSummary(assignment, [], plan.skipped, plan.refused)
        for student, message in plan.problems:
            print(f"autograder grade: {assignment}/{student}: {message}", file=sys.stderr)
    return plans, summaries


def record_decided(run: GradingRun, results: list[GradingResult], summaries: dict) -> None:
    """Record results decided by the coordinator (refused submissions) as the workers' results are recorded."""
    with RunsTable(run.db_url) as runs, open_gradebook(run.course_dir, db_url=run.db_url) as gb:
        for result in results:
            write_graded_notebook(run.course_dir, result)
            summaries[result.assignment].graded.append(record_result(gb, runs, result))


def run_jobs(run: GradingRun, jobs: list[GradingJob], timestamps: dict, summaries: dict,
             assignments: list[str]) -> None:
    """Grade `jobs` on Dask; this process records each result as it arrives (the only gradebook writer).

    A notebook that reached a time limit is graded once more at the end, alone (every other job has finished, so
    no classmate shares its worker or the machine's cores): the second result is the one recorded, and if it too
    reached a limit it keeps its `timeout` flag and is held for review (worker.timeout_flags), never a silent 0."""
    from distributed import as_completed

    from autograder.grade.worker import grade_job

    if not run.scheduler:  # before the workers are forked: they inherit it
        warm_templates(jobs)
    client = dask_client(run.workers, run.scheduler, run.memory_bytes, run.tls)
    label = assignments[0] if len(assignments) == 1 else f"{len(assignments)} assignments"
    with RunsTable(run.db_url) as runs, client as client, open_gradebook(run.course_dir, db_url=run.db_url) as gb:

        def record(job: GradingJob, result: GradingResult) -> None:
            result.flags = list(result.flags) + list(job.coordinator_flags)
            write_graded_notebook(run.course_dir, result)
            row = record_result(gb, runs, result, timestamps.get((result.assignment, result.student)))
            summaries[result.assignment].graded.append(row)
            progress.done(result)

        progress = Progress(len(jobs), f"grading {label}", run.progress)
        # longest first (by notebook size, a rough proxy) keeps the workers busy to the end
        ordered = sorted(jobs, key=lambda job: -len(job.nb_json or ""))
        ordered = [dataclasses.replace(job, allow_unenforced=bool(run.allow_unenforced_limits)) for job in ordered]
        futures = {client.submit(grade_job, job, key=f"grade-{job.content_hash[:16]}-{job.key}",
                                 pure=False, retries=1): job for job in ordered}
        again = []
        for future in as_completed(futures):
            job = futures[future]
            result = _result(future, job, run)
            if result.timed_out:
                again.append(job)
                progress.note(f"{job.key}: a time limit was reached; graded again alone at the end")
            else:
                record(job, result)
        for job in again:  # one at a time, nothing else running
            future = client.submit(grade_job, job, key=f"regrade-{job.content_hash[:16]}-{job.key}", pure=False)
            result = _result(future, job, run)
            result.retried = True
            result.notes = list(result.notes) + ["graded a second time, alone, after a time limit was reached"]
            record(job, result)
        progress.close()


def warm_early(run: GradingRun) -> threading.Thread | None:
    """With local workers: start this process's warm template for the run's limits in a thread, so that its 2-3 s of
    start-up (another process, importing what kernels import) overlap the planning (nbgrader's gradebook, in this
    process). `grade_many` joins it before anything is forked; `warm_templates` then finds it started. Every job of
    a run has the run's limits and GPU "auto" (plan.build_jobs). A run with nothing to grade waits for it too."""
    from autograder.sandbox.kernel import visible_gpus, warm_up

    if run.scheduler is not None or not uses_template(run.limits, "auto", cpu_only=not visible_gpus()):
        return None
    thread = threading.Thread(target=warm_up, args=(run.limits,), name="warm-template", daemon=True)
    thread.start()
    return thread


def warm_templates(jobs: list[GradingJob]) -> None:
    """Start this process's warm template for each set of limits of `jobs` whose kernels use one (sandbox/zygote.py)
    before local workers are forked from it: they share it, and the process keeps it for its next runs. A template
    that cannot start leaves the kernels cold, as in a worker."""
    from autograder.sandbox.kernel import visible_gpus, warm_up

    cpu_only = not visible_gpus()
    for limits in {job.limits for job in jobs if uses_template(job.limits, job.gpu, cpu_only)}:
        warm_up(limits)


def uses_template(limits: Limits, gpu: str | None, cpu_only: bool) -> bool:
    """Whether a job's kernels start from the warm template: it is on, and the job runs on the CPU (GPU kernels
    start cold)."""
    return bool(limits.warm_template) and (gpu is None or (gpu == "auto" and cpu_only))


def _result(future, job: GradingJob, run: GradingRun) -> GradingResult:
    try:
        return future.result()
    except Exception as exc:  # noqa: BLE001 - a lost worker costs only this submission
        return GradingResult.zero(job, "error", worker_failure(exc, run.memory_bytes))


class Progress:
    """The run's progress on stderr: a bar on a terminal; elsewhere (a log file, CI) one line per notebook graded,
    so a log shows how far the run has come."""

    def __init__(self, total: int, label: str, enabled: bool = True):
        from tqdm.auto import tqdm

        self.total, self.count, self.label, self.enabled = total, 0, label, enabled
        self.tty = enabled and sys.stderr.isatty()
        self.bar = tqdm(total=total, desc=label, unit="nb", disable=not self.tty)

    def done(self, result: GradingResult) -> None:
        self.count += 1
        if self.tty:
            self.bar.update(1)
        elif self.enabled:
            cpu = "" if result.cpu_seconds is None else f", {result.cpu_seconds:.1f} CPU-s"
            print(f"{self.label}: {self.count}/{self.total} {result.key} {result.status} "
                  f"({result.seconds:.1f} s{cpu})", file=sys.stderr, flush=True)

    def note(self, line: str) -> None:
        if self.tty:
            self.bar.write(f"{self.label}: {line}", file=sys.stderr)
        elif self.enabled:
            print(f"{self.label}: {line}", file=sys.stderr, flush=True)

    def close(self) -> None:
        self.bar.close()
