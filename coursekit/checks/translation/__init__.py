"""translation: the public checks of this topic."""
from coursekit.checks.translation.checks import check_label_smoothed_cross_entropy  # noqa: F401
from coursekit.checks.translation.checks import check_noam_lr  # noqa: F401
from coursekit.checks.translation.checks import check_beam_search  # noqa: F401
from coursekit.checks.translation.checks import check_corpus_bleu  # noqa: F401
