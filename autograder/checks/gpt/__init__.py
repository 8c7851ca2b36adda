"""gpt: the hidden checks of this topic, one module per part of notebook 08 (`coursekit.api.PART_MODULES`): `bpe`,
`model`, `data`, `training`, `sampling`, and `trained` (the trained model); `common` holds what several parts share,
`mistakes` the known-mistake variants and their table."""
from autograder.checks.gpt.bpe import check_train_bpe  # noqa: F401
from autograder.checks.gpt.bpe import check_bpe_encode  # noqa: F401
from autograder.checks.gpt.bpe import check_bpe_decode  # noqa: F401
from autograder.checks.gpt.model import check_gpt  # noqa: F401
from autograder.checks.gpt.data import check_get_batch  # noqa: F401
from autograder.checks.gpt.data import check_lm_loss  # noqa: F401
from autograder.checks.gpt.data import check_estimate_loss  # noqa: F401
from autograder.checks.gpt.training import check_lr_at  # noqa: F401
from autograder.checks.gpt.training import check_train_step  # noqa: F401
from autograder.checks.gpt.sampling import check_sample_next_token  # noqa: F401
from autograder.checks.gpt.sampling import check_generate  # noqa: F401
from autograder.checks.gpt.trained import check_trained_gpt  # noqa: F401
