"""Where the course lives: the nbgrader course root, its gradebook URL, and nbgrader's API objects for it.

Default course root: $AUTOGRADER_COURSE_DIR, else (for the CLI) the current folder when it holds
nbgrader_config.py, else `course/` of the repository. Default gradebook: --db / $AUTOGRADER_DB, else the course
config's `c.CourseDirectory.db_url`, else SQLite `gradebook.db` in the course root; any SQLAlchemy URL works
(PostgreSQL: `postgresql://user@host/dbname`).
"""
from __future__ import annotations

import os
import sys
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[2]


def alembic_on_path() -> None:
    """Put this environment's bin/ on PATH (idempotent), so that nbgrader finds its `alembic` command.

    nbgrader's Gradebook runs `alembic heads` (a subprocess found through PATH) whenever it creates a new
    gradebook; an environment used without activating it (`.venv/bin/python -m ...`) does not have its bin/ on
    PATH. Called explicitly where gradebooks may be created: the CLI, `nbgrader_coursedir` (nbgrader's API and
    Autograde), grading, collecting (importing this module changes nothing)."""
    bin_dir = os.path.dirname(sys.executable)
    if bin_dir not in os.environ.get("PATH", "").split(os.pathsep):
        os.environ["PATH"] = bin_dir + os.pathsep + os.environ.get("PATH", "")


NOTEBOOK_IGNORE = (".ipynb_checkpoints", "__pycache__", "*.pyc", ".DS_Store", "feedback")


def default_course_dir() -> Path:
    """The course this repository ships: $AUTOGRADER_COURSE_DIR, else the repository's course/."""
    return Path(os.environ.get("AUTOGRADER_COURSE_DIR") or REPO_ROOT / "course").resolve()


def command_course_dir(cwd: Path | None = None) -> Path:
    """The course a command works on without --course-dir: $AUTOGRADER_COURSE_DIR, else the current folder when
    it is an nbgrader course root (it holds nbgrader_config.py, as nbgrader's own commands assume), else the
    repository's course/."""
    cwd = Path.cwd() if cwd is None else Path(cwd)
    if not os.environ.get("AUTOGRADER_COURSE_DIR") and (cwd / "nbgrader_config.py").is_file():
        return cwd.resolve()
    return default_course_dir()


def default_db_url(course_dir: Path) -> str:
    """$AUTOGRADER_DB, else `c.CourseDirectory.db_url` of the course's nbgrader_config.py, else SQLite
    gradebook.db in the course root (nbgrader's own default)."""
    return (os.environ.get("AUTOGRADER_DB") or _course_setting(course_dir, "db_url")
            or f"sqlite:///{Path(course_dir).resolve() / 'gradebook.db'}")


def _course_setting(course_dir: Path, name: str) -> str | None:
    """A CourseDirectory setting of the course folder's own nbgrader_config.py (None when unset)."""
    from traitlets.config import PyFileConfigLoader

    config_file = Path(course_dir) / "nbgrader_config.py"
    if config_file.exists():
        config = PyFileConfigLoader(config_file.name, path=str(config_file.parent)).load_config()
        value = config.get("CourseDirectory", {}).get(name)
        if isinstance(value, str) and value:
            return value
    return None


def course_id(course_dir: Path) -> str:
    """The course id set in the course's nbgrader_config.py (`transformers101` for ours)."""
    return _course_setting(course_dir, "course_id") or "default_course"


def nbgrader_config(course_dir: Path):
    """The configuration an `nbgrader` command run in `course_dir` sees.

    Like nbgrader's apps: every `nbgrader_config.py` on Jupyter's config path ($JUPYTER_CONFIG_PATH, ~/.jupyter,
    <env>/etc/jupyter, /etc/jupyter; the first one wins), then the course folder's own file, which wins over all.
    So global settings of a deployment (late-penalty plugin, `Autograde.create_student`) apply to us too.
    A config file that fails to load raises (traitlets' error names the file).
    """
    from jupyter_core.paths import jupyter_config_path
    from traitlets.config import Application

    loader = Application(raise_config_file_errors=True)
    loader.load_config_file("nbgrader_config", path=jupyter_config_path())
    loader.load_config_file("nbgrader_config", path=str(Path(course_dir).resolve()))
    return loader.config


def exchange_root(course_dir: Path) -> str | None:
    """The nbgrader exchange the course's configuration names (`c.Exchange.root`, in the course's nbgrader_config.py
    or a global one on Jupyter's config path, as on the hub), or None where none does: nbgrader's built-in default
    (/srv/nbgrader/exchange) is never assumed, so a course without a hub releases and collects through folders."""
    config = nbgrader_config(course_dir)
    if "Exchange" in config and "root" in config.Exchange:
        return str(config.Exchange.root)
    return None


def nbgrader_coursedir(course_dir: Path, db_url: str | None = None):
    """(config, nbgrader CourseDirectory) for `course_dir`: its config files loaded, our root and gradebook."""
    from nbgrader.coursedir import CourseDirectory

    alembic_on_path()  # the API's and Autograde's gradebooks
    course_dir = Path(course_dir).resolve()
    config = nbgrader_config(course_dir)
    config.CourseDirectory.root = str(course_dir)
    config.CourseDirectory.db_url = db_url or default_db_url(course_dir)
    config.CourseDirectory.course_id = course_id(course_dir)
    return config, CourseDirectory(config=config)


def nbgrader_api(course_dir: Path, db_url: str | None = None):
    """nbgrader's NbGraderAPI on `course_dir`, with its config files loaded (`nbgrader_config`) and our gradebook."""
    from nbgrader.apps import NbGraderAPI

    config, coursedir = nbgrader_coursedir(course_dir, db_url)
    return NbGraderAPI(coursedir=coursedir, config=config)


def assignments_in_source(course_dir: Path) -> list[str]:
    source = Path(course_dir) / "source"
    if not source.is_dir():
        return []
    return sorted(p.name for p in source.iterdir() if p.is_dir() and any(p.glob("*.ipynb")))
