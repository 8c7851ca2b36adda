"""The publish room: what leaves the grader for students and instructors, from the gradebook and autograded/.

- `release.py`     the student version of assignments: nbgrader generate_assignment, provided.py's gate (due dates
                   in the gradebook), and the refresh of exercises/.
- `feedback.py`    the students' feedback pages (nbgrader generate_feedback, made inert).
- `export.py`      grades as CSV, and the Canvas and Moodle gradebook imports.
- `report.py`      the assignment and course pages: scores per grade cell, common mistakes, late, held, waiting.
- `similarity.py`  copied work: ranked pairs side by side, heat map, CSV.
- `fingerprint.py` the structure of a student's code (no-op statements dropped, own names canonical) for it.
- `html.py`        the head, style sheet, inline images and sort script of every instructor page.
"""
