"""The tables of docs/grading-config.md, printed from the one declaration of each setting: the traits of
`SandboxLimits` (autograder/sandbox/limits.py), `GradingWorkers` (autograder/grade/cluster.py) and
`SubmissionLimits` (autograder/submissions/files.py), with their defaults and help texts, and nbgrader's `Execute` times.

    python -m tools.settings_table     # rewrites the generated blocks of docs/grading-config.md

`tests/autograder/sandbox/test_limits.py` fails when the page is out of date.
"""
from __future__ import annotations

import sys
from pathlib import Path

from nbgrader.preprocessors import Execute

from autograder.course.coursedir import REPO_ROOT
from autograder.grade.cluster import GradingWorkers
from autograder.sandbox.limits import EXECUTE_TIMES, SandboxLimits
from autograder.submissions.files import SubmissionLimits

PAGE = REPO_ROOT / "docs" / "grading-config.md"
UNITS = ((1024**3, "GiB"), (1024**2, "MiB"))


def shown(value) -> str:
    """6442450944 -> '6 GiB'; 20000 -> '20,000'; 600.0 -> '600'."""
    if isinstance(value, int) and value:
        for size, unit in UNITS:
            if value % size == 0:
                return f"{value // size:,} {unit}"
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    return f"{value:,}" if isinstance(value, int) else str(value)


def _rows(configurable, config) -> list[str]:
    configured = configurable(config=config)
    rows = []
    for name, trait in configurable.class_traits(config=True).items():
        default, course = trait.default_value, getattr(configured, name)
        rows.append(f"| `c.{configurable.__name__}.{name}` | {shown(default)} | {shown(course)} | {trait.help} |")
    return rows


def limits_table(config) -> str:
    head = ["| setting | default | this course | what it limits |", "|---|---|---|---|"]
    execute = Execute(config=config)
    times = [f"| `c.Execute.{trait}` | {shown(getattr(Execute, trait).default_value)} (nbgrader's) "
             f"| {shown(getattr(execute, trait))} | {meaning} |" for trait, meaning in EXECUTE_TIMES.values()]
    return "\n".join(head + times + _rows(SandboxLimits, config))


def workers_table(config) -> str:
    head = ["| setting | default | this course | what it limits |", "|---|---|---|---|"]
    return "\n".join(head + _rows(GradingWorkers, config) + _rows(SubmissionLimits, config))


BLOCKS = {"limits": limits_table, "workers": workers_table}


def _marker(name: str, end: bool = False) -> str:
    return f"<!-- {'END' if end else 'BEGIN'} GENERATED {name}: python -m tools.settings_table -->"


def render_page(text: str, config) -> str:
    for name, build in BLOCKS.items():
        begin, end = _marker(name), _marker(name, end=True)
        head, rest = text.split(begin, 1)
        _, tail = rest.split(end, 1)
        text = f"{head}{begin}\n{build(config)}\n{end}{tail}"
    return text


def course_file_config():
    """This course's own nbgrader_config.py alone (not the machine's Jupyter config path), for the page."""
    from traitlets.config.loader import PyFileConfigLoader

    return PyFileConfigLoader("nbgrader_config.py", path=str(REPO_ROOT / "course")).load_config()


def main(argv=None) -> int:
    config = course_file_config()
    PAGE.write_text(render_page(PAGE.read_text(encoding="utf-8"), config), encoding="utf-8")
    print(f"wrote {Path(PAGE).relative_to(REPO_ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
