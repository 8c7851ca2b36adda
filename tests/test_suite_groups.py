"""`make test` runs on two pytest-xdist workers, and tests/conftest.py decides what runs together: a group (a file,
or the files that share an expensive fixture) goes whole to one worker. pytest-xdist's own loadgroup once stopped
grouping without a word (pytest-xdist issue #1386), so this runs two small files on two workers and reads which
worker ran each test."""
from __future__ import annotations

import re
import subprocess
import sys
from collections import defaultdict
from pathlib import Path


REPO = Path(__file__).resolve().parents[1]
FILES = ["tests/test_course_api.py", "tests/test_architecture.py"]


def _conftest():
    import importlib.util

    spec = importlib.util.spec_from_file_location("suite_conftest", REPO / "tests" / "conftest.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_groups_of_the_shared_fixtures():
    group_of = _conftest().group_of
    assert group_of("tests/course/test_runtime.py") == group_of("tests/course/test_notebook_readability.py") \
        == "course-runs"
    assert group_of("tests/course/test_autograde.py") == group_of("tests/course/test_credit.py") == "course-grading"
    assert group_of("tests/course/test_student_env.py") == group_of("tests/browser/test_student_notebooks.py") \
        == "browser"
    assert group_of("tests/deploy/test_hub.py") == "deploy"
    assert group_of("tests/autograder/pipeline/test_attacks.py") == "tests/autograder/pipeline/test_attacks.py"
    # the naming figure counts what every test of the hidden checks tried: it must run in their worker, after them
    assert group_of("tests/autograder/checks/test_zz_naming_figure.py") \
        == group_of("tests/autograder/checks/attention/test_checks.py") \
        == group_of("tests/autograder/checks/test_mutations.py") == "tests/autograder/checks/"


def test_each_group_runs_whole_in_one_worker():
    done = subprocess.run([sys.executable, "-m", "pytest", "-n", "2", "--dist", "loadgroup", "-v", "-p",
                           "no:cacheprovider", "-o", "addopts=--import-mode=importlib", *FILES],
                          cwd=REPO, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    workers = defaultdict(set)
    for worker, nodeid in re.findall(r"^\[(gw\d+)\] \[\s*\d+%\] PASSED (\S+)", done.stdout, re.M):
        workers[nodeid.split("::")[0]].add(worker)
    assert set(workers) == set(FILES), done.stdout[-3000:]
    assert all(len(w) == 1 for w in workers.values()), dict(workers)
    assert set().union(*workers.values()) == {"gw0", "gw1"}, dict(workers)   # both workers had work
