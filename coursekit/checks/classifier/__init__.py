"""classifier: the public checks of this topic."""
from coursekit.checks.classifier.checks import check_masked_mean_pool  # noqa: F401
from coursekit.checks.classifier.checks import check_transformer_classifier  # noqa: F401
from coursekit.checks.classifier.training import check_train_one_epoch  # noqa: F401
from coursekit.checks.classifier.training import check_evaluate  # noqa: F401
