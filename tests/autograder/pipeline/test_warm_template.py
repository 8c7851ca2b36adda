"""One warm template per grading process (autograder/sandbox/zygote.py, issue #48): a run on local workers starts it
before forking its workers, every kernel of the run is forked from it (no worker starts its own), the process keeps
it for its next run, and the scores are those of cold kernels."""
from __future__ import annotations

import dataclasses
import json
import os
import shutil
import tempfile
import threading
from pathlib import Path

from autograder.grade.engine import grade
from autograder.sandbox import kernel, zygote
from autograder.submissions.collect import collect


def _class(root: Path, released_course, helpers, kinds: dict[str, str]) -> Path:
    course = root / "course"
    shutil.copytree(released_course, course)
    for student, kind in kinds.items():
        helpers.write_submission(root / "inbox", course, student, kind)
    collect(course, root / "inbox")
    return course


def _scores(summary) -> dict[str, float]:
    return {row["student"]: row["score"] for row in summary.graded}


def _recorded(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


def test_local_workers_fork_every_kernel_from_the_template_of_the_grading_process(released_course, helpers,
                                                                                   tmp_path, monkeypatch):
    private_tmp = tmp_path / "tmp"  # a temporary folder of its own: a template of its own, started by this test
    private_tmp.mkdir()
    monkeypatch.setenv("TMPDIR", str(private_tmp))
    monkeypatch.setattr(tempfile, "tempdir", None)
    starts, kernels = tmp_path / "starts.jsonl", tmp_path / "kernels.jsonl"
    start, choose = zygote.Template.start, kernel.SandboxKernelManager._template

    def recording_start(self):  # inherited by the forked workers: a template one of them starts is recorded too
        with open(starts, "a") as fh:
            fh.write(json.dumps({"pid": os.getpid(), "thread": threading.current_thread().name}) + "\n")
        return start(self)

    def recording_choice(self):
        made = choose(self)
        with open(kernels, "a") as fh:
            fh.write(json.dumps({"pid": os.getpid(), "owner": made and made.owner}) + "\n")
        return made

    monkeypatch.setattr(zygote.Template, "start", recording_start)
    monkeypatch.setattr(kernel.SandboxKernelManager, "_template", recording_choice)
    warm = dataclasses.replace(helpers.TEST_LIMITS, warm_template=True)
    kinds = {"ada": "solution", "bo": "blank", "cy": "solution", "di": "solution"}
    first = _scores(grade(_class(tmp_path / "first", released_course, helpers, kinds), "ps1", workers=2,
                          limits=warm, progress=False))
    me = os.getpid()
    # one template, started here before the workers, in the thread that starts it while the run is planned
    assert _recorded(starts) == [{"pid": me, "thread": "warm-template"}]
    forked = _recorded(kernels)
    assert len(forked) >= len(kinds) and all(row["owner"] == me and row["pid"] != me for row in forked), forked
    assert len({row["pid"] for row in forked}) == 2, forked  # both workers used it
    ours = [made for made in zygote._templates.values() if made.files.startswith(str(private_tmp))]
    assert len(ours) == 1 and ours[0].healthy()  # kept after the run, still serving

    second = _scores(grade(_class(tmp_path / "second", released_course, helpers, {"ed": "solution"}), "ps1",
                           workers=2, limits=warm, progress=False))
    assert len(_recorded(starts)) == 1  # the next run of this process used the same one
    again = _recorded(kernels)[len(forked):]
    assert again and all(row["owner"] == me for row in again), again
    cold = _scores(grade(_class(tmp_path / "cold", released_course, helpers, kinds), "ps1", workers=2,
                         limits=dataclasses.replace(warm, warm_template=False), progress=False))
    assert first == cold and second["ed"] == cold["ada"] > cold["bo"], (first, second, cold)
    assert all(row["owner"] is None for row in _recorded(kernels)[len(forked) + len(again):])  # cold: none used
    ours[0].stop()
    for key in [key for key, made in zygote._templates.items() if made is ours[0]]:
        del zygote._templates[key]
    assert [name for name in os.listdir(private_tmp) if name.startswith("ag-tpl")] == []  # stopped, its folders gone
