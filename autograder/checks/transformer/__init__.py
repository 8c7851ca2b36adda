"""transformer: the hidden checks of this topic."""
from autograder.checks.transformer.checks import check_decoder_block  # noqa: F401
from autograder.checks.transformer.checks import check_decoder  # noqa: F401
from autograder.checks.transformer.checks import check_transformer  # noqa: F401
from autograder.checks.transformer.checks import check_greedy_decode  # noqa: F401
from autograder.checks.transformer.kv_cache import check_cached_greedy_decode  # noqa: F401
