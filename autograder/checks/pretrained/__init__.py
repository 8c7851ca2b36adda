"""pretrained: the hidden checks of notebook 11, one module per part (`checkpoint`, `cache`, `lora`, `features`) and
the trained review probe."""
from autograder.checks.pretrained.checkpoint import check_dequantize_q4_1  # noqa: F401
from autograder.checks.pretrained.checkpoint import check_llama_state_dict  # noqa: F401
from autograder.checks.pretrained.cache import check_cached_forward  # noqa: F401
from autograder.checks.pretrained.cache import check_cached_generate  # noqa: F401
from autograder.checks.pretrained.lora import check_lora_linear  # noqa: F401
from autograder.checks.pretrained.lora import check_add_lora  # noqa: F401
from autograder.checks.pretrained.features import check_final_hidden  # noqa: F401
from autograder.checks.pretrained.trained import check_review_probe  # noqa: F401
