"""Known-mistake variants of the reference, used to name the likely error when a student's numbers differ: one module
per topic (`known_mistakes/<topic>.py`, the topic of `coursekit/api.py`), the one place for every notebook.

Each function recomputes a reference result with one deliberate, common error switched on, using the reference's
own weights. With every switch at its default, each function reproduces the reference exactly (the tests check
this), so a match with a switch on really points at that error.

The mistakes' ids and texts live in `coursekit.mistakes` (the catalogue); here they only key the variants.
Mask convention as in the course: True = may attend.

The checks use them as `from autograder.checks import known_mistakes as M`; this package re-exports every
topic's variants.
"""
from autograder.checks.known_mistakes.embeddings import *  # noqa: F401,F403
from autograder.checks.known_mistakes.positional import *  # noqa: F401,F403
from autograder.checks.known_mistakes.attention import *  # noqa: F401,F403
from autograder.checks.known_mistakes.multi_head import *  # noqa: F401,F403
from autograder.checks.known_mistakes.encoder import *  # noqa: F401,F403
from autograder.checks.known_mistakes.transformer import *  # noqa: F401,F403
from autograder.checks.known_mistakes.classifier import *  # noqa: F401,F403
from autograder.checks.known_mistakes.gpt import *  # noqa: F401,F403
from autograder.checks.known_mistakes.modern import *  # noqa: F401,F403
from autograder.checks.known_mistakes.translation import *  # noqa: F401,F403
