"""positional: the public checks of this topic."""
from coursekit.checks.positional.checks import check_sinusoidal_positional_encoding  # noqa: F401
from coursekit.checks.positional.checks import check_positional_encoding  # noqa: F401
from coursekit.checks.positional.checks import check_learned_positional_embedding  # noqa: F401
