"""gpt: the public checks of this topic, one module per part of notebook 08 as in the hidden layer (`bpe`, `model`,
`data`, `training`, `sampling`; `common` holds what several share). Notebooks import them from here."""
from coursekit.checks.gpt.bpe import check_train_bpe  # noqa: F401
from coursekit.checks.gpt.bpe import check_bpe_encode  # noqa: F401
from coursekit.checks.gpt.bpe import check_bpe_decode  # noqa: F401
from coursekit.checks.gpt.model import check_gpt  # noqa: F401
from coursekit.checks.gpt.data import check_get_batch  # noqa: F401
from coursekit.checks.gpt.data import check_lm_loss  # noqa: F401
from coursekit.checks.gpt.data import check_estimate_loss  # noqa: F401
from coursekit.checks.gpt.training import check_lr_at  # noqa: F401
from coursekit.checks.gpt.training import check_train_step  # noqa: F401
from coursekit.checks.gpt.sampling import check_sample_next_token  # noqa: F401
from coursekit.checks.gpt.sampling import check_generate  # noqa: F401
