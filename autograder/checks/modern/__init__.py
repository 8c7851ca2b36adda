"""modern: the hidden checks of this topic."""
from autograder.checks.modern.checks import check_rmsnorm  # noqa: F401
from autograder.checks.modern.checks import check_rotary_cos_sin  # noqa: F401
from autograder.checks.modern.checks import check_apply_rotary  # noqa: F401
from autograder.checks.modern.checks import check_swi_glu  # noqa: F401
from autograder.checks.modern.checks import check_grouped_query_attention  # noqa: F401
from autograder.checks.modern.model import check_llama_block  # noqa: F401
from autograder.checks.modern.model import check_modern_gpt  # noqa: F401
