"""Parallel autograding: a Dask engine over nbgrader's own preprocessors.

- `engine.py`          builds one job per submission, fans them out over Dask, writes results (the coordinator).
- `jobs.py`            what travels between them: `GradingJob` in, `GradingResult` out (dataclasses).
- `worker.py`          what a Dask worker runs for one job: sanitize, execute in the sandbox, score.
- `sandbox.py`         limits of a submission (time, memory, processes, disk, output, GPU), configured in the
                       course's nbgrader_config.py (`SandboxLimits`, `Execute.timeout`; docs/grading-config.md),
                       the kernel spec and the kernel manager that start each kernel in its own jail and cgroup.
- `jail.py`            the bubblewrap jail: what a kernel sees (no solutions/autograder, no network, own PIDs).
- `cgroup.py`          one cgroup per submission: caps on its TOTAL memory and process count (or the fallback).
- `launcher.py`        the process a kernel starts as, outside the jail: joins the cgroup, sets rlimits, execs bwrap.
- `execute.py`         nbgrader's Execute with the limits: deadlines, SIGKILL after an ignored interrupt, output caps.
- `tamper_scan.py`     static scan of a submission for tampering (before it runs).
- `gradebook.py`       the single writer: nbgrader's gradebook plus our table of grading runs.

Kept import-free: the launcher imports `autograder.grade.launcher` for every kernel and must stay fast.
"""
