"""The local grading workers' memory (autograder.grade.cluster.GradingWorkers), as nbgrader configuration, and what
a worker's death tells the instructor. Workers that die for real: tests/autograder/pipeline/test_worker_deaths.py."""
from __future__ import annotations

from traitlets.config import Config

from autograder.course.units import GiB, MiB
from autograder.grade import cluster


def test_the_workers_memory_is_nbgrader_configuration():
    assert cluster.worker_memory_bytes() == 4 * GiB == cluster.GradingWorkers.memory_bytes.default_value
    config = Config()
    config.GradingWorkers.memory_bytes = 700 * MiB
    assert cluster.worker_memory_bytes(config) == 700 * MiB


def test_a_dead_worker_names_the_setting_that_limits_it():
    class KilledWorker(Exception):
        pass

    reason = cluster.worker_failure(KilledWorker(), 700 * MiB)
    assert f"died {cluster.WORKER_DEATHS_ALLOWED + 1} times" in reason
    assert str(700 * MiB) in reason and "GradingWorkers.memory_bytes" in reason
    assert "GradingWorkers" not in cluster.worker_failure(KilledWorker(), 0)
    assert cluster.worker_failure(ValueError(), 0) == "the grading worker failed: ValueError"


def test_a_spawned_worker_gets_the_limit_as_it_is():
    assert cluster.worker_memory_limit(0, "fork") == 0
    assert cluster.worker_memory_limit(700 * MiB, "spawn") == 700 * MiB
    assert cluster.worker_memory_limit(700 * MiB, "fork") > 700 * MiB  # plus this process's resident pages
