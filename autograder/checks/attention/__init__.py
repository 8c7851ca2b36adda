"""attention: the hidden checks of this topic."""
from autograder.checks.attention.checks import check_make_padding_mask  # noqa: F401
from autograder.checks.attention.checks import check_make_causal_mask  # noqa: F401
from autograder.checks.attention.checks import check_scaled_dot_product_attention  # noqa: F401
