"""The sandbox room: one untrusted kernel, and everything that confines it.

- `limits.py`      what one submission may use (SandboxLimits, Limits), as nbgrader configuration.
- `kernel.py`      the kernel spec and kernel manager that start each kernel in its own jail and cgroup.
- `jail.py`        the bubblewrap jail: what a kernel sees (no solutions/autograder, no network, own PIDs).
- `cgroup.py`      one cgroup per submission: caps on its TOTAL memory, process count and CPU (or the fallback).
- `scratch.py`     every temporary folder of a run (socket folder on a tmpfs): removed after, swept if its owner died.
- `ownership.py`   whose a scratch folder or cgroup is (`<pid>.<start time>` in its name), and if its owner runs.
- `launcher.py`    the process a kernel starts as, outside the jail: joins the cgroup, sets rlimits, execs bwrap
                   (or has the warm template fork the kernel).
- `zygote.py`      the warm template of a grading process and its workers: started, checked, replaced, asked.
- `template_main.py` the template's program, run as a file inside its jail: imports once, forks each kernel into
                   its own namespaces and cgroup, without capabilities.
- `execute.py`     nbgrader's Execute with the limits: time budgets, SIGKILL after an ignored interrupt, output caps.
- `clock.py`       the time limits in the submission's CPU seconds (its cgroup's), with a wall-clock backstop.
- `enforcement.py` whether this machine enforces a run's limits: said once per run, refused unless accepted.
- `scrub.py`       takes the grader's paths out of what a kernel printed.
- `inert.py`       makes what a kernel printed and a student wrote inert: the one allow-list of every page.

Kept import-free: every kernel starts as `python -m autograder.sandbox.launcher`, which must stay fast.
"""
