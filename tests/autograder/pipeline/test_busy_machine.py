"""A busy machine costs an honest student nothing (issue #47): the time limits count the submission's CPU seconds.

The reference answers of 03, 06 and 08 are graded alone, then with the whole grading run (coordinator, worker,
kernels) in a cgroup given a fraction of a core (a quarter for 03, half for 06 and 08), as on an oversubscribed
server; throttled, every score is the one graded alone (or the notebook is held with a `timeout` flag; none is
lower without one). 06 and 08 are graded with
the course's own limits (course/nbgrader_config.py), as deployed: 06's cached-decoding check is the one that lost
20 points at a load of 12 under wall-clock limits; 08 trains a model in its grading budget. 03 is graded in cold
kernels (no warm template: its first cell imports torch itself) with a cell limit between the CPU its heaviest cell
needs and the wall time that cell takes at a quarter of a core, and
once more, as a control, throttled with the limits of old (no per-submission cgroup, so time is wall-clock time):
the control shows the loss that wall-clock limits caused, now flagged and held instead of silent.
"""
from __future__ import annotations

import contextlib
import dataclasses
import os
import shutil
import time
import uuid
from pathlib import Path

import pytest

from autograder.course.coursedir import nbgrader_config
from autograder.sandbox import cgroup
from autograder.sandbox.limits import course_limits

pytestmark = [pytest.mark.pipeline, pytest.mark.slow]

REPO = Path(__file__).resolve().parents[3]
TIGHT = ("03_attention",)  # graded with CELL_CPU_SECONDS per cell, and in the control run
AS_DEPLOYED = ("06_decoder_and_transformer", "08_gpt_language_model")  # graded with the course's limits
ASSIGNMENTS = TIGHT + AS_DEPLOYED
THROTTLE_CORES = 0.25  # TIGHT's throttled runs
DEPLOYED_THROTTLE_CORES = 0.5  # AS_DEPLOYED's: half a core (a quarter would add four minutes to the suite)
# the heaviest cell of 03's reference needs ~2.4 CPU-s (its imports, in a kernel started cold, without the warm
# template; measured with the per-cell clock), ~10 s of wall time at a quarter of a core
CELL_CPU_SECONDS = 4.5


def _cpu_dir() -> str | None:
    groups = cgroup._own_groups()
    if "cpu" not in groups or "cpuacct" not in groups:
        return None
    folder = os.path.join(cgroup.ROOT, "cpu", groups["cpu"].lstrip("/"))
    return folder if os.access(folder, os.W_OK) else None


pytestmark.append(pytest.mark.skipif(_cpu_dir() is None, reason="needs a writable cgroup v1 cpu controller"))


@contextlib.contextmanager
def throttled(cores: float):
    """This process (and every process it starts meanwhile: Dask workers, the warm template, kernels) in a cpu group
    of `cores`. The templates this process kept from an earlier run are stopped first: the kernels they fork would
    run outside the group (their template's), so this run starts its own inside it, as a loaded server's would."""
    from autograder.sandbox import zygote

    parent = _cpu_dir()
    folder = os.path.join(parent, f"test-throttle-{uuid.uuid4().hex[:8]}")
    os.mkdir(folder)
    zygote.stop_all()
    try:
        Path(folder, "cpu.cfs_period_us").write_text("100000")
        Path(folder, "cpu.cfs_quota_us").write_text(str(int(cores * 100000)))
        Path(folder, "cgroup.procs").write_text(str(os.getpid()))
        yield
    finally:
        zygote.stop_all()  # not kept for the next run: it would fork that run's kernels inside this group
        Path(parent, "cgroup.procs").write_text(str(os.getpid()))
        for attempt in range(100):  # the stopped template's processes take a moment to end
            for task in Path(folder, "cgroup.procs").read_text().split():  # what is left goes back too
                with contextlib.suppress(OSError):
                    Path(parent, "cgroup.procs").write_text(task)
            for inner in sorted(Path(folder).glob("*/"), reverse=True):
                with contextlib.suppress(OSError):
                    inner.rmdir()
            try:
                os.rmdir(folder)
                break
            except OSError:
                if attempt == 99:
                    raise
                time.sleep(0.2)


@pytest.fixture(scope="module")
def course(tmp_path_factory):
    from autograder.publish.release import release
    from autograder.submissions.collect import collect

    root = tmp_path_factory.mktemp("busy") / "course"
    root.mkdir()
    shutil.copy2(REPO / "course" / "nbgrader_config.py", root / "nbgrader_config.py")
    for assignment in ASSIGNMENTS:
        shutil.copytree(REPO / "course" / "source" / assignment, root / "source" / assignment)
    release(list(ASSIGNMENTS), course_root=root, exercises_dir=root / "exercises")
    for assignment in ASSIGNMENTS:
        target = root / "inbox" / "honest" / assignment
        target.mkdir(parents=True)
        shutil.copy2(root / "source" / assignment / f"{assignment}.ipynb", target / f"{assignment}.ipynb")
    collect(root, root / "inbox")
    return root


def grade_all(course, assignments=ASSIGNMENTS, throttle: bool = False, **settings) -> dict[str, dict]:
    """{assignment: its row}: TIGHT's with a cell limit of CELL_CPU_SECONDS, the others with the course's limits;
    every wall-clock backstop far away (the throttled runs are slow by design). `throttle`: each group's run in a
    cpu group of its cores (TIGHT's THROTTLE_CORES, the others' DEPLOYED_THROTTLE_CORES)."""
    from autograder.grade.engine import grade_many

    course_wide = course_limits(nbgrader_config(course))
    rows = {}
    # TIGHT in cold kernels: its first cell then imports torch, the CPU its cell limit is set against
    for group, cell_timeout, cores, warm in ((TIGHT, CELL_CPU_SECONDS, THROTTLE_CORES, False),
                                             (AS_DEPLOYED, course_wide.cell_timeout, DEPLOYED_THROTTLE_CORES,
                                              course_wide.warm_template)):
        group = [a for a in group if a in assignments]
        if not group:
            continue
        limits = dataclasses.replace(course_wide, cell_timeout=cell_timeout, wall_factor=40.0, warm_template=warm)
        with throttled(cores) if throttle else contextlib.nullcontext():
            summaries = grade_many(course, group, workers=1, force=True, progress=False, limits=limits, **settings)
        rows.update({row["assignment"]: {**row, "cores": cores} for summary in summaries for row in summary.graded})
    return rows


@pytest.fixture(scope="module")
def runs(course):
    alone = grade_all(course)
    busy = grade_all(course, throttle=True)
    with _no_cgroups():
        control = grade_all(course, TIGHT, throttle=True, allow_unenforced_limits=True)
    return alone, busy, control


@contextlib.contextmanager
def _no_cgroups():
    saved = os.environ.get(cgroup.ENV)
    os.environ[cgroup.ENV] = "0"  # the workers start meanwhile and read it: no cgroup, so wall-clock limits
    try:
        yield
    finally:
        if saved is None:
            os.environ.pop(cgroup.ENV)
        else:
            os.environ[cgroup.ENV] = saved


def test_graded_alone_the_references_keep_every_automatic_point_and_their_times_are_recorded(runs):
    alone, _, _ = runs
    for assignment, row in alone.items():
        assert row["status"] == "graded" and not row["flags"], (assignment, row["flags"], row["messages"])
        assert 0 < row["cpu_seconds"] and row["cpu_seconds"] < row["seconds"] * 2, row


def test_throttled_to_a_quarter_core_the_scores_do_not_change(runs):
    alone, busy, _ = runs
    for assignment, row in busy.items():
        timed_out = [f for f in row["flags"] if f["code"] == "timeout"]
        if row["score"] != alone[assignment]["score"]:
            assert timed_out and row["held"], (assignment, row["score"], alone[assignment]["score"], row["messages"])
    assert all(row["score"] == alone[a]["score"] for a, row in busy.items()), "held, though CPU time was counted"
    assert sorted(busy) == sorted(ASSIGNMENTS)
    # the throttle did bite: each run got at most its share of a core (CPU per wall second; a ratio that a busy
    # machine can only lower, where a comparison of wall times with the run alone would follow the machine's load)
    shares = {a: (row["cpu_seconds"] / row["seconds"], row["cores"]) for a, row in busy.items()}
    assert all(share < cores * 1.3 for share, cores in shares.values()), shares


def test_the_control_with_wall_clock_limits_shows_the_loss_now_flagged_and_held(runs):
    alone, _, control = runs
    lost = {a: row for a, row in control.items() if row["score"] < alone[a]["score"]}
    assert lost, "the control run lost nothing: the cell limit no longer sits between CPU and throttled wall time"
    for assignment, row in lost.items():
        assert row["held"] and any(f["code"] == "timeout" for f in row["flags"]), (assignment, row["flags"])
        assert row["cpu_seconds"] is None  # not accounted: the run said so in its one line
        assert any("graded a second time, alone" in note for note in row["notes"])
