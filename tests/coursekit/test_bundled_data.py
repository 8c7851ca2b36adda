"""The data the student wheel carries (coursekit/_bundled_data, coursekit/bundled_data.py) is found by every lookup
of the notebooks' data: after $COURSE_DATA_DIR, before the repository's data/ and any data/ above the working
folder. (tests/course/test_student_env.py checks the real wheel.)"""
from __future__ import annotations

import shutil
from pathlib import Path

import pytest

import coursekit.data.yelp as yelp
import coursekit.modern_comparison as modern
import coursekit.multi30k as multi30k
import coursekit.pretrained_runs as pretrained_runs
import coursekit.shakespeare as shakespeare
import coursekit.translation_training as translation_training
from coursekit.bundled_data import BUNDLED_DATA

REPO = Path(__file__).resolve().parents[2]
LOOKUPS = [(shakespeare, "shakespeare_path", "tinyshakespeare/input.txt"),
           (modern, "results_path", "modern_vs_gpt.json"),
           (yelp, "synthetic_dir", "yelp_synthetic"),
           (multi30k, "multi30k_dir", "multi30k"),
           (translation_training, "translation_runs_path", "translation_runs.json"),
           (pretrained_runs, "pretrained_runs_path", "pretrained_runs.json")]


@pytest.fixture()
def bundled(tmp_path, monkeypatch):
    """A copy of data/ standing in for the wheel's, and a working folder with no data/ above it."""
    folder = tmp_path / "site-packages" / "coursekit" / "_bundled_data"
    shutil.copytree(REPO / "data", folder, ignore=shutil.ignore_patterns("*.tgz", "yelp_review_full_csv"))
    for module, _, _ in LOOKUPS:
        monkeypatch.setattr(module, "BUNDLED_DATA", folder)
    monkeypatch.delenv("COURSE_DATA_DIR", raising=False)
    work = tmp_path / "work" / "08_gpt_language_model"
    work.mkdir(parents=True)
    monkeypatch.chdir(work)
    return folder


@pytest.mark.parametrize("module, function, relative", LOOKUPS)
def test_the_wheels_copy_comes_before_the_repository(bundled, module, function, relative):
    assert getattr(module, function)() == bundled / relative


@pytest.mark.parametrize("module, function, relative", LOOKUPS)
def test_course_data_dir_still_wins(bundled, module, function, relative, tmp_path, monkeypatch):
    own = tmp_path / "own"
    shutil.copytree(bundled, own)
    monkeypatch.setenv("COURSE_DATA_DIR", str(own))
    assert getattr(module, function)() == own / relative


def test_an_editable_install_has_no_bundled_copy():
    """The repository's coursekit carries no data of its own: only `make student` puts it into the wheel."""
    assert BUNDLED_DATA.parent == REPO / "coursekit" and not BUNDLED_DATA.exists()
