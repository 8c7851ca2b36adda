"""The notebooks students handed in, read for the reports (autograder.submissions.submitted): as every submission is
read, so a link (to a classmate's notebook, or a whole student folder) is never followed, a notebook over the
course's size limit or one that does not parse is left out, and the other students' notebooks are read."""
from __future__ import annotations

import nbformat

from autograder.submissions.submitted import is_folder, plain_folders, read_submitted, submitted_notebooks


def _notebook(code: str):
    return nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(code)])


def test_links_oversized_and_broken_notebooks_are_left_out(tmp_path):
    submitted = tmp_path / "submitted"
    (submitted / "ann" / "ps1").mkdir(parents=True)
    nbformat.write(_notebook("x = 1"), submitted / "ann" / "ps1" / "b.ipynb")
    nbformat.write(_notebook("y = 2"), submitted / "ann" / "ps1" / "a.ipynb")
    (submitted / "ann" / "ps1" / "notes.txt").write_text("not a notebook")
    (submitted / "ben" / "ps1").mkdir(parents=True)
    (submitted / "ben" / "ps1" / "a.ipynb").symlink_to(submitted / "ann" / "ps1" / "a.ipynb")
    (submitted / "ben" / "ps1" / "broken.ipynb").write_text("{not json")
    (submitted / "cid").symlink_to(submitted / "ann")  # a whole student folder that is a link
    (submitted / "dan" / "ps1").mkdir(parents=True)
    nbformat.write(_notebook("# " + "x" * 2048), submitted / "dan" / "ps1" / "a.ipynb")  # over the limit below
    (submitted / "eve" / "ps2").mkdir(parents=True)  # another assignment only
    (tmp_path / "nbgrader_config.py").write_text("c = get_config()\nc.SubmissionLimits.notebook_bytes = 1024\n")

    notebooks = submitted_notebooks(tmp_path, "ps1")
    assert sorted(notebooks) == ["ann", "ben", "dan"]
    assert [nb.cells[0].source for nb in notebooks["ann"]] == ["y = 2", "x = 1"]  # in name order
    assert notebooks["ben"] == [] and notebooks["dan"] == []
    assert read_submitted(submitted / "ann" / "ps1" / "a.ipynb", 10) is None  # over the limit given
    assert read_submitted(submitted / "ann" / "ps1" / "a.ipynb", 1024).cells[0].source == "y = 2"


def test_folders_are_folders_themselves_never_links(tmp_path):
    (tmp_path / "a").mkdir()
    (tmp_path / "b").symlink_to(tmp_path / "a")
    (tmp_path / "c").write_text("")
    assert is_folder(tmp_path / "a") and not is_folder(tmp_path / "b") and not is_folder(tmp_path / "c")
    assert plain_folders(tmp_path) == [tmp_path / "a"]
    assert plain_folders(tmp_path / "missing") == []
