"""Public self-checks: the cells right after each exercise call `check_<name>(<name>)`.

One module per topic (`embeddings`, `positional`, `attention`, `multi_head`, ...). A check runs your function or
class on a few small fixed examples whose answers it works out by simple independent means, checks shapes, and
when something is off raises an AssertionError that says what went wrong and, where it can tell, gives a HINT
about the likely mistake. Passing prints a short success line. The hidden tests used for grading check more.

These modules never import `solutions` or `autograder`: they ship to students.
"""
from coursekit.checks.toolkit import CheckFailed, passed  # noqa: F401
