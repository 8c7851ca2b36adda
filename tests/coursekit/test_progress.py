"""coursekit.progress: bars are silent while nbgrader grades."""
import io

from coursekit.progress import progress


def test_disabled_in_grading_mode(monkeypatch):
    monkeypatch.setenv("NBGRADER_EXECUTION", "autograde")
    bar = progress(range(3))
    assert bar.disable and list(bar) == [0, 1, 2]


def test_enabled_otherwise_unless_asked(monkeypatch):
    monkeypatch.delenv("NBGRADER_EXECUTION", raising=False)
    bar = progress(range(3), file=io.StringIO())
    assert not bar.disable and list(bar) == [0, 1, 2]
    assert progress(range(3), disable=True).disable
