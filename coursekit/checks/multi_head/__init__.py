"""multi_head: the public checks of this topic."""
from coursekit.checks.multi_head.checks import check_split_heads  # noqa: F401
from coursekit.checks.multi_head.checks import check_merge_heads  # noqa: F401
from coursekit.checks.multi_head.checks import check_multi_head_attention  # noqa: F401
