"""The whole instructor loop on a PostgreSQL gradebook (a throwaway server on a Unix socket, no TCP):
release -> collect -> grade -> regrade (resume) -> export, with the same scores as the SQLite gradebook."""
from __future__ import annotations

import csv
import glob
import os
import pwd
import shutil
import subprocess
import tempfile
from pathlib import Path

import pytest
import sqlalchemy as sa

from autograder.cli import main
from autograder.publish.release import generate_assignment
from synthetic_course import synthetic_course, synthetic_submission


def server_binary(name: str) -> str | None:
    found = shutil.which(name) or sorted(glob.glob(f"/usr/lib/postgresql/*/bin/{name}"))
    return found if isinstance(found, str) else (found[-1] if found else None)


@pytest.fixture(scope="module")
def postgres_url():
    initdb, pg_ctl = server_binary("initdb"), server_binary("pg_ctl")
    if not (initdb and pg_ctl):
        pytest.skip("no PostgreSQL server binaries (initdb, pg_ctl) on this machine")
    folder = Path(tempfile.mkdtemp(prefix="ag-postgres-"))
    run_as: list[str] = []
    if os.geteuid() == 0:  # the server refuses to run as root
        try:
            user = pwd.getpwnam("postgres")
        except KeyError:
            pytest.skip("running as root and there is no 'postgres' user to run the server")
        os.chown(folder, user.pw_uid, user.pw_gid)
        run_as = ["runuser", "-u", "postgres", "--"]
    data = folder / "data"
    subprocess.run([*run_as, initdb, "-D", str(data), "-A", "trust", "-U", "grader", "--no-sync"],
                   check=True, capture_output=True, timeout=120)
    subprocess.run([*run_as, pg_ctl, "-D", str(data), "-l", str(folder / "server.log"), "-w", "-t", "60",
                    "-o", f"-k {folder} -c listen_addresses='' -c fsync=off", "start"],
                   check=True, capture_output=True, timeout=120)
    try:
        admin = sa.create_engine(f"postgresql://grader@/postgres?host={folder}", isolation_level="AUTOCOMMIT")
        with admin.connect() as connection:
            connection.execute(sa.text("CREATE DATABASE gradebook"))
        admin.dispose()
        yield f"postgresql://grader@/gradebook?host={folder}"
    finally:
        subprocess.run([*run_as, pg_ctl, "-D", str(data), "-m", "immediate", "stop"], capture_output=True,
                       timeout=120)
        shutil.rmtree(folder, ignore_errors=True)


def grade_class(root: Path, db: list[str]) -> dict[str, str]:
    """Release, collect three students, grade twice (the second run resumes), export; student -> score."""
    course = synthetic_course(root / "course", release=False)
    args = ["--course-dir", str(course), *db]
    generate_assignment("ps1", course, db[1] if db else None)  # what `autograder release` runs (NN_name courses)
    inbox = root / "inbox"
    for student, kind in (("ann", "solution"), ("ben", "mistake"), ("cat", "blank")):
        (inbox / student / "ps1").mkdir(parents=True)
        (inbox / student / "ps1" / "ps1.ipynb").write_text(synthetic_submission(course, kind))
    assert main(["collect", str(inbox), *args]) == 0
    assert main(["grade", "ps1", "--workers", "2", "--cell-timeout", "30", *args]) in (0, 1)
    assert main(["grade", "ps1", "--workers", "1", "--cell-timeout", "30", *args]) in (0, 1)  # all unchanged
    assert main(["export", "--to", str(root / "grades.csv"), *args]) == 0
    rows = list(csv.DictReader((root / "grades.csv").open()))
    return {row["student_id"]: row["score"] for row in rows}


def test_postgres_gradebook_gives_the_sqlite_scores(postgres_url, tmp_path, capsys):
    on_postgres = grade_class(tmp_path / "pg", ["--db", postgres_url])
    assert "skipped 3 unchanged" in capsys.readouterr().out  # resume works on PostgreSQL too
    assert not (tmp_path / "pg" / "course" / "gradebook.db").exists(), "nothing may fall back to SQLite"
    on_sqlite = grade_class(tmp_path / "sqlite", [])
    assert on_postgres == on_sqlite and len(on_postgres) == 3
    assert float(on_postgres["ann"]) > float(on_postgres["ben"]) > float(on_postgres["cat"]) == 0.0
    engine = sa.create_engine(postgres_url)
    with engine.connect() as connection:  # the rows really are in PostgreSQL
        students = connection.execute(sa.text("SELECT id FROM student ORDER BY id")).scalars().all()
    engine.dispose()
    assert students == ["ann", "ben", "cat"]
