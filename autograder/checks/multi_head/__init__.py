"""multi_head: the hidden checks of this topic."""
from autograder.checks.multi_head.checks import check_split_heads  # noqa: F401
from autograder.checks.multi_head.checks import check_merge_heads  # noqa: F401
from autograder.checks.multi_head.checks import check_multi_head_attention  # noqa: F401
