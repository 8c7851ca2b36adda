"""translation: the hidden checks of this topic, one module per part (`loss`, `beam`, `bleu`) and the trained model."""
from autograder.checks.translation.loss import check_label_smoothed_cross_entropy  # noqa: F401
from autograder.checks.translation.loss import check_noam_lr  # noqa: F401
from autograder.checks.translation.beam import check_beam_search  # noqa: F401
from autograder.checks.translation.bleu import check_corpus_bleu  # noqa: F401
from autograder.checks.translation.trained import check_trained_translator  # noqa: F401
