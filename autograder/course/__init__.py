"""The course room: what the instructor authored (no submission and no gradebook is read here).

- `coursedir.py`   where the course lives: course root, gradebook URL, nbgrader's API objects, REPO_ROOT.
- `units.py`       byte units (MiB, GiB), one definition for every room.
- `cells.py`       the one home of cell kinds: what nbgrader's metadata says a cell is (grade, solution, written...).
- `written.py`     the written answers' format: model answer and rubric in the source, "YOUR ANSWER HERE" released.
- `heldout.py`     the slice of Shakespeare that 08's trained-GPT check scores on, and the jail's copy without it.
- `heldout_translation.py` the Multi30k caption pairs 10's trained-translator check scores on, and the jail's
                   copies of the test files without them.
- `draw_secret.py`  the course's draw secret (kept in the course root) and each submission's draw salt.
- `provided.py`    the gated `provided.py` of notebooks 04-11 (earlier notebooks' reference, generated).
"""
