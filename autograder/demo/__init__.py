"""The demo room: `make demo` grades a sample class end to end.

- `run.py`         release, collect, grade on Dask, feedback, export, report: the summary table and the course page.
- `students.py`    the demo's students: honest, blank, hostile and mistaken (mistakes of coursekit/mistakes.py).
"""
