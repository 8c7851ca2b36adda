"""nbgrader configuration of the course `transformers101`.

The course root is this folder. nbgrader reads this file only when it runs in this folder:
    cd course && nbgrader autograde 03_attention        # uses every setting below
From the repository root,
    nbgrader generate_assignment 03_attention --CourseDirectory.root=course
works too (nbgrader's defaults produce the same student version), but for grading use the folder form or the
Python API: `autograder.release.nbgrader_api()` / `load_course_config()` load this file wherever you are, and
`autograder.release.release()` generates the release and refreshes `exercises/`.
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

# Every notebook runs in well under a minute; one stuck cell must not hold a grader for long.
c.Execute.timeout = 300
c.Execute.interrupt_on_timeout = True
# Kernels are launched from this environment (kernel `python3` -> the running interpreter).
c.Execute.kernel_name = "python3"

# A student who deleted a grade cell gets it back (scored), rather than the whole notebook failing.
c.OverwriteCells.add_missing_cells = True

# Release and grading keep the cell outputs of the source out of the student's copy.
c.ClearOutput.enabled = True
