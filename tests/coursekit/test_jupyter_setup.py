"""coursekit.jupyter_setup: the student JupyterLab configuration written into an environment (a fake prefix here).

The real student environment, built as the README says, is checked in tests/course/test_student_env.py.
"""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from coursekit import jupyter_setup as setup

BUNDLE = 'i.innerText="Success! Your notebook passes all the tests.",a.append(i)'


def _prefix(tmp_path: Path, page_config: dict | None = None) -> Path:
    static = tmp_path / "share" / "jupyter" / "labextensions" / "@jupyter" / "nbgrader" / "static"
    static.mkdir(parents=True)
    (static / "161.abc.js").write_text(BUNDLE)
    (static / "remoteEntry.abc.js").write_text("nothing to see")
    if page_config is not None:
        labconfig = tmp_path / "etc" / "jupyter" / "labconfig"
        labconfig.mkdir(parents=True)
        (labconfig / "page_config.json").write_text(json.dumps(page_config))
    return tmp_path


def _server(prefix: Path) -> dict:
    path = prefix / "etc" / "jupyter" / "jupyter_server_config.d" / setup.SERVER_CONFIG_NAME
    return json.loads(path.read_text())["ServerApp"]["jpserver_extensions"]


def _disabled(prefix: Path) -> dict:
    return json.loads((prefix / "etc" / "jupyter" / "labconfig" / "page_config.json").read_text())["disabledExtensions"]


def test_laptop_gets_validate_only(tmp_path):
    prefix = _prefix(tmp_path, page_config={"disabledExtensions": {"some:other": True}, "keep": 1})
    setup.configure(prefix)
    assert _server(prefix) == {
        "nbgrader.server_extensions.formgrader": False,
        "nbgrader.server_extensions.course_list": False,
        "nbgrader.server_extensions.assignment_list": False,
        "nbgrader.server_extensions.validate_assignment": True,
        setup.VALIDATE_EXTENSION: True,
    }
    disabled = _disabled(prefix)
    for plugin in setup.INSTRUCTOR_LAB_PLUGINS + setup.EXCHANGE_LAB_PLUGINS + ("some:other",):
        assert disabled[plugin] is True
    assert json.loads((prefix / "etc/jupyter/labconfig/page_config.json").read_text())["keep"] == 1
    bundle = (prefix / "share/jupyter/labextensions/@jupyter/nbgrader/static/161.abc.js").read_text()
    assert setup.NBGRADER_SUCCESS not in bundle and setup.VALIDATE_SUCCESS in bundle
    assert "public self-checks" in setup.VALIDATE_SUCCESS and "hidden tests" in setup.VALIDATE_SUCCESS
    overrides = json.loads((prefix / "share/jupyter/lab/settings/overrides.json").read_text())
    assert overrides[setup.NOTIFICATIONS] == {"fetchNews": "false", "checkForUpdates": False}
    assert '"' not in setup.VALIDATE_SUCCESS and "\\" not in setup.VALIDATE_SUCCESS  # safe inside a JS literal


def test_hub_keeps_the_assignment_list_and_reruns_change_nothing(tmp_path):
    prefix = _prefix(tmp_path)
    setup.configure(prefix)  # a laptop set-up first, then the hub's
    setup.configure(prefix, hub=True)
    server = _server(prefix)
    assert server["nbgrader.server_extensions.assignment_list"] is True
    assert server["nbgrader.server_extensions.formgrader"] is False
    disabled = _disabled(prefix)
    assert "@jupyter/nbgrader:assignment-list" not in disabled and disabled["@jupyter/nbgrader:formgrader"]
    files = sorted(p for p in prefix.rglob("*") if p.is_file())
    before = {p: p.read_bytes() for p in files}
    setup.configure(prefix, hub=True)
    assert {p: p.read_bytes() for p in files} == before


def test_missing_nbgrader_bundle_is_an_error(tmp_path):
    with pytest.raises(SystemExit, match="Validate message was not found"):
        setup.configure(tmp_path)


def test_validate_names_an_unanswered_written_question(tmp_path):
    """nbgrader's own Validator, on a notebook with one answered and one unanswered written question."""
    import nbformat

    def answer(grade_id, text):
        return nbformat.v4.new_markdown_cell(text, metadata={"nbgrader": {
            "grade": True, "solution": True, "locked": False, "points": 5, "grade_id": grade_id,
            "schema_version": 3, "task": False}})

    notebook = nbformat.v4.new_notebook()
    notebook.cells = [nbformat.v4.new_markdown_cell("**Question (written answer, 5 points).** Why divide by the "
                                                    "square root of d_k?"),
                      answer("why_scale", "YOUR ANSWER HERE"),
                      nbformat.v4.new_markdown_cell("**Question (written answer, 5 points).** What does the mask "
                                                    "keep out?"),
                      answer("mask_keeps", "YOUR ANSWER HERE")]
    from nbgrader.preprocessors import ComputeChecksums

    notebook, _ = ComputeChecksums().preprocess(notebook, {})
    notebook.cells[3].source = "The future tokens."  # answered
    path = tmp_path / "answers.ipynb"
    nbformat.write(notebook, path)
    (failed,) = setup._naming_validator()().validate(str(path))["failed"]
    assert "Why divide by the square root of d_k?" in " ".join(failed["raw_error"].split()), failed
    assert "did not answer the written question" in failed["raw_error"]
    assert all(len(line) <= 100 for line in failed["raw_error"].splitlines()), failed
    from nbgrader.validator import Validator

    assert Validator().validate(str(path))["failed"][0]["raw_error"] == "You did not provide a response."
