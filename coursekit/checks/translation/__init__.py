"""translation: the public checks of this topic, one module per part (`loss`, `beam`, `bleu`)."""
from coursekit.checks.translation.loss import check_label_smoothed_cross_entropy  # noqa: F401
from coursekit.checks.translation.loss import check_noam_lr  # noqa: F401
from coursekit.checks.translation.beam import check_beam_search  # noqa: F401
from coursekit.checks.translation.bleu import check_corpus_bleu  # noqa: F401
