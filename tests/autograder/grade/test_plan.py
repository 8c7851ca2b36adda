"""The coordinator's two decisions, each in its own step of `plan.build_jobs`: admitting a submission
(`admit_submission`, exercised end to end by the pipeline tests) and job-or-skip per notebook (`needs_grading`);
and the zero result the coordinator records without a worker (`GradingResult.zero`)."""
from __future__ import annotations

from autograder.grade.plan import needs_grading
from autograder.grade.jobs import GradingJob, GradingResult


def test_a_notebook_is_skipped_only_when_its_last_run_graded_the_same_content():
    assert needs_grading(None, "abc")
    assert not needs_grading({"content_hash": "abc", "status": "graded"}, "abc")
    assert needs_grading({"content_hash": "abc", "status": "graded"}, "abd")
    assert needs_grading({"content_hash": "abc", "status": "error: kernel died"}, "abc")
    assert not needs_grading({"content_hash": "abc", "status": "missing"}, "abc")


def test_a_zero_result_scores_every_grade_cell_zero_with_the_reason():
    cells = {"grade": [{"name": "test_a", "max_score": 5}, {"name": "written_b", "max_score": 5}]}
    job = GradingJob(assignment="a", notebook="a", student="s", course_id="c", cells=cells, content_hash="h")
    result = GradingResult.zero(job, "error", "the grading worker failed", seconds=1.23456)
    assert result.status == "error" and result.content_hash == "h" and result.seconds == 1.235
    assert result.grades == {"test_a": {"auto_score": 0.0, "max_score": 5, "needs_manual_grade": False},
                             "written_b": {"auto_score": 0.0, "max_score": 5, "needs_manual_grade": False}}
    assert set(result.messages.values()) == {"the grading worker failed"} and result.graded_nb is None
