"""Parallel autograding: a Dask engine over nbgrader's own preprocessors.

- `engine.py`          builds one job per submission, fans them out over Dask, writes results (the coordinator).
- `worker.py`          what a Dask worker runs for one job: sanitize, execute in the sandbox, score.
- `sandbox.py`         limits of a grading kernel (time, memory, output, GPU) and the kernel spec enforcing them.
- `launcher.py`        the process a sandboxed kernel starts as: applies rlimits, then becomes ipykernel.
- `forkserver.py`      one process per worker that imports torch & co. once and forks each kernel from there
                       (same arguments and limits as the launcher; the launcher is the fallback).
- `kernel_startup.py`  first code run in the kernel: installed packages can no longer be shadowed.
- `integrity.py`       static scan of a submission for tampering.
- `gradebook.py`       the single writer: nbgrader's gradebook plus our table of grading runs.

Kept import-free: the kernel imports `autograder.grade.kernel_startup` and must stay fast.
"""
