"""encoder: the public checks of this topic."""
from coursekit.checks.encoder.checks import check_positionwise_feed_forward  # noqa: F401
from coursekit.checks.encoder.checks import check_encoder_block  # noqa: F401
from coursekit.checks.encoder.checks import check_encoder  # noqa: F401
