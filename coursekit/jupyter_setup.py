"""Configure the student's JupyterLab in THIS environment: `python -m coursekit.jupyter_setup [--hub]`.

A student environment has nbgrader installed for its Validate button (and, on JupyterHub, the Assignment List), but
nbgrader enables its instructor tools too. This writes, into the environment's own `etc/jupyter` (so it applies to
every `jupyter lab` started from it, and to nothing else):

* `jupyter_server_config.d/transformers101-student.json`: the formgrader and course list server extensions off
  (and the Assignment List too on a laptop, which has no exchange to list: "exchange directory does not exist");
* `labconfig/page_config.json`: the Formgrader, Course List and Create Assignment lab plugins off (on a laptop
  also the Assignment List and the Nbgrader menu, which would offer only those);
* `share/jupyter/lab/settings/overrides.json`: no "get notified about official Jupyter news?" pop-up and no
  update checks (a course environment is pinned, and may be offline);
* the Validate dialog's success message, which nbgrader 0.9.6 hard-codes as "Success! Your notebook passes all the
  tests.": it now says that only the public self-checks ran and that the hidden tests run at grading;
* this module as a server extension (`VALIDATE_EXTENSION`): for a written question left unanswered, Validate says
  which question (nbgrader shows only "YOUR ANSWER HERE / You did not provide a response.").

`make student` runs it in `.venv-student`; the student image runs it with `--hub`. Running it again changes nothing.
"""
from __future__ import annotations

import argparse
import json
import sys
import textwrap
from pathlib import Path

__all__ = ["configure", "VALIDATE_SUCCESS", "NBGRADER_SUCCESS"]

NBGRADER_SUCCESS = "Success! Your notebook passes all the tests."
VALIDATE_SUCCESS = ("Your notebook ran from top to bottom without errors and passed the public self-checks. "
                    "This is not your grade: the hidden tests run only when your submission is graded.")

INSTRUCTOR_SERVER_EXTENSIONS = ("nbgrader.server_extensions.formgrader", "nbgrader.server_extensions.course_list")
INSTRUCTOR_LAB_PLUGINS = ("@jupyter/nbgrader:formgrader", "@jupyter/nbgrader:course-list",
                          "@jupyter/nbgrader:create-assignment")
EXCHANGE_SERVER_EXTENSIONS = ("nbgrader.server_extensions.assignment_list",)
EXCHANGE_LAB_PLUGINS = ("@jupyter/nbgrader:assignment-list", "@jupyter/nbgrader:menu")
VALIDATE_EXTENSION = "coursekit.jupyter_setup"  # names unanswered written questions in Validate's message
SERVER_CONFIG_NAME = "transformers101-student.json"  # sorts after nbgrader.json, so it wins
NOTIFICATIONS = "@jupyterlab/apputils-extension:notification"


def _write_json(path: Path, data: dict) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    text = json.dumps(data, indent=2, sort_keys=True) + "\n"
    if not path.is_file() or path.read_text() != text:
        path.write_text(text)


def _patch_validate_message(share: Path) -> list[Path]:
    """Replace nbgrader's success text in its lab extension bundle; returns the files that hold our text."""
    static = share / "jupyter" / "labextensions" / "@jupyter" / "nbgrader" / "static"
    done = []
    for bundle in sorted(static.glob("*.js")):
        text = bundle.read_text(encoding="utf-8")
        if NBGRADER_SUCCESS in text:
            bundle.write_text(text.replace(NBGRADER_SUCCESS, VALIDATE_SUCCESS), encoding="utf-8")
        if VALIDATE_SUCCESS in bundle.read_text(encoding="utf-8"):
            done.append(bundle)
    if not done:
        raise SystemExit(f"nbgrader's Validate message was not found under {static}: is nbgrader 0.9.6 installed?")
    return done


def configure(prefix: Path | str = sys.prefix, hub: bool = False) -> list[Path]:
    """Write the student configuration into `prefix` (an environment); returns the files written or patched."""
    prefix = Path(prefix)
    etc = prefix / "etc" / "jupyter"
    server_off = INSTRUCTOR_SERVER_EXTENSIONS + (() if hub else EXCHANGE_SERVER_EXTENSIONS)
    lab_off = INSTRUCTOR_LAB_PLUGINS + (() if hub else EXCHANGE_LAB_PLUGINS)

    server_config = etc / "jupyter_server_config.d" / SERVER_CONFIG_NAME
    extensions = {name: False for name in server_off}
    extensions["nbgrader.server_extensions.validate_assignment"] = True
    extensions[VALIDATE_EXTENSION] = True
    if hub:
        extensions.update({name: True for name in EXCHANGE_SERVER_EXTENSIONS})
    _write_json(server_config, {"ServerApp": {"jpserver_extensions": extensions}})

    page_config = etc / "labconfig" / "page_config.json"
    data = json.loads(page_config.read_text()) if page_config.is_file() else {}
    disabled = data.get("disabledExtensions") or {}
    if isinstance(disabled, list):  # older JupyterLab wrote a list
        disabled = {name: True for name in disabled}
    disabled.update({name: True for name in lab_off})
    if hub:
        for name in EXCHANGE_LAB_PLUGINS:
            disabled.pop(name, None)
    data["disabledExtensions"] = disabled
    _write_json(page_config, data)

    overrides = prefix / "share" / "jupyter" / "lab" / "settings" / "overrides.json"
    data = json.loads(overrides.read_text()) if overrides.is_file() else {}
    data.setdefault(NOTIFICATIONS, {}).update({"fetchNews": "false", "checkForUpdates": False})
    _write_json(overrides, data)

    return [server_config, page_config, overrides, *_patch_validate_message(prefix / "share")]


def _question_before(cells, index: int) -> str:
    """The written question an answer cell answers: the nearest markdown cell above it that is not an answer,
    as one line (its first sentence, at most 160 characters)."""
    for cell in reversed(cells[:index]):
        nbgrader = cell.get("metadata", {}).get("nbgrader", {})
        if cell.get("cell_type") == "markdown" and not nbgrader.get("solution"):
            text = " ".join(cell.get("source", "").replace("**", "").split())
            return text if len(text) <= 160 else text[:157].rsplit(" ", 1)[0] + " ..."
    return ""


def _naming_validator():
    """nbgrader's Validator, telling which written question an unanswered answer cell belongs to."""
    from nbgrader.validator import Validator

    class NamingValidator(Validator):
        def _get_failed_cells(self, nb):
            failed = super()._get_failed_cells(nb)
            for cell in failed:
                if cell.cell_type != "code":
                    index = next(i for i, other in enumerate(nb.cells) if other is cell)
                    cell.metadata["transformers101_question"] = _question_before(nb.cells, index)
            return failed

        def _extract_error(self, cell) -> str:
            question = cell.metadata.get("transformers101_question") if cell.cell_type != "code" else None
            if question:  # the dialog shows this unwrapped, in a box about 100 characters wide
                quoted = textwrap.fill(f'"{question}"', 88, initial_indent="  ", subsequent_indent="  ")
                return (f"You did not answer the written question\n{quoted}\n"
                        "Replace YOUR ANSWER HERE in the cell below the question with your answer.")
            return super()._extract_error(cell)

    return NamingValidator


def _jupyter_server_extension_points():
    return [{"module": VALIDATE_EXTENSION}]


def _load_jupyter_server_extension(serverapp) -> None:
    """Make the Validate button's handler (nbgrader's validate_assignment extension) use the naming Validator."""
    from nbgrader.server_extensions.validate_assignment import handlers

    handlers.Validator = _naming_validator()
    serverapp.log.info("transformers101: Validate names unanswered written questions")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m coursekit.jupyter_setup", description=__doc__.split("\n")[0])
    parser.add_argument("--hub", action="store_true",
                        help="JupyterHub student server: keep the Assignment List (fetch/submit via the exchange)")
    parser.add_argument("--prefix", default=sys.prefix, help="the environment to configure (default: this one)")
    args = parser.parse_args(argv)
    for path in configure(args.prefix, hub=args.hub):
        print(f"configured {path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
