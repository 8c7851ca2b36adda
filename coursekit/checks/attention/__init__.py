"""attention: the public checks of this topic."""
from coursekit.checks.attention.checks import check_make_padding_mask  # noqa: F401
from coursekit.checks.attention.checks import check_make_causal_mask  # noqa: F401
from coursekit.checks.attention.checks import check_scaled_dot_product_attention  # noqa: F401
