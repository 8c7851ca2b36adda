"""The gradebook room: the one store of scores.

- `store.py`       the single writer: nbgrader's gradebook plus our table of grading runs.
- `queries.py`     every read of it, with the final-score and waits-for-a-grader rules.
"""
