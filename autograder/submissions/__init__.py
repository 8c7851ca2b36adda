"""The submissions room: every read of a student's files, and who may be graded for what.

- `files.py`       the only reader of student files: regular files only (no links, FIFOs, devices), size caps.
- `collect.py`     a class's zip or folder (nbgrader layout or LMS names) into submitted/<student>/<assignment>/.
- `exchange.py`    the latest submission of each student from nbgrader's exchange (nbgrader's choice), read by files.py.
- `submitted.py`   the notebooks students handed in (submitted/), read by files.py for the reports (similarity...).
- `admission.py`   nbgrader's rules for a submission: the roster, timestamps and late penalties.
"""
