"""classifier: the hidden checks of this topic."""
from autograder.checks.classifier.checks import check_masked_mean_pool  # noqa: F401
from autograder.checks.classifier.checks import check_transformer_classifier  # noqa: F401
from autograder.checks.classifier.training import check_train_one_epoch  # noqa: F401
from autograder.checks.classifier.training import check_evaluate  # noqa: F401
from autograder.checks.classifier.trained import check_trained_classifier  # noqa: F401
