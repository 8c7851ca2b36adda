"""nbgrader configuration of the course `transformers101`.

The course root is this folder. nbgrader reads this file only when it runs in this folder:
    cd course && nbgrader autograde 03_attention        # uses every setting below
From the repository root,
    nbgrader generate_assignment 03_attention --CourseDirectory.root=course
works too (nbgrader's defaults produce the same student version), but for grading use the folder form or the
Python API: `autograder.publish.release.nbgrader_api()` / `load_course_config()` load this file wherever you are, and
`autograder.publish.release.release()` generates the release and refreshes `exercises/`.
"""
import os

c = get_config()  # noqa: F821  (injected by traitlets when nbgrader loads this file)

HERE = os.path.dirname(os.path.abspath(__file__))

c.CourseDirectory.course_id = "transformers101"
c.CourseDirectory.root = HERE
# provided.py and any data file next to a notebook travel with the assignment; checkpoints do not.
c.CourseDirectory.ignore = [".ipynb_checkpoints", "*.pyc", "__pycache__", "feedback", ".DS_Store"]

# What a student sees in place of a reference solution.
c.ClearSolutions.code_stub = {"python": "# YOUR CODE HERE\nraise NotImplementedError()"}
c.ClearSolutions.text_stub = "YOUR ANSWER HERE"

# --- Grading: every knob of `autograder grade` is set here (docs/grading-config.md) ----------------------------
# The per-cell time limit: ONE value for `nbgrader autograde` and for the grader's sandbox. Every notebook runs
# top to bottom in about a minute (07 in three); one stuck cell must not hold a grader for long. A cell past it
# is interrupted (the grader always interrupts), and killed with the whole submission when it ignores that.
c.Execute.timeout = 120
c.Execute.interrupt_on_timeout = True
# Seconds a kernel may take to start (also the grader's jailed kernel: a busy machine starts them slowly).
c.Execute.startup_timeout = 120
# Kernels are launched from this environment (kernel `python3` -> the running interpreter).
c.Execute.kernel_name = "python3"

# The grader's sandbox (autograder.sandbox.limits.SandboxLimits): what one submission may use while it is graded.
# Totals are for the whole submission: its kernel and every process it starts (one cgroup, one jail).
c.SandboxLimits.notebook_timeout = 600.0        # CPU seconds for the whole notebook; cells left then are not run
c.SandboxLimits.memory_bytes = 6 * 1024**3      # memory of the submission, also the cap of any one process
c.SandboxLimits.processes = 512                 # processes + threads at once (cgroup pids.max)
c.SandboxLimits.disk_bytes = 1 * 1024**3        # what it may write (its private /tmp); also the largest file
c.SandboxLimits.output_bytes = 1 * 1024**2      # output kept per cell; the rest is dropped with a note
c.SandboxLimits.notebook_output_bytes = 8 * 1024**2  # output kept for the whole notebook, errors included
c.SandboxLimits.kernel_restarts = 2             # a cell that kills the kernel is skipped, the notebook re-run
c.SandboxLimits.interrupt_grace = 5.0           # CPU seconds a timed-out cell has to stop before the kill
c.SandboxLimits.cpus = 1.0                      # CPU cores of the whole submission (cgroup CPU quota); 0: no cap
c.SandboxLimits.wall_factor = 4.0               # wall-clock backstop of each time limit (they count CPU seconds)
c.SandboxLimits.allow_unenforced = False        # refuse to grade where cgroups cannot enforce the limits
c.SandboxLimits.warm_template = True            # False: every kernel starts in a new jail, cold
# `autograder grade --cell-timeout/--notebook-timeout/--memory-gb` override these for one run.

# The grading workers (autograder.grade.cluster.GradingWorkers): one local Dask worker may use this much memory;
# above it the worker is restarted and its submission graded once more, then marked failed.
c.GradingWorkers.memory_bytes = 4 * 1024**3

# What `autograder collect` accepts (autograder.submissions.files.SubmissionLimits). A zip is checked before
# anything is extracted; over archive_bytes (uncompressed) or archive_entries, nothing of it is collected.
c.SubmissionLimits.notebook_bytes = 32 * 1024**2   # one submitted notebook (also refused by grade above it)
c.SubmissionLimits.file_bytes = 50 * 1024**2       # any other submitted file
c.SubmissionLimits.submission_bytes = 128 * 1024**2  # one student's files for one assignment, together
c.SubmissionLimits.archive_bytes = 2 * 1024**3     # everything a zip expands to
c.SubmissionLimits.archive_entries = 20_000        # entries of a zip

# A student who deleted a grade cell gets it back (scored), rather than the whole notebook failing.
c.OverwriteCells.add_missing_cells = True

# Release and grading keep the cell outputs of the source out of the student's copy.
c.ClearOutput.enabled = True
