"""The grade room: parallel autograding, a Dask engine over nbgrader's own preprocessors.

- `engine.py`      the coordinator: one grading run (`GradingRun`) of one or more assignments, its results into
                   the gradebook.
- `plan.py`        which submissions are graded with what: admission, jobs, unchanged notebooks, late penalties.
- `cluster.py`     the Dask side: the client on local workers or a scheduler, the local workers' memory
                   (GradingWorkers), what a dead worker means.
- `jobs.py`        what travels between coordinator and workers: `GradingJob` in, `GradingResult` out.
- `worker.py`      what a Dask worker runs for one job: sanitize, execute in the sandbox, judge, score.
- `judge.py`       the trusted step that runs the hidden checks (autograder/checks) against a kernel.
- `tamper_scan.py` static scan of a submission for tampering (before it runs).
- `inert_notebook.py` the graded notebook made inert before nbgrader stores it (the formgrader renders it).
"""
