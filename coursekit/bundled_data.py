"""The course's data as the student wheel carries it.

`make student` (in the course repository and in the student repository) copies the repository's `data/` into the
wheel as `coursekit/_bundled_data/`, so the notebooks find tinyshakespeare, the synthetic reviews, Multi30k and
the recorded runs wherever the student keeps the exercises. An editable instructor install has no such folder and
reads the repository's `data/` instead; every lookup of the notebooks' data (`find_data` below, and
coursekit.data.yelp and coursekit.real_data's own) tries this folder right after $COURSE_DATA_DIR.
"""
import os
from pathlib import Path

BUNDLED_DATA = Path(__file__).resolve().parent / "_bundled_data"

DATA_DIR_ENV = "COURSE_DATA_DIR"


def find_data(relative: str | Path, what: str, *, bundled: Path = BUNDLED_DATA, package_file: str = __file__) -> Path:
    """Where a notebook's data file `relative` to data/ is, in the one order
    every lookup of the notebooks' data uses: $COURSE_DATA_DIR, the copy the student wheel carries (`bundled`), the
    data/ folder of the repository the package (`package_file`, a module of coursekit) lives in, a data/ folder in
    the working directory or one of its parents. Nothing is downloaded: FileNotFoundError says where it looked."""
    candidates = []
    if os.environ.get(DATA_DIR_ENV):
        candidates.append(Path(os.environ[DATA_DIR_ENV]) / relative)
    candidates.append(Path(bundled) / relative)
    candidates.append(Path(package_file).resolve().parents[1] / "data" / relative)
    here = Path.cwd().resolve()
    candidates += [folder / "data" / relative for folder in (here, *here.parents)]
    for candidate in candidates:
        if candidate.is_file():
            return candidate
    raise FileNotFoundError(
        f"{what} is not here: looked for " + ", ".join(str(c) for c in candidates[:3])
        + f" and data/ above the working directory. Copy data/{Path(relative).as_posix()} of the course there, or "
        f"set {DATA_DIR_ENV} to a folder holding {Path(relative).as_posix()}.")
