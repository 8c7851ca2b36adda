"""The grade room: parallel autograding, a Dask engine over nbgrader's own preprocessors.

- `engine.py`      the coordinator: one grading run (`GradingRun`) of one or more assignments, its results into
                   the gradebook.
- `plan.py`        which submissions are graded with what: admission, jobs, unchanged notebooks, late penalties.
- `cluster.py`     the Dask side: the client on local workers or a scheduler, the local workers' memory
                   (GradingWorkers), what a dead worker means.
- `dask_nodes.py`  Dask's scheduler and worker without their HTTP server (a local cluster listens on TLS only).
- `jobs.py`        what travels between coordinator and workers: `GradingJob` in, `GradingResult` out.
- `worker.py`      what a Dask worker runs for one job: sanitize, execute in the sandbox, judge, score.
- `judge.py`       the trusted step that runs the hidden checks (autograder/checks) against a kernel.
- `tamper_scan.py` static scan of a submission for tampering (before it runs).
- `inert_notebook.py` the graded notebook made inert before nbgrader stores it (the formgrader renders it).
- `stand_in_leaks.py` outputs that carry the stand-ins' code (a harvester printing them) taken out of the graded
                   notebook before it is stored.
"""
