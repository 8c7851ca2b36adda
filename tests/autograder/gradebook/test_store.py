"""autograder.gradebook.store.open_gradebook: the one way every module opens nbgrader's gradebook (issue #33: a
gradebook made without alembic, so without `alembic_version`, made `autograder grade` fail with
`sqlite3.OperationalError: no such table: alembic_version`)."""
from __future__ import annotations

import pytest
import sqlalchemy as sa
from nbgrader.api import Base

from autograder.gradebook.store import open_gradebook, schema_revision


def _version(url: str) -> str | None:
    engine = sa.create_engine(url)
    try:
        with engine.connect() as conn:
            if "alembic_version" not in sa.inspect(engine).get_table_names():
                return None
            return conn.execute(sa.text("SELECT version_num FROM alembic_version")).scalar()
    finally:
        engine.dispose()


def test_a_gradebook_made_without_alembic_version_is_brought_to_nbgrader_s_schema(tmp_path):
    fresh = f"sqlite:///{tmp_path / 'fresh.db'}"
    with open_gradebook(db_url=fresh, course="c") as gb:  # nbgrader creates and stamps an empty gradebook
        gb.add_student("someone")
    head = _version(fresh)
    assert head

    url = f"sqlite:///{tmp_path / 'made_elsewhere.db'}"
    engine = sa.create_engine(url)
    Base.metadata.create_all(engine)  # nbgrader's tables, as a tool without alembic makes them
    with engine.begin() as conn:
        conn.execute(sa.text("INSERT INTO course (id) VALUES ('c')"))
        conn.execute(sa.text("INSERT INTO student (id) VALUES ('ada')"))
    engine.dispose()
    assert _version(url) is None and schema_revision(url) == head

    with open_gradebook(db_url=url, course="c") as gb:
        assert [s.id for s in gb.students] == ["ada"]  # nothing lost
        assert gb.db.execute(sa.text("SELECT version_num FROM alembic_version")).scalar() == head  # what grade reads
    assert _version(url) == head and schema_revision(url) is None
    with open_gradebook(db_url=url, course="c") as gb:  # a second opening changes nothing
        assert [s.id for s in gb.students] == ["ada"]
    assert _version(url) == head


def test_an_empty_or_stamped_gradebook_is_left_to_nbgrader(tmp_path):
    url = f"sqlite:///{tmp_path / 'gb.db'}"
    assert schema_revision(url) is None  # empty: nbgrader's Gradebook creates it
    with open_gradebook(db_url=url, course="c"):
        pass
    assert schema_revision(url) is None and _version(url)


def test_open_gradebook_of_a_course_folder_uses_its_gradebook_and_course_id(tmp_path, monkeypatch):
    monkeypatch.delenv("AUTOGRADER_DB", raising=False)
    (tmp_path / "nbgrader_config.py").write_text("c = get_config()\nc.CourseDirectory.course_id = 'my_course'\n")
    with open_gradebook(tmp_path) as gb:
        assert gb.course_id == "my_course"
    assert (tmp_path / "gradebook.db").is_file()


@pytest.mark.parametrize("tables, revision", [
    ({"assignment": ["id", "name", "course_id"], "course": ["id"], "student": ["id", "lms_user_id"],
      "base_cell": ["id"], "grade": ["id", "extra_credit"], "notebook": ["id", "kernelspec"]}, "e43177bfe90b"),
    ({"assignment": ["id", "name"], "student": ["id", "lms_user_id"], "base_cell": ["id"],
      "grade": ["id", "extra_credit"], "notebook": ["id", "kernelspec"]}, "282d30a0218e"),
    ({"assignment": ["id", "name"], "student": ["id"], "base_cell": ["id"], "grade": ["id", "extra_credit"],
      "notebook": ["id", "kernelspec"]}, "167914646830"),
    ({"assignment": ["id", "name"], "student": ["id"], "grade": ["id", "extra_credit"],
      "notebook": ["id", "kernelspec"]}, "724cde206c17"),
    ({"assignment": ["id", "name"], "student": ["id"], "grade": ["id"], "notebook": ["id", "kernelspec"]},
     "50a4d84c131a"),
    ({"assignment": ["id", "name"], "student": ["id"], "grade": ["id"], "notebook": ["id"]}, "b6d005d67074"),
])
def test_the_schema_revision_is_the_newest_whose_tables_are_there(tmp_path, tables, revision):
    url = f"sqlite:///{tmp_path / 'old.db'}"
    engine = sa.create_engine(url)
    with engine.begin() as conn:
        for table, columns in tables.items():
            conn.execute(sa.text(f"CREATE TABLE {table} ({', '.join(f'{c} VARCHAR' for c in columns)})"))
    engine.dispose()
    assert schema_revision(url) == revision


def test_an_older_runs_table_gets_the_cpu_seconds_column_and_keeps_its_rows(tmp_path):
    from autograder.gradebook.store import RunsTable

    url = f"sqlite:///{tmp_path / 'old.db'}"
    engine = sa.create_engine(url)
    with engine.begin() as conn:  # the table as the first version made it
        conn.execute(sa.text("CREATE TABLE autograder_runs (assignment VARCHAR(128), notebook VARCHAR(128), "
                             "student VARCHAR(128), content_hash VARCHAR(64), status VARCHAR(32), held BOOLEAN, "
                             "score FLOAT, max_score FLOAT, flags TEXT, messages TEXT, mistakes TEXT, notes TEXT, "
                             "seconds FLOAT, graded_at DATETIME, PRIMARY KEY (assignment, notebook, student))"))
        conn.execute(sa.text("INSERT INTO autograder_runs (assignment, notebook, student, score, seconds) "
                             "VALUES ('a', 'n', 'ada', 3.0, 9.5)"))
    engine.dispose()
    with RunsTable(url) as runs:
        old = runs.get("a", "n", "ada")
        assert old["score"] == 3.0 and old["seconds"] == 9.5 and old["cpu_seconds"] is None
        runs.put({**old, "student": "bob", "cpu_seconds": 4.25})
        assert runs.get("a", "n", "bob")["cpu_seconds"] == 4.25


def test_a_time_limit_reached_twice_holds_the_notebook_with_its_scores_as_graded(tmp_path):
    """A `hold` flag (worker.timeout_flags): held for review, every score as graded, the flagged cell marked for a
    grader; a `tamper` flag holds every grade at 0."""
    from autograder.grade.jobs import GradingResult
    from autograder.gradebook.store import RunsTable, record_result

    url = f"sqlite:///{tmp_path / 'gb.db'}"
    with open_gradebook(db_url=url, course="c") as gb:
        gb.add_assignment("a")
        gb.add_notebook("n", "a")
        for name, points in (("test_fast", 2.0), ("test_slow", 3.0)):
            gb.add_grade_cell(name, "n", "a", max_score=points, cell_type="code")
        gb.add_student("ada")
        grades = {"test_fast": {"auto_score": 2.0, "max_score": 2.0, "needs_manual_grade": False},
                  "test_slow": {"auto_score": 0.0, "max_score": 3.0, "needs_manual_grade": False}}
        timeout = {"code": "timeout", "severity": "hold", "cell": "test_slow",
                   "message": "time limit reached: 120 s of CPU time"}
        with RunsTable(url) as runs:
            row = record_result(gb, runs, GradingResult("a", "n", "ada", "graded", grades=grades, flags=[timeout],
                                                        cpu_seconds=130.0, seconds=200.0))
            assert row["held"] and row["status"] == "graded (held for review)" and row["score"] == 2.0
            assert runs.get("a", "n", "ada")["cpu_seconds"] == 130.0
            cells = {g.name: g for g in gb.find_submission_notebook("n", "a", "ada").grades}
            assert cells["test_slow"].needs_manual_grade and not cells["test_fast"].needs_manual_grade
            assert cells["test_fast"].score == 2.0 and cells["test_slow"].manual_score is None
            tamper = {**timeout, "code": "monkeypatch", "severity": "tamper"}
            row = record_result(gb, runs, GradingResult("a", "n", "ada", "graded", grades=grades, flags=[tamper]))
            assert row["held"] and row["score"] == 0.0
